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

#include "../common/tf32.cuh"  // split (cvt.rna hi, cvt.rna lo), mma_m16n8k8

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
        const tf32::Split a = tf32::split(m0), b = tf32::split(m1);
        cs[e] = make_float4(__uint_as_float(a.hi), __uint_as_float(b.hi), __uint_as_float(a.lo), __uint_as_float(b.lo));
    }
}

// A fragments (hi, lo) of points row0 .. row0 + 15 and k8 step s from the tile (coordinate j of point p at p PS +
// j JS; x^T: JS % 32 == 4, rows: PS / 4 odd, so lane (g, t) reads bank g PS + t JS + const: no conflict either way).
template <int DP, int PS, int JS>
__device__ __forceinline__ void load_a(const float* xs, int row0, int s, int lane, std::uint32_t (&hi)[4],
                                       std::uint32_t (&lo)[4]) {
    const int g = lane / 4, j = 8 * s + lane % 4;
    const float* x0 = xs + (row0 + g) * PS + j * JS;
    const float v[4] = {x0[0], x0[8 * PS], j + 4 < DP ? x0[4 * JS] : 0.f, j + 4 < DP ? x0[8 * PS + 4 * JS] : 0.f};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const tf32::Split p = tf32::split(v[i]);
        hi[i] = p.hi, lo[i] = p.lo;
    }
}

// The warp's A fragments [k8 step][m16 tile][4], hi and lo: split once a tile and kept in registers where they fit
// (DP <= 16: 32 registers), else one k8 step's, loaded and split in every pass.
__host__ __device__ constexpr bool hoists(int dp) { return steps(dp) <= 2; }
template <int DP>
using AFrags = std::uint32_t[hoists(DP) ? steps(DP) : 1][2][4];

// The warp's points warp * 32 + 16 mi + ..: all k8 steps (hoists(DP)).
template <int DP, int PS, int JS>
__device__ __forceinline__ void load_tile_a(const float* xs, int lane, AFrags<DP>& ah, AFrags<DP>& al) {
#pragma unroll
    for (int s = 0; s < steps(DP); ++s)
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
            load_a<DP, PS, JS>(xs, threadIdx.x / 32 * 32 + 16 * mi, s, lane, ah[s][mi], al[s][mi]);
}

// d = a b + c: an accumulator's first mma, started at the norms of its two centres (c = a quad).
__device__ __forceinline__ void mma_c(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], float4 c) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
}

// One pass: centres c0 .. c0 + 31 of the staged block (cs: its B fragments; cn: its norms; cnq: them as quads; cb0:
// its first centre) against the warp's 32 points, then the running (best, second, index) of the lane's four rows
// (a = 2 mi + h: point 16 mi + 8 h + g of the warp).
// The epilogue a pair is LOP3 + 3 FMNMX (it was FMNMX x 3, FSETP, SEL and the index's IADD: 251 -> 209 instructions a
// pass with the quads): g's three low mantissa bits are replaced by the centre's slot in the lane's pass (n8 tile ni,
// column e: 2 ni + e), best = min and second = min(second, max(best, g)) kept on these packed values alone, and once a
// pass a point's best records the pass's first centre where it improved; the slot in best's low bits completes the
// index (unpack_index). |pack(g) - g| <= 7 ulp(g) <= 14 u |g|, which tc_bound covers (notes/kmeans.md, round 8 (b)):
// a point that clears the bound has Liao's nearest centre at the packed minimum; ties or packed values within a few
// ulps (of two lanes, say) leave a gap under the bound: Liao's path. The pad centres' norms are kPadNorm (finite:
// +inf would pack to a NaN, which fminf would skip in best but not in second's max(best, g)).
constexpr float kPadNorm = 3.4028222e38f;  // 0x7f7ffff8: FLT_MAX with the slot bits clear
// One LOP3 (g & mask) | slot: mask (~7) comes in a register (opaque_mask), the slot as the immediate; with both as
// constants ptxas spends two LOP3s.
__device__ __forceinline__ float pack(float g, int mask, int slot) {
    std::uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(__float_as_uint(g)), "r"(mask), "r"(slot));
    return __uint_as_float(r);
}
// ~7, not provably constant to the compiler (c0 < 2^30 always), formed in the pass: nothing more live across tiles.
__device__ __forceinline__ int opaque_mask(int c0) { return ~7 | (c0 >> 30); }
__device__ __forceinline__ int unpack_index(int pass_first, float best, int lane) {
    const int slot = __float_as_int(best) & 7;
    return pass_first + 2 * (lane % 4) + (slot & 6) * 4 + (slot & 1);
}

template <int DP, bool Quads, int PS, int JS>
__device__ __forceinline__ void pass(const float4* cs, const float* cn, const float4* cnq, int cb0, int c0, const float* xs,
                                     int lane, AFrags<DP>& ah, AFrags<DP>& al, float (&best)[4], float (&second)[4],
                                     int (&bi)[4]) {
    constexpr int S = steps(DP);
    const int t = lane % 4;
    // Four n8 tiles (centres c0 + 8 ni + 2t, + 1 in lane t) for the warp's two m16 tiles, started at ||c||^2.
    // Quads (cnq: the norms of centres 2p, 2p + 1 as (n0, n1, n0, n1), one LDS.128 a C operand): the norms enter as
    // the first mma's C operand (d = a b + c, d apart from c) instead of 32 register moves into the accumulators;
    // the same sums.
    float acc[2][4][4];
    float4 nq[4];
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
        if constexpr (Quads) {
            nq[ni] = cnq[(c0 + 8 * ni) / 2 + t];
        } else {
            const float2 nv = *reinterpret_cast<const float2*>(cn + c0 + 8 * ni + 2 * t);
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
                acc[mi][ni][0] = nv.x, acc[mi][ni][1] = nv.y, acc[mi][ni][2] = nv.x, acc[mi][ni][3] = nv.y;
        }
    }
    const float4* bf = cs + (c0 / 8) * S * 32 + lane;
    // The three products smallest first, product-outer in the source (ptxas interleaves ~4 accumulators' chains
    // either way, register-bound: the SASS of both orders has the same 3,952 instructions).
    auto step = [&](int s, const std::uint32_t (&h)[2][4], const std::uint32_t (&l)[2][4]) {
        std::uint32_t bh[4][2], bl[4][2];
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
            const float4 b = bf[(ni * S + s) * 32];
            bh[ni][0] = __float_as_uint(b.x), bh[ni][1] = __float_as_uint(b.y);
            bl[ni][0] = __float_as_uint(b.z), bl[ni][1] = __float_as_uint(b.w);
        }
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) {
                if (Quads && s == 0) mma_c(acc[mi][ni], l[mi], bh[ni], nq[ni]);
                else tf32::mma_m16n8k8(acc[mi][ni], l[mi], bh[ni]);
            }
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) tf32::mma_m16n8k8(acc[mi][ni], h[mi], bl[ni]);
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) tf32::mma_m16n8k8(acc[mi][ni], h[mi], bh[ni]);
    };
    if constexpr (hoists(DP)) {
#pragma unroll
        for (int s = 0; s < S; ++s) step(s, ah[s], al[s]);
    } else {
#pragma unroll 1
        for (int s = 0; s < S; ++s) {  // fully unrolled, every step's loads are hoisted and spill
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
                load_a<DP, PS, JS>(xs, threadIdx.x / 32 * 32 + 16 * mi, s, lane, ah[0][mi], al[0][mi]);
            step(s, ah[0], al[0]);
        }
    }
    const int mask = opaque_mask(c0);
    float before[4];
#pragma unroll
    for (int a = 0; a < 4; ++a) before[a] = best[a];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float g = pack(acc[a / 2][ni][2 * (a % 2) + e], mask, 2 * ni + e);
                second[a] = fminf(second[a], fmaxf(best[a], g));
                best[a] = fminf(best[a], g);
            }
#pragma unroll
    for (int a = 0; a < 4; ++a)
        if (best[a] < before[a]) bi[a] = cb0 + c0;  // the pass's first centre: unpack_index adds the slot
}

// The gap bound of the 3xTF32 screen, in units u = 2^-24, B = ||x|| + max ||c|| (notes/kmeans.md, rounds 6 (b) and
// 8 (b)). Per centre |g_tc - g| <= (D + 16 DP8 + 13) u B^2: ||c||^2's FMA chain gamma_D; the split (x_lo m_lo dropped,
// the lo parts rounded to TF32) 3.01 * 2^-22 per |x_j m_j|; and, NOT assuming round-to-nearest in the tensor
// core, each mma (c + 8 exact products) off by at most 10 * 2^-22 of its magnitude sum (<= (1 + 2^-9) B^2), for
// 3 DP8 / 8 mma steps; the packed slot (pass) 14.01 u B^2 more. With Liao's gamma_{D+2} B^2 a pair needs
// (4D + 32 DP8 + 59) u B^2; (4D + 32 DP8 + 96) u B^2 covers the rounding of the gap, of B and of this product.
// Underflow (subnormal lo parts or products flushed): 2^-122 DP8 (B + 1). 4B^2 overflows (bound +inf: Liao's path) before any product or g can.
__device__ inline float tc_bound(int d, int dp8, float b) {
    const float b4 = (2.f * b) * (2.f * b);
    return static_cast<float>(d + 8 * dp8 + 24) * (5.9604645e-08f * b4) + 1.9e-37f * static_cast<float>(dp8) * (b + 1.f);
}

}  // namespace
}  // namespace gpuopt::kmeans::tiled::tc
