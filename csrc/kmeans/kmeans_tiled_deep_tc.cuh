// device_tiled's deep path with its products on the tensor cores (products "tf32x3"): the FP32 tile's loop
// (kmeans_tiled_deep.cu: x' and c' shifted by the centres' mean, K steps of 32 coordinates through two cp.async
// stages, the running (best, second, index), the queue and the resolve pass over it) with g = ||c'||^2 - 2 x'.c' as
// m16n8k8 mma.sync products in error-compensated TF32: x' = x_hi + x_lo split as its A fragments are loaded, -2c'
// split once a loop by prep<true> into B fragments in staging order; a k8 step adds x_lo m_hi, x_hi m_lo, x_hi m_hi
// (smallest first) onto accumulators started at ||c'||^2, the order of kmeans_tiled_tc.cuh's screen, so its rigorous
// bound tc_bound holds (the shift's ~4u B'^2 a pair is inside its slack: 96 u B'^2 against the 59 its argument
// needs, with no packed slot here).
//
// WideTile's 128 points x 128 centres a block: 8 warps as 4 (points) x 2 (centres), a warp 32 points x 64 centres as
// 2 x 8 m16n8 tiles, 64 accumulators a thread; lane (g, t) = (lane / 4, lane % 4) holds points g, g + 8 of each m16
// tile and centres 2t, 2t + 1 of each n8 tile. A thread's four points (slot a = 2 mi + h: point 16 mi + 8 h + g of
// its warp's 32) keep their running triples in shared memory; after the last centre tile a quad merges them by
// shuffles and the two warp columns through shared memory. A loads from x'^T: lanes (g, t) read words t kXStride +
// g (kXStride % 32 == 4: at most 2-way conflicts); B loads: one LDS.128 a lane per n8 tile and k8 step, conflict-free.
#pragma once

#include <cstdint>

#include "../common/async_copy.cuh"
#include "../common/tf32.cuh"
#include "kmeans_device.cuh"
#include "kmeans_tiled_deep_parts.cuh"
#include "kmeans_tiled_tc.cuh"  // tc::tc_bound

namespace gpuopt::kmeans::tiled::deep {
namespace {

constexpr int kTcN8 = WideTile::kCentres / 8;  // n8 tiles of a centre tile
constexpr int kTcS8 = kSlab / 8;                // k8 steps of a K step
constexpr int kTcStageB = kTcS8 * kTcN8 * 32;   // float4 B fragments a stage (hi and lo)
// x'^T stages as the FP32 tile, the B fragments' stages, and a thread's four running triples [4][threads] x 3 (after
// a tile: the two warp columns' merged triples [2][kPoints] x 3; in the resolve pass: GatherTile).
constexpr std::size_t kTcShared =
    (static_cast<std::size_t>(kStages) * kSlab * WideTile::kXStride + 4 * kStages * kTcStageB + 3 * 4 * kDeepThreads) *
    sizeof(float);
static_assert(5 * 2 * WideTile::kPoints <= 3 * 4 * kDeepThreads && kTcStageB % kDeepThreads == 0,
              "the merged triples fit the running triples' space; the B copies divide among the threads");

// Pairs (the assign pass, Gather false): a point's Top3 instead of its running triple, merged over the quad after
// every centre tile and kept in the registers of the lane whose slot it is (the running arrays' shared memory would
// not fit two blocks an SM with five values), so a point whose third-nearest is farther than the bound from its
// best is settled by two Liao distances instead of the queue (liao_pair).
template <bool Gather, bool Pairs = false>
__global__ void __launch_bounds__(kDeepThreads, 2) assign_tc(const float* __restrict__ x, std::int64_t n, int d, int k,
                                                             int kc, int dp, const float4* __restrict__ ct4,
                                                             const float* __restrict__ cn,
                                                             const float* __restrict__ shift,
                                                             const float* __restrict__ centres,
                                                             Header* __restrict__ hdr,
                                                             std::int64_t* __restrict__ queue_i,
                                                             float2* __restrict__ queue_b,
                                                             std::int32_t* __restrict__ membership,
                                                             LoopState* __restrict__ state) {
    constexpr int kPoints = WideTile::kPoints, kCentres = WideTile::kCentres, kXStride = WideTile::kXStride;
    static_assert(!(Gather && Pairs), "Pairs: the assign pass");
    if (state->done) return;
    extern __shared__ __align__(16) float dsm[];
    float* const xs = dsm;                                                  // [kStages][kSlab][kXStride]
    float4* const bs = reinterpret_cast<float4*>(dsm + kStages * kSlab * kXStride);  // [kStages][kTcS8][kTcN8][32]
    float* const best_s = reinterpret_cast<float*>(bs + kStages * kTcStageB);        // [4][threads]
    float* const second_s = best_s + 4 * kDeepThreads;
    int* const index_s = reinterpret_cast<int*>(second_s + 4 * kDeepThreads);
    float* const mbest_s = best_s;                                          // [2][kPoints], after a tile
    float* const msecond_s = best_s + 2 * kPoints;
    int* const mindex_s = reinterpret_cast<int*>(best_s + 4 * kPoints);
    float* const mthird_s = best_s + 6 * kPoints;                          // (Pairs) [2][kPoints]
    int* const mindex2_s = reinterpret_cast<int*>(best_s + 8 * kPoints);  // (Pairs) [2][kPoints]
    const GatherTile gt = GatherTile::at<kPoints>(best_s);  // (Gather)
    __shared__ float bound_s[kPoints];  // ||x'_p||^2 over the first centre tile's steps, then the point's gap bound
    __shared__ int changed_s;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wr = warp % 4, wc = warp / 4, g = lane / 4, t = lane % 4;
    if (tid == 0) changed_s = 0;  // seen after the first step's barrier
    const XCopy xc(tid);
    const int slabs = dp / kSlab, steps = slabs * (kc / kCentres);
    const std::int64_t count = Gather ? static_cast<std::int64_t>(hdr->queued) : n;  // (the queue: after assign)
    const std::int64_t tiles = (count + kPoints - 1) / kPoints;
    for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const std::int64_t p0 = tile * kPoints;
        const int len = static_cast<int>(count - p0 < kPoints ? count - p0 : kPoints);
        if constexpr (Gather) gt.begin(queue_i, queue_b, p0, len);
        // Step s: centre tile s / slabs, coordinates (s % slabs) * kSlab .. + kSlab, into stage `stage`; its B
        // fragments (k8 steps j0 / 8 .. + 3 of n8 tiles kTcN8 ci .. + kTcN8 - 1) are kTcS8 contiguous runs of ct4.
        auto issue = [&](int s, int stage) {
            const int j0 = s % slabs * kSlab, ci = s / slabs;
            xc.issue<kPoints, kXStride, Gather>(xs + stage * kSlab * kXStride, x, d, p0, len, j0, gt.rows);
            float4* bd = bs + stage * kTcStageB + tid;
            const float4* src = ct4 + (static_cast<std::int64_t>(j0 / 8) * (kc / 8) + ci * kTcN8) * 32 + tid;
            static_assert(kTcN8 * 32 == 2 * kDeepThreads, "a k8 step's B fragments: two 16-byte copies a thread");
#pragma unroll 1
            for (int s8 = 0; s8 < kTcS8; ++s8, bd += kTcN8 * 32, src += static_cast<std::int64_t>(kc / 8) * 32) {
                dev::cp_async_16(reinterpret_cast<float*>(bd), reinterpret_cast<const float*>(src), 16);
                dev::cp_async_16(reinterpret_cast<float*>(bd + kDeepThreads),
                                 reinterpret_cast<const float*>(src + kDeepThreads), 16);
            }
            dev::cp_async_commit();
        };
        Top3 run;  // (Pairs) slot t's point over the centre tiles so far
        if constexpr (!Gather && !Pairs) {
#pragma unroll
            for (int a = 0; a < 4; ++a)
                best_s[a * kDeepThreads + tid] = second_s[a * kDeepThreads + tid] = __int_as_float(0x7f800000),
                index_s[a * kDeepThreads + tid] = 0;
        }
        float acc[2][8][4];
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
            const int cw = ci * kCentres + wc * (kCentres / 2);  // the warp's first centre of this centre tile
            if (sj == 0) {
#pragma unroll
                for (int ni = 0; ni < 8; ++ni) {
                    const float2 nv = *reinterpret_cast<const float2*>(cn + cw + 8 * ni + 2 * t);
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi)
                        acc[mi][ni][0] = nv.x, acc[mi][ni][1] = nv.y, acc[mi][ni][2] = nv.x, acc[mi][ni][3] = nv.y;
                }
            }
            const float* xa = xs + stage * kSlab * kXStride;
            const float4* ba = bs + stage * kTcStageB + wc * 8 * 32 + lane;
#pragma unroll 1
            for (int s8 = 0; s8 < kTcS8; ++s8) {  // (unrolled, the next steps' loads hoisted and spilled)
                std::uint32_t ah[2][4], al[2][4];
#pragma unroll
                for (int mi = 0; mi < 2; ++mi) {  // rows g, g + 8 and coordinates t, t + 4 of the m16 tile mi
                    const float* x0 = xa + (8 * s8 + t) * kXStride + wr * 32 + 16 * mi + g;
                    const float v[4] = {x0[0], x0[8], x0[4 * kXStride], x0[4 * kXStride + 8]};
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const tf32::Split p = tf32::split(v[i]);
                        ah[mi][i] = p.hi, al[mi][i] = p.lo;
                    }
                }
#pragma unroll
                for (int ni = 0; ni < 8; ++ni) {
                    const float4 b = ba[(s8 * kTcN8 + ni) * 32];
                    const std::uint32_t bh[2] = {__float_as_uint(b.x), __float_as_uint(b.y)};
                    const std::uint32_t bl[2] = {__float_as_uint(b.z), __float_as_uint(b.w)};
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi) {
                        tf32::mma_m16n8k8(acc[mi][ni], al[mi], bh);
                        tf32::mma_m16n8k8(acc[mi][ni], ah[mi], bl);
                        tf32::mma_m16n8k8(acc[mi][ni], ah[mi], bh);
                    }
                }
            }
            if (!Gather && ci == 0 && tid < kPoints) {  // the pad coordinates are 0: fma(0, 0, s) == s
                float xn2 = sj == 0 ? 0.f : bound_s[tid];  // (step 0: after its barrier, the last tile's tests read it)
#pragma unroll 8
                for (int j = 0; j < kSlab; ++j) xn2 = __fmaf_rn(xa[j * kXStride + tid], xa[j * kXStride + tid], xn2);
                bound_s[tid] = xn2;
            }
            if (sj == slabs - 1) {
                // acc[mi][ni][2h + e]: point wr*32 + 16 mi + 8 h + g (slot a = 2 mi + h), centre cw + 8 ni + 2t + e.
                if constexpr (Gather) {
                    unsigned long long mask = 0;
#pragma unroll
                    for (int a = 0; a < 4; ++a) {
                        const int p = wr * 32 + 16 * (a / 2) + 8 * (a % 2) + g;
                        const float2 q = p < len ? gt.qb[p] : make_float2(0.f, 0.f);
#pragma unroll
                        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
                            for (int e = 0; e < 2; ++e) {
                                const int c = cw + 8 * ni + 2 * t + e;
                                if (p < len && c < k && !(__fsub_rn(acc[a / 2][ni][2 * (a % 2) + e], q.x) > q.y))
                                    mask |= 1ull << (16 * a + 2 * ni + e);
                            }
                    }
                    while (mask) {
                        const int bit = __ffsll(static_cast<long long>(mask)) - 1;
                        mask &= mask - 1;
                        const int a = bit / 16, ni = bit % 16 / 2, e = bit % 2;
                        gt.offer(x, d, centres, wr * 32 + 16 * (a / 2) + 8 * (a % 2) + g, cw + 8 * ni + 2 * t + e);
                    }
                } else if constexpr (Pairs) {
#pragma unroll
                    for (int a = 0; a < 4; ++a) {
                        Top3 top;
#pragma unroll
                        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
                            for (int e = 0; e < 2; ++e) top.add(acc[a / 2][ni][2 * (a % 2) + e], cw + 8 * ni + 2 * t + e);
#pragma unroll
                        for (int off = 1; off < 4; off *= 2) top.merge(top.shfl_xor(off));
                        if (t == a) run.merge(top);  // (earlier centre tiles: lower indices)
                    }
                } else {
#pragma unroll
                    for (int a = 0; a < 4; ++a) {
                        float best = best_s[a * kDeepThreads + tid], second = second_s[a * kDeepThreads + tid];
                        int bi = index_s[a * kDeepThreads + tid];
#pragma unroll
                        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
                            for (int e = 0; e < 2; ++e)  // the thread's centres in increasing index
                                add_best(best, bi, second, acc[a / 2][ni][2 * (a % 2) + e], cw + 8 * ni + 2 * t + e);
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
        // A quad's four lanes hold the same points (centres 2t, 2t + 1 of each n8 tile): the butterfly leaves each
        // point's merged triple in all four; lane t keeps slot t's, point wr*32 + 16 (t / 2) + 8 (t % 2) + g.
        float b = run.best, s2 = run.second;  // (Pairs: merged already)
        int m = run.index;
        if constexpr (!Pairs) {
#pragma unroll
            for (int a = 0; a < 4; ++a) {
                float best = best_s[a * kDeepThreads + tid], second = second_s[a * kDeepThreads + tid];
                int bi = index_s[a * kDeepThreads + tid];
#pragma unroll
                for (int off = 1; off < 4; off *= 2)
                    merge_best(best, bi, second, __shfl_xor_sync(0xffffffffu, best, off),
                               __shfl_xor_sync(0xffffffffu, bi, off), __shfl_xor_sync(0xffffffffu, second, off));
                if (t == a) b = best, s2 = second, m = bi;
            }
        }
        if (tid < kPoints)
            bound_s[tid] = tc::tc_bound(d, dp / 8, __fadd_ru(__fsqrt_ru(bound_s[tid]), __int_as_float(hdr->cmax_bits)));
        __syncthreads();  // every running triple is read: their space takes the warp columns' merged triples
        const int p = wr * 32 + 16 * (t / 2) + 8 * (t % 2) + g;
        mbest_s[wc * kPoints + p] = b, msecond_s[wc * kPoints + p] = s2, mindex_s[wc * kPoints + p] = m;
        if constexpr (Pairs) mthird_s[wc * kPoints + p] = run.third, mindex2_s[wc * kPoints + p] = run.index2;
        __syncthreads();
        if (tid < len) {  // point tid: its two warp columns' triples (disjoint centres), then the gap test
            float best = mbest_s[tid], second = msecond_s[tid], third = 0.f;
            int bi = mindex_s[tid], bi2 = 0;
            if constexpr (Pairs) {
                Top3 top, other;  // column 0's centres are the lower of each centre tile, not of all: merge by index
                top.best = best, top.second = second, top.third = mthird_s[tid], top.index = bi;
                top.index2 = mindex2_s[tid];
                other.best = mbest_s[kPoints + tid], other.second = msecond_s[kPoints + tid];
                other.third = mthird_s[kPoints + tid], other.index = mindex_s[kPoints + tid];
                other.index2 = mindex2_s[kPoints + tid];
                top.merge(other);
                best = top.best, second = top.second, third = top.third, bi = top.index, bi2 = top.index2;
            } else {
                merge_best(best, bi, second, mbest_s[kPoints + tid], mindex_s[kPoints + tid], msecond_s[kPoints + tid]);
            }
            int settled = -1;
            if (__fsub_rn(second, best) > bound_s[tid]) settled = bi;  // (NaN compares false: Liao's path)
            else if (Pairs && __fsub_rn(third, best) > bound_s[tid])
                settled = liao_pair(x, d, centres, p0 + tid, bi, bi2);
            if (settled >= 0) {
                if (membership[p0 + tid] != settled) atomicAdd(&changed_s, 1);
                membership[p0 + tid] = settled;
            } else {
                const unsigned q = atomicAdd(&hdr->queued, 1u);  // < n: each point at most once a loop
                queue_i[q] = p0 + tid, queue_b[q] = make_float2(best, bound_s[tid]);
            }
        }
        __syncthreads();  // the merged triples are read before the next tile's running triples take their space
    }
    __syncthreads();
    add_changed<kDeepThreads>(tid == 0 ? changed_s : 0, state);
}

}  // namespace
}  // namespace gpuopt::kmeans::tiled::deep
