// fast_sparse_input's kernel for maps up to 32 wide and filters up to 3x3 (the lab's layer); the atomic kernel of
// sparse_conv_scatter.cu covers the rest. Work follows the non-zero inputs (the lab: 104 K of 524 K, x 512 maps =
// 53 M multiply-adds instead of 268 M), and every shared-memory access of the hot loop is bank-conflict-free:
//
// 1. compact_rows_kernel: per channel, its non-zeros in raster order, packed as value << 16 | byte offset
//    4 * (iy * 32 + ix), with a row pointer (CSR by rows), so a block reads exactly the rows its tile needs. It also
//    zeroes the overflow flag (no memset launch) and lets planes_kernel start early (programmatic dependent launch:
//    the planes zeroed and the codes staged while the compaction finishes; round 4).
// 2. planes_kernel: a block owns 32 maps (one per lane) x kTR output rows; its 32 warps walk channels, each (non-zero,
//    tap) pair a `red.shared.add` of value * tap into the map's accumulators: per lane one IADD, one IMUL, one
//    atomic (the non-zeros unpacked into offset and value arrays when staged; integer adds: exact,
//    order-independent). The column offset s of a tap is NOT applied to the address: each map keeps one accumulator
//    plane per s (indexed by the input column). With a plane row of 32 words, planes of a multiple of 32 words and
//    maps 32*k + 1 words apart, lane m hits bank (m + ix) mod 32 whatever the taps: 1 wavefront per warp
//    instruction (one plane per map, with its 9 offsets, averages 2.7).
// Round 6: sparse neurons in (gpuopt.sparse.SparseNeurons: these lists built once) queue planes_kernel alone;
// planes_kernel stages its spans and codes without divisions and walks its channels
// with the next one's span and first entries in registers.
// Epilogue: each block first sums its S planes with their shifts into plane 0 (local), then the cluster's ranks add
// their plane 0 through distributed shared memory (split reads per output), ReLU, 2x2 max.
// (Round 4 also tried the compaction inside planes_kernel, each warp ballotting its tile's rows: one launch, but 16
// map groups x 1.25 row overlap compact every row 20 times: 32.3 M instructions against 22.9 M, slower; notes.)
// Exactness as the other one-pass kernels: the int32 sums cannot overflow while max|x| * sum|w_m| <= INT_MAX
// (max|x| of the channels read, sum|w| over the cluster); otherwise the int64 path (sparse_exact.cuh).
// A cluster of `split` blocks shares one (maps, rows), each taking 1/split of the channels; the planes are added
// through distributed shared memory in rank order.

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

constexpr int kLanes = 32;        // maps per block, one per lane
constexpr int kWarps = 32;        // warps per block: 8 per scheduler to hide the list loads
constexpr int kThreads = kLanes * kWarps;
constexpr int kTR = 8;            // output rows per block (even: whole pool windows)
constexpr int kRow = static_cast<int>(kSparsePlanesMaxW);  // plane row (words): the input columns
constexpr int kBuf = 128;         // non-zeros staged per warp at a time (the lab: 64 per channel and tile on average)
constexpr int kCodeRows = 256;    // (channel, entry) rows of codes staged per phase (33 KB)
constexpr int kMaxH = static_cast<int>(kSparsePlanesMaxH);  // a non-zero packs value << 16 | 4 * (iy * 32 + ix)
static_assert(4 * (kMaxH * kRow + kRow - 1) < 65536 && kSparsePlanesMaxTaps == 3, "16-bit byte offsets; 3x3");
constexpr int kCompactThreads = 256;  // 8 rows per round (H200: 6.4 us on the lab's layer; 1024 threads in one round
                                      // measured 9.8 us: the 32-warp prefix loop costs more than the rounds)

struct PGeometry : FusedShape {
    int R, S, tiles, split;
    int lists;      // 1: sparse neurons in (the lists built before: no compaction launch to wait for)
    int zero_flag;  // 1: planes_kernel zeroes the overflow flag (lists and the bound proven by the caller)
    int rows;       // plane rows: kTR + 2 (R - 1)
    int map_words;  // S * rows * kRow + 1
};

// One warp per row (lane = column), 8 rows per round; the ballot scan keeps raster order (deterministic). (Round 6
// tried a warp per channel, 16 rows' loads in flight and no barrier: 8.6 us alone on the lab's layer against this
// kernel's 6.9, 0.6 IPC: one warp walks its 32 rows' ballots in series. Kept this one.)
__global__ void __launch_bounds__(kCompactThreads)
    compact_rows_kernel(const std::int16_t* __restrict__ x, int* __restrict__ nz, int* __restrict__ rowptr,
                        int* __restrict__ absmax, int* __restrict__ overflow, int H, int W) {
    cluster::allow_dependents();  // planes_kernel's blocks may zero their planes and stage codes meanwhile
    if (overflow != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *overflow = 0;  // (no memset launch; planes_kernel
                                                                                    // writes it after)
    constexpr int kW = kCompactThreads / 32;
    __shared__ int warp_counts[kW];
    __shared__ int block_max;
    const int c = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const std::int16_t* xc = x + static_cast<long long>(c) * H * W;
    int* out = nz + static_cast<long long>(c) * H * W;
    int* rp = rowptr + static_cast<long long>(c) * (H + 1);
    if (threadIdx.x == 0) block_max = 0;
    int base = 0, my_max = 0;
    for (int r0 = 0; r0 < H; r0 += kW) {
        const int r = r0 + warp;
        const int v = (r < H && lane < W) ? static_cast<int>(xc[r * W + lane]) : 0;
        my_max = max(my_max, abs(v));
        const CompactRound round = compact_round<kW>(v != 0, warp_counts);
        if (v != 0)
            out[base + round.slot] =
                static_cast<int>((static_cast<unsigned>(v) << 16) | static_cast<unsigned>(4 * (r * kRow + lane)));
        if (lane == 0 && r < H) rp[r] = base + round.warp_before;
        base += round.total;
    }
    atomicMax(&block_max, my_max);
    __syncthreads();
    if (threadIdx.x == 0) rp[H] = base, absmax[c] = block_max;
}

// A FAST code decoded for the hot loop, once when staged (in planes_kernel's prologue, which overlaps the
// compaction): value << 16 | byte offset of its plane and tap row, 4 * (col * rows * kRow + (R - 1 + pad_h - row) *
// kRow) (< 2^12); codes outside the filter: 0 (adds nothing). A non-zero's 4 * (iy * kRow + ix) - 4 * y0 * kRow is
// added in the loop.
__device__ __forceinline__ int tap_entry(int code, const PGeometry& g) {
    const FastTap t = decode_fast(code);
    if (t.row >= g.R || t.col >= g.S) return 0;
    return static_cast<int>((static_cast<unsigned>(t.value) << 16) |
                            static_cast<unsigned>(4 * (t.col * g.rows * kRow + (g.R - 1 + g.pad_h - t.row) * kRow)));
}

__device__ __forceinline__ void red_add(unsigned addr, int v) {
    // No "memory" clobber: the staged non-zeros may be read ahead of it (they are not what it writes); volatile
    // asm stays ordered with the barriers.
    asm volatile("red.shared.add.s32 [%0], %1;" ::"r"(addr), "r"(v));
}

__global__ void __launch_bounds__(kThreads, 1)
    planes_kernel(const std::int16_t* __restrict__ x, const std::int32_t* __restrict__ codes,
                  const int* __restrict__ nz, const int* __restrict__ rowptr, const int* __restrict__ absmax,
                  std::int32_t* __restrict__ y, int* __restrict__ overflow, const PGeometry g) {
    extern __shared__ int4 smem_raw[];
    int* acc = reinterpret_cast<int*>(smem_raw);  // [kLanes][map_words]
    // Per warp: kBuf non-zeros, unpacked once when staged (32 a warp instruction) into byte offsets and values, so
    // the hot loop spends one IADD, one IMUL and the atomic per (non-zero, map), no unpacking.
    // (one array: a quad's values sit at a fixed distance from its offsets, so the loop steps one address)
    __shared__ int4 staged[kWarps][2 * kBuf / 4];
    __shared__ int2 span[kCodeRows];  // this phase's channels: [lo, hi) of their tile rows' non-zeros (round 6)
    __shared__ unsigned long long wsum[kLanes];
    __shared__ int xmax, inexact, next_channel;
    // Sparse neurons in (round 6: no compaction launch before this one): zero the flag here. The launcher only asks
    // for this when the host proved the int32 bound (no block can then raise the flag: no race with this store).
    if (g.zero_flag && blockIdx.x == 0 && threadIdx.x == 0) *overflow = 0;
    const int rank = g.split > 1 ? static_cast<int>(cluster::rank()) : 0;
    const int groups = (g.M + kLanes - 1) / kLanes, owner = blockIdx.x / g.split;
    const int m0 = (owner % groups) * kLanes, y0 = (owner / groups) * kTR;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int total_words = kLanes * g.map_words;  // a multiple of 4
    int* ctab = acc + total_words;  // this phase's codes: [channel, entry][map], rows padded to 33 words
    for (int i = threadIdx.x; i < total_words / 4; i += kThreads) smem_raw[i] = make_int4(0, 0, 0, 0);
    if (threadIdx.x < kLanes) wsum[threadIdx.x] = 0;
    if (threadIdx.x == 0) xmax = inexact = 0;

    // Input rows feeding output rows [y0, y0 + kTR); a non-zero at row iy through tap row r lands on plane row
    // iy - r + pad_h - y0 + R - 1, in [0, rows).
    const int iy_lo = max(0, y0 - g.pad_h), iy_hi = min(g.H, y0 + kTR + g.R - 1 - g.pad_h);
    const unsigned acc_addr = static_cast<unsigned>(__cvta_generic_to_shared(acc));
    const unsigned lane_base = acc_addr + 4u * static_cast<unsigned>(lane * g.map_words);
    const unsigned lane_base_y = lane_base - 4u * static_cast<unsigned>(y0 * kRow);  // (mod 2^32: + an entry's iy)
    const long long HW = static_cast<long long>(g.H) * g.W;
    const int pad_entry = 4 * iy_lo * kRow;  // value 0 at a valid position: pads the staged tail
    const int4* offs4 = staged[warp];
    int* offs1 = reinterpret_cast<int*>(staged[warp]);
    int* vals1 = offs1 + kBuf;
    int my_xmax = 0;

    const int per = channels_per_split(g.C, g.split, 1);
    const int c_begin = rank * per, c_end = min(g.C, (rank + 1) * per);
    const int phase = max(1, kCodeRows / g.width);  // channels whose codes fit ctab (the lab: all 256 at once)
    for (int p0 = c_begin; p0 < c_end; p0 += phase) {
        const int pn = min(phase, c_end - p0), rows = pn * g.width;
        __syncthreads();  // the previous phase's codes and spans are consumed (and the planes zeroed)
        // Each channel's [lo, hi) for this tile and its max|x| (round 6: one load each, all in flight, instead of
        // a dependent pair per (warp, channel)). Sparse neurons in: issued before the codes' loads (no previous
        // kernel to wait for), so the two DRAM latencies overlap.
        int2 my_span = make_int2(0, 0);
        int my_max = 0;
        const auto load_span = [&] {
            if (static_cast<int>(threadIdx.x) < pn) {
                const int* rp = rowptr + static_cast<long long>(p0 + threadIdx.x) * (g.H + 1);
                my_span = make_int2(rp[iy_lo], rp[iy_hi]);
                my_max = absmax[p0 + threadIdx.x];
            }
        };
        if (g.lists) load_span();
        // A warp per map (round 6: no division per code), its codes of these channels contiguous: lane-strided,
        // coalesced, kBatch loads in flight; maps past M read as 0 (add nothing). Conflict-free stores (33-word rows).
        // The map's sum |w| over these channels is summed here (the bound's filter side; round 4 summed it per
        // (warp, channel) in the walk).
        constexpr int kBatch = 8;
        for (int m = warp; m < kLanes; m += kWarps) {
            const std::int32_t* cm = codes + (static_cast<long long>(m0 + m) * g.C + p0) * g.width;
            const bool live = m0 + m < g.M;
            unsigned long long msum = 0;
#pragma unroll 1
            for (int r0 = lane; r0 < rows; r0 += kBatch * 32) {
                int v[kBatch];
#pragma unroll
                for (int k = 0; k < kBatch; ++k) v[k] = live && r0 + 32 * k < rows ? cm[r0 + 32 * k] : 0;
#pragma unroll
                for (int k = 0; k < kBatch; ++k)
                    if (r0 + 32 * k < rows) {
                        const int te = tap_entry(v[k], g);
                        ctab[(r0 + 32 * k) * (kLanes + 1) + m] = te;
                        msum += static_cast<unsigned long long>(abs(te >> 16));
                    }
            }
#pragma unroll
            for (int d = 16; d > 0; d /= 2) msum += __shfl_xor_sync(0xffffffffu, msum, d);
            if (lane == 0) wsum[m] += msum;  // (this warp's map only: no atomics)
        }
        cluster::wait_for_previous();  // compact_rows_kernel's lists (the planes zeroed and codes staged before)
        if (!g.lists) load_span();
        if (static_cast<int>(threadIdx.x) < pn) span[threadIdx.x] = my_span;
        if (threadIdx.x == 0) next_channel = kWarps;
        my_xmax = max(my_xmax, my_max);
        __syncthreads();
        // The walk: warp w starts with channel w, then takes the next one from a shared counter (channels of uneven
        // density balance over the warps; the integer sums do not depend on the order), asked two channels ahead so
        // the atomic's latency hides. A channel's row span and first kBuf entries are loaded one channel ahead
        // (registers): the list latency hides behind the current scatter; per (warp, channel) only the staging
        // (unpack: 32 entries an instruction), the lane's tap and the loop remain.
        const auto grab = [&] {
            int t = 0;
            if (lane == 0) t = atomicAdd(&next_channel, 1);
            return t;  // lane 0's; broadcast when needed
        };
        int c = warp;
        int cn = __shfl_sync(0xffffffffu, grab(), 0);
        int cnn_lane0 = grab();
        int2 sp = c < pn ? span[c] : make_int2(0, 0);
        int pre[kBuf / 32];
        const auto load_first = [&](int ch, int2 s2, int* e) {
            const int* list = nz + (p0 + ch) * HW + s2.x;
            const int cnt = min(kBuf, s2.y - s2.x);
#pragma unroll
            for (int k = 0; k < kBuf / 32; ++k) e[k] = lane + 32 * k < cnt ? list[lane + 32 * k] : pad_entry;
        };
        const auto stage = [&](const int* e) {
            __syncwarp();  // the previous chunk's reads are done
#pragma unroll
            for (int k = 0; k < kBuf / 32; ++k) offs1[lane + 32 * k] = e[k] & 0xffff, vals1[lane + 32 * k] = e[k] >> 16;
            __syncwarp();
        };
        load_first(c, sp, pre);
        while (c < pn) {
            const int lo = sp.x, hi = sp.y;
            const int cnn = __shfl_sync(0xffffffffu, cnn_lane0, 0);
            cnn_lane0 = cn < pn ? grab() : pn;  // (no more grabs once the channels are dealt)
            const int2 spn = cn < pn ? span[cn] : make_int2(0, 0);
            const int* cm = ctab + c * g.width * (kLanes + 1) + lane;
            if (hi > lo) stage(pre);
            load_first(cn, spn, pre);  // in flight during this channel's scatter
            for (int k0 = lo; k0 < hi; k0 += kBuf) {
                const int cnt = min(kBuf, hi - k0);
                if (k0 != lo) {  // (rare: more than kBuf entries in the tile's rows)
                    int e[kBuf / 32];
#pragma unroll
                    for (int k = 0; k < kBuf / 32; ++k)
                        e[k] = lane + 32 * k < cnt ? nz[(p0 + c) * HW + k0 + lane + 32 * k] : pad_entry;
                    stage(e);
                }
                const int quads = (cnt + 3) / 4;  // the staged tail is padded with value 0
                for (int j = 0; j < g.width; ++j) {
                    // This lane's tap of channel c: (address base, value); codes outside the filter add nothing.
                    const int te = cm[j * (kLanes + 1)];  // decoded when staged
                    const int w = te >> 16;
                    const unsigned base = lane_base_y + static_cast<unsigned>(te & 0xffff);
                    const int4* const end = offs4 + quads;
#pragma unroll 2
                    for (const int4* q = offs4; q < end; ++q) {
                        const int4 o = q[0], v = q[kBuf / 4];  // broadcasts: four non-zeros
                        red_add(base + o.x, w * v.x);  // (wraps, unused, when the bound fails)
                        red_add(base + o.y, w * v.y);
                        red_add(base + o.z, w * v.z);
                        red_add(base + o.w, w * v.w);
                    }
                }
            }
            sp = spn, c = cn, cn = cnn;
        }
    }
    cluster::wait_for_previous();  // (a block without channels): the overflow flag is zeroed before any write
    atomicMax(&xmax, my_xmax);
    __syncthreads();  // this block's planes complete
    // 3. Pre-sum the S column planes into plane 0, row by row of the outputs: out(ty, ox) = sum_s plane_s(ty + R - 1,
    // ox + s - pad_w). All reads before any write (registers, then a barrier); plane 0 is then what the ranks add.
    const int PW = g.W / 2, wrows = kTR / 2, plane_words = g.rows * kRow;
    if (g.S > 1) {
        constexpr int kPer = kLanes * kTR * kRow / kThreads;  // 8 outputs per thread
        int sums[kPer];
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int e = threadIdx.x + k * kThreads, ox = e % kRow, t = e / kRow;  // t = map * kTR + ty
            const int* at = acc + (t / kTR) * g.map_words + (t % kTR + g.R - 1) * kRow;
            int s0 = 0;
#pragma unroll
            for (int s = 0; s < static_cast<int>(kSparsePlanesMaxTaps); ++s) {  // (S <= 3: unrolled, predicated)
                const int ix = ox + s - g.pad_w;
                if (s < g.S && ix >= 0 && ix < g.W) s0 += at[s * plane_words + ix];
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

void sparse_neurons_compact(const std::int16_t* x, int* nz, int* rowptr, int* absmax, std::int64_t C, std::int64_t H,
                           std::int64_t W) {
    sparse_neurons_check(C, H, W);
    GPUOPT_REQUIRE(x != nullptr && nz != nullptr && rowptr != nullptr && absmax != nullptr,
                   "sparse_neurons_compact: null x, nz, rowptr or absmax");
    compact_rows_kernel<<<static_cast<unsigned>(C), kCompactThreads, 0, current_stream()>>>(x, nz, rowptr, absmax, nullptr,
                                                                        static_cast<int>(H), static_cast<int>(W));
    GPUOPT_CHECK_LAUNCH("sparse compact_rows_kernel");
}

bool sparse_conv_fast_sparse_input_planes(const std::int16_t* x, const std::int32_t* codes, std::int64_t width,
                                          std::int32_t* y, int* overflow, const SparseConvShape& s,
                                          const SparseNeuronLists* lists) {
    // The caller (sparse_conv_fast_sparse_input) has checked the shape, width and pointers.
    if (!sparse_input_planes_apply(s)) {
        GPUOPT_REQUIRE(lists == nullptr, "sparse_conv_fast_sparse_input: sparse neurons need maps up to " +
                                             std::to_string(kSparsePlanesMaxW) + " wide and " +
                                             std::to_string(kSparsePlanesMaxH) + " high and filters up to " +
                                             std::to_string(kSparsePlanesMaxTaps) + "x" +
                                             std::to_string(kSparsePlanesMaxTaps) + " (the planes kernel)");
        return false;
    }
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
    if (lists != nullptr) {  // sparse neurons in: the lists built once (SparseNeurons), this kernel alone
        GPUOPT_REQUIRE(lists->nz != nullptr && lists->rowptr != nullptr && lists->absmax != nullptr,
                       "sparse_conv_fast_sparse_input: null neuron lists");
        g.lists = 1, g.zero_flag = lists->bound_proven ? 1 : 0;  // else the flag is zeroed first (a memset: some block may set it)
        if (!lists->bound_proven) GPUOPT_CUDA_CHECK(cudaMemsetAsync(overflow, 0, sizeof(int), current_stream()));
        cluster::launch_ex(planes_kernel, static_cast<unsigned>(blocks), kThreads, smem, g.split, false, x, codes,
                           lists->nz, lists->rowptr, lists->absmax, y, overflow, g);
        GPUOPT_CHECK_LAUNCH("sparse planes_kernel");
        return true;
    }
    // The non-zero lists, row pointers and max |x| of each channel: scratch of this call (scratch.hpp).
    const std::size_t C = static_cast<std::size_t>(g.C);
    const Scratch scratch({sizeof(int) * C * g.H * g.W, sizeof(int) * C * (g.H + 1), sizeof(int) * C});
    int *nz = scratch.get<int>(0), *rowptr = scratch.get<int>(1), *absmax = scratch.get<int>(2);
    compact_rows_kernel<<<g.C, kCompactThreads, 0, current_stream()>>>(x, nz, rowptr, absmax, overflow, g.H, g.W);
    GPUOPT_CHECK_LAUNCH("sparse compact_rows_kernel");
    // Dependent launch: its prologue (planes zeroed, the first codes staged) overlaps the compaction's tail.
    cluster::launch_ex(planes_kernel, static_cast<unsigned>(blocks), kThreads, smem, g.split, true, x, codes,
                    static_cast<const int*>(nz), static_cast<const int*>(rowptr), static_cast<const int*>(absmax), y,
                    overflow, g);
    GPUOPT_CHECK_LAUNCH("sparse planes_kernel");
    return true;
}

}  // namespace gpuopt::sparse
