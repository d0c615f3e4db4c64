// The NCTU layer following the non-zeros of BOTH operands (sparse_conv_cuda.hpp,
// sparse_conv_fast_sparse_input): work ~ (non-zero inputs) x (non-zero taps), not outputs x taps.
//
// 1. compact_kernel: one block per input channel lists its non-zero neurons (packed row/col,
//    value) in raster order (a block scan, so the list is deterministic), with the count and
//    max |x| of the channel.
// 2. scatter_kernel: a block owns MB maps x a 32x32 tile of pre-pool outputs, held as int32
//    accumulators in shared memory. For each channel, every (non-zero input, map) pair adds
//    value * tap to the outputs that tap reaches, with shared-memory integer atomics: integer
//    addition is associative, so the result is exact and independent of the order. Then
//    ReLU + 2x2 max pool from shared memory; only pooled results are written.
//    Exactness as in sparse_conv_fused.cu: the int32 accumulators cannot overflow when
//    max|x| * sum|w_m| fits int32 for every map of the block; otherwise the block recomputes
//    its windows exactly in int64 (exact_windows) and raises the overflow flag if needed.
// As in fast_fused, a thread-block cluster of `split` blocks (auto, <= 8) shares one (maps, tile), each block
// scattering a contiguous channel range into its own accumulators; the cluster then adds them through
// distributed shared memory (integer addition, rank order), each block finishing 1/split of the windows.
// Each block reads whole channel lists, so maps of many tiles repeat the list scans
// (fast_fused is the better choice for large maps).

#include "../common/cluster.cuh"
#include "../common/device.hpp"

#include <climits>
#include <cstdint>

#include "../common/scratch.hpp"
#include "../common/launch.cuh"
#include "sparse_conv_cuda.hpp"
#include "sparse_exact.cuh"

namespace gpuopt::sparse {

namespace {

constexpr int kThreads = 256;                 // one thread per pool window of the tile in the epilogue
constexpr int kTile = 32;                     // pre-pool outputs per tile side
constexpr int kTapChannels = 16;              // channels whose taps are decoded per pass
constexpr int kMaxSide = 32767;               // non-zeros store (row << 16 | col)

struct Geometry : FusedShape {
    int tiles_x, tiles;
    int split;  // blocks per cluster, each scattering 1/split of the channels
};

__global__ void __launch_bounds__(kThreads)
    compact_kernel(const std::int16_t* __restrict__ x, int2* __restrict__ nz, int* __restrict__ count,
                   int* __restrict__ absmax, int H, int W) {
    __shared__ int warp_counts[kThreads / 32];
    __shared__ int block_max;
    const int HW = H * W, c = blockIdx.x, tid = threadIdx.x;
    const std::int16_t* xc = x + static_cast<long long>(c) * HW;
    int2* out = nz + static_cast<long long>(c) * HW;
    if (tid == 0) block_max = 0;
    int base = 0, my_max = 0;
    for (int start = 0; start < HW; start += kThreads) {
        const int i = start + tid;
        const int v = i < HW ? static_cast<int>(xc[i]) : 0;
        my_max = max(my_max, abs(v));
        const CompactRound round = compact_round<kThreads / 32>(v != 0, warp_counts);
        if (v != 0) {
            const int iy = i / W, ix = i - iy * W;
            out[base + round.slot] = make_int2((iy << 16) | ix, v);
        }
        base += round.total;
    }
    atomicMax(&block_max, my_max);
    __syncthreads();
    if (tid == 0) count[c] = base, absmax[c] = block_max;
}

template <int MB>
__global__ void __launch_bounds__(kThreads)
    scatter_kernel(const std::int16_t* __restrict__ x, const std::int32_t* __restrict__ codes,
                   const int2* __restrict__ nz, const int* __restrict__ count, const int* __restrict__ absmax,
                   std::int32_t* __restrict__ y, int* __restrict__ overflow, const Geometry g) {
    extern __shared__ int4 smem_raw[];
    int* acc = reinterpret_cast<int*>(smem_raw);                    // [MB][kTile * kTile]
    int2* taps = reinterpret_cast<int2*>(acc + MB * kTile * kTile);  // [MB][kTapChannels][width]: value, row << 4 | col
    __shared__ unsigned long long wsum[MB];
    __shared__ int xmax;
    const int rank = g.split > 1 ? static_cast<int>(cluster::rank()) : 0;
    const int groups = (g.M + MB - 1) / MB, owner = blockIdx.x / g.split;
    const int group = owner % groups, tile = owner / groups, m0 = group * MB;
    const int ty = tile / g.tiles_x, tx = tile - ty * g.tiles_x;
    const int y0 = ty * kTile, x0 = tx * kTile, tid = threadIdx.x;
    for (int i = tid; i < MB * kTile * kTile; i += kThreads) acc[i] = 0;
    if (tid < MB) wsum[tid] = 0;
    if (tid == 0) xmax = 0;
    const long long HW = static_cast<long long>(g.H) * g.W;
    // The origin of the outputs a non-zero at (iy, ix) reaches through tap (row, col), tile-relative.
    const int oy0 = g.pad_h - y0, ox0 = g.pad_w - x0;
    int my_xmax = 0;

    const int per = channels_per_split(g.C, g.split, kTapChannels);
    const int c_end = min(g.C, (rank + 1) * per);
    for (int c0 = rank * per; c0 < c_end; c0 += kTapChannels) {
        const int nc = min(kTapChannels, c_end - c0);
        __syncthreads();  // previous taps consumed (and the accumulators zeroed)
        for (int e = tid; e < MB * nc * g.width; e += kThreads) {
            const int m = e / (nc * g.width), rest = e - m * (nc * g.width);
            const int cc = rest / g.width, j = rest - cc * g.width;
            const FastTap tap = m0 + m < g.M  // filters past M: value 0
                ? decode_fast(codes[(static_cast<long long>(m0 + m) * g.C + c0 + cc) * g.width + j])
                : FastTap{0, 0, 0};
            const int value = tap.value, row = tap.row, col = tap.col;
            taps[(m * kTapChannels + cc) * g.width + j] = make_int2(value, (row << 4) | col);
            if (value != 0) atomicAdd(&wsum[m], static_cast<unsigned long long>(abs(value)));
        }
        __syncthreads();
        for (int cc = 0; cc < nc; ++cc) {
            const int c = c0 + cc, n = count[c];
            my_xmax = max(my_xmax, absmax[c]);
            const int2* list = nz + c * HW;
            // (non-zero, map) pairs, map fastest: the MB threads of one non-zero share its (broadcast) load.
            for (int e = tid; e < n * MB; e += kThreads) {
                const int i = e / MB, m = e - i * MB;
                const int2 p = list[i];
                const int oy = (p.x >> 16) + oy0, ox = (p.x & 0xffff) + ox0;
                const int2* tm = taps + (m * kTapChannels + cc) * g.width;
                int* am = acc + m * kTile * kTile;
                for (int j = 0; j < g.width; ++j) {
                    const int2 t = tm[j];
                    const int ry = oy - (t.y >> 4), rx = ox - (t.y & 15);
                    if (t.x != 0 && static_cast<unsigned>(ry) < kTile && static_cast<unsigned>(rx) < kTile)
                        atomicAdd(&am[ry * kTile + rx],  // (wraps, unused, when the bound fails)
                                  static_cast<int>(static_cast<unsigned>(t.x) * static_cast<unsigned>(p.y)));
                }
            }
        }
    }

    atomicMax(&xmax, my_xmax);
    if (g.split > 1) {
        cluster::sync();  // every rank's accumulators, wsum and xmax complete and visible
    } else {
        __syncthreads();
    }
    // The bound over all channels: max of the ranks' max|x|, sum of their sum|w| (one rank: its own).
    bool exact = true;
    {
        int xm = 0;
        for (int r = 0; r < g.split; ++r)
            xm = max(xm, *(g.split > 1 ? cluster::map(&xmax, r) : &xmax));
        for (int m = 0; m < MB; ++m) {
            unsigned long long ws = 0;
            for (int r = 0; r < g.split; ++r)
                ws += (g.split > 1 ? cluster::map(wsum, r) : wsum)[m];
            exact = exact && static_cast<unsigned long long>(xm) * ws <= INT_MAX;
        }
    }
    const int share = kThreads / g.split;  // the windows this block finishes: [rank*share, (rank+1)*share)
    const int PH = g.H / 2, PW = g.W / 2;
    if (!exact) {  // cluster-uniform
        if (tid < share) {
            const int w = rank * share + tid;
            exact_windows<MB>(x, codes, y, overflow, g, m0, y0 + 2 * (w / (kTile / 2)), x0 + 2 * (w % (kTile / 2)));
        }
    } else {
        for (int e = tid; e < MB * share; e += kThreads) {
            const int m = e / share, w = rank * share + (e - m * share);
            const int wy = w / (kTile / 2), wx = w % (kTile / 2), oy = y0 + 2 * wy, ox = x0 + 2 * wx;
            if (m0 + m >= g.M || oy / 2 >= PH || ox / 2 >= PW) continue;
            const int at = m * kTile * kTile + 2 * wy * kTile + 2 * wx;
            int v[4] = {0, 0, 0, 0};
            for (int r = 0; r < g.split; ++r) {
                const int* a = (g.split > 1 ? cluster::map(acc, r) : acc) + at;
                v[0] += a[0], v[1] += a[1], v[2] += a[kTile], v[3] += a[kTile + 1];
            }
            y[(static_cast<long long>(m0 + m) * PH + oy / 2) * PW + ox / 2] =
                max(0, max(max(v[0], v[1]), max(v[2], v[3])));
        }
    }
    if (g.split > 1) cluster::sync();  // no block frees its shared memory while another reads it
}

template <int MB>
void launch(const std::int16_t* x, const std::int32_t* codes, std::int32_t* y, int* overflow, const Geometry& g) {
    const std::int64_t blocks = static_cast<std::int64_t>((g.M + MB - 1) / MB) * g.tiles * g.split;
    GPUOPT_REQUIRE(blocks <= INT_MAX, "sparse_conv_fast_sparse_input: too many blocks (maps x tiles >= 2^31)");
    const std::size_t smem = sizeof(int) * MB * kTile * kTile + sizeof(int2) * MB * kTapChannels * g.width;
    require_shared_memory(scatter_kernel<MB>, smem, "sparse_conv_fast_sparse_input");
    // Scratch of this call (scratch.hpp): the non-zero lists (capacity H*W per channel), counts, max |x|.
    const std::size_t C = static_cast<std::size_t>(g.C);
    const Scratch scratch({sizeof(int2) * C * g.H * g.W, sizeof(int) * C, sizeof(int) * C});
    int2* nz = scratch.get<int2>(0);
    int *count = scratch.get<int>(1), *absmax = scratch.get<int>(2);
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(overflow, 0, sizeof(int), current_stream()));
    compact_kernel<<<g.C, kThreads, 0, current_stream()>>>(x, nz, count, absmax, g.H, g.W);
    GPUOPT_CHECK_LAUNCH("sparse compact_kernel");
    cluster::launch(scatter_kernel<MB>, static_cast<unsigned>(blocks), kThreads, smem, g.split, x, codes,
                    static_cast<const int2*>(nz), static_cast<const int*>(count), static_cast<const int*>(absmax), y,
                    overflow, g);
    GPUOPT_CHECK_LAUNCH("sparse scatter_kernel");
}

}  // namespace

void sparse_conv_sparse_input_check(const SparseConvShape& s) {
    sparse_conv_check(s);
    // Non-zeros store (row << 16 | col); (non-zero, map) pair indices are int.
    GPUOPT_REQUIRE(s.H <= kMaxSide && s.W <= kMaxSide && s.H * s.W <= (1 << 27),
                   "sparse_conv (fast_sparse_input): H and W must be <= 32767 and H*W <= 2^27; use variant='fast_fused'");
}

void sparse_neurons_check(std::int64_t C, std::int64_t H, std::int64_t W) {
    GPUOPT_REQUIRE(C >= 1 && H >= 1 && W >= 1 && C <= INT_MAX, "sparse neurons: C, H and W must be >= 1 (C < 2^31)");
    GPUOPT_REQUIRE(H <= kSparsePlanesMaxH && W <= kSparsePlanesMaxW,
                   "sparse neurons: maps must be at most " + std::to_string(kSparsePlanesMaxH) + " high and " +
                       std::to_string(kSparsePlanesMaxW) + " wide (the planes kernel's lists), got " +
                       std::to_string(H) + "x" + std::to_string(W));
}

void sparse_conv_fast_sparse_input(const std::int16_t* x, const std::int32_t* codes, std::int64_t width,
                                   std::int32_t* y, int* overflow, const SparseConvShape& s,
                                   const SparseNeuronLists* lists) {
    sparse_conv_sparse_input_check(s);
    GPUOPT_REQUIRE(width >= 1 && width <= s.R * s.S, "sparse_conv: width (entries per padded slice) must be in 1..R*S = " +
                                                         std::to_string(s.R * s.S) + ", got " + std::to_string(width));
    GPUOPT_REQUIRE(x != nullptr && y != nullptr && codes != nullptr && overflow != nullptr,
                   "sparse_conv_fast_sparse_input: null x, codes, y or overflow");
    if (sparse_conv_fast_sparse_input_planes(x, codes, width, y, overflow, s, lists)) return;  // W <= 32, R, S <= 3
    Geometry g{};
    g.C = static_cast<int>(s.C), g.H = static_cast<int>(s.H), g.W = static_cast<int>(s.W), g.M = static_cast<int>(s.M);
    g.width = static_cast<int>(width), g.pad_h = static_cast<int>(s.R / 2), g.pad_w = static_cast<int>(s.S / 2);
    g.tiles_x = static_cast<int>((s.W + kTile - 1) / kTile);
    g.tiles = g.tiles_x * static_cast<int>((s.H + kTile - 1) / kTile);
    // 8 maps per block unless M <= 4; split (cluster size) for ~4 blocks per SM (the GPU's multiprocessor count), each
    // block keeping >= 2 tap chunks of channels.
    const bool eight = s.M > 4;
    const std::int64_t owners = (s.M + (eight ? 7 : 3)) / (eight ? 8 : 4) * g.tiles;
    g.split = 1;
    while (cluster::supported() && g.split < 8 && owners * g.split < 4 * multiprocessor_count() &&
           s.C >= 2 * kTapChannels * 2 * g.split)
        g.split *= 2;
    if (eight)
        launch<8>(x, codes, y, overflow, g);
    else
        launch<4>(x, codes, y, overflow, g);
}

}  // namespace gpuopt::sparse
