// The resident-V Winograd kernel (conv2d_winograd.cu picks it for F(4x4, 5x5) with C <= CMax: MNIST conv2,
// the MNIST winograd stage): the chunked kernel's grid.y map blocks each redid the staging and input transform of
// their tiles (half its instructions on MNIST conv2), so here one block owns TB tiles and ALL K maps:
//   1. the input transform once: raw patches chunk by chunk (4-byte cp.async one chunk ahead, double-buffered),
//      column pass, row pass into Vs, which keeps V for every channel (64 points x 32 channels x 16 tiles =
//      128 KB) in mma B-fragment order, lane slots swizzled (winograd_tc::v_index_swizzled: conflict-free stores);
//   2. per 32-map block: warp (row, part) takes the 8 points of one row of the n x n transform (and 32 /
//      kMapSplit of the maps) over all channels, products in 3xTF32 (winograd_tc::split4 + 3 mma), its U
//      fragments read straight from global (L2: U is 512 KB and only this warp uses a point's U in this block,
//      so shared memory would add nothing but a copy) kUAhead points ahead in a register ring;
//   3. the output transform's row pass on the warp's own 8 points in registers (A^T over b: 8 -> 4 per row), so
//      the accumulators go through shared memory at half size (Es[row][j][map][tile], 64 KB over the patch
//      buffers), then per (map, tile) the column pass, bias, activation, store or 2x2 pool (store_tile).
// The mma accumulate across chunks (rounding toward zero per mma: C = 32 is conv2d tf32x3's 32-deep flush).
// Deterministic: fixed order everywhere, no atomics. One block per SM (197 KB of shared memory).
#pragma once

#include <cstdint>

#include "winograd_block.cuh"
#include "winograd_tc.cuh"

namespace gpuopt::conv::winograd {

// TB tiles, every map in 32-map blocks, 8-channel chunks, at most CMax channels (V resident); kMapSplit warps per
// row of points (1: a warp takes both m16 tiles of a map block, 256 threads up to 255 registers; 2: 512 threads,
// half the maps each, at most 128 registers).
template <int M, int R, int TB_, int CMax_, int MapSplit>
struct ResidentShape {
    static constexpr int kM = M, kR = R, kN = M + R - 1, kNN = kN * kN;
    static constexpr int KB = winograd_tc::kMaps, TB = TB_, CB = winograd_tc::kChannels, CMax = CMax_;
    static constexpr int kMapSplit = MapSplit, kMi = KB / 16 / MapSplit;  // m16 tiles a warp
    static constexpr int kThreads = 32 * kN * MapSplit;
    static constexpr int kChunks = CMax / CB;
    static constexpr int kVFloats = kNN * kChunks * winograd_tc::kVFloats;
    // Rs's channel stride = 4 (mod 8) floats: the row pass's warp reads channels c and c + 4 on opposite bank
    // halves.
    static constexpr int kRsC = kNN * TB + 4, kRsFloats = CB * kRsC;
    static constexpr int kEsFloats = kN * M * KB * TB;
    static constexpr int kWorkFloats = 2 * kRsFloats > kEsFloats ? 2 * kRsFloats : kEsFloats;
    static constexpr int kSharedBytes = 4 * (kVFloats + kWorkFloats);
    static constexpr int kUAhead = 4;  // U fragments in flight a warp (points ahead)
    static_assert(TB == winograd_tc::kTiles && CMax % CB == 0 && kN % kUAhead == 0 && kMi >= 1 && CB == 8,
                  "resident shape: 16-tile fragments, 8-channel chunks, 32-map blocks");
};

// Es[row][j][map][tile]: the row-transformed accumulators; the tile index XOR-ed by 8 on odd map pairs, so the C
// fragments' float2 stores (8 maps x 4 tile pairs a warp) and the epilogue's reads (16 tiles x 2 maps) are both
// conflict-free.
template <int M, int KB, int TB>
__device__ __forceinline__ int es_index(int r, int j, int kk, int t) {
    return ((r * M + j) * KB + kk) * TB + (t ^ (((kk >> 1) & 1) << 3));
}

template <typename S>
__global__ void __launch_bounds__(S::kThreads, 1)
    winograd_resident_kernel(const float* __restrict__ x, const float* __restrict__ u,
                             const float* __restrict__ bias, float* __restrict__ y, const WinoParams a) {
    namespace tc = winograd_tc;
    using T = Transforms<S::kM, S::kR>;
    constexpr int n = S::kN, M = S::kM, KB = S::KB, TB = S::TB, CB = S::CB, NC = S::kChunks, MI = S::kMi;
    constexpr int kThreads = S::kThreads, kRsC = S::kRsC, kUA = S::kUAhead;
    extern __shared__ __align__(16) float smem[];
    float* Vs = smem;                // [NN][NC][128]: V of every channel, fragment order
    float* Ws = smem + S::kVFloats;  // 2 x Rs[CB][n][n][TB] while transforming, then Es
    __shared__ TileTable<TB> tt;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int tile0 = blockIdx.x * TB;
    tt.fill(a, tile0, M, tid, kThreads);
    __syncthreads();

    // 1. The input transform, once for all maps.
    const PatchStager<TB, n, kThreads, kRsC> patches(x, tt, a, tid);
    const int nch = a.Cp / CB;
    patches.template issue<CB>(x, 0, a.C, Ws);
    dev::cp_async_commit();
    for (int cc = 0; cc < nch; ++cc) {
        float* rs = Ws + (cc & 1) * S::kRsFloats;
        dev::cp_async_wait<0>();
        __syncthreads();  // chunk cc landed; the row pass of chunk cc - 1 is done with the other buffer
        if (cc + 1 < nch) patches.template issue<CB>(x, (cc + 1) * CB, a.C, Ws + ((cc + 1) & 1) * S::kRsFloats);
        dev::cp_async_commit();
        column_pass<M, S::kR, TB, CB, kRsC>(rs, tid, kThreads);
        __syncthreads();
        // Row pass (x B): a warp takes 16 tiles x channels c, c + 4 of one row (with the swizzle: all 32 banks).
        for (int i = tid; i < CB * n * TB; i += kThreads) {
            const int t = i % TB, c = 4 * ((i / TB) & 1) + (i / (2 * TB)) % 4, r = i / (TB * CB);
            float d[n], o[n];
#pragma unroll
            for (int b = 0; b < n; ++b) d[b] = rs[c * kRsC + (r * n + b) * TB + t];
            T::bt(d, o);
#pragma unroll
            for (int b = 0; b < n; ++b) Vs[((r * n + b) * NC + cc) * tc::kVFloats + tc::v_index_swizzled(c, t)] = o[b];
        }
    }
    __syncthreads();  // Vs complete; Ws is Es from now on
    float* Es = Ws;

    // 2. Map block by map block: warp (row, part) owns points row * n + b, m16 tiles mi0.. of the block.
    const int row = warp / S::kMapSplit, mi0 = (warp % S::kMapSplit) * MI;
    const int nkb = a.Kp / KB;
    const i64 upt = static_cast<i64>(nch) * nkb * tc::kUFloats;  // U floats a point
    const float* urow = u + row * n * upt + mi0 * 128 + lane * 4;
    auto uload = [&](int b, int cc, int kb, float4 (&dst)[MI]) {
        const float* p = urow + b * upt + (static_cast<i64>(cc) * nkb + kb) * tc::kUFloats;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) dst[mi] = __ldg(reinterpret_cast<const float4*>(p + mi * 128));
    };
    float4 uq[kUA][MI];  // ring: slot b % kUA holds point b's fragments of the current step
#pragma unroll
    for (int b = 0; b < kUA; ++b) uload(b, 0, 0, uq[b]);
    const float* vrow = Vs + row * n * NC * tc::kVFloats + tc::v_slot(lane) * 4;
    const int g = lane / 4, t2 = 2 * (lane % 4);
    for (int kb = 0; kb < nkb; ++kb) {
        float acc[n][MI][2][4];
#pragma unroll
        for (int b = 0; b < n; ++b)
#pragma unroll
            for (int i = 0; i < MI * 8; ++i) acc[b][i / 8][(i / 4) % 2][i % 4] = 0.0f;
        for (int cc = 0; cc < nch; ++cc) {
            int ncc = cc + 1, nkb_next = kb;  // the next step, for the ring's refills
            if (ncc == nch) ncc = 0, ++nkb_next;
            if (nkb_next == nkb) ncc = cc, nkb_next = kb;  // past the last step: reload this one (never used)
#pragma unroll
            for (int b = 0; b < n; ++b) {
                float4 cur[MI];
#pragma unroll
                for (int mi = 0; mi < MI; ++mi) cur[mi] = uq[b % kUA][mi];
                if (b + kUA < n) uload(b + kUA, cc, kb, uq[b % kUA]);
                else uload(b + kUA - n, ncc, nkb_next, uq[b % kUA]);
                std::uint32_t bh[2][2], bl[2][2];
                {
                    std::uint32_t h[4], l[4];
                    tc::split4(*reinterpret_cast<const float4*>(vrow + (b * NC + cc) * tc::kVFloats), h, l);
                    bh[0][0] = h[0], bh[0][1] = h[1], bh[1][0] = h[2], bh[1][1] = h[3];
                    bl[0][0] = l[0], bl[0][1] = l[1], bl[1][0] = l[2], bl[1][1] = l[3];
                }
#pragma unroll
                for (int mi = 0; mi < MI; ++mi) {
                    std::uint32_t ah[4], al[4];
                    tc::split4(cur[mi], ah, al);
#pragma unroll
                    for (int ni = 0; ni < 2; ++ni) {
                        tf32::mma_m16n8k8(acc[b][mi][ni], al, bh[ni]);  // smallest terms first
                        tf32::mma_m16n8k8(acc[b][mi][ni], ah, bl[ni]);
                        tf32::mma_m16n8k8(acc[b][mi][ni], ah, bh[ni]);
                    }
                }
            }
        }
        // 3. The output transform's row pass in registers (C fragment (g, t2): maps g, g + 8 x tiles t2, t2 + 1).
        __syncthreads();  // the previous map block's epilogue is done with Es
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < 2; ++ni)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    float c0[n], c1[n], o0[M], o1[M];
#pragma unroll
                    for (int b = 0; b < n; ++b) c0[b] = acc[b][mi][ni][2 * h], c1[b] = acc[b][mi][ni][2 * h + 1];
                    T::at(c0, o0);
                    T::at(c1, o1);
                    const int kk = 16 * (mi0 + mi) + g + 8 * h, t = 8 * ni + t2;
#pragma unroll
                    for (int j = 0; j < M; ++j)
                        *reinterpret_cast<float2*>(Es + es_index<M, KB, TB>(row, j, kk, t)) = make_float2(o0[j], o1[j]);
                }
        __syncthreads();
        // Column pass, bias, activation, store: whole (map, tile) pairs, tile fastest.
        for (int pair = tid; pair < KB * TB; pair += kThreads) {
            const int t = pair % TB, kk = pair / TB, k = kb * KB + kk;
            if (k >= a.K || tile0 + t >= a.tiles) continue;
            float yv[M][M];
#pragma unroll
            for (int j = 0; j < M; ++j) {
                float col[n], o[M];
#pragma unroll
                for (int r = 0; r < n; ++r) col[r] = Es[es_index<M, KB, TB>(r, j, kk, t)];
                T::at(col, o);
#pragma unroll
                for (int i = 0; i < M; ++i) yv[i][j] = o[i];
            }
            store_tile<M>(yv, bias ? bias[k] : 0.0f, k, tt.img[t], (tt.row0[t] + a.ph) / M, (tt.col0[t] + a.pw) / M,
                          a, y);
        }
    }
}

}  // namespace gpuopt::conv::winograd
