// device_tiled's screen on the tensor cores (products "tf32x3"): g = ||c||^2 - 2 x.c as an m16n8k8 mma.sync
// product in error-compensated TF32 (x = x_hi + x_lo, -2c = m_hi + m_lo, three products x_hi m_hi + x_hi m_lo +
// x_lo m_hi, FP32 accumulation), with its own rigorous rounding bound (tc_bound) for the near-tie test, so the
// memberships stay Liao's. Included by kmeans_tiled.cu (assign_tiled<DP, Blocked, Tc>), which keeps the tile
// staging, the merge of a point's four lanes, the gap test and the queue of Liao's path.
//
// A warp owns 32 points of the 256-point tile (two m16 tiles: A = the points, read from x^T with conflict-free
// 4-byte loads and split once a tile) and runs every centre in passes of 32 (four n8 tiles: B = -2c, staged once
// a loop, split hi/lo, in fragment order: one conflict-free LDS.128 a lane per n8 tile and k8 step), the
// accumulators started at ||c||^2. Lane (g, t) = (lane / 4, lane % 4) holds points g, g + 8 of each m16 tile and
// centres 2t, 2t + 1 of each n8 tile, so a point's (best, second, index) sits in the four lanes of a quad, as in
// the FFMA tile (kCols = 4).
#pragma once

#include <cstdint>

#include "../matmul/tf32.cuh"  // split (cvt.rna hi, cvt.rna lo), mma_m16n8k8

namespace gpuopt::kmeans::tiled::tc {
namespace {

// k8 steps of the padded dimension DP (4 is padded to 8: the fragment's coordinates t + 4 are zero).
__host__ __device__ constexpr int steps(int dp) { return (dp + 7) / 8; }
// Floats of staged -2c per centre: hi and lo of 8 * steps coordinates.
__host__ __device__ constexpr int centre_floats(int dp) { return 16 * steps(dp); }

// -2c of centres cb0 .. cb0 + kb - 1 (kb a multiple of 8) as B fragments: cs[(n8 tile * steps + k8 step) * 32 +
// lane] = (hi(t), hi(t + 4), lo(t), lo(t + 4)) of centre 8 n + g, coordinates 8 s + t (+ 4); zero past k and d.
template <int DP>
__device__ inline void stage_centres(const float* __restrict__ centres, int k, int d, int cb0, int kb, float4* cs) {
    constexpr int S = steps(DP);
    for (int e = threadIdx.x; e < kb / 8 * S * 32; e += blockDim.x) {
        const int lane = e % 32, s = e / 32 % S, c = cb0 + e / (32 * S) * 8 + lane / 4, j = 8 * s + lane % 4;
        const float m0 = c < k && j < d ? -2.f * centres[c * d + j] : 0.f;
        const float m1 = c < k && j + 4 < d ? -2.f * centres[c * d + j + 4] : 0.f;
        const matmul::tf32::Split a = matmul::tf32::split(m0), b = matmul::tf32::split(m1);
        cs[e] = make_float4(__uint_as_float(a.hi), __uint_as_float(b.hi), __uint_as_float(a.lo), __uint_as_float(b.lo));
    }
}

// A fragments (hi, lo) of points row0 .. row0 + 15 and k8 step s from x^T (row stride `stride`, stride % 32 == 4:
// lane (g, t) reads bank 4t + g + const, no conflict).
template <int DP>
__device__ __forceinline__ void load_a(const float* xs, int stride, int row0, int s, int lane, std::uint32_t (&hi)[4],
                                       std::uint32_t (&lo)[4]) {
    const int g = lane / 4, j = 8 * s + lane % 4;
    const float v[4] = {xs[j * stride + row0 + g], xs[j * stride + row0 + g + 8],
                        j + 4 < DP ? xs[(j + 4) * stride + row0 + g] : 0.f,
                        j + 4 < DP ? xs[(j + 4) * stride + row0 + g + 8] : 0.f};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const matmul::tf32::Split p = matmul::tf32::split(v[i]);
        hi[i] = p.hi, lo[i] = p.lo;
    }
}

// The gap bound of the 3xTF32 screen, in units u = 2^-24, B = ||x|| + max ||c|| (notes/kmeans.md, round 6 (b)).
// Per centre |g_tc - g| <= (D + 16 DP8 + 13) u B^2: ||c||^2's FMA chain gamma_D; the split (x_lo m_lo dropped,
// the lo parts rounded to TF32) 3.01 * 2^-22 per |x_j m_j|; and, NOT assuming round-to-nearest in the tensor
// core, each mma (c + 8 exact products) off by at most 10 * 2^-22 of its magnitude sum (<= (1 + 2^-9) B^2), for
// 3 DP8 / 8 mma steps. With Liao's gamma_{D+2} B^2 a pair needs (4D + 32 DP8 + 30) u B^2; (4D + 32 DP8 + 64) u B^2
// covers the rounding of the gap, of B and of this product. Underflow (subnormal lo parts or products flushed):
// 2^-122 DP8 (B + 1). 4B^2 overflows (bound +inf: Liao's path) before any product or g can.
__device__ inline float tc_bound(int d, int dp8, float b) {
    const float b4 = (2.f * b) * (2.f * b);
    return static_cast<float>(d + 8 * dp8 + 16) * (5.9604645e-08f * b4) + 1.9e-37f * static_cast<float>(dp8) * (b + 1.f);
}

}  // namespace
}  // namespace gpuopt::kmeans::tiled::tc
