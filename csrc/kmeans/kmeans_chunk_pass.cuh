// device_persistent's chunk pass (kmeans_persistent.cu, round 8): a chunk's assignment, leaf sums and counts where
// x is resident in shared memory, D is unrolled and k <= 4 (kmeans04's case), and the cp.async staging of a block's x
// that it overlaps with the first loop. The same arithmetic as assign_and_sum's (kmeans_device.cuh).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../common/async_copy.cuh"
#include "kmeans_device.cuh"

namespace gpuopt::kmeans {
namespace {

constexpr int kMaskWords = kGatherMaxK + 1;  // a leaf's member masks (k <= 4) and its change mask

// chunk_pass's D: unrolled ones up to 16, not D = 2: those kernels spilled 4-8 bytes with it (D = 2, 17, 21; their
// general path does not).
template <int D>
constexpr bool kChunkPassDim = D > 0 && D != 2 && D <= 16;
template <int D>
__device__ __forceinline__ bool uses_chunk_pass(int k) { return kChunkPassDim<D> && k <= kGatherMaxK; }

// The block's x into shared memory by cp.async, for chunk_pass (leaf l of the block at xs + l * stride; `objects` of
// them from src): five commit groups a thread, the first four the first chunk's leaves by rounds (warp w copies leaf
// r * 8 + w in group r: the leaf its round r assigns), the fifth the block's other chunks. 16-byte pieces where x and
// D allow, else 4 bytes; nothing past the block's objects is read.
template <int D>
__device__ inline void stage_async(float* xs, int stride, const float* src, std::int64_t objects, bool aligned) {
    constexpr int kWarps = kThreads / 32, kLeafFloats = kLeaf * D;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const bool vec = D % 4 == 0 && aligned;
    for (int r = 0; r < kLeaves / kWarps; ++r) {
        const int leaf = r * kWarps + warp;
        const std::int64_t in_leaf = std::min<std::int64_t>(objects - std::int64_t{leaf} * kLeaf, kLeaf);
        const int floats = in_leaf > 0 ? static_cast<int>(in_leaf) * D : 0;
        const float* from = src + static_cast<std::int64_t>(leaf) * kLeafFloats;
        float* to = xs + leaf * stride;
        if (vec) {
#pragma unroll 1
            for (int q = 4 * lane; q < floats; q += 4 * 32) dev::cp_async_16(to + q, from + q, 16);
        } else {
#pragma unroll 1
            for (int q = lane; q < floats; q += 32) dev::cp_async_4(to + q, from + q, 4);
        }
        dev::cp_async_commit();
    }
    const std::int64_t first = std::int64_t{kChunk} * D, floats = objects * D;  // the other chunks: one group
    if (vec) {
#pragma unroll 1
        for (std::int64_t f = first + 4 * threadIdx.x; f < floats; f += 4 * kThreads)
            dev::cp_async_16(xs + (f / kLeafFloats) * stride + f % kLeafFloats, src + f, 16);
    } else {
#pragma unroll 1
        for (std::int64_t f = first + threadIdx.x; f < floats; f += kThreads)
            dev::cp_async_4(xs + (f / kLeafFloats) * stride + f % kLeafFloats, src + f, 4);
    }
    dev::cp_async_commit();
}

// s += v where bit != 0, as a predicated add: written `if (bit) s += v` the compiler adds always and keeps s by two
// 64-bit selects (H200 call 2, ncu per SASS line: the gather 145 instructions a leaf, 48 of them FSEL). The same
// round-to-nearest float64 add where it adds, nothing where it does not: the same bits.
__device__ __forceinline__ void add_if(double& s, double v, unsigned bit) {
    asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %2, 0;\n\t@p add.rn.f64 %0, %0, %1;\n\t}" : "+d"(s) : "d"(v), "r"(bit));
}

// Round r of the first chunk's first loop: this thread's copies of group r done (at most 4 - r newer ones pending),
// then the warp's (the leaf's lanes' copies, visible to every lane after __syncwarp).
__device__ __forceinline__ void staged_wait(int r) {
    switch (r) {
        case 0: dev::cp_async_wait<4>(); break;
        case 1: dev::cp_async_wait<3>(); break;
        case 2: dev::cp_async_wait<2>(); break;
        default: dev::cp_async_wait<1>(); break;
    }
    __syncwarp();
}

// A chunk's assignment, leaf sums and counts where x is resident, D unrolled and k = K <= 4 (kmeans04; round 8: the
// general path spent ~240 instructions an object-warp on the assignment and ~170 a leaf on its leaf sums, ncu's
// per-instruction counts). The same arithmetic: nearest<D>'s distances and ties, the leaf sums of leaf_sums_pass's
// gather (a leaf's members of a cluster added in object order from 0.0 in float64).
//  * Assignment: warp w takes leaves w, w + 8, ... (a lane an object); the centres read as float4 rows; the leaf's
//    member mask of each cluster and its change mask by ballot, stored by lanes 0..K (no shared atomics).
//  * Leaf sums: a thread a (leaf, coordinate), the masks' bits deciding each add (a ragged last leaf has no bits past
//    its end: nothing there is read into a sum); counts: warp 0, a lane a leaf, popc then one warp reduction.
//  * first: the block's first chunk in the first loop, whose x stage_async is still copying (a round waits for its
//    own leaf's group, so x's load overlaps the first loop instead of preceding it: ~4 us of a call).
// Leaves counts_s[0..K] set, leaf_s [kLeaves][K*D] written, mem updated; the caller synchronises.
template <int D, int K>
__device__ __forceinline__ void chunk_pass(const float* xc, int stride, int len, std::int32_t* mem,
                                           const float* centres, unsigned* masks, int* counts, double* leaf_s,
                                           bool first) {
    constexpr int kWarps = kThreads / 32, kd = K * D;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    auto round = [&](int r, auto wait) {  // a leaf a warp
        const int leaf = r * kWarps + warp, i = leaf * kLeaf + lane;
        const float* o = xc + leaf * stride + lane * D;
        float xr[D];
        if constexpr (decltype(wait)::value) staged_wait(r);  // the first loop: this round's leaf is in
        load_row<D>(o, xr, true);  // rows of 16 bytes where D % 4 == 0 (stage_stride keeps every leaf 16-byte aligned)
        std::int32_t best = 0;
        float best_dist = 0.f;
#pragma unroll
        for (int c = 0; c < K; ++c) {
            float cr[D];
            if constexpr (D % 4 == 0) {
#pragma unroll
                for (int j = 0; j < D; j += 4) {
                    const float4 v = *reinterpret_cast<const float4*>(centres + c * D + j);
                    cr[j] = v.x, cr[j + 1] = v.y, cr[j + 2] = v.z, cr[j + 3] = v.w;
                }
            } else {
#pragma unroll
                for (int j = 0; j < D; ++j) cr[j] = centres[c * D + j];
            }
            const float dist = liao_distance<D>(xr, nullptr, cr, D);
            if (c == 0 || dist < best_dist) best_dist = dist, best = c;  // as nearest<D>
        }
        if (i >= len) best = -1;  // past the end: a member of no cluster (its x is not staged)
        const std::int32_t old = mem[i];
        mem[i] = best;
        unsigned word = __ballot_sync(0xffffffffu, old != best);  // past the end: -1 both, no change
#pragma unroll
        for (int c = 0; c < K; ++c) {
            const unsigned m = __ballot_sync(0xffffffffu, best == c);
            if (lane == c) word = m;
        }
        if (lane <= K) masks[leaf * kMaskWords + lane] = word;  // [0..K-1] members, [K] changes
    };
    if (first) {  // the first loop of the first chunk: a round waits for its leaf's copy
#pragma unroll 1
        for (int r = 0; r < kLeaves / kWarps; ++r) round(r, std::true_type{});
    } else {
#pragma unroll 2
        for (int r = 0; r < kLeaves / kWarps; ++r) round(r, std::false_type{});
    }
    __syncthreads();
    for (int item = threadIdx.x; item < kLeaves * D; item += kThreads) {
        const int lp = item / D, j = item % D;
        const float* col = xc + lp * stride + j;
        unsigned m[K];
        double s[K];
#pragma unroll
        for (int c = 0; c < K; ++c) m[c] = masks[lp * kMaskWords + c], s[c] = 0.0;
#pragma unroll
        for (int i = 0; i < kLeaf; ++i) {  // bit positions known at compile time: one LOP3 a test
            const double v = static_cast<double>(col[i * D]);
#pragma unroll
            for (int c = 0; c < K; ++c) add_if(s[c], v, m[c] & (1u << i));
        }
#pragma unroll
        for (int c = 0; c < K; ++c) leaf_s[lp * kd + c * D + j] = s[c];
    }
    if (warp == 0) {
#pragma unroll
        for (int c = 0; c <= K; ++c) {
            const unsigned total = __reduce_add_sync(0xffffffffu, __popc(masks[lane * kMaskWords + c]));
            if (lane == 0) counts[c] = static_cast<int>(total);
        }
    }
}

}  // namespace
}  // namespace gpuopt::kmeans
