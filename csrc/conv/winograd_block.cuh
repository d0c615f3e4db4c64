// Pieces both fused Winograd kernels share (conv2d_winograd.cu's chunked kernel, winograd_resident.cuh's
// resident-V kernel): the launch parameters, the block's tile table, the raw-patch staging, the column pass
// and the store of a finished m x m tile (bias, activation, then the tile itself or its 2x2 pools).
#pragma once

#include <climits>
#include <cstdint>

#include "../common/activation.hpp"
#include "../common/async_copy.cuh"
#include "conv2d_cuda.hpp"
#include "winograd_transforms.cuh"

namespace gpuopt::conv::winograd {

using i64 = std::int64_t;

struct WinoParams {
    int C, H, W, K, ph, pw, P, Q;
    int TQ, TPQ, tiles;  // tiles per row, per image, in all
    int Cp, Kp;          // padded channels (multiple of CB) and maps (multiple of KB) of U
    Activation act;
    WinogradPool pool;
};

// A block's TB consecutive tiles (flattened over images): x offset of the tile's image, input row and column of
// its patch corner (row0 INT_MIN: no tile), image. Filled once, so the loops and the epilogue divide nothing.
template <int TB>
struct TileTable {
    i64 base[TB];
    int row0[TB], col0[TB], img[TB];

    __device__ void fill(const WinoParams& a, int tile0, int m, int tid, int threads) {
        for (int t = tid; t < TB; t += threads) {
            const int g = tile0 + t;
            if (g < a.tiles) {
                const int im = g / a.TPQ, rem = g - im * a.TPQ;
                const int ty = rem / a.TQ, tx = rem - ty * a.TQ;
                base[t] = static_cast<i64>(im) * a.C * a.H * a.W;
                img[t] = im;
                row0[t] = ty * m - a.ph;
                col0[t] = tx * m - a.pw;
            } else {
                base[t] = 0, img[t] = 0, row0[t] = INT_MIN, col0[t] = 0;
            }
        }
    }
};

// Raw n x n patches of CB channels into Rs[c][row][col][tile] (channel stride RsC), 4-byte cp.async zero-filled
// outside the image, past C and for missing tiles. Thread tid always copies tile tid % TB, patch column
// (tid / TB) % n and rows tid / (TB n) + kRowStep q, so its source pointer and in-image bits are computed once per
// block; a chunk adds only a channel offset and the channel bound.
template <int TB, int N, int Threads, int RsC>
struct PatchStager {
    static constexpr int kRowStep = Threads / (TB * N), kRows = N / kRowStep;
    static_assert(Threads % (TB * N) == 0 && kRowStep >= 1 && N % kRowStep == 0, "patch staging map");
    const float* xt;  // x at (tile's image, channel 0, row row0 + sr0, column col0 + sj); x itself when outside
    unsigned okmask;  // bit q: row sr0 + kRowStep q and column sj lie inside the image
    i64 hw, rowstep;
    int dst;  // offset in Rs

    __device__ PatchStager(const float* x, const TileTable<TB>& tt, const WinoParams& a, int tid) {
        const int st = tid % TB, sj = (tid / TB) % N, sr0 = tid / (TB * N);
        const int row0 = tt.row0[st], col = tt.col0[st] + sj;
        const bool colok = row0 != INT_MIN && col >= 0 && col < a.W;
        okmask = 0;
#pragma unroll
        for (int q = 0; q < kRows; ++q) {
            const int row = row0 + sr0 + kRowStep * q;
            okmask |= (colok && row >= 0 && row < a.H) ? 1u << q : 0u;
        }
        xt = colok ? x + tt.base[st] + static_cast<i64>(row0 + sr0) * a.W + col : x;
        hw = static_cast<i64>(a.H) * a.W;
        rowstep = static_cast<i64>(kRowStep) * a.W;
        dst = (sr0 * N + sj) * TB + st;
    }

    template <int CB>
    __device__ __forceinline__ void issue(const float* x, int c0, int C, float* rs) const {
        const int cl = C - c0;  // channels of this chunk that exist
#pragma unroll
        for (int c = 0; c < CB; ++c) {
            const float* xc = xt + (c0 + c) * hw;
#pragma unroll
            for (int q = 0; q < kRows; ++q) {
                const bool ok = ((okmask >> q) & 1u) && c < cl;
                dev::cp_async_4(rs + dst + c * RsC + kRowStep * q * N * TB, ok ? xc + q * rowstep : x,
                                        ok ? 4 : 0);
            }
        }
    }
};

// Column pass (B^T on each column), in place: item (c, col, tile), tile fastest (conflict-free).
template <int M, int R, int TB, int CB, int RsC>
__device__ __forceinline__ void column_pass(float* rs, int tid, int threads) {
    using T = Transforms<M, R>;
    constexpr int n = T::kN;
    for (int i = tid; i < CB * n * TB; i += threads) {
        const int t = i % TB, j = (i / TB) % n, c = i / (TB * n);
        float d[n], o[n];
#pragma unroll
        for (int r = 0; r < n; ++r) d[r] = rs[c * RsC + (r * n + j) * TB + t];
        T::bt(d, o);
#pragma unroll
        for (int r = 0; r < n; ++r) rs[c * RsC + (r * n + j) * TB + t] = o[r];
    }
}

// Tile (img, ty, tx) of map k after the output transform: bias, activation, then the m x m outputs with the
// ragged edge masked, or their 2x2 pools (m even: windows never cross tiles; a trailing odd row/column of the
// convolution is dropped, as pool2d does).
template <int M>
__device__ __forceinline__ void store_tile(float (&yv)[M][M], float bk, int k, int img, int ty, int tx,
                                           const WinoParams& a, float* y) {
#pragma unroll
    for (int i = 0; i < M; ++i)
#pragma unroll
        for (int j = 0; j < M; ++j) yv[i][j] = apply_activation(yv[i][j] + bk, a.act);
    if (a.pool == WinogradPool::None) {
        float* yo = y + (static_cast<i64>(img) * a.K + k) * a.P * a.Q;
#pragma unroll
        for (int i = 0; i < M; ++i) {
            const int p = ty * M + i;
#pragma unroll
            for (int j = 0; j < M; ++j) {
                const int q = tx * M + j;
                if (p < a.P && q < a.Q) yo[static_cast<i64>(p) * a.Q + q] = yv[i][j];
            }
        }
    } else {
        if constexpr (M % 2 == 0) {
            const int PH = a.P / 2, PW = a.Q / 2;
            float* yo = y + (static_cast<i64>(img) * a.K + k) * PH * PW;
#pragma unroll
            for (int i = 0; i < M / 2; ++i) {
                const int p = ty * (M / 2) + i;
#pragma unroll
                for (int j = 0; j < M / 2; ++j) {
                    const int q = tx * (M / 2) + j;
                    const float v00 = yv[2 * i][2 * j], v01 = yv[2 * i][2 * j + 1];
                    const float v10 = yv[2 * i + 1][2 * j], v11 = yv[2 * i + 1][2 * j + 1];
                    const float v = a.pool == WinogradPool::Max ? fmaxf(fmaxf(v00, v01), fmaxf(v10, v11))
                                                                : (v00 + v01 + v10 + v11) * 0.25f;
                    if (p < PH && q < PW) yo[static_cast<i64>(p) * PW + q] = v;
                }
            }
        }
    }
}

}  // namespace gpuopt::conv::winograd
