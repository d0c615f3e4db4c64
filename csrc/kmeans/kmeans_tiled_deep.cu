// device_tiled past D = 64 ("deep"): assign_tiled keeps a tile's points whole in shared memory (x^T of 256 points
// x D <= 64; it took D <= 128 at one block an SM), so longer points took Liao's distance a thread a point (assign_any: 1M x 256, k=1000 ran 1.1 s a
// loop on the H200, 50x slower than a PyTorch Lloyd loop). Here the dot form is a plain tiled SGEMM whose K loop
// runs over D, for any D:
//   shift    once a loop: m = the centres' mean, coordinate by coordinate (k adds in index order). The dot form
//            runs on x' = fl(x - m) and c' = fl(c - m): distances do not move, but the rounding bound scales with
//            B'^2 = (||x'|| + max ||c'||)^2 instead of (||x|| + max ||c||)^2, 3-8x smaller on data away from the
//            origin (uniform in (0, 1]: every coordinate positive). The shift's own rounding moves ||x' - c'||^2 by at
//            most ~2u B'^2, inside dot_bound's slack (8(D + 4) against the 6D + 8 its argument needs).
//   prep     once a loop: -2c' transposed and padded ([DP][kc], exact: a power of two), ||c'||^2 by one fmaf chain in
//            coordinate order (pad centres +inf), max ||c'|| rounded up (an integer atomicMax of non-negative
//            floats: any order, the same value).
//   assign   a block tile of 128 points x all centres, in centre tiles of 128 (k <= 64: 256 points x one tile of 64,
//            DeepTile) and K steps of 32 coordinates
//            (cp.async, two stages: x transposed by 4-byte copies, lane (coordinate, point) so the stores hit 32
//            banks, then shifted by m in place by the thread that copied them; -2c' by 16-byte copies); 256
//            threads, each an 8 x 8 register tile (points ty*4.., 64 + ty*4..; centres tx*4.., 64 + tx*4..: 4 LDS.128
//            per 64 FMAs, the x loads broadcast). The accumulators start at ||c'||^2 and add x'_j (-2 c'_j) for
//            j = 0, 1, ... After a centre tile, the running (best, second, index) per point (centres in increasing
//            index, strict <); after the last, the 16 threads of a point row merge theirs by shuffles. ||x'||^2 (the
//            bound's B') accumulates from the staged x' during the first centre tile. A point whose gap clears
//            dot_bound gets its membership; the others go to a queue in global memory with their best g and bound.
//   resolve  the same kernel over the queue (Gather): its points' rows gathered into the tiles, the same chains, so
//            the same g for every centre; each centre within the bound of the point's best g is a candidate and
//            gets Liao's distance (liao_distance, on x and c themselves), and the smallest (distance, index) wins by
//            a 64-bit atomicMin of (distance bits, index) in shared memory: Liao's membership, ties to the lower
//            index (a centre farther than the bound is strictly farther by Liao's distance too: nearest_dot's
//            argument). The queue costs its share of an assign pass; a warp a point recomputing every g from L2
//            (the first form) ran 205 ms a loop at 1M x 1024, k=512 on uniform data, against the assign's 26.
//   pairs    (the narrow tile; the 3xTF32 tile from 256 padded coordinates) the assign pass keeps each point's two
//            nearest and its third-nearest g (Top3): a queued point whose third is farther than the bound from its
//            best has exactly two candidates, so it is settled there by their two Liao distances (liao_pair, the
//            resolve pass's rule) and never queued.
// The change count is an integer (atomics in any order), so the result is the same bits for any grid.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../common/async_copy.cuh"
#include "../common/cuda_check.cuh"
#include "../common/device.hpp"
#include "../common/error.hpp"
#include "../common/launch.cuh"
#include "../common/stream.hpp"
#include "kmeans_device.cuh"
#include "kmeans_tiled.hpp"

#include "kmeans_tiled_deep_parts.cuh"
#include "kmeans_tiled_deep_tc.cuh"

namespace gpuopt::kmeans::tiled::deep {
namespace {

// Gather false: the assign pass over all n points. Gather true: the resolve pass over the queue (module comment).
// Pairs (the narrow tile's one centre tile, Gather false): each point's two nearest and third-nearest value straight
// from the accumulators; a point whose third is farther than the bound from its best is settled by two Liao
// distances instead of the queue (Top3, liao_pair).
template <class T, bool Gather, bool Pairs = false>
__global__ void __launch_bounds__(kDeepThreads, 2) assign(const float* __restrict__ x, std::int64_t n, int d, int k,
                                                          int kc, int dp, const float* __restrict__ ct,
                                                          const float* __restrict__ cn,
                                                          const float* __restrict__ shift,
                                                          const float* __restrict__ centres,
                                                          Header* __restrict__ hdr,
                                                          std::int64_t* __restrict__ queue_i,
                                                          float2* __restrict__ queue_b,
                                                          std::int32_t* __restrict__ membership,
                                                          LoopState* __restrict__ state) {
    constexpr int kRowThreads = T::kRowThreads, kCentres = T::kCentres, kPoints = T::kPoints, kXStride = T::kXStride;
    constexpr int kHalfP = kPoints / 2, kHalfC = kCentres / 2;
    static_assert(!Pairs || (!Gather && kCentres == kNarrowMaxK), "Pairs: the assign pass of the one-tile narrow tile");
    if (state->done) return;
    extern __shared__ __align__(16) float dsm[];
    float* const xs = dsm;                                 // [kStages][kSlab][kXStride]: x'^T of the step's slab
    float* const cs = dsm + kStages * kSlab * kXStride;    // [kStages][kSlab][kCentres]: -2c'^T of the step's slab
    // The running (best, second, index) of a thread's 8 points, [8][threads]: in registers next to the 64
    // accumulators they spilled (128 registers: two blocks an SM); touched once a centre tile.
    float* const best_s = cs + kStages * kSlab * kCentres;
    float* const second_s = best_s + 8 * kDeepThreads;
    int* const index_s = reinterpret_cast<int*>(second_s + 8 * kDeepThreads);
    const GatherTile gt = GatherTile::at<kPoints>(best_s);  // (Gather)
    __shared__ float bound_s[kPoints];  // ||x'_p||^2 over the first centre tile's steps, then the point's gap bound
    __shared__ int changed_s;            // (counters in shared memory: registers are held to 128)
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int tx = tid % kRowThreads, ty = tid / kRowThreads;
    if (tid == 0) changed_s = 0;  // seen after the first step's barrier
    const XCopy xc(tid);
    const int slabs = dp / kSlab, steps = slabs * (kc / kCentres);
    const std::int64_t count = Gather ? static_cast<std::int64_t>(hdr->queued) : n;  // (the queue: after assign)
    const std::int64_t tiles = (count + kPoints - 1) / kPoints;
    for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const std::int64_t p0 = tile * kPoints;
        const int len = static_cast<int>(count - p0 < kPoints ? count - p0 : kPoints);
        if constexpr (Gather) gt.begin(queue_i, queue_b, p0, len);
        // Step s: centre tile s / slabs, coordinates (s % slabs) * kSlab .. + kSlab, into stage `stage`.
        auto issue = [&](int s, int stage) {
            const int j0 = s % slabs * kSlab, c0 = s / slabs * kCentres;
            xc.issue<kPoints, kXStride, Gather>(xs + stage * kSlab * kXStride, x, d, p0, len, j0, gt.rows);
            // -2c': a pass copies T::kCopyRows slab rows of kCentres floats, a lane 16 bytes.
            constexpr int kLanesARow = kCentres / 4;
            const int crow = warp * (32 / kLanesARow) + lane / kLanesARow, ccol = lane % kLanesARow * 4;
            float* cd = cs + stage * kSlab * kCentres + crow * kCentres + ccol;
            const float* csrc = ct + static_cast<std::int64_t>(j0 + crow) * kc + c0 + ccol;
#pragma unroll
            for (int r = 0; r < kSlab / T::kCopyRows; ++r)
                dev::cp_async_16(cd + r * T::kCopyRows * kCentres, csrc + static_cast<std::int64_t>(r) * T::kCopyRows * kc, 16);
            dev::cp_async_commit();
        };
        if constexpr (!Gather) {
#pragma unroll
            for (int a = 0; a < 8; ++a)
                best_s[a * kDeepThreads + tid] = second_s[a * kDeepThreads + tid] = __int_as_float(0x7f800000),
                index_s[a * kDeepThreads + tid] = 0;
        }
        float acc[8][8];
        issue(0, 0);
        for (int s = 0; s < steps; ++s) {
            const int stage = s & 1, ci = s / slabs, sj = s % slabs;
            if (s + 1 < steps) {
                issue(s + 1, stage ^ 1);  // its stage was last read before the previous step's closing barrier
                dev::cp_async_wait<1>();
            } else {
                dev::cp_async_wait<0>();
            }
            xc.shift<kPoints, kXStride>(xs + stage * kSlab * kXStride, shift[sj * kSlab + xc.j]);
            __syncthreads();
            if (sj == 0) {
#pragma unroll
                for (int b = 0; b < 8; ++b) {
                    const float nb = cn[ci * kCentres + (b < 4 ? tx * 4 + b : kHalfC + tx * 4 + b - 4)];
#pragma unroll
                    for (int a = 0; a < 8; ++a) acc[a][b] = nb;
                }
            }
            const float* xa = xs + stage * kSlab * kXStride;
            const float* ca = cs + stage * kSlab * kCentres;
#pragma unroll 2
            for (int j = 0; j < kSlab; ++j) {
                const float4 x0 = *reinterpret_cast<const float4*>(xa + j * kXStride + ty * 4);
                const float4 x1 = *reinterpret_cast<const float4*>(xa + j * kXStride + kHalfP + ty * 4);
                const float4 c0 = *reinterpret_cast<const float4*>(ca + j * kCentres + tx * 4);
                const float4 c1 = *reinterpret_cast<const float4*>(ca + j * kCentres + kHalfC + tx * 4);
                const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
                const float cv[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#pragma unroll
                for (int a = 0; a < 8; ++a)
#pragma unroll
                    for (int b = 0; b < 8; ++b) acc[a][b] = __fmaf_rn(xv[a], cv[b], acc[a][b]);
            }
            if (!Gather && ci == 0 && tid < kPoints) {  // the pad coordinates are 0: fma(0, 0, s) == s
                float xn2 = sj == 0 ? 0.f : bound_s[tid];  // (step 0: after its barrier, the last tile's tests read it)
#pragma unroll 8
                for (int j = 0; j < kSlab; ++j) xn2 = __fmaf_rn(xa[j * kXStride + tid], xa[j * kXStride + tid], xn2);
                bound_s[tid] = xn2;
            }
            if (sj == slabs - 1) {
                if constexpr (Gather) {
                    // The candidates: centres whose g is within the bound of the point's best g (a mask over the
                    // thread's 8 x 8, then one Liao distance a candidate, in one call site).
                    unsigned long long mask = 0;
#pragma unroll
                    for (int a = 0; a < 8; ++a) {
                        const int p = a < 4 ? ty * 4 + a : kHalfP + ty * 4 + a - 4;
                        const float2 q = p < len ? gt.qb[p] : make_float2(0.f, 0.f);
#pragma unroll
                        for (int b = 0; b < 8; ++b) {
                            const int c = ci * kCentres + (b < 4 ? tx * 4 + b : kHalfC + tx * 4 + b - 4);
                            if (p < len && c < k && !(__fsub_rn(acc[a][b], q.x) > q.y)) mask |= 1ull << (a * 8 + b);
                        }
                    }
                    while (mask) {
                        const int bit = __ffsll(static_cast<long long>(mask)) - 1;
                        mask &= mask - 1;
                        const int a = bit / 8, b = bit % 8;
                        const int p = a < 4 ? ty * 4 + a : kHalfP + ty * 4 + a - 4;
                        gt.offer(x, d, centres, p, ci * kCentres + (b < 4 ? tx * 4 + b : kHalfC + tx * 4 + b - 4));
                    }
                } else if constexpr (Pairs) {
                    // The only centre tile: a point's Top3 over its row's 8 threads (butterfly); lane tx keeps slot
                    // tx's as (best, second, third, index, index2) in its slots 0 and 1 of the running arrays.
#pragma unroll
                    for (int a = 0; a < 8; ++a) {
                        Top3 top;
#pragma unroll
                        for (int b = 0; b < 8; ++b) top.add(acc[a][b], b < 4 ? tx * 4 + b : kHalfC + tx * 4 + b - 4);
#pragma unroll
                        for (int off = 1; off < kRowThreads; off *= 2) top.merge(top.shfl_xor(off));
                        if (tx == a)
                            best_s[tid] = top.best, second_s[tid] = top.second, best_s[kDeepThreads + tid] = top.third,
                            index_s[tid] = top.index, index_s[kDeepThreads + tid] = top.index2;
                    }
                } else {
                    // Running (best, second, index): the thread's centres in increasing index, strict < keeps the
                    // lower.
#pragma unroll
                    for (int a = 0; a < 8; ++a) {
                        float best = best_s[a * kDeepThreads + tid], second = second_s[a * kDeepThreads + tid];
                        int bi = index_s[a * kDeepThreads + tid];
#pragma unroll
                        for (int b = 0; b < 8; ++b)
                            add_best(best, bi, second, acc[a][b], ci * kCentres + (b < 4 ? tx * 4 + b : kHalfC + tx * 4 + b - 4));
                        best_s[a * kDeepThreads + tid] = best, second_s[a * kDeepThreads + tid] = second;
                        index_s[a * kDeepThreads + tid] = bi;
                    }
                }
            }
            __syncthreads();  // this stage is read before the next step's copies overwrite it
        }
        if constexpr (Gather) {  // (after the last step's barrier: every candidate is in)
            gt.write_back(membership, len, &changed_s);
            continue;
        }
        if (tid < kPoints)
            bound_s[tid] = dot_bound(d, __fadd_ru(__fsqrt_ru(bound_s[tid]), __int_as_float(hdr->cmax_bits)));
        // A point's row of 16 lanes merges (best, second, index): the butterfly leaves the result in every lane;
        // lane tx < 8 keeps point tx's. (Pairs: merged already.)
        float b = 0.f, s2 = 0.f, t3 = 0.f;
        int m = 0, m2 = 0;
        if constexpr (Pairs) {
            b = best_s[tid], s2 = second_s[tid], t3 = best_s[kDeepThreads + tid];
            m = index_s[tid], m2 = index_s[kDeepThreads + tid];
        } else {
#pragma unroll
            for (int a = 0; a < 8; ++a) {
                float best = best_s[a * kDeepThreads + tid], second = second_s[a * kDeepThreads + tid];
                int bi = index_s[a * kDeepThreads + tid];
#pragma unroll
                for (int off = 1; off < kRowThreads; off *= 2)
                    merge_best(best, bi, second, __shfl_xor_sync(0xffffffffu, best, off),
                               __shfl_xor_sync(0xffffffffu, bi, off), __shfl_xor_sync(0xffffffffu, second, off));
                if (tx == a) b = best, s2 = second, m = bi;
            }
        }
        __syncthreads();  // bound_s
        const int p = tx < 4 ? ty * 4 + tx : kHalfP + ty * 4 + tx - 4;
        if (tx < 8 && p < len) {
            int settled = -1;
            if (__fsub_rn(s2, b) > bound_s[p]) settled = m;  // (NaN compares false: Liao's path)
            else if (Pairs && __fsub_rn(t3, b) > bound_s[p]) settled = liao_pair(x, d, centres, p0 + p, m, m2);
            if (settled >= 0) {
                if (membership[p0 + p] != settled) atomicAdd(&changed_s, 1);
                membership[p0 + p] = settled;
            } else {
                const unsigned q = atomicAdd(&hdr->queued, 1u);  // < n: each point at most once a loop
                queue_i[q] = p0 + p, queue_b[q] = make_float2(b, bound_s[p]);
            }
        }
    }
    __syncthreads();
    add_changed<kDeepThreads>(tid == 0 ? changed_s : 0, state);
}

// f(tile) for k centres: the narrow tile up to its width, else the wide one.
template <class F>
void with_tile(std::int64_t k, F&& f) {
    if (k <= kNarrowMaxK) f(NarrowTile{});
    else f(WideTile{});
}

// Where the assign pass settles the pairs itself (Pairs): the narrow tile past 512 padded coordinates, the 3xTF32
// tile from 512. kmeans_map on the H200 (61ca4a6, pairs in every narrow tile and in the 3xTF32 tile from 256,
// against 3687f7f without; marginal loop, 1M uniform points): D = 1024 1.08-1.15x faster (k = 2..8192), D = 512
// 1.00-1.10x with k >= 128, but D = 512 with k = 8, 32 0.91x and 0.98x and D = 256 0.87-0.99x: where few points
// queue, the Top3's merges and the inline Liao distances cost more than the resolve pass they save.
constexpr int kNarrowPairsAbove = 512, kTcPairsMinDim = 512;

}  // namespace

std::size_t workspace_bytes(std::int64_t n, std::int64_t d, std::int64_t k, bool tc) {
    return parts(n, d, k, tc).total;
}

void check(std::int64_t d, std::int64_t k, bool tc) {
    GPUOPT_REQUIRE(padded_dim(d) * padded_centres(k, tc) <= INT_MAX,
                   "kmeans device_tiled: k*D past 2^31 padded centre coordinates");
    if (tc) {
        require_shared_memory(assign_tc<false>, kTcShared, "kmeans device_tiled: assign (D > 64, tf32x3)");
        require_shared_memory(assign_tc<false, true>, kTcShared, "kmeans device_tiled: assign (D > 64, tf32x3)");
        require_shared_memory(assign_tc<true>, kTcShared, "kmeans device_tiled: resolve (D > 64, tf32x3)");
        return;
    }
    with_tile(k, [&](auto t) {
        using T = decltype(t);
        require_shared_memory(assign<T, false>, T::kShared, "kmeans device_tiled: assign (D > 64)");
        if constexpr (std::is_same_v<T, NarrowTile>)
            require_shared_memory(assign<T, false, true>, T::kShared, "kmeans device_tiled: assign (D > 64)");
        require_shared_memory(assign<T, true>, T::kShared, "kmeans device_tiled: resolve (D > 64)");
    });
}

Grid plan(std::int64_t n, std::int64_t k, int blocks, bool tc) {
    Grid g;
    auto fill = [&](auto kernel, std::size_t shared, int points) {
        const std::int64_t tiles = (n + points - 1) / points;
        const std::int64_t resident = static_cast<std::int64_t>(multiprocessor_count()) *
                                      std::max(resident_blocks_per_sm(kernel, kDeepThreads, shared), 1);
        g.assign_blocks = static_cast<unsigned>(std::min<std::int64_t>(tiles, blocks > 0 ? blocks : resident));
        g.resolve_blocks = static_cast<unsigned>(blocks > 0 ? blocks : resident);  // (the queue's length: on the device)
    };
    if (tc) fill(assign_tc<false>, kTcShared, WideTile::kPoints);
    else with_tile(k, [&](auto t) {
        using T = decltype(t);
        fill(assign<T, false>, T::kShared, T::kPoints);  // (Pairs: the same launch bounds and shared memory)
    });
    return g;
}

void launch(const Grid& g, const float* x, std::int64_t n, std::int64_t d, std::int64_t k, const float* centres,
            std::int32_t* membership, void* state_ptr, void* workspace, bool tc) {
    auto* state = static_cast<LoopState*>(state_ptr);
    const Parts p = parts(n, d, k, tc);
    auto* base = static_cast<unsigned char*>(workspace);
    auto* hdr = reinterpret_cast<Header*>(base);
    auto* ct = reinterpret_cast<float*>(base + p.ct);
    auto* cn = reinterpret_cast<float*>(base + p.cn);
    auto* shift = reinterpret_cast<float*>(base + p.shift);
    auto* queue_i = reinterpret_cast<std::int64_t*>(base + p.queue_i);
    auto* queue_b = reinterpret_cast<float2*>(base + p.queue_b);
    const int di = static_cast<int>(d), ki = static_cast<int>(k);
    const int kc = static_cast<int>(padded_centres(k, tc)), dp = static_cast<int>(padded_dim(d));
    const cudaStream_t stream = current_stream();
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(hdr, 0, sizeof(Header), stream));
    centre_mean<<<(dp + kDeepThreads - 1) / kDeepThreads, kDeepThreads, 0, stream>>>(centres, ki, di, dp, shift, state);
    GPUOPT_CHECK_LAUNCH("kmeans device_tiled centre_mean (D > 64)");
    const unsigned prep_blocks = static_cast<unsigned>(std::min<std::int64_t>(
        (static_cast<std::int64_t>(dp) * kc + kDeepThreads - 1) / kDeepThreads, 4 * multiprocessor_count()));
    if (tc) prep<true><<<prep_blocks, kDeepThreads, 0, stream>>>(centres, ki, di, kc, dp, shift, ct, cn, hdr, state);
    else prep<false><<<prep_blocks, kDeepThreads, 0, stream>>>(centres, ki, di, kc, dp, shift, ct, cn, hdr, state);
    GPUOPT_CHECK_LAUNCH("kmeans device_tiled prep (D > 64)");
    if (tc) {
        const auto* ct4 = reinterpret_cast<const float4*>(ct);
        // (Pairs: the same occupancy as plan's assign_tc<false>: launch bounds, shared memory)
        auto* assign_pass = dp >= kTcPairsMinDim ? assign_tc<false, true> : assign_tc<false>;
        assign_pass<<<g.assign_blocks, kDeepThreads, kTcShared, stream>>>(x, n, di, ki, kc, dp, ct4, cn, shift, centres,
                                                                         hdr, queue_i, queue_b, membership, state);
        GPUOPT_CHECK_LAUNCH("kmeans device_tiled assign (D > 64, tf32x3)");
        assign_tc<true><<<g.resolve_blocks, kDeepThreads, kTcShared, stream>>>(x, n, di, ki, kc, dp, ct4, cn, shift,
                                                                               centres, hdr, queue_i, queue_b,
                                                                               membership, state);
        GPUOPT_CHECK_LAUNCH("kmeans device_tiled resolve (D > 64, tf32x3)");
        return;
    }
    with_tile(k, [&](auto t) {
        using T = decltype(t);
        auto* assign_pass = assign<T, false>;
        if constexpr (std::is_same_v<T, NarrowTile>)
            if (dp > kNarrowPairsAbove) assign_pass = assign<T, false, true>;
        assign_pass<<<g.assign_blocks, kDeepThreads, T::kShared, stream>>>(x, n, di, ki, kc, dp, ct, cn, shift, centres,
                                                                          hdr, queue_i, queue_b, membership, state);
        GPUOPT_CHECK_LAUNCH("kmeans device_tiled assign (D > 64)");
        assign<T, true><<<g.resolve_blocks, kDeepThreads, T::kShared, stream>>>(x, n, di, ki, kc, dp, ct, cn, shift,
                                                                                centres, hdr, queue_i, queue_b,
                                                                                membership, state);
    });
    GPUOPT_CHECK_LAUNCH("kmeans device_tiled resolve (D > 64)");
}

}  // namespace gpuopt::kmeans::tiled::deep
