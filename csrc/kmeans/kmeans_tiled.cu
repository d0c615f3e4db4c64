// "device_tiled": device_gemm's loop (Liao's memberships, the sums of Summation::Chunked; any k*D) with the
// two halves of assign_and_sum split so each costs what it must:
//   assign_tiled  the dot form as an SGEMM with a row-argmin epilogue: a block holds 256 points (x transposed in
//                 shared memory) and all k centres (-2c transposed, ||c||^2), each thread a 4 x 8 (points x
//                 centres) register tile fed by float4 shared-memory loads (3 LDS.128 per 32 FMAs), a running
//                 (best, second, index) per point; the 4 threads of a point row merge theirs by shuffles; a point
//                 whose gap is within dot_bound is queued and gets Liao's distance to its candidates (nearest_dot's
//                 rule) with a tile's worth of others, one a thread, so every membership is Liao's. Persistent
//                 grid: the centres are staged once a block (k*D <= 4096), else streamed a block of them at a
//                 time through each tile (Blocked). D <= 16: the next tile's points and memberships are copied by
//                 cp.async into a second x buffer while this tile runs (prefetches), and a tile needs one barrier:
//                 the merged (best, second, index) are gap-tested by the lanes that hold them. Products "tf32x3"
//                 (Tc): the same tile with the products on the tensor cores in 3xTF32, a warp 32 points x 32
//                 centres of mma.sync (kmeans_tiled_tc.cuh), the tile's points as rows (16-byte copies), its own
//                 rounding bound tc_bound in place of dot_bound, the centre's index packed into g's low bits
//                 (tc::pack); "ffma" the register tile; "auto": resolve.
//   sum_members   per chunk of 1024 objects a stable block radix sort of (cluster, index) gives each cluster its
//                 members in object order; one thread per (cluster, 4 coordinates) adds them, closing a leaf sum into
//                 the chunk sum at each leaf boundary: the leaf/chunk tree of assign_and_sum (empty leaves add
//                 +0.0: no change), work by members (N*D) instead of by k*D per leaf. D <= 16: the chunk's x copied
//                 by cp.async during the sort, the next chunk's memberships loaded during the walks. D >= 64 in
//                 16-byte rows: no staging, a thread per (cluster, 4 coordinates) of all D reads its members' rows.
// Then finish_loop (kmeans_device.cu), unchanged: the same bits as device_gemm and cpu(summation="chunked").
// D > 64: the deep path (kmeans_tiled_deep.cu), the K loop over D (takes_deep), its products FP32 FMAs or, with
// products "tf32x3", 3xTF32 mma.sync (kmeans_tiled_deep_tc.cuh).
#include <cub/block/block_radix_sort.cuh>

#include <algorithm>
#include <cstdint>
#include <string>

#include "../common/async_copy.cuh"
#include "../common/cuda_check.cuh"
#include "../common/device.hpp"
#include "../common/error.hpp"
#include "../common/launch.cuh"
#include "kmeans_device.cuh"
#include "kmeans_tiled.hpp"
#include "kmeans_tiled_tc.cuh"

namespace gpuopt::kmeans::tiled {
namespace {

constexpr int kTileThreads = 256;
// A thread's register tile: 4 points x kCentresT centres, kCols threads a point row. 8 x 8 spilled at 128
// registers (64 accumulators next to 8 points' (best, second, index)). Measured on the H200 at 10M x 16, k=256:
// 4 x 8 (kCols 4) 109 registers, 2 blocks an SM, issue slots 68% busy: 3.89 ms/loop; 4 x 4 (kCols 8, unroll 2) 64
// registers, 4 blocks an SM, but 2.57 G instructions against 2.16 G and 9.2 cycles an issue: 4.09 ms.
constexpr int kCols = 4;
constexpr int kTileCentres = 32;                          // centres a register pass: kCols x kCentresT
constexpr int kCentresT = kTileCentres / kCols;           // a multiple of 4: float4 groups of centres
constexpr int kTilePoints = kTileThreads / kCols * 4;     // points a block tile: rows of threads x 4 points
constexpr int kMinBlocks = kCols == 8 ? 4 : 2;            // blocks an SM the registers are held to
static_assert(kCentresT % 4 == 0 && kTilePoints <= kTileThreads, "float4 centre groups; a flush a thread a point");
constexpr int kXStride = kTilePoints + 4; // x^T rows padded: the transposing stores spread over the banks
constexpr int kSortItems = kChunk / kTileThreads;  // 4 keys a thread in sum_members
constexpr int kIndexBits = 10;                      // a chunk's object index in the sort key
constexpr int kSumCols = 16;                        // coordinates of the chunk staged at once (64 KB)
static_assert(kChunk == 1 << kIndexBits && kTileThreads * kSortItems == kChunk, "sort keys hold a chunk index");

__host__ __device__ inline int padded_k(int k) { return (k + kTileCentres - 1) / kTileCentres * kTileCentres; }

// Past k*D = 4096 the centres do not stay in shared memory whole: a tile streams them in blocks of
// block_centres(DP) (about 4096 coordinates, a multiple of a register pass), the running (best, second, index)
// carried across blocks in registers; only the norms (k floats) stay whole.
constexpr int kStagedCoords = kMaxCentreCoords<true>;
__host__ __device__ constexpr int block_centres(int dp) {
    return kStagedCoords / dp / kTileCentres * kTileCentres > kTileCentres ? kStagedCoords / dp / kTileCentres * kTileCentres
                                                                           : kTileCentres;
}
inline bool blocked(std::int64_t d, std::int64_t k) { return k * d > kStagedCoords; }

// Staged centres a block holds at once: all of them, or a block of them (Blocked).
__host__ __device__ inline int staged_centres(int dp, int k, bool blocked_centres) {
    return blocked_centres ? block_centres(dp) : padded_k(k);
}

// The norms also as mma C-operand quads: the tensor-core screen with its A fragments in registers and all centres
// staged (2 kc floats more).
__host__ __device__ constexpr bool quads(int dp, bool blocked_centres, bool tc) {
    return tc && tc::hoists(dp) && !blocked_centres;
}

// Two x buffers (the next tile and its memberships prefetched by cp.async) where they are small: D <= 16. Measured
// on the H200 (10M x 16, k=256, marginal loop): 2,927 µs without, 2,759 / 2,718 with (ktile call 2).
__host__ __device__ constexpr bool prefetches(int dp) { return dp <= 16; }

// The tile's points in shared memory, coordinate j of point p at p * PS + j * JS: x^T (PS 1, JS kXStride) for the
// FFMA tile (its float4 loads run over 4 points) and where the tensor-core screen loads A a k8 step a pass; rows (PS
// row_stride(DP), JS 1) for the tensor-core screen with prefetch: 16-byte cp.async copies (4 a thread a tile at D =
// 16, against 16 transposing 4-byte copies of ~25 instructions each), a point's coordinates in float4 loads, and the
// A-fragment loads still conflict-free (lane (g, t) reads word g PS + t: distinct banks for PS / 4 odd).
__host__ __device__ constexpr bool rows(int dp, bool tc) { return tc && prefetches(dp); }
__host__ __device__ constexpr int row_stride(int dp) { return dp / 4 % 2 ? dp : dp + 4; }
__host__ __device__ constexpr int point_stride(int dp, bool tc) { return rows(dp, tc) ? row_stride(dp) : 1; }
__host__ __device__ constexpr int coord_stride(int dp, bool tc) { return rows(dp, tc) ? 1 : kXStride; }
__host__ __device__ constexpr int x_buffer_floats(int dp, bool tc) {
    return rows(dp, tc) ? kTilePoints * row_stride(dp) : dp * kXStride;
}

// Tc: -2c as hi/lo B fragments (tc::centre_floats a centre) instead of one float a coordinate.
std::size_t tile_shared_bytes(int dp, int k, bool blocked_centres, bool tc) {
    const int kc = padded_k(k), kb = staged_centres(dp, k, blocked_centres);
    const int cs = (tc ? tc::centre_floats(dp) : dp) * kb;
    const int cq = quads(dp, blocked_centres, tc) ? 2 * kc : 0;
    const int xt = prefetches(dp) ? 2 * x_buffer_floats(dp, tc) + 2 * kTilePoints : x_buffer_floats(dp, tc);
    return static_cast<std::size_t>(cs + kc + cq + xt) * sizeof(float);
}

std::size_t sum_shared_bytes(int k) {
    return static_cast<std::size_t>(kChunk * kSumCols + kChunk + 3 * (k + 1)) * sizeof(std::int32_t);
}

// Points whose dot-form gap does not clear the bound, waiting for Liao's path: at most a tile's worth are added
// between two flushes, so kQueue = 2 tiles never overflows.
constexpr int kQueue = 2 * kTilePoints;
__shared__ std::int64_t queue_i[kQueue];
__shared__ float queue_b[kQueue];  // the point's best g
__shared__ int queue_n;

// The gap bound of one point, its coordinate j at xp[j * JS] (the layouts above): B = ||x|| + max ||c||, rounded up;
// dot_bound for the FFMA screen (tc_dim 0), tc::tc_bound for the 3xTF32 one over tc_dim padded coordinates. N > 0:
// ||x||^2 over the N = DP staged coordinates, whose pad coordinates are zero (fma(0, 0, s) == s: the same sum as
// over d), unrolled, by float4 in rows; N = 0: over d.
template <int JS, int N = 0>
__device__ inline float point_bound(const float* xp, int d, float cmax, int tc_dim) {
    float xn2 = 0.f;
    if constexpr (N > 0 && JS == 1 && N % 4 == 0) {
#pragma unroll
        for (int j = 0; j < N; j += 4) {
            const float4 v = *reinterpret_cast<const float4*>(xp + j);
            xn2 = __fmaf_rn(v.x, v.x, xn2), xn2 = __fmaf_rn(v.y, v.y, xn2);
            xn2 = __fmaf_rn(v.z, v.z, xn2), xn2 = __fmaf_rn(v.w, v.w, xn2);
        }
    } else {
        const int count = N > 0 ? N : d;
#pragma unroll 4
        for (int j = 0; j < count; ++j) xn2 = __fmaf_rn(xp[j * JS], xp[j * JS], xn2);
    }
    const float b = __fadd_ru(__fsqrt_ru(xn2), cmax);
    return tc_dim ? tc::tc_bound(d, tc_dim, b) : dot_bound(d, b);
}

// nearest_dot's candidates: g within the bound of the best b (g recomputed with the same chain: the same values;
// -2c is exact, so Blocked reads it from the centres themselves), Liao's distance for those in index order, ties to
// the lower index. After the 3xTF32 screen (Blocked = true: its staged centres are fragments; b its best g, the
// bound tc_bound) g is recomputed by FFMA: Liao's nearest c* has g_ffma(c*) <= b + e_tc + e_ffma + 2 e_liao <= b +
// tc_bound (a pair's 2 e_tc + 2 e_liao, e_tc >= e_ffma), so it is still a candidate.
template <bool Blocked, int JS>
__device__ inline int liao_among_candidates(const float* xp, float b, float bound, int d, int k, int kc,
                                            const float* cs, const float* cn, const float* __restrict__ centres) {
    float best_dist = 0.f;
    int m = -1;
    for (int c = 0; c < k; ++c) {
        float g = cn[c];
        for (int j = 0; j < d; ++j)
            g = __fmaf_rn(xp[j * JS], Blocked ? -2.f * centres[c * d + j] : cs[j * kc + c], g);
        if (!(__fsub_rn(g, b) > bound)) {
            float dist = 0.f;
            for (int j = 0; j < d; ++j) {
                const float diff = __fsub_rn(xp[j * JS], centres[c * d + j]);
                dist = __fadd_rn(dist, __fmul_rn(diff, diff));
            }
            if (m < 0 || dist < best_dist) best_dist = dist, m = c;
        }
    }
    return m;
}

// The queued points through Liao's path, up to a tile at once: their rows staged into a free x buffer (layout PS,
// JS), one point a thread. Called by the whole block with queue_n uniform; empties it.
// Returns this thread's membership changes.
template <bool Blocked, int PS, int JS>
__device__ inline int flush_queue(const float* __restrict__ x, int d, int k, int kc, const float* __restrict__ centres,
                                  const float* cs, const float* cn, float* xs, float cmax, int tc_dim,
                                  std::int32_t* __restrict__ membership) {
    int changed = 0;
    const int total = queue_n;
    for (int e0 = 0; e0 < total; e0 += kTilePoints) {
        const int count = total - e0 < kTilePoints ? total - e0 : kTilePoints;
        for (int t = threadIdx.x; t < count * d; t += kTileThreads) {
            const int e = t / d, j = t % d;
            xs[e * PS + j * JS] = x[queue_i[e0 + e] * d + j];
        }
        __syncthreads();
        if (threadIdx.x < count) {
            const std::int64_t i = queue_i[e0 + threadIdx.x];
            const float* xp = xs + threadIdx.x * PS;
            const int m = liao_among_candidates<Blocked, JS>(xp, queue_b[e0 + threadIdx.x], point_bound<JS>(xp, d, cmax, tc_dim),
                                                             d, k, kc, cs, cn, centres);
            changed += membership[i] != m;
            membership[i] = m;
        }
        __syncthreads();  // xs and the queue read
    }
    if (threadIdx.x == 0) queue_n = 0;
    __syncthreads();
    return changed;
}

// DP: D rounded up to a multiple of 4 (the pad coordinates are 0 in x and c: fma(0, 0, g) == g). Blocked: the
// centres streamed through shared memory in blocks of block_centres(DP) per tile (k*D > 4096), the same g values
// and the same order of centres, so the same memberships. Tc: the products on the tensor cores in 3xTF32
// (kmeans_tiled_tc.cuh: a warp 32 points x a pass of 32 centres), other g values with their own bound (tc_bound),
// and the same Liao-exact memberships.
template <int DP, bool Blocked, bool Tc>
__global__ void __launch_bounds__(kTileThreads, kMinBlocks) assign_tiled(const float* __restrict__ x, std::int64_t n, int d,
                                                                int k, const float* __restrict__ centres,
                                                                std::int32_t* __restrict__ membership,
                                                                LoopState* __restrict__ state) {
    if (state->done) return;
    constexpr int kSteps = tc::steps(DP);   // Tc: k8 steps
    const int kc = padded_k(k), kb = staged_centres(DP, k, Blocked);
    extern __shared__ __align__(16) float tsm[];
    float* cs = tsm;                        // [DP][kb]: -2c of the staged centres, transposed (exact: a power of two)
                                            // (Tc: [kb / 8][steps][32 lanes] float4 B fragments, hi and lo)
    float* cn = cs + (Tc ? tc::centre_floats(DP) : DP) * kb;  // [kc]: ||c||^2 (fmaf chain in coordinate order), pad centres +inf
    // kQuads: the norms again as (n(2p), n(2p + 1), n(2p), n(2p + 1)) quads, the mma's C operand (tc::pass)
    constexpr bool kQuads = quads(DP, Blocked, Tc);
    const float4* cnq = reinterpret_cast<const float4*>(cn + kc);  // [kc / 2] (kQuads)
    // kPrefetch: two x buffers, the next tile's points and memberships copied by cp.async during this tile's passes;
    // the tile's points at p * kPS + j * kJS (rows(): rows, else x^T)
    constexpr bool kPrefetch = prefetches(DP), kRows = rows(DP, Tc);
    constexpr int kPS = point_stride(DP, Tc), kJS = coord_stride(DP, Tc), kXBuf = x_buffer_floats(DP, Tc);
    float* const xs0 = cn + kc + (kQuads ? 2 * kc : 0);  // [1 or 2][kXBuf]: the tile's points
    int* old_s = reinterpret_cast<int*>(xs0 + (kPrefetch ? 2 : 1) * kXBuf);  // [2][kTilePoints] (kPrefetch): the
                                                                               // tile's memberships before this loop
    float* xs = xs0;
    __shared__ float cmax_s;
    if (threadIdx.x == 0) queue_n = 0;  // seen by all after the barrier below
    // Centres cb0 .. cb0 + kb - 1 into cs (pad centres and coordinates 0; their norms are +inf).
    auto stage_centres = [&](int cb0) {
        if constexpr (Tc) {
            tc::stage_centres<DP>(centres, k, d, cb0, kb, reinterpret_cast<float4*>(cs));
        } else {
            for (int t = threadIdx.x; t < DP * kb; t += kTileThreads) {
                const int j = t / kb, c = cb0 + t % kb;
                cs[t] = j < d && c < k ? -2.f * centres[c * d + j] : 0.f;
            }
        }
    };
    if (!Blocked) stage_centres(0);
    centre_norms(centres, k, d, kc, cn, &cmax_s);  // (its barrier also publishes cs and queue_n)
    if constexpr (Tc)  // finite pad norms (tc::pass packs g); published by the first tile's barrier
        for (int c = k + threadIdx.x; c < kc; c += kTileThreads) cn[c] = tc::kPadNorm;
    if constexpr (kQuads)  // cn[c < k] is published by centre_norms' barrier
        for (int p = threadIdx.x; p < kc / 2; p += kTileThreads) {
            const float n0 = 2 * p < k ? cn[2 * p] : tc::kPadNorm, n1 = 2 * p + 1 < k ? cn[2 * p + 1] : tc::kPadNorm;
            cn[kc + 4 * p] = n0, cn[kc + 4 * p + 1] = n1, cn[kc + 4 * p + 2] = n0, cn[kc + 4 * p + 3] = n1;
        }
    const int lane = threadIdx.x % 32;
    // Centre column tx: centres g*4*kCols + tx*4 .. +3 of a pass (float4 group g: a warp's loads of a group are
    // consecutive 16-byte words, no bank conflict); point row ty: points ty*4..ty*4+3.
    const int tx = lane % kCols;
    const int ty = threadIdx.x / 32 * (32 / kCols) + lane / kCols;
    const bool vec = d % 4 == 0 && (reinterpret_cast<std::uintptr_t>(x) & 15) == 0;
    int changed = 0;
    const std::int64_t tiles = (n + kTilePoints - 1) / kTilePoints;
    // kPrefetch: tile tl's points into x buffer b (zeros past the end) and its memberships into old_s, by cp.async;
    // one commit group a thread. Rows with d == DP and x 16-byte aligned: 16-byte copies; else 4-byte ones (x^T:
    // transposing), a thread's coordinate fixed where d == DP. The pad coordinates d..DP of both buffers are zeroed once.
    auto stage_async = [&](std::int64_t tl, int b) {
        if (tl < tiles) {
            const std::int64_t q0 = tl * kTilePoints;
            const int ln = static_cast<int>(n - q0 < kTilePoints ? n - q0 : kTilePoints);
            float* dst = xs0 + b * kXBuf;
            const float* src = x + q0 * d;
            if (kRows && d == DP && vec) {
                constexpr int kQ = DP / 4, kStep = kTileThreads / kQ;  // 16-byte pieces a point; points a round
                const int j = threadIdx.x % kQ * 4, p1 = threadIdx.x / kQ;
#pragma unroll
                for (int i = 0; i < kTilePoints / kStep; ++i) {
                    const int p = p1 + i * kStep;
                    dev::cp_async_16(dst + p * kPS + j, p < ln ? src + 4 * (threadIdx.x + i * kTileThreads) : x,
                                             p < ln ? 16 : 0);
                }
            } else if (d == DP) {
                constexpr int kStep = kTileThreads / DP;  // points a round of the block
                const int j = threadIdx.x % DP, p1 = threadIdx.x / DP;
#pragma unroll
                for (int i = 0; i < DP; ++i) {
                    const int p = p1 + i * kStep;
                    dev::cp_async_4(dst + p * kPS + j * kJS, p < ln ? src + threadIdx.x + i * kTileThreads : x,
                                            p < ln ? 4 : 0);
                }
            } else {
                for (int t = threadIdx.x; t < kTilePoints * d; t += kTileThreads) {
                    const int p = t / d, j = t % d;
                    dev::cp_async_4(dst + p * kPS + j * kJS, p < ln ? src + t : x, p < ln ? 4 : 0);
                }
            }
            if (threadIdx.x < ln)
                dev::cp_async_4(reinterpret_cast<float*>(old_s + b * kTilePoints + threadIdx.x),
                                        reinterpret_cast<const float*>(membership + q0 + threadIdx.x), 4);
        }
        dev::cp_async_commit();
    };
    if constexpr (kPrefetch) {
        const int pad = DP - d;
        for (int t = threadIdx.x; t < 2 * kTilePoints * pad; t += kTileThreads) {
            const int r = t % (kTilePoints * pad);
            xs0[t / (kTilePoints * pad) * kXBuf + r / pad * kPS + (d + r % pad) * kJS] = 0.f;
        }
        stage_async(blockIdx.x, 0);
    }
    int buf = 0;
    for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x, buf ^= 1) {
        const std::int64_t p0 = tile * kTilePoints;
        const int len = static_cast<int>(n - p0 < kTilePoints ? n - p0 : kTilePoints);
        if constexpr (kPrefetch) dev::cp_async_wait<0>();  // this tile's copies, issued a tile ago
        // kPrefetch: the tile's one barrier (the copies seen by all; the last tile's reads of the x buffers, gap tests
        // and queue entries done: queue_n uniform)
        __syncthreads();
        if (queue_n >= kTilePoints)  // Liao's path for the queue, in a free x buffer (kPrefetch: the last tile's)
            changed += flush_queue<Blocked || Tc, kPS, kJS>(x, d, k, kc, centres, cs, cn, xs0 + (kPrefetch ? (buf ^ 1) * kXBuf : 0),
                                                            cmax_s, Tc ? 8 * kSteps : 0, membership);
        const float* xt = x + p0 * d;
        if constexpr (kPrefetch) {
            xs = xs0 + buf * kXBuf;
            stage_async(tile + gridDim.x, buf ^ 1);
        } else if (vec) {  // 16-byte loads, consecutive threads on consecutive addresses
            for (int t = threadIdx.x; t < kTilePoints * d / 4; t += kTileThreads) {
                const int p = t * 4 / d, j = t * 4 % d;
                const float4 v = p < len ? *reinterpret_cast<const float4*>(xt + t * 4) : make_float4(0.f, 0.f, 0.f, 0.f);
                xs[j * kXStride + p] = v.x, xs[(j + 1) * kXStride + p] = v.y;
                xs[(j + 2) * kXStride + p] = v.z, xs[(j + 3) * kXStride + p] = v.w;
            }
        } else {
            for (int t = threadIdx.x; t < kTilePoints * d; t += kTileThreads) {
                const int p = t / d, j = t % d;
                xs[j * kXStride + p] = p < len ? xt[t] : 0.f;
            }
        }
        if constexpr (!kPrefetch) {
            if (DP > d)
                for (int t = threadIdx.x; t < (DP - d) * kTilePoints; t += kTileThreads)
                    xs[(d + t / kTilePoints) * kXStride + t % kTilePoints] = 0.f;
            __syncthreads();
        }

        float best[4], second[4];
        int bi[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) best[a] = second[a] = __int_as_float(0x7f800000), bi[a] = 0;
        // Tc: the warp's A fragments (points warp*32 + 16 mi ..), split once a tile where they fit in registers
        // (DP <= 16: 32 registers), else loaded and split a k8 step at a time in every pass.
        tc::AFrags<DP> ah, al;
        if constexpr (Tc && tc::hoists(DP)) tc::load_tile_a<DP, kPS, kJS>(xs, lane, ah, al);
        for (int cb0 = 0; cb0 < kc; cb0 += kb) {  // once unless Blocked
          if (Blocked) {
              __syncthreads();  // the last block's cs read
              stage_centres(cb0);
              __syncthreads();
          }
          const int cend = kc - cb0 < kb ? kc - cb0 : kb;  // both multiples of a register pass
          for (int c0 = 0; c0 < cend; c0 += kTileCentres) {
           if constexpr (Tc) {
            tc::pass<DP, kQuads, kPS, kJS>(reinterpret_cast<const float4*>(cs), cn + cb0, cnq, cb0, c0, xs, lane, ah, al,
                                           best, second, bi);
           } else {
            float acc[4][kCentresT];
#pragma unroll
            for (int g = 0; g < kCentresT / 4; ++g) {
                const float4 nv = *reinterpret_cast<const float4*>(cn + cb0 + c0 + g * 4 * kCols + tx * 4);
#pragma unroll
                for (int a = 0; a < 4; ++a)
                    acc[a][g * 4] = nv.x, acc[a][g * 4 + 1] = nv.y, acc[a][g * 4 + 2] = nv.z, acc[a][g * 4 + 3] = nv.w;
            }
            // Coordinate order: the same g as nearest_dot's chain. 4 coordinates unrolled: in full, every coordinate's
            // loads are hoisted and spill (and the 4 x 4 tile spills at 4 under 64 registers: unroll 2 there).
#pragma unroll 4
            for (int j = 0; j < DP; ++j) {
                const float4 xa = *reinterpret_cast<const float4*>(xs + j * kXStride + ty * 4);
                const float xv[4] = {xa.x, xa.y, xa.z, xa.w};
                float cv[kCentresT];
#pragma unroll
                for (int g = 0; g < kCentresT / 4; ++g) {
                    const float4 cg = *reinterpret_cast<const float4*>(cs + j * kb + c0 + g * 4 * kCols + tx * 4);
                    cv[g * 4] = cg.x, cv[g * 4 + 1] = cg.y, cv[g * 4 + 2] = cg.z, cv[g * 4 + 3] = cg.w;
                }
#pragma unroll
                for (int a = 0; a < 4; ++a)
#pragma unroll
                    for (int b = 0; b < kCentresT; ++b) acc[a][b] = __fmaf_rn(xv[a], cv[b], acc[a][b]);
            }
            // Running (best, second, index), centres in increasing index (add_best).
#pragma unroll
            for (int a = 0; a < 4; ++a)
#pragma unroll
                for (int b = 0; b < kCentresT; ++b) {
                    const float g = acc[a][b];
                    add_best(best[a], bi[a], second[a], g, cb0 + c0 + b / 4 * 4 * kCols + tx * 4 + b % 4);
                }
           }
          }
        }
        // A point's (best, second, index) over its kCols lanes: the butterfly leaves the merged values in every lane.
#pragma unroll
        for (int a = 0; a < 4; ++a) {
            if constexpr (Tc) bi[a] = tc::unpack_index(bi[a], best[a], lane);
#pragma unroll
            for (int off = 1; off < kCols; off *= 2)
                merge_best(best[a], bi[a], second[a], __shfl_xor_sync(0xffffffffu, best[a], off),
                           __shfl_xor_sync(0xffffffffu, bi[a], off), __shfl_xor_sync(0xffffffffu, second[a], off));
        }
        // The gap test in the warp, lane tx of a point row for its row's point tx (no barrier, no shared round trip):
        // the membership where the gap clears the bound, else the point is queued for Liao's path, flushed at a tile's
        // start (measured at 6f14c66+: run in place, one lane's k x D recomputation held its block at the next barrier,
        // 54% of the kernel's stalls; queued, 256 of them run at once, one a thread).
        static_assert(kCols == 4, "a point row's 4 lanes take its 4 points");
        float b = best[0], s = second[0];
        int m = bi[0];
#pragma unroll
        for (int a = 1; a < 4; ++a)
            if (tx == a) b = best[a], s = second[a], m = bi[a];
        const int p = Tc ? threadIdx.x / 32 * 32 + tx / 2 * 16 + tx % 2 * 8 + lane / 4 : ty * 4 + tx;
        if (p < len) {
            const float bound = point_bound<kJS, DP>(xs + p * kPS, d, cmax_s, Tc ? 8 * kSteps : 0);
            if (__fsub_rn(s, b) > bound) {
                changed += (kPrefetch ? old_s[buf * kTilePoints + p] : membership[p0 + p]) != m;
                membership[p0 + p] = m;
            } else {
                const int q = atomicAdd(&queue_n, 1);  // < kQueue: at most a tile's worth since the last flush check
                queue_i[q] = p0 + p, queue_b[q] = b;
            }
        }
    }
    if constexpr (kPrefetch) dev::cp_async_wait<0>();  // (nothing is left: past the last tile no copies)
    __syncthreads();  // the last tile's gap tests and queue entries
    if (queue_n > 0)
        changed += flush_queue<Blocked || Tc, kPS, kJS>(x, d, k, kc, centres, cs, cn, xs0, cmax_s, Tc ? 8 * kSteps : 0,
                                                        membership);
    add_changed<kTileThreads>(changed, state);
}

using ChunkSort = cub::BlockRadixSort<unsigned, kTileThreads, kSortItems>;

// One (cluster, 4 coordinates) item of a chunk's sums: the cluster's members in object order (its run q0..qe of the
// sorted keys), each leaf's sum closed into the chunk sum at the leaf boundary (assign_and_sum's tree: an empty leaf
// adds nothing), the member's 4 coordinates from load(i). Both walks of sum_members take it, so the tree that fixes
// the bits is written once. Unroll: the member loop's unroll (0: the compiler's choice).
template <int Unroll, class Load>
__device__ __forceinline__ void walk_members(const unsigned* sorted_s, int q0, int qe, Load load, double (&sum)[4]) {
    double chunk_sum[4] = {0.0, 0.0, 0.0, 0.0}, leaf_sum[4] = {0.0, 0.0, 0.0, 0.0};
    int leaf = 0;
    auto add = [&](int q) {
        const int i = static_cast<int>(sorted_s[q] & (kChunk - 1));
        if (i / kLeaf != leaf) {
#pragma unroll
            for (int r = 0; r < 4; ++r) chunk_sum[r] += leaf_sum[r], leaf_sum[r] = 0.0;
            leaf = i / kLeaf;
        }
        const float4 v = load(i);
        leaf_sum[0] += static_cast<double>(v.x), leaf_sum[1] += static_cast<double>(v.y);
        leaf_sum[2] += static_cast<double>(v.z), leaf_sum[3] += static_cast<double>(v.w);
    };
    if constexpr (Unroll > 0) {
#pragma unroll Unroll
        for (int q = q0; q < qe; ++q) add(q);
    } else {
        for (int q = q0; q < qe; ++q) add(q);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) sum[r] = chunk_sum[r] + leaf_sum[r];
}

// Chunk sums from the memberships: a stable sort of (cluster, index) by cluster, then a thread per (cluster, 4
// coordinates; 1 where the staged columns are not a multiple of 4) walks its members in object order (leaf sums
// closed at each leaf boundary). Member counts: integers.
__global__ void __launch_bounds__(kTileThreads, 2) sum_members(const float* __restrict__ x, std::int64_t n, int d,
                                                               int k, const std::int32_t* __restrict__ membership,
                                                               double* __restrict__ chunk_sums,
                                                               unsigned long long* __restrict__ counts,
                                                               LoopState* __restrict__ state) {
    if (state->done) return;
    __shared__ typename ChunkSort::TempStorage sort_s;
    extern __shared__ __align__(16) float ssm[];
    float* x_s = ssm;                                                     // [kChunk][<= kSumCols]
    unsigned* sorted_s = reinterpret_cast<unsigned*>(x_s + kChunk * kSumCols);  // [kChunk] (cluster << 10 | index)
    int* start_s = reinterpret_cast<int*>(sorted_s + kChunk);             // [k + 1] (k: past the end)
    int* end_s = start_s + k + 1;
    int* count_s = end_s + k + 1;                                         // [k] this block's members
    for (int c = threadIdx.x; c <= k; c += kTileThreads) count_s[c] = 0;
    const int kd = k * d;
    const int key_bits = kIndexBits + 32 - __clz(k);  // clusters 0..k (k: past the end)
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    // One column block of 16-byte rows (D <= 16, D % 4 == 0, x aligned): the chunk's x copied by cp.async while the
    // block sorts, and the next chunk's memberships loaded during this chunk's walks.
    const bool early = d <= kSumCols && d % 4 == 0 && (reinterpret_cast<std::uintptr_t>(x) & 15) == 0;
    // Long 16-byte rows (D >= 64): no staging at all (below).
    const bool direct = d >= 64 && d % 4 == 0 && (reinterpret_cast<std::uintptr_t>(x) & 15) == 0;
    unsigned members[kSortItems];  // blocked: thread t holds objects 4t..4t+3, so the stable sort keeps object order
    auto load_members = [&](std::int64_t chunk) {
        if (chunk >= chunks) return;
        const std::int64_t start = chunk * kChunk;
        const int len = static_cast<int>(n - start < kChunk ? n - start : kChunk);
#pragma unroll
        for (int r = 0; r < kSortItems; ++r) {
            const int i = threadIdx.x * kSortItems + r;
            members[r] = i < len ? static_cast<unsigned>(membership[start + i]) : static_cast<unsigned>(k);
        }
    };
    load_members(blockIdx.x);
    for (std::int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const std::int64_t start = chunk * kChunk;
        const int len = static_cast<int>(n - start < kChunk ? n - start : kChunk);
        unsigned keys[kSortItems];
#pragma unroll
        for (int r = 0; r < kSortItems; ++r) keys[r] = members[r] << kIndexBits | static_cast<unsigned>(threadIdx.x * kSortItems + r);
        __syncthreads();  // the last chunk's sorted_s, start_s, end_s and x_s are read
        if (early) {
            const float* xc = x + start * d;
            for (int t = threadIdx.x; t < len * d / 4; t += kTileThreads) dev::cp_async_16(x_s + 4 * t, xc + 4 * t, 16);
            dev::cp_async_commit();
        }
        for (int c = threadIdx.x; c <= k; c += kTileThreads) start_s[c] = end_s[c] = 0;
        ChunkSort(sort_s).Sort(keys, kIndexBits, key_bits);
#pragma unroll
        for (int r = 0; r < kSortItems; ++r) sorted_s[threadIdx.x * kSortItems + r] = keys[r];
        __syncthreads();
#pragma unroll
        for (int r = 0; r < kSortItems; ++r) {  // each cluster's run in the sorted keys
            const int q = threadIdx.x * kSortItems + r;
            const unsigned c = keys[r] >> kIndexBits;
            if (q == 0 || sorted_s[q - 1] >> kIndexBits != c) start_s[c] = q;
            if (q == kChunk - 1 || sorted_s[q + 1] >> kIndexBits != c) end_s[c] = q + 1;
        }
        load_members(chunk + gridDim.x);
        __syncthreads();
        for (int c = threadIdx.x; c < k; c += kTileThreads) count_s[c] += end_s[c] - start_s[c];
        if (direct) {
            // A thread per (cluster, 4 coordinates) over all D at once, its members' float4 read from x itself: a
            // warp's 32 items share a cluster and read 512 contiguous bytes of a member's row. Staged 16 columns at
            // a time only k * 4 threads walked (32 of 256 at k = 8: 1.26 ms a loop at 1M x 256, 5 ms at D = 1024).
            // Per coordinate the same adds in the same order: the same bits.
            const int d4 = d / 4;
            const float* xc = x + start * d;
            for (int item = threadIdx.x; item < k * d4; item += kTileThreads) {
                const int c = item / d4, jj = item % d4 * 4;
                double sum[4];
                walk_members<4>(sorted_s, start_s[c], end_s[c], [&](int i) {
                    return __ldg(reinterpret_cast<const float4*>(xc + static_cast<std::int64_t>(i) * d + jj));
                }, sum);
#pragma unroll
                for (int r = 0; r < 4; ++r) chunk_sums[chunk * kd + c * d + jj + r] = sum[r];
            }
            continue;
        }
        for (int j0 = 0; j0 < d; j0 += kSumCols) {
            const int w = d - j0 < kSumCols ? d - j0 : kSumCols;
            if (j0 > 0) __syncthreads();  // the last columns are read
            const float* xc = x + start * d + j0;
            if (early) {  // (every other whole-row 16-byte case is early too)
                dev::cp_async_wait<0>();
            } else {
                for (int t = threadIdx.x; t < len * w; t += kTileThreads)
                    x_s[t] = xc[static_cast<std::int64_t>(t / w) * d + t % w];
            }
            __syncthreads();
            if (w % 4 == 0) {
                // A thread per (cluster, 4 coordinates): one walk of the member list feeds 4 independent float64
                // chains from one LDS.128 a member (a thread per coordinate walked it 4 times, one dependent
                // LDS, LDS, DADD chain each). Per coordinate the same adds in the same order: the same bits.
                const int w4 = w / 4;
                for (int item = threadIdx.x; item < k * w4; item += kTileThreads) {
                    const int c = item / w4, jj = item % w4 * 4;
                    double sum[4];
                    walk_members<0>(sorted_s, start_s[c], end_s[c], [&](int i) {
                        return *reinterpret_cast<const float4*>(x_s + i * w + jj);
                    }, sum);
#pragma unroll
                    for (int r = 0; r < 4; ++r) chunk_sums[chunk * kd + c * d + j0 + jj + r] = sum[r];
                }
            } else {
                for (int item = threadIdx.x; item < k * w; item += kTileThreads) {
                    const int c = item / w, jj = item % w;
                    double chunk_sum = 0.0, leaf_sum = 0.0;
                    int leaf = 0;
                    for (int q = start_s[c], qe = end_s[c]; q < qe; ++q) {
                        const int i = static_cast<int>(sorted_s[q] & (kChunk - 1));
                        if (i / kLeaf != leaf) chunk_sum += leaf_sum, leaf_sum = 0.0, leaf = i / kLeaf;
                        leaf_sum += static_cast<double>(x_s[i * w + jj]);
                    }
                    chunk_sums[chunk * kd + c * d + j0 + jj] = chunk_sum + leaf_sum;
                }
            }
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < k; c += kTileThreads)
        if (count_s[c]) atomicAdd(&counts[c], static_cast<unsigned long long>(count_s[c]));
}

template <class F>
void with_padded_dim(int d, F&& f) {
    if (d <= 4) f(std::integral_constant<int, 4>{});
    else if (d <= 8) f(std::integral_constant<int, 8>{});
    else if (d <= 16) f(std::integral_constant<int, 16>{});
    else if (d <= 32) f(std::integral_constant<int, 32>{});
    else f(std::integral_constant<int, 64>{});  // (D <= kMaxTiledDim = 64: past it the deep path)
}

// f(assign_tiled<DP, Blocked, Tc>, its dynamic shared memory) for D <= kMaxTiledDim, k clusters and resolved
// products p.
template <class F>
void with_assign_tiled(std::int64_t d, std::int64_t k, Products p, F&& f) {
    with_padded_dim(static_cast<int>(d), [&](auto dp) {
        const bool b = blocked(d, k), tc = p == Products::Tf32x3;
        const std::size_t shared = tile_shared_bytes(dp.value, static_cast<int>(k), b, tc);
        if (tc) {
            if constexpr (dp.value <= kMaxTcTiledDim) {
                if (b) f(assign_tiled<dp.value, true, true>, shared);
                else f(assign_tiled<dp.value, false, true>, shared);
            } else {
                GPUOPT_REQUIRE(false, "kmeans device_tiled: the tile's tensor-core screen takes D <= 32 (internal)");
            }
        } else {
            if (b) f(assign_tiled<dp.value, true, false>, shared);
            else f(assign_tiled<dp.value, false, false>, shared);
        }
    });
}

template <class Kernel>
int resident_blocks(Kernel kernel, std::size_t shared, int blocks) {
    if (blocks > 0) return blocks;
    int per_sm = 0;
    GPUOPT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kTileThreads, shared));
    return multiprocessor_count() * std::max(per_sm, 1);
}

}  // namespace

// Auto: the tensor cores where the A fragments stay in registers (DP 8, 16; D <= 4 pads half of each k8 step with
// zeros). Measured on the H200 at c2976f6 (marginal µs a loop): 10M x 16, k=256 3,096 against ffma 3,859; 1M x 16,
// k=64 212 against 219; but 1M x 64, k=256 2,212 against 1,941 and 1M x 128, k=128 5,530 against 3,001 (the A
// fragments loaded and split a k8 step at a time in every pass).
// The deep path past D = 64 (any D): the tile pads 64 < D <= 128 to DP = 128 (x^T 133 KB, one block an SM) while the
// deep path pads to a multiple of 32. Measured on the H200 (1M points, k=1024, marginal loop): the tile at D = 128
// 13.8 ms, the deep path at D = 129 12.5 ms (FFMA); with products "tf32x3" the tile at 8M x 128, k=1024 ran 274 ms
// against the FFMA deep path's 67.7 (at 7028975).
// With products "tf32x3" from D = 33 (kMaxTcTiledDim): the tile's screen there loads and splits its A fragments a k8
// step at a time in every pass (1M x 64, k=256: 2,212 µs against FFMA's 1,941 at c2976f6), the deep path's 3xTF32
// tile once a K step.
static bool takes_deep(std::int64_t d, Products resolved) {
    return d > kMaxTiledDim || (d > kMaxTcTiledDim && resolved == Products::Tf32x3);
}

// From D = 33 with more than 64 centres: the deep path's 3xTF32 tile (H200 at 7028975, 1M uniform points, marginal
// ms a loop, tf32x3 against ffma: D=256, k=1000 13.9 against 17.1; D=512, k=2048 61.2 against 74.0; D=1024, k=512
// 38.3 against 44.9); with 64 centres or fewer the FFMA path's narrow tile (256 points x 64 centres) wins, the
// tensor-core tile's 128 centres running part empty (D=1024, k=8: 11.4 against 10.2).
Products resolve(Products p, std::int64_t d, std::int64_t k) {
    if (p != Products::Auto) return p;
    if (d > kMaxTcTiledDim) return k > 64 ? Products::Tf32x3 : Products::Ffma;
    return d > 4 && d <= 16 ? Products::Tf32x3 : Products::Ffma;
}

void check(std::int64_t n, std::int64_t d, std::int64_t k, Products p) {
    (void)n;
    const std::string what = "kmeans device_tiled";
    GPUOPT_REQUIRE(k <= kMaxClusters, what + ": k = " + std::to_string(k) + " clusters; at most " +
                                          std::to_string(kMaxClusters) + " (their norms and counts in shared memory)");
    GPUOPT_REQUIRE(d <= (1 << 20) && k * d <= (std::int64_t{1} << 30),
                   what + ": at most 2^20 coordinates and k*D <= 2^30 centre coordinates");
    if (!takes_deep(d, resolve(p, d, k))) {
        with_assign_tiled(d, k, resolve(p, d, k), [&](auto kernel, std::size_t shared) {
            require_shared_memory(kernel, shared, (what + ": assign_tiled").c_str());
        });
    } else {
        deep::check(d, k, resolve(p, d, k) == Products::Tf32x3);
    }
    require_shared_memory(sum_members, sum_shared_bytes(static_cast<int>(k)), (what + ": sum_members").c_str());
}

Launch plan(std::int64_t n, std::int64_t d, std::int64_t k, int blocks, Products p) {
    Launch l;
    l.products = resolve(p, d, k);
    const std::int64_t tiles = (n + kTilePoints - 1) / kTilePoints, chunks = (n + kChunk - 1) / kChunk;
    if (!takes_deep(d, l.products))
        with_assign_tiled(d, k, l.products, [&](auto kernel, std::size_t shared) {
            l.assign_blocks = static_cast<unsigned>(std::min<std::int64_t>(tiles, resident_blocks(kernel, shared, blocks)));
        });
    else {
        l.deep = true;
        const bool tc = l.products == Products::Tf32x3;
        l.deep_grid = deep::plan(n, k, blocks, tc);
        l.workspace_bytes = deep::workspace_bytes(n, d, k, tc);
    }
    l.sum_blocks = static_cast<unsigned>(std::min<std::int64_t>(chunks, resident_blocks(
        sum_members, sum_shared_bytes(static_cast<int>(k)), blocks)));
    return l;
}

void launch(const Launch& l, const float* x, std::int64_t n, std::int64_t d, std::int64_t k, const float* centres,
            std::int32_t* membership, double* chunk_sums, unsigned long long* counts, void* state_ptr,
            void* workspace) {
    auto* state = static_cast<LoopState*>(state_ptr);
    const int di = static_cast<int>(d), ki = static_cast<int>(k);
    if (l.deep) {
        deep::launch(l.deep_grid, x, n, d, k, centres, membership, state_ptr, workspace,
                     l.products == Products::Tf32x3);
    } else {
        with_assign_tiled(d, k, l.products, [&](auto kernel, std::size_t shared) {
            kernel<<<l.assign_blocks, kTileThreads, shared, current_stream()>>>(x, n, di, ki, centres, membership, state);
        });
        GPUOPT_CHECK_LAUNCH("kmeans device_tiled assign");
    }
    sum_members<<<l.sum_blocks, kTileThreads, sum_shared_bytes(ki), current_stream()>>>(x, n, di, ki, membership, chunk_sums, counts,
                                                                     state);
    GPUOPT_CHECK_LAUNCH("kmeans device_tiled sum_members");
}

}  // namespace gpuopt::kmeans::tiled
