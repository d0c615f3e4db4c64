// The Winograd kernel's per-point products on the tensor cores in 3xTF32 (conv2d_winograd.cu, Shape<..., Tc>):
// per point and 8-channel chunk, M[32 maps][16 tiles] += U[32 maps][8 ch] x V[8 ch][16 tiles], i.e. 2 x 2
// m16n8k8 tiles. Both operands sit in shared memory already in fragment order, so a lane reads its A fragments
// (two m16 tiles) and its B fragments (two n8 tiles) with three 16-byte loads, conflict-free; each float is split
// hi/lo as it is loaded (split4: 3 instructions) and the three products (lo*hi, hi*lo, hi*hi) accumulate in the
// tensor cores across the chunks (rounding toward zero each mma): for C = 32 (MNIST conv2) that is the 32-deep
// flush of conv2d tf32x3; a zeroed partial fragment per chunk plus FP32 adds would round to nearest but costs 16
// adds a point and spills at 128 registers. The tests hold F(4,5)'s float64 bound at C = 32 and C = 128.
#pragma once

#include <cstdint>

#include "../common/tf32.cuh"  // mma_m16n8k8

namespace gpuopt::conv::winograd_tc {

constexpr int kMaps = 32, kTiles = 16, kChannels = 8;  // the one block shape the fragment layouts assume
constexpr int kUFloats = kMaps * kChannels, kVFloats = kChannels * kTiles;  // per point and chunk

// A = U (rows: maps, columns: channels), fragments [m16 tile][lane][4]: lane (g, t) = (row % 8, column % 4) holds
// (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4) of its tile (PTX m16n8k8 .tf32 A layout).
__host__ __device__ constexpr int u_index(int map, int c) {
    return (map / 16) * 128 + ((map % 8) * 4 + c % 4) * 4 + (map % 16) / 8 + 2 * (c / 4);
}

// B = V (rows: channels, columns: tiles), fragments [lane][n8 tile][2]: lane (g, t) = (column % 8, row % 4) holds
// rows t and t + 4 of column g.
__host__ __device__ constexpr int v_index(int c, int tile) {
    return ((tile % 8) * 4 + c % 4) * 4 + (tile / 8) * 2 + c / 4;
}

// v_index with the lane slot XOR-ed by (tile % 8) >> 1: the resident kernel's row pass (a warp stores 16 tiles x
// channels c, c + 4) then hits all 32 banks (plain v_index: 8, a 4-way conflict); lane l reads its B fragments
// at v_slot(l) * 4, still one conflict-free LDS.128 (the XOR stays inside aligned groups of 4 slots).
__host__ __device__ constexpr int v_index_swizzled(int c, int tile) {
    return ((((tile % 8) * 4 + c % 4) ^ ((tile % 8) >> 1)) * 4) + (tile / 8) * 2 + c / 4;
}
__host__ __device__ constexpr int v_slot(int lane) { return lane ^ ((lane >> 3) & 3); }

// x = hi + lo: hi is x rounded to TF32 (half away from zero, as cvt.rna.tf32.f32) in two integer operations, lo
// = x - hi (exact in FP32) passed as it is: the tensor cores read a TF32 operand's top 19 bits only, so lo is
// truncated to TF32 there (error <= 2^-11 |lo| <= 2^-23 |x|). Three instructions; with tf32::split's two cvt.rna
// the products issued ~7 a float (ncu on the H200: 370 M warp instructions against 397 M for FFMA).
__device__ __forceinline__ void split4(const float4 v, std::uint32_t (&hi)[4], std::uint32_t (&lo)[4]) {
    const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        hi[i] = (__float_as_uint(f[i]) + 0x1000u) & 0xffffe000u;
        lo[i] = __float_as_uint(f[i] - __uint_as_float(hi[i]));
    }
}

// One chunk of NP points (the warp's): us, vs at the warp's first point, point strides kUFloats, kVFloats.
// acc[p][mi][ni]: the C fragment of maps 16 mi.., tiles 8 ni.. of point p.
template <int NP>
__device__ __forceinline__ void products(float (&acc)[NP][2][2][4], const float* us, const float* vs, int lane) {
#pragma unroll
    for (int p = 0; p < NP; ++p) {
        std::uint32_t bh[2][2], bl[2][2];
        {
            std::uint32_t h[4], l[4];
            split4(*reinterpret_cast<const float4*>(vs + p * kVFloats + lane * 4), h, l);
            bh[0][0] = h[0], bh[0][1] = h[1], bh[1][0] = h[2], bh[1][1] = h[3];
            bl[0][0] = l[0], bl[0][1] = l[1], bl[1][0] = l[2], bl[1][1] = l[3];
        }
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {  // one m16 tile's A fragments live at a time (registers: 128 at 512 threads)
            std::uint32_t ah[4], al[4];
            split4(*reinterpret_cast<const float4*>(us + p * kUFloats + mi * 128 + lane * 4), ah, al);
#pragma unroll
            for (int ni = 0; ni < 2; ++ni) {
                tf32::mma_m16n8k8(acc[p][mi][ni], al, bh[ni]);  // smallest terms first
                tf32::mma_m16n8k8(acc[p][mi][ni], ah, bl[ni]);
                tf32::mma_m16n8k8(acc[p][mi][ni], ah, bh[ni]);
            }
        }
    }
}

}  // namespace gpuopt::conv::winograd_tc
