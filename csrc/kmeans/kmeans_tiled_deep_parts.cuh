// device_tiled's deep path (kmeans_tiled_deep.cu): what its FP32 tile and its 3xTF32 tile (kmeans_tiled_deep_tc.cuh)
// share: the tile shapes, the loop's workspace, the shift and centre preparation kernels, a thread's share of the
// x copies and the resolve pass's gathered tile. Included by kmeans_tiled_deep.cu only (one translation unit).
#pragma once

#include <cstdint>

#include "../common/async_copy.cuh"
#include "../common/tf32.cuh"
#include "kmeans_device.cuh"

namespace gpuopt::kmeans::tiled::deep {
namespace {


constexpr int kDeepThreads = 256;
constexpr int kSlab = 32;                      // coordinates a K step
constexpr int kStages = 2;
constexpr int kWarps = kDeepThreads / 32;

// A block tile: RowThreads threads along a point row (centres) x kDeepThreads / RowThreads rows, each thread an 8 x 8
// register tile (points ty*4.., kPoints/2 + ty*4..; centres tx*4.., kCentres/2 + tx*4..). 16: 128 points x 128
// centres; 8 (k <= 64): 256 points x 64 centres, so k = 8 pads to 64 centres, not 128 (the product is 16x the
// FLOPs it needs at 128: 7.35 ms of a 14.3 ms loop at 1M x 1024, k = 8 on the H200). Both two blocks an SM.
template <int RowThreads>
struct DeepTile {
    static constexpr int kRowThreads = RowThreads;
    static constexpr int kCentres = RowThreads * 8;                    // a centre tile
    static constexpr int kPoints = kDeepThreads / RowThreads * 8;      // a block tile's points
    static constexpr int kXStride = kPoints + 4;  // x^T rows: float4 loads along points aligned, copies over 32 banks
    static constexpr int kCopyRows = kWarps * 32 / (kCentres / 4);     // slab rows of -2c' copied a pass
    static constexpr std::size_t kShared =
        (static_cast<std::size_t>(kStages) * kSlab * (kXStride + kCentres) + 3 * 8 * kDeepThreads) * sizeof(float);
    static_assert(kPoints <= kDeepThreads && kSlab % kCopyRows == 0 && RowThreads >= 8, "a thread a point; the copy "
                  "passes; lane tx < 8 takes a point after the row's merge");
};
using WideTile = DeepTile<16>;
using NarrowTile = DeepTile<8>;
constexpr std::int64_t kNarrowMaxK = NarrowTile::kCentres;

// The loop's scratch header: the queue's length and max ||c|| (float bits), zeroed before prep.
struct Header {
    unsigned queued;
    int cmax_bits;
};

// Centres padded to the tile's width: one narrow tile, or wide tiles (the 3xTF32 tile is wide only).
__host__ __device__ inline std::int64_t padded_centres(std::int64_t k, bool tc) {
    return k <= kNarrowMaxK && !tc ? kNarrowMaxK
                                   : (k + WideTile::kCentres - 1) / WideTile::kCentres * WideTile::kCentres;
}
__host__ __device__ inline std::int64_t padded_dim(std::int64_t d) { return (d + kSlab - 1) / kSlab * kSlab; }
inline std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// The workspace: [Header][ct: DP x kc floats, or 2 DP x kc for the 3xTF32 tile (hi and lo)][cn: kc floats]
// [shift: DP floats][queue_i: n int64][queue_b: n (best g, bound) pairs].
struct Parts {
    std::size_t ct, cn, shift, queue_i, queue_b, total;
};
Parts parts(std::int64_t n, std::int64_t d, std::int64_t k, bool tc) {
    const std::size_t kc = static_cast<std::size_t>(padded_centres(k, tc)), dp = static_cast<std::size_t>(padded_dim(d));
    Parts p{};
    p.ct = aligned(sizeof(Header));
    p.cn = p.ct + aligned((tc ? 2 : 1) * dp * kc * sizeof(float));
    p.shift = p.cn + aligned(kc * sizeof(float));
    p.queue_i = p.shift + aligned(dp * sizeof(float));
    p.queue_b = p.queue_i + aligned(static_cast<std::size_t>(n) * sizeof(std::int64_t));
    p.total = p.queue_b + aligned(static_cast<std::size_t>(n) * sizeof(float2));
    return p;
}


// m_j = the mean of the centres' coordinate j (0 for the pad coordinates): k adds in index order, one thread a
// coordinate. Any m keeps the memberships Liao's; this one is near the data.
__global__ void __launch_bounds__(kDeepThreads) centre_mean(const float* __restrict__ centres, int k, int d, int dp,
                                                            float* __restrict__ shift,
                                                            const LoopState* __restrict__ state) {
    if (state->done) return;
    for (int j = blockIdx.x * kDeepThreads + threadIdx.x; j < dp; j += gridDim.x * kDeepThreads) {
        float sum = 0.f;
        if (j < d)
            for (int c = 0; c < k; ++c) sum = __fadd_rn(sum, centres[static_cast<std::int64_t>(c) * d + j]);
        shift[j] = j < d ? __fdiv_rn(sum, static_cast<float>(k)) : 0.f;
    }
}

// -2c'_j of centre c, 0 past k and d.
__device__ __forceinline__ float m2c(const float* __restrict__ centres, const float* __restrict__ shift, int k, int d,
                                     int c, int j) {
    return j < d && c < k ? -2.f * __fsub_rn(centres[static_cast<std::int64_t>(c) * d + j], shift[j]) : 0.f;
}

// Tc false: ct = -2c'^T ([DP][kc]). Tc true: -2c' split into TF32 hi and lo as mma.sync B fragments, in the order
// the 3xTF32 tile stages them: ct4[(s8 * kc / 8 + n8) * 32 + lane] = (hi(t), hi(t + 4), lo(t), lo(t + 4)) of centre
// 8 n8 + g, coordinates 8 s8 + t (+ 4), (g, t) = (lane / 4, lane % 4) (kmeans_tiled_tc.cuh's stage_centres).
template <bool Tc>
__global__ void __launch_bounds__(kDeepThreads) prep(const float* __restrict__ centres, int k, int d, int kc, int dp,
                                                     const float* __restrict__ shift, float* __restrict__ ct,
                                                     float* __restrict__ cn, Header* __restrict__ hdr,
                                                     const LoopState* __restrict__ state) {
    if (state->done) return;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kDeepThreads;
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kDeepThreads + threadIdx.x;
    if constexpr (Tc) {
        auto* ct4 = reinterpret_cast<float4*>(ct);
        for (std::int64_t e = first; e < static_cast<std::int64_t>(dp) * kc / 2; e += stride) {  // dp/8 * kc/8 * 32
            const int lane = static_cast<int>(e % 32), n8 = static_cast<int>(e / 32 % (kc / 8));
            const int s8 = static_cast<int>(e / 32 / (kc / 8));
            const int c = 8 * n8 + lane / 4, j = 8 * s8 + lane % 4;
            const tf32::Split a = tf32::split(m2c(centres, shift, k, d, c, j));
            const tf32::Split b = tf32::split(m2c(centres, shift, k, d, c, j + 4));
            ct4[e] = make_float4(__uint_as_float(a.hi), __uint_as_float(b.hi), __uint_as_float(a.lo),
                                 __uint_as_float(b.lo));
        }
    } else {
        for (std::int64_t t = first; t < static_cast<std::int64_t>(dp) * kc; t += stride)
            ct[t] = m2c(centres, shift, k, d, static_cast<int>(t % kc), static_cast<int>(t / kc));
    }
    for (std::int64_t c = first; c < kc; c += stride) {
        float s = __int_as_float(0x7f800000);
        if (c < k) {
            const float* cp = centres + c * d;
            s = 0.f;
            for (int j = 0; j < d; ++j) {
                const float v = __fsub_rn(cp[j], shift[j]);
                s = __fmaf_rn(v, v, s);
            }
            atomicMax(&hdr->cmax_bits, __float_as_int(__fsqrt_ru(s)));  // s >= 0 (or NaN: past every finite)
        }
        cn[c] = s;
    }
}

// (Liao's distance bits, centre index): non-negative floats order as their bits, so the smallest packed value is
// the smallest distance, ties to the lower index.
__device__ __forceinline__ unsigned long long pack_candidate(float dist, int c) {
    return static_cast<unsigned long long>(__float_as_uint(dist)) << 32 | static_cast<unsigned>(c);
}

// A point's two nearest centres by g (values and indices) and the third-nearest value: where the third is farther
// than the gap bound from the best, only the two can be Liao's nearest (every other centre is farther by the
// argument of nearest_dot), so two Liao distances settle the point without the resolve pass (assign's Pairs).
// best, second and index follow the running triple's rules exactly (add_best).
struct Top3 {
    float best = __builtin_huge_valf(), second = __builtin_huge_valf(), third = __builtin_huge_valf();
    int index = 0, index2 = 0;
    __device__ void add(float g, int c) {  // (centres in increasing index)
        index2 = g < best ? index : (g < second ? c : index2);
        third = fminf(third, fmaxf(second, g));
        add_best(best, index, second, g, c);
    }
    // o's centres disjoint from this one's: the smaller (g, index) pairs first, as one sequence in index order would.
    __device__ void merge(const Top3& o) {
        auto before = [](float g1, int c1, float g2, int c2) { return g1 < g2 || (g1 == g2 && c1 < c2); };
        Top3 a = *this, b = o;
        if (before(b.best, b.index, a.best, a.index)) a = o, b = *this;
        if (before(b.best, b.index, a.second, a.index2))
            a.third = fminf(a.second, b.second), a.second = b.best, a.index2 = b.index;
        else
            a.third = fminf(a.third, b.best);
        *this = a;
    }
    __device__ Top3 shfl_xor(int off) const {
        Top3 o;
        o.best = __shfl_xor_sync(0xffffffffu, best, off), o.second = __shfl_xor_sync(0xffffffffu, second, off);
        o.third = __shfl_xor_sync(0xffffffffu, third, off), o.index = __shfl_xor_sync(0xffffffffu, index, off);
        o.index2 = __shfl_xor_sync(0xffffffffu, index2, off);
        return o;
    }
};

// Point `row`'s Liao membership between two candidates: the smaller Liao distance, ties to the lower index (what
// the resolve pass's atomicMin over pack_candidate gives them).
__device__ inline int liao_pair(const float* __restrict__ x, int d, const float* __restrict__ centres,
                                std::int64_t row, int c1, int c2) {
    const float unused[1] = {0.f};  // (liao_distance<0> reads the point through its pointer)
    const float* xr = x + row * d;
    const unsigned long long p1 =
        pack_candidate(liao_distance<0>(unused, xr, centres + static_cast<std::int64_t>(c1) * d, d), c1);
    const unsigned long long p2 =
        pack_candidate(liao_distance<0>(unused, xr, centres + static_cast<std::int64_t>(c2) * d, d), c2);
    return static_cast<int>((p1 < p2 ? p1 : p2) & 0xffffffffu);
}

// A thread's share of a step's x slab (kSlab coordinates x kPoints points, transposed: x^T): its coordinate j and
// first point p (then every 8th). A warp's 32 copies are 4 points x 8 coordinates, 32-byte pieces of 4 rows, stored
// to banks 4j + p (all distinct: kXStride % 32 == 4).
struct XCopy {
    int j, p;
    __device__ explicit XCopy(int tid) : j(tid / 32 % 4 * 8 + tid % 8), p(tid / 128 * 4 + tid % 32 / 8) {}
    // Coordinates j0 .. j0 + kSlab - 1 of the tile's len points (rows p0 + .., or the gathered rows_s[..]) into one
    // stage; zeros past d and len.
    template <int kPoints, int kXStride, bool Gather>
    __device__ __forceinline__ void issue(float* xs_stage, const float* __restrict__ x, int d, std::int64_t p0,
                                          int len, int j0, const std::int64_t* rows_s) const {
        float* xd = xs_stage + j * kXStride + p;
        const bool j_in = j0 + j < d;
        const float* src = x + (Gather ? 0 : (p0 + p) * d) + j0 + j;
#pragma unroll 4
        for (int r = 0; r < kPoints / 8; ++r) {  // (4, not all 32 of the narrow tile: their addresses spilled)
            const bool in = j_in && p + 8 * r < len;
            const float* from = Gather ? src + (in ? rows_s[p + 8 * r] : 0) * d : src + static_cast<std::int64_t>(8 * r) * d;
            dev::cp_async_4(xd + 8 * r, in ? from : x, in ? 4 : 0);
        }
    }
    // x' = fl(x - m) in place, m_j = mj (0 past d: the pad coordinates stay 0): the thread's own copies of the
    // stage, complete and visible to it after its cp.async wait.
    template <int kPoints, int kXStride>
    __device__ __forceinline__ void shift(float* xs_stage, float mj) const {
        float* xd = xs_stage + j * kXStride + p;
#pragma unroll
        for (int r = 0; r < kPoints / 8; ++r) xd[8 * r] = __fsub_rn(xd[8 * r], mj);
    }
};
static_assert(kWarps == 8 && kSlab == 32, "XCopy's map");

// The resolve pass's tile: its queue entries (the point's row, its best g and bound) and each point's smallest
// packed candidate (pack_candidate), in shared memory the assign pass uses for its running triples.
struct GatherTile {
    std::int64_t* rows;
    unsigned long long* cand;
    float2* qb;
    template <int kPoints>
    __device__ static GatherTile at(void* space) {
        auto* rows = static_cast<std::int64_t*>(space);
        auto* cand = reinterpret_cast<unsigned long long*>(rows + kPoints);
        return {rows, cand, reinterpret_cast<float2*>(cand + kPoints)};
    }
    // Entries p0 .. p0 + len - 1 of the queue (a barrier before: the last tile's write-back read them; one after).
    __device__ void begin(const std::int64_t* queue_i, const float2* queue_b, std::int64_t p0, int len) const {
        __syncthreads();
        if (static_cast<int>(threadIdx.x) < len)
            rows[threadIdx.x] = queue_i[p0 + threadIdx.x], qb[threadIdx.x] = queue_b[p0 + threadIdx.x],
            cand[threadIdx.x] = ~0ull;
        __syncthreads();
    }
    // Point p's candidate c: Liao's distance (on x and c themselves) into its smallest (distance, index).
    __device__ void offer(const float* __restrict__ x, int d, const float* __restrict__ centres, int p, int c) const {
        const float unused[1] = {0.f};  // (liao_distance<0> reads the point through its pointer)
        const float dist = liao_distance<0>(unused, x + rows[p] * d, centres + static_cast<std::int64_t>(c) * d, d);
        atomicMin(&cand[p], pack_candidate(dist, c));
    }
    // After the tile's last step (every candidate in): Liao's memberships of its len points; changes counted.
    __device__ void write_back(std::int32_t* __restrict__ membership, int len, int* changed_s) const {
        if (static_cast<int>(threadIdx.x) < len) {
            const std::int64_t i = rows[threadIdx.x];
            const int m = static_cast<int>(cand[threadIdx.x] & 0xffffffffu);
            if (membership[i] != m) atomicAdd(changed_s, 1);
            membership[i] = m;
        }
    }
};

}  // namespace
}  // namespace gpuopt::kmeans::tiled::deep
