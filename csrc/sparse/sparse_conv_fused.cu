// The NCTU layer in ONE kernel on FAST filters: conv + ReLU + 2x2 max pool, so the M*H*W
// pre-pool maps are never written (see sparse_conv_cuda.hpp, sparse_conv_fast_fused). This is the window
// kernel (any R, S); 3x3 layers go by default to the register-blocked kernels (sparse_conv_fused_blocked.cu).
//
// A block owns MB output maps x one tile of 32x32 pre-pool outputs; each of its 256 threads
// owns one 2x2 pool window of each of the MB maps (4*MB int32 accumulators in registers,
// indexed only by unrolled loops). The input channels are staged through shared memory
// kChunk at a time (tile + halo, int32), the FAST codes of those channels decoded once per
// block into (value, offset) taps, uniform across the block (broadcast reads).
//
// Exactness without int64 sums: every partial sum of an output is bounded by
// max|x over the tile| * sum over (c, taps) |w_m|. The block measures both while it stages
// and decodes; when the bound fits int32 for all its maps the int32 accumulation is exact
// and cannot overflow. Otherwise (huge values, never the lab's data) the block recomputes
// its outputs with exact int64 sums from global memory and raises the overflow flag where
// a sum (pooled or not, including a trailing odd row/column) does not fit, as the CPU does.
//
// Channel split (parallelism): one block per (maps, tile) leaves the lab's layer with 64-128 blocks of serial
// work over 512 channels. A thread-block cluster of `split` blocks (<= 8) shares one (maps, tile); each block
// sums a contiguous range of the channels, then the cluster adds the partial sums through distributed shared
// memory (integer addition: exact, in rank order), each block finishing 1/split of the windows.
//
// Shared-memory layout: each staged row stores its even columns, then its odd columns, so
// the two columns of a window (2wx+s, 2wx+s+1) are consecutive words across a half-warp for
// every s; the row stride is = 8 (mod 16) words so the two half-warps (window rows wy and
// wy+1, 2 input rows apart) hit disjoint banks: conflict-free reads for every tap.

#include "../common/cluster.cuh"
#include "../common/device.hpp"

#include <climits>
#include <cstdint>

#include "../common/device_buffer.cuh"
#include "../common/launch.cuh"
#include "sparse_conv_cuda.hpp"
#include "sparse_exact.cuh"

namespace gpuopt::sparse {

namespace {

constexpr int kWinX = 16, kWinY = 16;             // pool windows per tile: one per thread
constexpr int kThreads = kWinX * kWinY;
constexpr int kTileW = 2 * kWinX, kTileH = 2 * kWinY;  // pre-pool outputs per tile
constexpr int kChunk = 8;                          // input channels staged per pass

struct Geometry : FusedShape {
    int tiles_x, tiles;    // tiles per map (x, total)
    int split;              // blocks per cluster, each summing 1/split of the channels
    int lh, lw, plane, rs;  // staged rows and columns, words per column plane, row stride (words)
    int chan_words;         // lh * rs
    bool vec;               // x rows may be read 16 bytes at a time (W % 8 == 0, x 16-byte aligned)
};

__device__ __forceinline__ void stage(int* xs, int cc, int li, int lj, int v, const Geometry& g) {
    xs[cc * g.chan_words + li * g.rs + (lj & 1) * g.plane + (lj >> 1)] = v;
}

// The cluster's epilogue: publish this block's partial sums (over its channels), then finish windows
// [rank*share, (rank+1)*share) from the sums of all ranks, with the cluster-wide bound (max of max|x|, sum
// of sum|w|) deciding between the int32 result and the exact int64 recomputation.
template <int MB>
__device__ void cluster_finish(const std::int16_t* __restrict__ x, const std::int32_t* __restrict__ codes,
                               std::int32_t* __restrict__ y, int* __restrict__ overflow, const Geometry& g, int* xs,
                               const int (&acc)[MB][4], int rank, int m0, int y0, int x0,
                               unsigned long long* wsum, int* xmax) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int m = 0; m < MB; ++m)
#pragma unroll
        for (int d = 0; d < 4; ++d) xs[(m * 4 + d) * kThreads + tid] = acc[m][d];  // staging is no longer read
    cluster::sync();  // every rank's partials, wsum and xmax are complete and visible
    bool exact = true;
    {
        unsigned long long ws[MB] = {};
        int xm = 0;
        for (int r = 0; r < g.split; ++r) {
            xm = max(xm, *cluster::map(xmax, r));
            const unsigned long long* wr = cluster::map(wsum, r);
#pragma unroll
            for (int m = 0; m < MB; ++m) ws[m] += wr[m];
        }
#pragma unroll
        for (int m = 0; m < MB; ++m) exact = exact && static_cast<unsigned long long>(xm) * ws[m] <= INT_MAX;
    }
    const int share = kThreads / g.split;  // windows this block finishes
    const int PH = g.H / 2, PW = g.W / 2;
    if (!exact) {
        if (tid < share) {
            const int w = rank * share + tid;
            exact_windows<MB>(x, codes, y, overflow, g, m0, y0 + 2 * (w / kWinX), x0 + 2 * (w % kWinX));
        }
    } else {
        for (int e = tid; e < MB * share; e += kThreads) {
            const int m = e / share, w = rank * share + (e - m * share);
            const int oy = y0 + 2 * (w / kWinX), ox = x0 + 2 * (w % kWinX);
            if (m0 + m >= g.M || oy / 2 >= PH || ox / 2 >= PW) continue;
            int v[4] = {0, 0, 0, 0};
            for (int r = 0; r < g.split; ++r) {
                const int* part = cluster::map(xs, r);
#pragma unroll
                for (int d = 0; d < 4; ++d) v[d] += part[(m * 4 + d) * kThreads + w];
            }
            y[(static_cast<long long>(m0 + m) * PH + oy / 2) * PW + ox / 2] =
                max(0, max(max(v[0], v[1]), max(v[2], v[3])));
        }
    }
    cluster::sync();  // no block leaves (freeing its shared memory) while another still reads it
}

template <int MB>
__global__ void __launch_bounds__(kThreads, 3)  // 3 blocks/SM: up to 80 registers (no spills at MB = 8)
    fused_fast_kernel(const std::int16_t* __restrict__ x, const std::int32_t* __restrict__ codes,
                      std::int32_t* __restrict__ y, int* __restrict__ overflow, const Geometry g) {
    extern __shared__ int4 smem_raw[];
    int* xs = reinterpret_cast<int*>(smem_raw);                      // [kChunk][lh][rs]
    int2* taps = reinterpret_cast<int2*>(xs + kChunk * g.chan_words);  // [MB][kChunk * width]: value, offA | offB << 16
    __shared__ unsigned long long wsum[MB];                          // sum |w| per map, all channels
    __shared__ int xmax;                                             // max |x| over the staged tile
    const int rank = g.split > 1 ? static_cast<int>(cluster::rank()) : 0;
    const int owner = blockIdx.x / g.split;  // the (maps, tile) of this block's cluster
    const int group = owner % ((g.M + MB - 1) / MB), tile = owner / ((g.M + MB - 1) / MB);
    const int m0 = group * MB;
    const int ty = tile / g.tiles_x, tx = tile - ty * g.tiles_x;
    const int y0 = ty * kTileH, x0 = tx * kTileW;
    const int tid = threadIdx.x, wx = tid % kWinX, wy = tid / kWinX;
    if (tid < MB) wsum[tid] = 0;
    if (tid == 0) xmax = 0;

    int acc[MB][4];
#pragma unroll
    for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0;
    int my_xmax = 0;
    const int base = 2 * wy * g.rs + wx;
    const long long map_size = static_cast<long long>(g.H) * g.W;

    // This block's channels: whole chunks, in rank order.
    const int per = channels_per_split(g.C, g.split, kChunk);
    const int c_end = min(g.C, (rank + 1) * per);
    for (int c0 = rank * per; c0 < c_end; c0 += kChunk) {
        const int nc = min(kChunk, c_end - c0);
        __syncthreads();  // the previous chunk's reads are done (and wsum/xmax are initialised)
        // Tile interior: 8 columns per item (one 16-byte load where possible).
        for (int e = tid; e < nc * g.lh * (kTileW / 8); e += kThreads) {
            const int row = e / (kTileW / 8), q = e - row * (kTileW / 8);
            const int cc = row / g.lh, li = row - cc * g.lh;
            const int gy = y0 - g.pad_h + li, gx0 = x0 + 8 * q;
            const std::int16_t* src = x + (c0 + cc) * map_size + static_cast<long long>(gy) * g.W;
            const bool row_in = gy >= 0 && gy < g.H;
            if (g.vec && row_in && gx0 + 8 <= g.W) {
                const int4 v = *reinterpret_cast<const int4*>(src + gx0);
                const int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const int lo = static_cast<std::int16_t>(words[k] & 0xffff), hi = words[k] >> 16;
                    my_xmax = max(my_xmax, max(abs(lo), abs(hi)));
                    stage(xs, cc, li, g.pad_w + 8 * q + 2 * k, lo, g);
                    stage(xs, cc, li, g.pad_w + 8 * q + 2 * k + 1, hi, g);
                }
            } else {
#pragma unroll
                for (int k = 0; k < 8; ++k) {
                    const int gx = gx0 + k;
                    const int v = (row_in && gx < g.W) ? static_cast<int>(src[gx]) : 0;
                    my_xmax = max(my_xmax, abs(v));
                    stage(xs, cc, li, g.pad_w + 8 * q + k, v, g);
                }
            }
        }
        // Halo columns (pad_w on each side).
        for (int e = tid; e < nc * g.lh * 2 * g.pad_w; e += kThreads) {
            const int row = e / (2 * g.pad_w), k = e - row * (2 * g.pad_w);
            const int cc = row / g.lh, li = row - cc * g.lh;
            const int lj = k < g.pad_w ? k : kTileW + k;
            const int gy = y0 - g.pad_h + li, gx = x0 - g.pad_w + lj;
            const int v = (gy >= 0 && gy < g.H && gx >= 0 && gx < g.W)
                              ? static_cast<int>(x[(c0 + cc) * map_size + static_cast<long long>(gy) * g.W + gx])
                              : 0;
            my_xmax = max(my_xmax, abs(v));
            stage(xs, cc, li, lj, v, g);
        }
        // Taps of this chunk, [m][cc][j]; the channel's staging offset folded into the offsets.
        for (int e = tid; e < MB * nc * g.width; e += kThreads) {
            const int m = e / (nc * g.width), rest = e - m * (nc * g.width);
            const int cc = rest / g.width, j = rest - cc * g.width;
            const FastTap tap = m0 + m < g.M  // filters past M: value 0
                ? decode_fast(codes[(static_cast<long long>(m0 + m) * g.C + c0 + cc) * g.width + j])
                : FastTap{0, 0, 0};
            const int value = tap.value, row = tap.row, col = tap.col;
            const int off = cc * g.chan_words + row * g.rs;
            const int off_a = off + (col & 1) * g.plane + (col >> 1);
            const int off_b = off + ((col + 1) & 1) * g.plane + ((col + 1) >> 1);
            taps[m * kChunk * g.width + rest] = make_int2(value, off_a | (off_b << 16));
            if (value != 0) atomicAdd(&wsum[m], static_cast<unsigned long long>(abs(value)));
        }
        __syncthreads();
#pragma unroll
        for (int m = 0; m < MB; ++m) {
            const int2* tm = taps + m * kChunk * g.width;
#pragma unroll 4
            for (int t = 0; t < nc * g.width; ++t) {
                const int2 tap = tm[t];
                const int* pa = xs + base + (tap.y & 0xffff);
                const int* pb = xs + base + (tap.y >> 16);
                acc[m][0] += tap.x * pa[0];
                acc[m][1] += tap.x * pb[0];
                acc[m][2] += tap.x * pa[g.rs];
                acc[m][3] += tap.x * pb[g.rs];
            }
        }
    }

    atomicMax(&xmax, my_xmax);
    __syncthreads();
    if (g.split > 1) {
        cluster_finish<MB>(x, codes, y, overflow, g, xs, acc, rank, m0, y0, x0, wsum, &xmax);
        return;
    }
    bool exact = true;
#pragma unroll
    for (int m = 0; m < MB; ++m) exact = exact && static_cast<unsigned long long>(xmax) * wsum[m] <= INT_MAX;
    const int oy = y0 + 2 * wy, ox = x0 + 2 * wx;
    if (!exact) {  // block-uniform
        exact_windows<MB>(x, codes, y, overflow, g, m0, oy, ox);
        return;
    }
    const int PH = g.H / 2, PW = g.W / 2;
    if (oy / 2 >= PH || ox / 2 >= PW) return;  // a trailing odd row/column, or past the map
#pragma unroll
    for (int m = 0; m < MB; ++m)
        if (m0 + m < g.M)
            y[(static_cast<long long>(m0 + m) * PH + oy / 2) * PW + ox / 2] =
                max(0, max(max(acc[m][0], acc[m][1]), max(acc[m][2], acc[m][3])));
}

template <int MB>
void launch(const std::int16_t* x, const std::int32_t* codes, std::int32_t* y, int* overflow, Geometry g) {
    const std::int64_t groups = (g.M + MB - 1) / MB;
    const std::int64_t blocks = groups * g.tiles * g.split;
    GPUOPT_REQUIRE(blocks <= INT_MAX, "sparse_conv_fast_fused: too many blocks (maps x tiles >= 2^31)");
    const std::size_t smem = sizeof(int) * kChunk * g.chan_words + sizeof(int2) * MB * kChunk * g.width;
    require_shared_memory(fused_fast_kernel<MB>, smem, "sparse_conv_fast_fused");
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(overflow, 0, sizeof(int), current_stream()));
    cluster::launch(fused_fast_kernel<MB>, static_cast<unsigned>(blocks), kThreads, smem, g.split, x, codes, y, overflow,
                    g);
    GPUOPT_CHECK_LAUNCH("sparse fused_fast_kernel");
}

}  // namespace

void sparse_conv_fast_fused(const std::int16_t* x, const std::int32_t* codes, std::int64_t width, std::int32_t* y,
                            int* overflow, const SparseConvShape& s, int split, FusedKernel kernel) {
    sparse_conv_check(s);
    GPUOPT_REQUIRE(width >= 1 && width <= s.R * s.S, "sparse_conv: width (entries per padded slice) must be in 1..R*S = " +
                                                         std::to_string(s.R * s.S) + ", got " + std::to_string(width));
    require_choice(kFusedSplits, split, "sparse_conv_fast_fused");
    GPUOPT_REQUIRE(x != nullptr && y != nullptr && codes != nullptr && overflow != nullptr,
                   "sparse_conv_fast_fused: null x, codes, y or overflow");
    const bool three = s.R == 3 && s.S == 3;
    GPUOPT_REQUIRE(three || kernel == FusedKernel::kAuto || kernel == FusedKernel::kWindow,
                   "sparse_conv_fast_fused: the register-blocked kernels (int32, fp32) are 3x3 only, got " +
                       std::to_string(s.R) + "x" + std::to_string(s.S));
    if (kernel == FusedKernel::kInt32 || kernel == FusedKernel::kFp32) {
        sparse_conv_fast_fused_blocked(x, codes, width, y, overflow, s, split, kernel == FusedKernel::kFp32);
        return;
    }
    Geometry g{};
    g.C = static_cast<int>(s.C), g.H = static_cast<int>(s.H), g.W = static_cast<int>(s.W), g.M = static_cast<int>(s.M);
    g.width = static_cast<int>(width), g.pad_h = static_cast<int>(s.R / 2), g.pad_w = static_cast<int>(s.S / 2);
    g.tiles_x = static_cast<int>((s.W + kTileW - 1) / kTileW);
    g.tiles = g.tiles_x * static_cast<int>((s.H + kTileH - 1) / kTileH);
    g.lh = kTileH + 2 * g.pad_h, g.lw = kTileW + 2 * g.pad_w;
    g.plane = (g.lw + 1) / 2;
    g.rs = 2 * g.plane + ((8 - (2 * g.plane) % 16) + 16) % 16;  // = 8 (mod 16): conflict-free half-warps
    g.chan_words = g.lh * g.rs;
    g.vec = s.W % 8 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
    // 8 maps per block reuse each staged input twice as much as 4 (half the L2 traffic); 4 only for M <= 4.
    // Auto split: enough blocks for ~4 per SM (the GPU's multiprocessor count), each block keeping >= 2 channel chunks.
    const bool eight = s.M > 4;
    const std::int64_t owners = (s.M + (eight ? 7 : 3)) / (eight ? 8 : 4) * g.tiles;
    if (split == 0) {
        split = 1;
        while (cluster::supported() && split < 8 && owners * split < 4 * multiprocessor_count() &&
               s.C >= 2 * kChunk * 2 * split)
            split *= 2;
    }
    GPUOPT_REQUIRE(split == 1 || cluster::supported(), "sparse_conv_fast_fused: split > 1 needs thread-block clusters (a GPU of compute capability 9.0 or later)");
    g.split = split;
    if (eight)
        launch<8>(x, codes, y, overflow, g);
    else
        launch<4>(x, codes, y, overflow, g);
}

}  // namespace gpuopt::sparse
