// The device-side building blocks of the loop-on-the-GPU k-means variants (kmeans_device.cu): the summation
// tree's constants, the loop state, and the nearest centre two ways (Liao's distance; the dot form with Liao's
// distance where its rounding cannot separate the two nearest). Included by kmeans_device.cu and kmeans_tiled.cu.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kmeans.hpp"

namespace gpuopt::kmeans {
namespace {

constexpr int kThreads = 256;                                   // assign_and_sum block
constexpr int kLeaf = static_cast<int>(kSumLeaf);               // objects per leaf
constexpr int kLeaves = static_cast<int>(kSumFanout);           // leaves per chunk
constexpr int kChunk = static_cast<int>(kSumChunk);             // objects per chunk
constexpr int kGroup = static_cast<int>(kSumFanout);            // chunks per group
// k*D the loop kernel holds: 4 (cluster, coordinate) pairs a thread at 64 registers (Liao's distance, 4 blocks an
// SM), 16 at 128 (the dot form, 2 blocks an SM: its shared memory allows no more).
template <bool Dot>
constexpr int kMaxCentreCoords = Dot ? 4096 : 1024;
template <bool Dot>
constexpr int kCoordsPerThread = kMaxCentreCoords<Dot> / kThreads;
constexpr int kLeafSlab = 8192;                                 // doubles of leaf sums in shared memory at once
constexpr int kGatherMaxK = 4;                                  // leaf sums a (leaf, cluster, coordinate) up to this k
constexpr int kFinishWarps = 8;                                 // finish_loop: warps a block, a (cluster, coordinate) each
static_assert(kChunk % kThreads == 0 && kLeaf == 32 && kGroup == 32, "a chunk splits evenly; a warp per leaf/group");

struct LoopState {
    int done;                           // 1 once the loop has stopped
    int iterations;                     // loops run
    unsigned int finished_blocks;       // finish_loop's last-block counter
    int nonfinite;                      // 1 once a loop's centre sums were not finite: x holds NaN or inf
    unsigned long long changed;         // memberships changed this loop (assign_and_sum adds, finish_loop reads)
};

// Member counts of a warp's objects (best: a lane's cluster, -1 for none) for k <= kGatherMaxK, k uniform in the warp:
// a ballot per cluster and one shared atomic a warp (32 lanes' atomics on at most 4 addresses would serialise).
__device__ __forceinline__ void ballot_counts(int best, int k, int* counts_s) {
#pragma unroll
    for (int c = 0; c < kGatherMaxK; ++c) {
        const int m = c < k ? __popc(__ballot_sync(0xffffffffu, best == c)) : 0;
        if (m && threadIdx.x % 32 == 0) atomicAdd(&counts_s[c], m);
    }
}

// The block's change count (a thread's `changed` each, blockDim.x == Threads) added to the loop's: warp sums by
// shuffles, then one atomic a block (integers: the same total in any order). Ends past a barrier.
template <int Threads>
__device__ inline void add_changed(int changed, LoopState* state) {
    __shared__ int warp_changed[Threads / 32];
    for (int off = 16; off > 0; off /= 2) changed += __shfl_xor_sync(0xffffffffu, changed, off);
    if (threadIdx.x % 32 == 0) warp_changed[threadIdx.x / 32] = changed;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long total = 0;
        for (int w = 0; w < Threads / 32; ++w) total += static_cast<unsigned long long>(warp_changed[w]);
        if (total) atomicAdd(&state->changed, total);
    }
}

// Whether this block is the grid's last to get here (threadfence pattern: every block's writes before it are visible
// to the last). Every thread of the block gets the answer; ends past a barrier, then a fence.
__device__ inline bool last_block(LoopState* state) {
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(&state->finished_blocks, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    __threadfence();
    return last;
}

// finish_loop's first level for one (cluster, coordinate) entry e: group g's sum = 0.0 + its chunks' sums in chunk
// order (chunk rows kd doubles apart; +0.0 past the last chunk, which leaves a sum that starts at +0.0 unchanged).
// The 32 loads are issued before the adds (ptxas issues each about one add ahead: many warps hide it).
__device__ __forceinline__ double group_sum(const double* __restrict__ chunk_sums, std::int64_t g, std::int64_t chunks,
                                           int kd, int e) {
    double part[kGroup];
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
        const std::int64_t q = g * kGroup + u;
        part[u] = q < chunks ? chunk_sums[q * kd + e] : 0.0;
    }
    double sum = 0.0;
#pragma unroll
    for (int u = 0; u < kGroup; ++u) sum += part[u];
    return sum;
}

// A centre coordinate's new value from its total and member count (count > 0): the mean rounded once, float(total /
// count). A total that is not finite means NaN or inf in x (every point is some cluster's member, so its sums show
// it): *nonfinite is set (a plain store of 1 by any thread; the loop's close stops the run on it).
__device__ __forceinline__ float close_mean(double total, double count, int* nonfinite) {
    if (!isfinite(total)) *nonfinite = 1;
    return static_cast<float>(total / count);
}

// A loop's end, by one thread: Liao's measure (the change count as a float over numObjs as a float) into the history,
// the loop counted, the counters reset, the stop rule; a loop whose sums were not finite stops the run (the host
// raises at its read of the state: parts::require_finite).
__device__ inline void record_loop(LoopState* state, unsigned long long changed, std::int64_t n, float threshold,
                                   int max_iter, float* history) {
    const float delta = static_cast<float>(changed) / static_cast<float>(n);
    history[state->iterations] = delta;
    state->iterations += 1;
    state->changed = 0;
    state->finished_blocks = 0;
    if (!(delta > threshold) || state->iterations >= max_iter || state->nonfinite) state->done = 1;
}

// Liao's distance with D <= kStageMaxDim: assign_and_sum copies a chunk's x into shared memory (cp.async) before it
// waits for the previous loop (programmatic dependent launch), so the load overlaps the previous loop's tail and the
// leaf sums read shared memory instead of x again. 33 KB at D = 8; wider rows would cost blocks an SM.
constexpr int kStageMaxDim = 8;
__host__ __device__ constexpr bool stages_x(int d, bool dot) { return !dot && d <= kStageMaxDim; }
// A leaf's rows, then kStagePad floats: a warp's leaf-sum threads (32/D leaves x D coordinates) on distinct banks
// for D = 4, 8; a multiple of 4 keeps every leaf 16-byte aligned.
__host__ __device__ constexpr int stage_pad(int d) { return d % 4 == 0 ? d : 4; }
__host__ __device__ constexpr int stage_stride(int d) { return kLeaf * d + stage_pad(d); }

// Leaves whose sums are held at once: a power of two dividing 32, with leaves * k*D doubles in kLeafSlab (half of
// it next to a staged chunk, so large k keeps its blocks an SM).
__host__ __device__ inline int leaves_per_pass(int kd, bool staged = false) {
    int leaves = kLeaves;
    while (leaves > 1 && leaves * kd > (staged ? kLeafSlab / 2 : kLeafSlab)) leaves /= 2;
    return leaves;
}

// Shared memory of assign_and_sum: [staged x: kLeaves leaves of stage_stride(D)][leaf sums][centres k*D] (dot form:
// [-2 centres (k+1)*D][||c||^2 k+1]) [members kChunk][counts k].
inline std::size_t assign_shared_bytes(std::int64_t d, std::int64_t k, bool dot) {
    const std::int64_t kd = k * d;
    const bool staged = stages_x(static_cast<int>(d), dot);
    return static_cast<std::size_t>(staged ? kLeaves * stage_stride(static_cast<int>(d)) : 0) * sizeof(float) +
           static_cast<std::size_t>(leaves_per_pass(static_cast<int>(kd), staged) * kd) * sizeof(double) +
           static_cast<std::size_t>(kd + (dot ? (k + 1) * (d + 1) : 0)) * sizeof(float) +
           static_cast<std::size_t>(kChunk + k) * sizeof(std::int32_t);
}

// Liao's distance of one object to one centre: float32 squared differences summed over the coordinates in order,
// unfused. With D > 0 the object's coordinates come from the registers xr, else from memory o.
template <int D>
__device__ __forceinline__ float liao_distance(const float (&xr)[D > 0 ? D : 1], const float* __restrict__ o,
                                               const float* centre, int d) {
    float dist = 0.f;
    if constexpr (D > 0) {
#pragma unroll
        for (int j = 0; j < D; ++j) {
            const float diff = __fsub_rn(xr[j], centre[j]);
            dist = __fadd_rn(dist, __fmul_rn(diff, diff));
        }
    } else {
        for (int j = 0; j < d; ++j) {
            const float diff = __fsub_rn(o[j], centre[j]);
            dist = __fadd_rn(dist, __fmul_rn(diff, diff));
        }
    }
    return dist;
}

// An object's D coordinates into registers: D / 4 16-byte loads where D allows and the row is 16-byte aligned
// (`aligned`, the caller's knowledge), else D scalar loads.
template <int D>
__device__ __forceinline__ void load_row(const float* o, float (&xr)[D], bool aligned) {
    if constexpr (D % 4 == 0) {
        if (aligned) {
#pragma unroll
            for (int j = 0; j < D; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(o + j);
                xr[j] = v.x, xr[j + 1] = v.y, xr[j + 2] = v.z, xr[j + 3] = v.w;
            }
            return;
        }
    }
#pragma unroll
    for (int j = 0; j < D; ++j) xr[j] = o[j];
}

// Liao's nearest centre of one object: float32 squared differences summed over the coordinates in order,
// unfused, ties to the lower index. With D > 0 (the coordinate count known at compile time) the object's
// coordinates are read once into registers instead of once per centre.
template <int D>
__device__ inline std::int32_t nearest(const float* __restrict__ o, const float* centres, int c_first, int count,
                                       int d, std::int32_t best, float& best_dist) {
    constexpr int kRegs = D > 0 ? D : 1;
    float xr[kRegs];
    if constexpr (D > 0) load_row<D>(o, xr, (reinterpret_cast<std::uintptr_t>(o) & 15) == 0);
    for (int c = 0; c < count; ++c) {
        const float dist = liao_distance<D>(xr, o, centres + c * (D > 0 ? D : d), d);
        if (c_first + c == 0 || dist < best_dist) {
            best_dist = dist;
            best = c_first + c;
        }
    }
    return best;
}

// ||v||^2 as one fmaf chain in coordinate order: a centre's norm in the dot form (every kernel that forms g starts
// from this value) and a point's in its gap bound.
__device__ __forceinline__ float squared_norm(const float* __restrict__ v, int d) {
    float s = 0.f;
    for (int j = 0; j < d; ++j) s = __fmaf_rn(v[j], v[j], s);
    return s;
}

// The dot form's centre norms, by the whole block: norms[c] = ||c||^2 for c < k and +inf for the pad entries
// up to `count` (never the nearest), then, after a barrier, max ||c|| rounded up into *cmax by warp 0 (the
// rounding bound's scale; visible to all after the caller's next barrier).
__device__ inline void centre_norms(const float* __restrict__ centres, int k, int d, int count, float* norms,
                                    float* cmax) {
    for (int c = threadIdx.x; c < count; c += blockDim.x)
        norms[c] = c < k ? squared_norm(centres + static_cast<std::int64_t>(c) * d, d) : __int_as_float(0x7f800000);
    __syncthreads();
    if (threadIdx.x < 32) {
        float m = 0.f;
        for (int c = threadIdx.x; c < k; c += 32) m = fmaxf(m, norms[c]);
        for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        if (threadIdx.x == 0) *cmax = __fsqrt_ru(m);
    }
}

// A running (best b, its index i, second s) takes centre c's g, centres in increasing index: strict < keeps the lower
// index; s = min(s, max(b, g)) holds the second smallest (equal to b on a tie; a NaN g leaves b and sets s = b, so
// such a point fails every gap test: Liao's path).
__device__ __forceinline__ void add_best(float& b, int& i, float& s, float g, int c) {
    s = fminf(s, fmaxf(b, g));
    if (g < b) i = c;
    b = fminf(b, g);
}

// (best, index, second) of two disjoint centre sets: ties to the lower index, an equal best makes second = best
// (zero gap: Liao's path decides).
__device__ __forceinline__ void merge_best(float& b, int& i, float& s, float b2, int i2, float s2) {
    if (b2 < b || (b2 == b && i2 < i)) s = fminf(s2, b), b = b2, i = i2;
    else s = fminf(s, b2);
}

// The dot form's bound: the two nearest centres by g(c) = ||c||^2 - 2 x.c (float32 fused multiply-adds) are
// Liao's two nearest, in that order, when g's gap exceeds every rounding that could reorder them. Per centre,
// |g - exact| <= 2 gamma_{D+1} B^2 (||c||^2 then D FMAs; Cauchy-Schwarz) and Liao's distance is within
// gamma_{D+2} B^2 of ||x - c||^2, with B = ||x|| + max ||c||; for a pair that is (6D + 8) u B^2, u = 2^-24.
// 8(D + 4) u B^2 covers it with the rounding of the gap and of B itself; 2^-126 per term covers underflow
// (flushed or not). 4B^2 is formed first: it overflows (an infinite bound: Liao's way) before any g or Liao
// distance (each at most B^2) can, so no infinity in g ever decides.
__device__ inline float dot_bound(int d, float b) {
    const float b4 = (2.f * b) * (2.f * b);
    return 2.f * static_cast<float>(d + 4) * (5.9604645e-08f * b4 + 4.7019774e-38f);
}

// The nearest centre by the dot form: x in registers, centres in pairs ([-2c] and ||c||^2 padded with a centre
// at +inf), one FMA per (centre, coordinate) instead of Liao's sub, mul, add. Where the best and second-best
// g are not further apart than dot_bound (ties, near-ties, overflow: NaN compares false), the object's
// distances are recomputed Liao's way, so the answer is always Liao's.
template <int D>
__device__ inline std::int32_t nearest_dot(const float* __restrict__ o, const float* centres, const float* m2c,
                                           const float* cn, float cmax, int k, int d) {
    if constexpr (D > 0) d = D;
    constexpr int kRegs = D > 0 ? D : 1;
    float xr[kRegs];
    float xn2 = 0.f;
    if constexpr (D > 0) {
#pragma unroll
        for (int j = 0; j < D; ++j) xr[j] = o[j];
#pragma unroll
        for (int j = 0; j < D; ++j) xn2 = __fmaf_rn(xr[j], xr[j], xn2);
    } else {
        for (int j = 0; j < d; ++j) xn2 = __fmaf_rn(o[j], o[j], xn2);
    }
    float best = __int_as_float(0x7f800000), second = best;
    std::int32_t bi = 0;
    for (int c = 0; c < k; c += 2) {  // two independent FMA chains
        float a0 = cn[c], a1 = cn[c + 1];
        const float* p0 = m2c + c * d;
        const float* p1 = p0 + d;
        if constexpr (D > 0 && D % 4 == 0) {  // rows of 16 bytes: one shared-memory load per 4 FMAs
#pragma unroll
            for (int j = 0; j < D; j += 4) {
                const float4 v0 = *reinterpret_cast<const float4*>(p0 + j);
                const float4 v1 = *reinterpret_cast<const float4*>(p1 + j);
                a0 = __fmaf_rn(xr[j], v0.x, a0), a1 = __fmaf_rn(xr[j], v1.x, a1);
                a0 = __fmaf_rn(xr[j + 1], v0.y, a0), a1 = __fmaf_rn(xr[j + 1], v1.y, a1);
                a0 = __fmaf_rn(xr[j + 2], v0.z, a0), a1 = __fmaf_rn(xr[j + 2], v1.z, a1);
                a0 = __fmaf_rn(xr[j + 3], v0.w, a0), a1 = __fmaf_rn(xr[j + 3], v1.w, a1);
            }
        } else if constexpr (D > 0) {
#pragma unroll
            for (int j = 0; j < D; ++j) a0 = __fmaf_rn(xr[j], p0[j], a0), a1 = __fmaf_rn(xr[j], p1[j], a1);
        } else {
            for (int j = 0; j < d; ++j) a0 = __fmaf_rn(o[j], p0[j], a0), a1 = __fmaf_rn(o[j], p1[j], a1);
        }
        // Strictly smaller: equal values leave a zero gap, so ties go to the exact path (lower index).
        if (a0 < best) second = best, best = a0, bi = c;
        else if (a0 < second) second = a0;
        if (a1 < best) second = best, best = a1, bi = c + 1;
        else if (a1 < second) second = a1;
    }
    const float b = __fadd_ru(__fsqrt_ru(xn2), cmax);
    const float bound = dot_bound(d, b);
    if (!(__fsub_rn(second, best) > bound)) {
        // Liao's distance only for the candidates: a centre whose g exceeds the best g by more than the bound is
        // strictly farther than the best centre by Liao's distance too (the pair argument above), so Liao's
        // nearest, ties included, is among the centres within the bound (the best one always is; NaN: all are).
        // g is recomputed with the same fused multiply-adds in the same order: the same values. In index order
        // with a strict "closer", as nearest<D>: ties to the lower index. Typically 2 centres instead of k.
        float best_dist = 0.f;
        bi = -1;
        for (int c = 0; c < k; ++c) {
            float a = cn[c];
            const float* p = m2c + c * d;
            if constexpr (D > 0) {
#pragma unroll
                for (int j = 0; j < D; ++j) a = __fmaf_rn(xr[j], p[j], a);
            } else {
                for (int j = 0; j < d; ++j) a = __fmaf_rn(o[j], p[j], a);
            }
            if (!(__fsub_rn(a, best) > bound)) {
                const float dist = liao_distance<D>(xr, o, centres + c * d, d);  // as nearest<D>
                if (bi < 0 || dist < best_dist) best_dist = dist, bi = c;
            }
        }
    }
    return bi;
}

// The leaf sums of one pass (`leaves` leaves from leaf0 of a chunk of `len` objects) into leaf_s[leaf][cluster][coord]:
// one thread per (leaf, coordinate), the leaf's objects in object order, each read once and added in float64 to its
// cluster's sum. members[i]: object i's cluster, -1 past the end. column(first, j): coordinate j of object `first`
// (the next object d floats on). k <= kGatherMaxK: the sums in registers (K = k, a constant: no compare and add for
// clusters past k; the same adds as a thread per (leaf, cluster, coordinate) adding +0.0 for non-members), kFlight
// loads in flight; otherwise added into leaf_s in shared memory (zeroed here), kBatch loads issued first (a load
// inside the member test would wait a full round trip per object). assign_and_sum's and persistent_loop's pass.
template <int kFlight, int kBatch, class Column>
__device__ inline void leaf_sums_pass(int k, int d, int len, int leaf0, int leaves, const std::int32_t* members,
                                      Column column, double* leaf_s) {
    const int kd = k * d;
    if (k <= kGatherMaxK) {
        auto gather = [&](auto kk) {
            constexpr int K = decltype(kk)::value;
            for (int item = threadIdx.x; item < leaves * d; item += kThreads) {
                const int lp = item / d, j = item % d, first = (leaf0 + lp) * kLeaf;
                const float* col = column(first, j);
                double s[K];
#pragma unroll
                for (int c = 0; c < K; ++c) s[c] = 0.0;
                const int in_leaf = len - first < kLeaf ? len - first : kLeaf;  // a ragged last leaf: predicated
#pragma unroll 1
                for (int h = 0; h < kLeaf; h += kFlight) {
                    float v[kFlight];
#pragma unroll
                    for (int i = 0; i < kFlight; ++i) v[i] = h + i < in_leaf ? col[static_cast<std::int64_t>(h + i) * d] : 0.f;
#pragma unroll
                    for (int i = 0; i < kFlight; ++i) {
                        const int m = h + i < in_leaf ? members[first + h + i] : -1;
                        const double vd = static_cast<double>(v[i]);
#pragma unroll
                        for (int c = 0; c < K; ++c)
                            if (m == c) s[c] += vd;
                    }
                }
#pragma unroll
                for (int c = 0; c < K; ++c) leaf_s[lp * kd + c * d + j] = s[c];
            }
        };
        static_assert(kGatherMaxK == 4, "one case a k");
        switch (k) {
            case 1: gather(std::integral_constant<int, 1>{}); break;
            case 2: gather(std::integral_constant<int, 2>{}); break;
            case 3: gather(std::integral_constant<int, 3>{}); break;
            default: gather(std::integral_constant<int, 4>{}); break;
        }
    } else {
        for (int t = threadIdx.x; t < leaves * kd; t += kThreads) leaf_s[t] = 0.0;
        __syncthreads();
        for (int item = threadIdx.x; item < leaves * d; item += kThreads) {
            const int lp = item / d, j = item % d, first = (leaf0 + lp) * kLeaf;
            const int in_leaf = len - first;  // objects of this leaf in the chunk (<= 0: none)
            double* acc = leaf_s + lp * kd + j;
            const float* col = column(first, j);
#pragma unroll
            for (int h = 0; h < kLeaf; h += kBatch) {
                float v[kBatch];
#pragma unroll
                for (int i = 0; i < kBatch; ++i) v[i] = h + i < in_leaf ? col[static_cast<std::int64_t>(h + i) * d] : 0.f;
#pragma unroll
                for (int i = 0; i < kBatch; ++i) {
                    const int m = members[first + h + i];  // -1 past the end
                    if (m >= 0) acc[m * d] += static_cast<double>(v[i]);
                }
            }
        }
    }
}

// Calls f(std::integral_constant<int, D>{}) with D = d for d in 1..kMaxUnrolledDim, else D = 0 (any d).
constexpr int kMaxUnrolledDim = 24;  // beyond, x[D] in registers next to the rest passes 64 registers
template <class F, int... Ds>
void with_dim_impl(int d, F&& f, std::integer_sequence<int, Ds...>) {
    const bool done = ((d == Ds + 1 ? (f(std::integral_constant<int, Ds + 1>{}), true) : false) || ...);
    if (!done) f(std::integral_constant<int, 0>{});
}
template <class F>
void with_dim(std::int64_t d, F&& f) {
    with_dim_impl(static_cast<int>(d), f, std::make_integer_sequence<int, kMaxUnrolledDim>{});
}

}  // namespace
}  // namespace gpuopt::kmeans
