// fast_sparse_input's kernel for maps up to 32 wide and filters up to 3x3 (the lab's layer); the atomic kernel of
// sparse_conv_scatter.cu covers the rest. Work follows the non-zero inputs (the lab: 104 K of 524 K, x 512 maps =
// 53 M multiply-adds instead of 268 M), and every shared-memory access of the hot loop is bank-conflict-free.
//
// ONE kernel (round 4: the compaction kernel, its row pointers and its list loads are folded in). A block owns 32
// maps (one per lane) x kTR output rows; its 32 warps walk channels. Per (warp, channel):
//  1. compaction: the <= kTR + 2 input rows the tile reads (lane = column, loaded one channel AHEAD, in registers,
//     so the loads of channel c + 32 fly while channel c is scattered) are balloted into the warp's buffer as
//     value << 16 | byte offset 4 * (row - iy_lo) * 32 + 4 * col (a tile's rows always fit: no chunks);
//  2. scatter: per (non-zero, tap) a `red.shared.add` of value * tap into the map's accumulators (integer adds:
//     exact, order-independent, deterministic). The column offset s of a tap is NOT applied to the address: each
//     map keeps one accumulator plane per s (indexed by the input column), so with a plane row of 32 words, planes
//     a multiple of 32 words and maps 32*k + 1 words apart, lane m hits bank (m + ix) mod 32 whatever the taps:
//     1 wavefront per warp instruction (one plane per map, with its 9 offsets, averages 2.7).
// Epilogue: each block first sums its S planes with their shifts into plane 0 (local), then the cluster's ranks add
// their plane 0 through distributed shared memory (split reads per output), ReLU, 2x2 max.
// Exactness as the other one-pass kernels: the int32 sums cannot overflow while max|x| * sum|w_m| <= INT_MAX (max|x|
// of the rows the tile read, sum|w| over the cluster); otherwise the int64 path (sparse_exact.cuh).
// A cluster of `split` blocks shares one (maps, rows), each taking 1/split of the channels.

#include "../common/cluster.cuh"
#include "../common/device.hpp"

#include <climits>
#include <cstdint>

#include "../common/launch.cuh"
#include "sparse_conv_cuda.hpp"
#include "sparse_exact.cuh"

namespace gpuopt::sparse {

namespace {

constexpr int kLanes = 32;        // maps per block, one per lane
constexpr int kWarps = 32;        // warps per block: 8 per scheduler
constexpr int kThreads = kLanes * kWarps;
constexpr int kTR = 8;            // output rows per block (even: whole pool windows)
constexpr int kRow = static_cast<int>(kSparsePlanesMaxW);  // plane row (words): the input columns
constexpr int kInRows = kTR + static_cast<int>(kSparsePlanesMaxTaps) - 1;  // input rows a tile reads, at most
constexpr int kBuf = kInRows * kRow + 4;  // a tile's non-zeros of one channel, padded to whole quads (1.3 KB)
constexpr int kCodeRows = 256;    // (channel, entry) rows of codes staged per phase (33 KB)
static_assert(kBuf % 4 == 0 && 4 * kInRows * kRow < 65536, "buffer entries: 16-bit byte offsets, int4 reads");

struct PGeometry : FusedShape {
    int R, S, tiles, split;
    int rows;       // plane rows: kTR + 2 (R - 1)
    int map_words;  // S * rows * kRow + 1
};

__device__ __forceinline__ void red_add(unsigned addr, int v) {
    // No "memory" clobber: the staged non-zeros may be read ahead of it (they are not what it writes); volatile
    // asm stays ordered with the barriers.
    asm volatile("red.shared.add.s32 [%0], %1;" ::"r"(addr), "r"(v));
}

// This lane's column of the tile's input rows of channel c (0 past the image, past W, or for c >= c_end).
__device__ __forceinline__ void load_rows(int (&v)[kInRows], const std::int16_t* __restrict__ x, int c, int c_end,
                                          long long HW, int iy_lo, int nrows, int W, int lane) {
    const std::int16_t* xc = x + c * HW + static_cast<long long>(iy_lo) * W + lane;
    const bool ok = c < c_end && lane < W;
#pragma unroll
    for (int r = 0; r < kInRows; ++r) v[r] = ok && r < nrows ? static_cast<int>(__ldg(xc + r * W)) : 0;
}

__global__ void __launch_bounds__(kThreads, 1)
    planes_kernel(const std::int16_t* __restrict__ x, const std::int32_t* __restrict__ codes,
                  std::int32_t* __restrict__ y, int* __restrict__ overflow, const PGeometry g) {
    extern __shared__ int4 smem_raw[];
    int* acc = reinterpret_cast<int*>(smem_raw);  // [kLanes][map_words]
    __shared__ int4 bufs[kWarps][kBuf / 4];       // per warp: one channel's packed non-zeros
    __shared__ unsigned long long wsum[kLanes];
    __shared__ int xmax, inexact;
    const int rank = g.split > 1 ? static_cast<int>(cluster::rank()) : 0;
    const int groups = (g.M + kLanes - 1) / kLanes, owner = blockIdx.x / g.split;
    const int m0 = (owner % groups) * kLanes, y0 = (owner / groups) * kTR;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int total_words = kLanes * g.map_words;  // a multiple of 4
    int* ctab = acc + total_words;  // this phase's codes: [channel, entry][map], rows padded to 33 words

    // Input rows feeding output rows [y0, y0 + kTR); a non-zero at row iy through tap row r lands on plane row
    // iy - r + pad_h - y0 + R - 1, in [0, rows).
    const int iy_lo = max(0, y0 - g.pad_h), iy_hi = min(g.H, y0 + kTR + g.R - 1 - g.pad_h);
    const int nrows = iy_hi - iy_lo;
    const long long HW = static_cast<long long>(g.H) * g.W;
    const int per = channels_per_split(g.C, g.split, 1);
    const int c_begin = rank * per, c_end = min(g.C, (rank + 1) * per);
    // The first channel's rows are in flight while the planes are zeroed and the codes staged.
    int v[kInRows];
    int have = c_begin + warp;
    load_rows(v, x, have, c_end, HW, iy_lo, nrows, g.W, lane);

    for (int i = threadIdx.x; i < total_words / 4; i += kThreads) smem_raw[i] = make_int4(0, 0, 0, 0);
    if (threadIdx.x < kLanes) wsum[threadIdx.x] = 0;
    if (threadIdx.x == 0) xmax = inexact = 0;
    const unsigned acc_addr = static_cast<unsigned>(__cvta_generic_to_shared(acc));
    const unsigned lane_base = acc_addr + 4u * static_cast<unsigned>(lane * g.map_words);
    const int plane_words = g.rows * kRow;
    int4* buf = bufs[warp];
    int* buf1 = reinterpret_cast<int*>(buf);
    const unsigned lt = (1u << lane) - 1u;
    unsigned long long my_wsum = 0;
    int my_xmax = 0;

    const int phase = max(1, kCodeRows / g.width);  // channels whose codes fit ctab (the lab: all 256 at once)
    for (int p0 = c_begin; p0 < c_end; p0 += phase) {
        const int pn = min(phase, c_end - p0), rows = pn * g.width;
        __syncthreads();  // the previous phase's codes are consumed (and the planes zeroed)
        // Coalesced: a map's codes of these channels are contiguous; maps past M read as 0 (adds nothing). Loads
        // kBatch at a time before their stores (the whole block waits here: 2 memory latencies, not 8).
        constexpr int kBatch = 4;
#pragma unroll 1
        for (int e0 = threadIdx.x; e0 < kLanes * rows; e0 += kBatch * kThreads) {
            int cv[kBatch];
#pragma unroll
            for (int k = 0; k < kBatch; ++k) {
                const int e = e0 + k * kThreads, m = e / rows, row = e - m * rows;
                cv[k] = e < kLanes * rows && m0 + m < g.M
                            ? codes[(static_cast<long long>(m0 + m) * g.C + p0) * g.width + row] : 0;
            }
#pragma unroll
            for (int k = 0; k < kBatch; ++k) {
                const int e = e0 + k * kThreads, m = e / rows, row = e - m * rows;
                if (e < kLanes * rows) ctab[row * (kLanes + 1) + m] = cv[k];
            }
        }
        __syncthreads();
#pragma unroll 1
        for (int c = p0 + warp; c < p0 + pn; c += kWarps) {
            if (c != have) load_rows(v, x, c, c_end, HW, iy_lo, nrows, g.W, lane);  // warp-uniform (ragged phases)
            // 1. Compaction: ballot per row, raster order (deterministic; the sums do not depend on it anyway).
            __syncwarp();  // the previous channel's reads of buf are done
            int cnt = 0;
#pragma unroll
            for (int r = 0; r < kInRows; ++r) {
                my_xmax = max(my_xmax, abs(v[r]));
                const unsigned b = __ballot_sync(0xffffffffu, v[r] != 0);
                if (v[r] != 0)
                    buf1[cnt + __popc(b & lt)] =
                        static_cast<int>((static_cast<unsigned>(v[r]) << 16) | (4u * (r * kRow + lane)));
                cnt += __popc(b);
            }
            if (lane < 3) buf1[cnt + lane] = 0;  // value 0 at offset 0 (a valid plane row): whole quads
            // 2. The next channel's rows: in flight during the scatter (v is free again).
            have = c + kWarps < p0 + pn ? c + kWarps : p0 + pn + warp;
            load_rows(v, x, have, c_end, HW, iy_lo, nrows, g.W, lane);
            __syncwarp();
            const int quads = (cnt + 3) / 4;
            const int* cm = ctab + (c - p0) * g.width * (kLanes + 1) + lane;
            for (int j = 0; j < g.width; ++j) {
                // This lane's tap of channel c: (address base, value); codes outside the filter add nothing.
                FastTap tap = decode_fast(cm[j * (kLanes + 1)]);
                if (tap.row >= g.R || tap.col >= g.S) tap = FastTap{0, 0, 0};
                my_wsum += static_cast<unsigned long long>(abs(tap.value));
                const unsigned base = lane_base + 4u * static_cast<unsigned>(
                    tap.col * plane_words + (g.R - 1 + g.pad_h - tap.row - y0 + iy_lo) * kRow);
                const int w = tap.value;
#pragma unroll 2
                for (int q = 0; q < quads; ++q) {
                    const int4 e = buf[q];  // broadcast: four non-zeros (value << 16 | byte offset)
                    red_add(base + (e.x & 0xffff), w * (e.x >> 16));  // (wraps, unused, when the bound fails)
                    red_add(base + (e.y & 0xffff), w * (e.y >> 16));
                    red_add(base + (e.z & 0xffff), w * (e.z >> 16));
                    red_add(base + (e.w & 0xffff), w * (e.w >> 16));
                }
            }
        }
    }
    atomicAdd(&wsum[lane], my_wsum);
    atomicMax(&xmax, my_xmax);
    __syncthreads();  // this block's planes complete
    // 3. Pre-sum the S column planes into plane 0, row by row of the outputs: out(ty, ox) = sum_s plane_s(ty + R - 1,
    // ox + s - pad_w). All reads before any write (registers, then a barrier); plane 0 is then what the ranks add.
    const int PW = g.W / 2, wrows = kTR / 2;
    if (g.S > 1) {
        constexpr int kPer = kLanes * kTR * kRow / kThreads;  // 8 outputs per thread
        int sums[kPer];
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int e = threadIdx.x + k * kThreads, ox = e % kRow, t = e / kRow;  // t = map * kTR + ty
            const int* at = acc + (t / kTR) * g.map_words + (t % kTR + g.R - 1) * kRow;
            int s0 = 0;
            for (int s = 0; s < g.S; ++s) {
                const int ix = ox + s - g.pad_w;
                if (ix >= 0 && ix < g.W) s0 += at[s * plane_words + ix];
            }
            sums[k] = s0;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int e = threadIdx.x + k * kThreads, ox = e % kRow, t = e / kRow;
            acc[(t / kTR) * g.map_words + (t % kTR + g.R - 1) * kRow + ox] = sums[k];
        }
    }  // S == 1: plane 0 is the sum already
    if (g.split > 1)
        cluster::sync();  // every rank's plane 0, wsum and xmax complete and visible
    else
        __syncthreads();
    if (threadIdx.x < kLanes) {
        unsigned long long ws = 0;
        int xm = 0;
        for (int r = 0; r < g.split; ++r) {
            xm = max(xm, g.split > 1 ? *cluster::map(&xmax, r) : xmax);
            ws += g.split > 1 ? cluster::map(wsum, r)[threadIdx.x] : wsum[threadIdx.x];
        }
        if (static_cast<unsigned long long>(xm) * ws > INT_MAX) inexact = 1;
    }
    __syncthreads();
    const int PH = g.H / 2;
    if (inexact) {  // block-uniform (the cluster's bound): windows (row, col) of the tile, dealt to the ranks; an
                    // odd last column too (its sums are checked for overflow, as the CPU reference does)
        const int wcols = (g.W + 1) / 2;
        for (int p = rank + g.split * static_cast<int>(threadIdx.x); p < wrows * wcols; p += g.split * kThreads)
            exact_windows<kLanes>(x, codes, y, overflow, g, m0, y0 + 2 * (p / wcols), 2 * (p % wcols));
    } else {
        // Windows (map, row, col) of the tile, a contiguous share per rank; each output sums plane 0 of every rank.
        const int n = kLanes * wrows * PW, share = (n + g.split - 1) / g.split;
        for (int e = rank * share + static_cast<int>(threadIdx.x); e < min(n, (rank + 1) * share); e += kThreads) {
            const int m = e / (wrows * PW), wi = e - m * (wrows * PW), wr = wi / PW, wc = wi - wr * PW;
            const int oy = y0 + 2 * wr;
            if (m0 + m >= g.M || oy / 2 >= PH) continue;
            const int at = m * g.map_words + (2 * wr + g.R - 1) * kRow + 2 * wc;
            int s00 = 0, s01 = 0, s10 = 0, s11 = 0;
            for (int r = 0; r < g.split; ++r) {
                const int* a = (g.split > 1 ? cluster::map(acc, r) : acc) + at;
                s00 += a[0], s01 += a[1], s10 += a[kRow], s11 += a[kRow + 1];
            }
            y[(static_cast<long long>(m0 + m) * PH + oy / 2) * PW + wc] = max(max(max(s00, s01), max(s10, s11)), 0);
        }
    }
    if (g.split > 1) cluster::sync();  // no block frees its shared memory while another reads it
}

}  // namespace

bool sparse_conv_fast_sparse_input_planes(const std::int16_t* x, const std::int32_t* codes, std::int64_t width,
                                          std::int32_t* y, int* overflow, const SparseConvShape& s) {
    // The caller (sparse_conv_fast_sparse_input) has checked the shape, width and pointers.
    if (!sparse_input_planes_apply(s)) return false;
    PGeometry g{};
    g.C = static_cast<int>(s.C), g.H = static_cast<int>(s.H), g.W = static_cast<int>(s.W), g.M = static_cast<int>(s.M);
    g.width = static_cast<int>(width), g.pad_h = static_cast<int>(s.R / 2), g.pad_w = static_cast<int>(s.S / 2);
    g.R = static_cast<int>(s.R), g.S = static_cast<int>(s.S);
    g.tiles = (g.H + kTR - 1) / kTR;
    g.rows = kTR + 2 * (g.R - 1);
    g.map_words = g.S * g.rows * kRow + 1;
    // Split (cluster size): the most blocks that still fit one per SM in one wave (the lab: 16 x 4 owners x 2),
    // each block keeping >= 2 channels per warp.
    const std::int64_t owners = static_cast<std::int64_t>((g.M + kLanes - 1) / kLanes) * g.tiles;
    g.split = 1;
    while (cluster::supported() && g.split < 8 && owners * g.split * 2 <= multiprocessor_count() &&
           s.C >= 2 * kWarps * 2 * g.split)
        g.split *= 2;
    const std::int64_t blocks = owners * g.split;
    GPUOPT_REQUIRE(blocks <= INT_MAX, "sparse_conv_fast_sparse_input: too many blocks");
    const std::size_t smem = sizeof(int) * (kLanes * g.map_words + kCodeRows * (kLanes + 1));
    require_shared_memory(planes_kernel, smem, "sparse_conv_fast_sparse_input");
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(overflow, 0, sizeof(int), nullptr));
    cluster::launch(planes_kernel, static_cast<unsigned>(blocks), kThreads, smem, g.split, x, codes, y, overflow, g);
    GPUOPT_CHECK_LAUNCH("sparse planes_kernel");
    return true;
}

}  // namespace gpuopt::sparse
