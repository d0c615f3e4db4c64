// conv2d as a matrix product: the GEMM-based variants of the ECE408 reports and gpuopt's fast one.
//
// The GEMM view (every kernel here uses it): with M = K output maps, "columns" npq = (n*P + p)*Q + q over all
// N*P*Q output pixels and "taps" crs = (c*R + r)*S + s over the C*R*S filter taps,
//
//     Y[k][npq] = sum_crs W[k][crs] * X_unrolled[crs][npq],   X_unrolled[crs][npq] = x[n][c][p*u-ph+r][q*v-pw+s]
//
// (zero where that position falls into the padding), and y[n][k][p][q] = act(Y[k][npq] + bias[k]). W's KCRS
// memory already is the K x C*R*S "unrolled mask" of the reports, row-major: nothing to do for it.
//
//   unroll              The ECE408 Fashion-MNIST report's Optimization 1. The report used three kernels (unroll
//                       the mask, unroll the input, "unroll the output"), then its multiply; here the mask needs no
//                       kernel, so: im2col_kernel writes X_unrolled for a chunk of images into pool scratch
//                       (zeros in the padding), gpuopt's own matmul (the C++ launcher of `gemm`: async, warptile,
//                       shared or naive) computes Y' = W x X_unrolled in ONE product for the whole chunk, and
//                       unroll_epilogue_kernel permutes Y'[k][n*P*Q + pq] into y[n][k][pq] with bias and
//                       activation. A chunk is the whole batch when its scratch, (C*R*S + K) * N*P*Q floats, fits
//                       the budget (1 GiB by default), else as many images as fit (at least one). With one image
//                       per chunk Y' has y's own layout: the GEMM writes y directly and the epilogue runs in place
//                       (only when there is a bias or an activation).
//   implicit_gemm       The ECE408 MNIST report's "unrolling by accessing the inputs directly according to their
//                       indices": the textbook shared-memory tiled matrix multiply (TILE x TILE threads, TILE of
//                       kImplicitGemmTiles), the W tile loaded as in a matmul, the X tile gathered from x by index,
//                       no unrolled buffer; bias and activation fused into the store.
//   implicit_gemm_fast  gpuopt's: the matmul ladder's warp-tiled kernel (matmul_warptile.cuh: the WarpTiling
//                       block/warp/thread tile shapes, ThreadTile's lane layout, and warp_tile_fma, its shared ->
//                       register fragment loads and 8x8 / 8x4 thread-tile FMAs, are used as they are), fed by two
//                       tile-loader policies written for the convolution. The matmul headers have no loader hook
//                       (their kernels read a row-major B), so the kernel template implicit_gemm_fast_kernel is
//                       here, templated on an A loader (W tiles: 16-byte loads when C*R*S % 4 == 0 and w is 16-byte
//                       aligned, transposed into shared memory through registers as the warptile kernel does; else
//                       4-byte cp.async, which lands transposed and needs no alignment, as the async kernel does)
//                       and a B loader (X tiles gathered by 4-byte cp.async, zero-filled in the padding). The tap
//                       decode crs -> (c, r, s) is done once per block and k-step, two k-steps ahead, into a small
//                       table in shared memory; every thread keeps only its column's (n, p, q) in registers.
//                       Double-buffered shared memory, one barrier per k-step: the loads of k-step kt+1 are in
//                       flight while k-step kt is computed. The store is this file's: output tiles are scattered
//                       to y[n][k][p][q] (not a row-major C), with bias and activation, 16-byte stores when P*Q % 4
//                       == 0 and y is 16-byte aligned.
//
// Index ranges: the kernels index columns, taps, maps and positions inside one image with int (offsets of
// images and rows of w with 64 bits), so C*R*S, K, P*Q, H + 2ph and W + 2pw must be < 2^31 - 1024 (room for
// "index + tile") and C*H*W <= 2^31 - 1; the implicit kernels also need N*P*Q < 2^31 - 1024, while unroll never
// puts more columns than that in one GEMM (the matmul launchers' own limit). Shapes beyond these are rejected
// with InvalidArgument before anything runs, as are unknown parameters and (naive GEMM) K beyond its grid. A stride whose output has one row (column) is never multiplied, so any
// stride is accepted. Every kernel is deterministic (no atomics): results are bitwise reproducible.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/device_buffer.cuh"
#include "../common/async_copy.cuh"
#include "../common/kernel_info.hpp"
#include "../common/launch.cuh"
#include "../common/thread_index.cuh"
#include "../common/tile_order.cuh"
#include "../common/vec4.cuh"
#include "../matmul/matmul_cuda.hpp"
#include "../matmul/matmul_warptile.cuh"
#include "conv2d_cuda.hpp"

namespace gpuopt::conv {

namespace {

using i64 = std::int64_t;

constexpr int kMaxGridY = 65535;
// Largest column / tap / map count of the int-indexed kernels (and the matmul launchers' own limit).
constexpr i64 kIndexLimit = kGemmIndexLimit;

// ------------------------------------------------------------------------------------------------
// Index arithmetic shared by every kernel of this file.

// x / d for 0 <= x < 2^31 by a multiply-high and a shift (the round-up method of Granlund & Montgomery,
// as CUTLASS's FastDivmod): with l = ceil(log2 d), mul = ceil(2^(31+l) / d) < 2^32 and
// x / d = (x * mul) >> (31 + l), exact for every x < 2^31 since mul*d - 2^(31+l) < d <= 2^l. d = 1 is
// marked by mul = 0. The host computes the same (tests emulate it there).
struct FastDivmod {
    int d = 1;
    unsigned mul = 0, shift = 0;

    FastDivmod() = default;
    explicit FastDivmod(int divisor) : d(divisor) {
        if (d <= 1) return;
        int l = 0;
        while ((i64{1} << l) < d) ++l;
        mul = static_cast<unsigned>(((std::uint64_t{1} << (31 + l)) + static_cast<std::uint64_t>(d) - 1) /
                                    static_cast<std::uint64_t>(d));
        shift = static_cast<unsigned>(l - 1);
    }
    __host__ __device__ __forceinline__ int div(int x) const {
        if (mul == 0) return x;
#if defined(__CUDA_ARCH__)
        return static_cast<int>(__umulhi(static_cast<unsigned>(x), mul) >> shift);
#else
        return static_cast<int>(((static_cast<std::uint64_t>(static_cast<unsigned>(x)) * mul) >> 32) >> shift);
#endif
    }
};

// One convolution in the GEMM view, as every kernel receives it (by value: kernel parameters live in the
// constant bank, so the shape costs no registers).
struct GemmConv {
    const float* x;
    const float* w;
    const float* bias;  // null: none
    float* y;
    int C, H, W, K, R, S;
    int u, v, ph, pw;  // u (v) is 1 when the output has a single row (column): never multiplied then
    int P, Q, PQ, NPQ, CRS, RS, HW;
    i64 CHW, KPQ;  // image strides of x and y
    FastDivmod div_RS, div_S, div_PQ, div_Q;
    Activation act;
};

// Where column npq (output pixel (n, p, q)) reads and writes. Columns past N*P*Q (edge tiles) are marked
// !ok and point at image 0, so addresses formed from them stay inside x.
struct Column {
    const float* image;  // x[n]
    i64 y_off;           // offset of y[n][0][p][q]
    int h0, w0;          // top-left input position of the window (negative inside the padding)
    unsigned base;       // h0*W + w0 modulo 2^32 (see gather_index)
    bool ok;
};

__device__ __forceinline__ Column column_of(const GemmConv& g, int npq) {
    Column col;
    col.ok = npq < g.NPQ;
    const int j = col.ok ? npq : 0;
    const int n = g.div_PQ.div(j);
    const int pq = j - n * g.PQ;
    const int p = g.div_Q.div(pq);
    const int q = pq - p * g.Q;
    col.image = g.x + static_cast<i64>(n) * g.CHW;
    col.y_off = static_cast<i64>(n) * g.KPQ + pq;
    col.h0 = p * g.u - g.ph;
    col.w0 = q * g.v - g.pw;
    col.base = static_cast<unsigned>(col.h0) * static_cast<unsigned>(g.W) + static_cast<unsigned>(col.w0);
    return col;
}

// Filter tap crs = (c, r, s): the offset of x[.][c][r][s] in an image, and r, s for the bounds test. Taps past
// C*R*S (the last k-step's tail) are marked invalid.
struct __align__(16) Tap {
    unsigned off;  // c*H*W + r*W + s modulo 2^32 (r*W alone exceeds an int for filters taller than 2^31 / W)
    int r, s;
    int ok;
};

__host__ __device__ __forceinline__ Tap tap_of(const GemmConv& g, int crs) {
    Tap t;
    t.ok = crs < g.CRS;
    const int i = t.ok ? crs : 0;
    const int c = g.div_RS.div(i);
    const int rs = i - c * g.RS;
    t.r = g.div_S.div(rs);
    t.s = rs - t.r * g.S;
    t.off = static_cast<unsigned>(c) * static_cast<unsigned>(g.HW) + static_cast<unsigned>(t.r) * static_cast<unsigned>(g.W) +
            static_cast<unsigned>(t.s);
    return t;
}

// Index of X_unrolled[tap][column] in x[n] (its image), or -1 where it lies in the padding (or past the
// matrix). Inside the image the index c*H*W + h*W + w = tap.off + (h0*W + w0) is below C*H*W <= 2^31 - 1, so
// the sum taken modulo 2^32 (unsigned: defined wrap-around) is exact even where its parts are not ints (h0*W
// for a window reaching far into the padding, r*W for a tall filter).
__device__ __forceinline__ int gather_index(const GemmConv& g, const Column& col, const Tap& t) {
    const int h = col.h0 + t.r, w = col.w0 + t.s;
    const bool in = col.ok && t.ok && static_cast<unsigned>(h) < static_cast<unsigned>(g.H) &&
                    static_cast<unsigned>(w) < static_cast<unsigned>(g.W);
    return in ? static_cast<int>(t.off + col.base) : -1;
}

__device__ __forceinline__ float gather(const GemmConv& g, const Column& col, const Tap& t) {
    const int i = gather_index(g, col, t);
    return i >= 0 ? __ldg(col.image + i) : 0.f;
}

__device__ __forceinline__ float epilogue(const GemmConv& g, float acc, float bias_k) {
    return apply_activation(acc + bias_k, g.act);
}

// Validates the shape for the int-indexed kernels (host only). `what` names the variant in messages;
// `implicit`: the whole batch is one GEMM, so N*P*Q must be an int too (unroll sets NPQ per chunk of images).
void check_gemm_shape(const Conv2dShape& s, const char* what, bool implicit) {
    s.validate();
    auto limit = [what](bool ok, const std::string& msg) {
        GPUOPT_REQUIRE(ok, std::string("conv2d ") + what + ": " + msg);
    };
    // Products of positive dimensions, each checked factor by factor so that none overflows.
    limit(s.C < kIndexLimit && s.R < kIndexLimit && s.S < kIndexLimit && s.C * s.R < kIndexLimit &&
              s.C * s.R * s.S < kIndexLimit,
          "C*R*S = " + std::to_string(s.C) + "*" + std::to_string(s.R) + "*" + std::to_string(s.S) +
              " must be < 2^31 - 1024 (int indices)");
    limit(s.K < kIndexLimit, "K = " + std::to_string(s.K) + " must be < 2^31 - 1024 (int indices)");
    // The padded extents bound every input row/column a window touches (h0 + r < H + ph) and P, Q.
    limit(s.H + 2 * s.pad_h < kIndexLimit && s.W + 2 * s.pad_w < kIndexLimit,
          "H + 2*ph and W + 2*pw must be < 2^31 - 1024 (int indices)");
    const i64 P = s.P(), Q = s.Q();
    limit(P * Q < kIndexLimit,
          "P*Q = " + std::to_string(P) + "*" + std::to_string(Q) + " must be < 2^31 - 1024 (int indices)");
    limit(s.C * s.H < kIndexLimit && s.C * s.H * s.W <= INT_MAX,
          "C*H*W = " + std::to_string(s.C) + "*" + std::to_string(s.H) + "*" + std::to_string(s.W) +
              " must be < 2^31 (int indices inside an image)");
    if (implicit)
        limit(s.N < kIndexLimit && s.N * P * Q < kIndexLimit,
              "N*P*Q = " + std::to_string(s.N) + "*" + std::to_string(P * Q) +
                  " must be < 2^31 - 1024 (int column indices); split the batch");
}

// Validates the shape and pointers and builds the GEMM view.
GemmConv make_gemm_conv(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                        Activation act, const char* what, bool implicit) {
    check_gemm_shape(s, what, implicit);
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr,
                   std::string("conv2d ") + what + ": x, w and y must be device pointers");
    const i64 P = s.P(), Q = s.Q();
    const i64 CRS = s.C * s.R * s.S;
    GemmConv g{};
    g.x = x, g.w = w, g.bias = bias, g.y = y;
    g.C = static_cast<int>(s.C), g.H = static_cast<int>(s.H), g.W = static_cast<int>(s.W);
    g.K = static_cast<int>(s.K), g.R = static_cast<int>(s.R), g.S = static_cast<int>(s.S);
    // A stride only ever multiplies p < P (q < Q): with one output row it is never used, so a huge one is
    // replaced by 1; otherwise (P-1)*u <= H + 2ph - R keeps it in range.
    g.u = P == 1 ? 1 : static_cast<int>(s.stride_h);
    g.v = Q == 1 ? 1 : static_cast<int>(s.stride_w);
    g.ph = static_cast<int>(s.pad_h), g.pw = static_cast<int>(s.pad_w);
    g.P = static_cast<int>(P), g.Q = static_cast<int>(Q), g.PQ = static_cast<int>(P * Q);
    g.NPQ = implicit ? static_cast<int>(s.N * P * Q) : 0;  // unroll: set per chunk
    g.CRS = static_cast<int>(CRS), g.RS = static_cast<int>(s.R * s.S), g.HW = static_cast<int>(s.H * s.W);
    g.CHW = s.C * s.H * s.W;
    g.KPQ = s.K * P * Q;
    g.div_RS = FastDivmod(g.RS), g.div_S = FastDivmod(g.S), g.div_PQ = FastDivmod(g.PQ), g.div_Q = FastDivmod(g.Q);
    g.act = act;
    return g;
}

// ------------------------------------------------------------------------------------------------
// unroll: im2col, one matmul, permute + epilogue.

constexpr int kUnrollThreads = 256;

// X_unrolled[crs][j] for the chunk's columns j = (n - n0)*P*Q + pq, j < ncols (g is the chunk's view: x, y
// and N*P*Q start at image n0). Grid x over columns (consecutive threads write consecutive addresses; with
// stride 1 they also read consecutive ones), y over taps (loop when C*R*S > 65535). Every element is written,
// zeros included.
__global__ void __launch_bounds__(kUnrollThreads) im2col_kernel(GemmConv g, int ncols, float* __restrict__ xu) {
    const int j = static_cast<int>(blockIdx.x) * kUnrollThreads + static_cast<int>(threadIdx.x);
    if (j >= ncols) return;
    const Column col = column_of(g, j);
    for (int crs = blockIdx.y; crs < g.CRS; crs += gridDim.y)
        xu[static_cast<i64>(crs) * ncols + j] = gather(g, col, tap_of(g, crs));
}

// y[n][k][pq] = act(Y'[k][j] + bias[k]) for the chunk's columns j: x over columns, y over maps (loop when
// K > 65535). Reads and writes are coalesced along pq. In place (one image per chunk, Y' = y[n0]) each thread
// reads and writes the same element, so the pointers are not __restrict__.
__global__ void __launch_bounds__(kUnrollThreads) unroll_epilogue_kernel(GemmConv g, const float* yp, int ncols) {
    const int j = static_cast<int>(blockIdx.x) * kUnrollThreads + static_cast<int>(threadIdx.x);
    if (j >= ncols) return;
    const Column col = column_of(g, j);
    for (int k = blockIdx.y; k < g.K; k += gridDim.y) {
        const float b = g.bias ? __ldg(g.bias + k) : 0.f;
        const float v = yp[static_cast<i64>(k) * ncols + j];
        g.y[col.y_off + static_cast<i64>(k) * g.PQ] = epilogue(g, v, b);
    }
}

void check_unroll_gemm(UnrollGemm gemm) {
    GPUOPT_REQUIRE(static_cast<std::size_t>(gemm) < kUnrollGemms.size(),
                   "conv2d unroll: gemm must be an index into kUnrollGemms, got " + std::to_string(static_cast<int>(gemm)));
}

// C[M][N] = A[M][Kd] x B[Kd][N] by the chosen matmul of the ladder, at its default parameters (matmul_choices.hpp).
void run_gemm(UnrollGemm gemm, const float* a, const float* b, float* c, i64 M, i64 N, i64 Kd) {
    using namespace matmul;
    switch (gemm) {
        case UnrollGemm::Async:
            matmul_async(a, b, c, M, N, Kd, static_cast<AsyncTile>(kAsyncTiles.default_index),
                         kAsyncStages.default_value(), kAsyncSplitK.default_value());
            break;
        case UnrollGemm::Tf32x3:
            matmul_tf32x3(a, b, c, M, N, Kd, kTf32x3Stages.default_value(), kTf32x3FlushK.default_value(),
                          static_cast<Tf32x3Split>(kTf32x3Splits.default_index));
            break;
        case UnrollGemm::Tf32x3Wgmma: matmul_tf32x3_wgmma(a, b, c, M, N, Kd); break;
        case UnrollGemm::Warptile: matmul_warptile(a, b, c, M, N, Kd, static_cast<WarpTile>(kWarpTiles.default_index)); break;
        case UnrollGemm::Shared: matmul_shared(a, b, c, M, N, Kd, kSharedBlocks.default_value()); break;
        case UnrollGemm::Naive: matmul_naive(a, b, c, M, N, Kd); break;
    }
}

// Images per GEMM: as many as fit the budget ((C*R*S + K) * P*Q floats each), at least 1, at most N, and
// never more columns than a matmul takes.
i64 unroll_chunk(const Conv2dShape& s, i64 scratch_limit_bytes) {
    const i64 PQ = s.P() * s.Q();
    const i64 per_image_floats = (s.C * s.R * s.S + s.K) * PQ;  // < 2^63: each factor < 2^32 (checked)
    i64 chunk = std::max<i64>(1, scratch_limit_bytes / static_cast<i64>(sizeof(float)) / per_image_floats);
    chunk = std::min(chunk, (kIndexLimit - 1) / PQ);
    return std::max<i64>(1, std::min(chunk, s.N));
}

void check_unroll_budget(i64 scratch_limit_bytes) {
    GPUOPT_REQUIRE(scratch_limit_bytes > 0, "conv2d unroll: scratch_limit_bytes must be positive, got " +
                                                std::to_string(scratch_limit_bytes));
}

// ------------------------------------------------------------------------------------------------
// implicit_gemm: the textbook tiled matrix multiply with the X tile gathered by index.

// Thread (ty, tx) = (t / TILE, t % TILE) of block (bx, by) computes Y[k = by*TILE + ty][npq = bx*TILE + tx]:
// per k-step of TILE taps it loads W[k][crs0 + tx] (consecutive taps of one map: coalesced) and X_unrolled
// [crs0 + ty][npq] (consecutive columns: consecutive q, coalesced reads for stride 1), then sums TILE products
// from shared memory (w_s[ty][i] is one address per row: a broadcast; x_s[i][tx] consecutive words). Out-of-
// range elements are staged as zeros. Grid y loops over map tiles past 65535.
template <int TILE>
__global__ void __launch_bounds__(TILE* TILE) implicit_gemm_kernel(GemmConv g) {
    __shared__ float w_s[TILE][TILE];
    __shared__ float x_s[TILE][TILE];
    const int tx = static_cast<int>(threadIdx.x) % TILE, ty = static_cast<int>(threadIdx.x) / TILE;
    const Column col = column_of(g, static_cast<int>(blockIdx.x) * TILE + tx);
    const int k_tiles = ceil_div(g.K, TILE);
    for (int kt = blockIdx.y; kt < k_tiles; kt += gridDim.y) {
        const int k = kt * TILE + ty;
        const float* w_row = g.w + static_cast<i64>(k < g.K ? k : 0) * g.CRS;
        float acc = 0.f;
        for (int crs0 = 0; crs0 < g.CRS; crs0 += TILE) {
            w_s[ty][tx] = k < g.K && crs0 + tx < g.CRS ? __ldg(w_row + crs0 + tx) : 0.f;
            x_s[ty][tx] = gather(g, col, tap_of(g, crs0 + ty));
            __syncthreads();
#pragma unroll
            for (int i = 0; i < TILE; ++i) acc = fmaf(w_s[ty][i], x_s[i][tx], acc);
            __syncthreads();  // before the next k-step overwrites the tiles
        }
        if (k < g.K && col.ok)
            g.y[col.y_off + static_cast<i64>(k) * g.PQ] = epilogue(g, acc, g.bias ? __ldg(g.bias + k) : 0.f);
    }
}

// ------------------------------------------------------------------------------------------------
// implicit_gemm_fast: matmul_warptile.cuh's warp-tiled core with convolution tile loaders.
//
// Shared memory per stage (as the matmul kernels lay it out): a_t[BK][BM + 4], W's tile transposed (tap-major),
// then b_s[BK][BN], X_unrolled's tile; two stages, then the tap table (2 x BK Taps). A loader policy has
//   Loader(const GemmConv&, int block_offset, int thread)    block_offset: first map (A) or column (B)
//   fetch(g, kt, taps, stage)   start the loads of k-step kt (into registers, or by cp.async straight into
//                               `stage`); taps: the tap table's slot of k-step kt (the B loaders use it)
//   store(stage)                move what fetch put in registers into `stage` (nothing for cp.async loaders)
// and the kernel drives two of them, A (maps x taps of W) and B (taps x columns of X_unrolled).

using matmul::WarpTiling;

// W tile by 16-byte loads (C*R*S % 4 == 0 and w 16-byte aligned, so every row of W is, and a float4 of a row
// is wholly inside or outside C*R*S): float4 e = t + p*THREADS is row e / (BK/4), taps (e % (BK/4))*4 .. +3;
// two neighbouring threads read one row's 32 bytes (BK = 8), and their transposing stores a_t[kq + j][row]
// land in distinct banks (row stride BM + 4 = 4 banks: the odd thread's kq = 4 is 16 banks off). Staged in
// registers between fetch and store, as in the warptile kernel.
template <class T>
struct WeightTileVec4 {
    static constexpr int ROW_VECS = T::BK / 4;
    static constexpr int VECS = T::BM * ROW_VECS;
    static constexpr int PER_THREAD = (VECS + T::THREADS - 1) / T::THREADS;
    static_assert(T::BK % 4 == 0, "whole float4 runs of taps");
    float4 reg[PER_THREAD];
    int block_m, t;

    __device__ __forceinline__ WeightTileVec4(const GemmConv&, int block_m_, int thread) : block_m(block_m_), t(thread) {}

    __device__ __forceinline__ void fetch(const GemmConv& g, int kt, const Tap*, float*) {
#pragma unroll
        for (int p = 0; p < PER_THREAD; ++p) {
            const int e = t + p * T::THREADS;
            if (VECS % T::THREADS != 0 && e >= VECS) break;
            const int k = block_m + e / ROW_VECS;
            const bool row_ok = k < g.K;
            reg[p] = dev::load4<true>(g.w + static_cast<i64>(row_ok ? k : 0) * g.CRS,
                                              kt * T::BK + (e % ROW_VECS) * 4, g.CRS, row_ok);
        }
    }
    __device__ __forceinline__ void store(float* stage) const {
#pragma unroll
        for (int p = 0; p < PER_THREAD; ++p) {
            const int e = t + p * T::THREADS;
            if (VECS % T::THREADS != 0 && e >= VECS) break;
            float* dst = stage + (e % ROW_VECS) * 4 * T::LDA + e / ROW_VECS;
            dst[0 * T::LDA] = reg[p].x;
            dst[1 * T::LDA] = reg[p].y;
            dst[2 * T::LDA] = reg[p].z;
            dst[3 * T::LDA] = reg[p].w;
        }
    }
};

// W tile by 4-byte cp.async (any C*R*S, any alignment; a 4-byte copy lands transposed, as matmul_async.cuh
// copies A): thread t copies COPIES consecutive taps of row t % BM, from tap (t / BM) * COPIES, to
// a_t[tap][row]; a warp's copies land in 32 consecutive words (no bank conflicts), and each thread keeps one
// row pointer. (The async kernel's mapping, 8 taps of 4 rows per warp instruction, keeps a pointer per row
// pass: it spilled at the 128-register cap in the 128x64 tile.) Zero-filled outside W.
template <class T>
struct WeightTileAsync4 {
    static constexpr int GROUPS = T::THREADS / T::BM, COPIES = T::BK / GROUPS;
    static_assert(T::THREADS % T::BM == 0 && T::BK % GROUPS == 0, "the W tile splits evenly over the threads");
    int k, tap0;

    __device__ __forceinline__ WeightTileAsync4(const GemmConv&, int block_m, int thread)
        : k(block_m + thread % T::BM), tap0((thread / T::BM) * COPIES) {}

    __device__ __forceinline__ void fetch(const GemmConv& g, int kt, const Tap*, float* stage) const {
        const int crs0 = kt * T::BK + tap0;
        const bool row_ok = k < g.K;
        const float* src0 = g.w + (row_ok ? static_cast<i64>(k) * g.CRS + crs0 : 0);
        float* dst0 = stage + tap0 * T::LDA + (k % T::BM);
#pragma unroll
        for (int p = 0; p < COPIES; ++p) {
            const bool ok = row_ok && crs0 + p < g.CRS;
            dev::cp_async_4(dst0 + p * T::LDA, ok ? src0 + p : g.w, ok ? 4 : 0);
        }
    }
    __device__ __forceinline__ void store(float*) const {}
};

// X_unrolled tile by 4-byte cp.async gathers: thread t owns column t % BN of the tile (its (n, p, q) decoded
// once, kept in registers) and taps t / BN + i * (THREADS / BN); consecutive threads copy consecutive columns
// (consecutive q: with stride 1, consecutive addresses) into consecutive words of b_s. The taps come from the
// block's tap table; positions in the padding and past the matrix are zero-filled (src-size 0, the source
// address then points at x[n] and is not read).
template <class T>
struct Im2colTileAsync {
    static constexpr int ROWS = T::THREADS / T::BN, COPIES = T::BK / ROWS;
    static_assert(T::THREADS % T::BN == 0 && T::BK % ROWS == 0, "the X tile splits evenly over the threads");
    Column col;
    int tap0, dst0;

    __device__ __forceinline__ Im2colTileAsync(const GemmConv& g, int block_n, int thread)
        : col(column_of(g, block_n + thread % T::BN)), tap0(thread / T::BN), dst0(T::A_FLOATS + thread) {}

    __device__ __forceinline__ void fetch(const GemmConv& g, int, const Tap* taps, float* stage) const {
#pragma unroll
        for (int p = 0; p < COPIES; ++p) {
            const Tap t = taps[tap0 + p * ROWS];
            const int i = gather_index(g, col, t);
            dev::cp_async_4(stage + dst0 + p * T::THREADS, col.image + (i >= 0 ? i : 0), i >= 0 ? 4 : 0);
        }
    }
};

// The tile configurations, by the `tile` parameter's names. 4 warps (8 for 128x128) with the matmul ladder's
// warp and thread tiles; __launch_bounds__ caps registers at 128 (2 or 4 blocks per multiprocessor).
//   64x64x8   (default) K = 64 maps exactly (MNIST conv2), 128 in two rows (CS6235 conf2/conf4); twice the
//             blocks of the 128-wide tiles for the small-N*P*Q layers (conf4: 196 blocks).
//   128x128x8 the matmul ladder's warptile Tiling128x128x8 (K >= 128 and many columns).
//   128x64x8, 64x128x8, 32x128x8: in between; 32x128 for few maps (the ECE408 layers' K = 6..32).
using FastTiling64x64x8 = WarpTiling<64, 64, 8, 32, 32, 8, 4, 4>;
using FastTiling128x128x8 = matmul::Tiling128x128x8;
using FastTiling128x64x8 = WarpTiling<128, 64, 8, 64, 32, 8, 8, 4>;
using FastTiling64x128x8 = WarpTiling<64, 128, 8, 32, 64, 8, 8, 4>;
using FastTiling32x128x8 = WarpTiling<32, 128, 8, 32, 32, 8, 4, 4>;

template <class T>
constexpr std::size_t fast_shared_bytes() {
    return (2 * static_cast<std::size_t>(T::A_FLOATS + T::B_FLOATS)) * sizeof(float) + 2 * T::BK * sizeof(Tap);
}

// y[n][k][p][q] = act(acc + bias[k]) for this thread's TM x TN outputs (ThreadTile's layout: rows k of
// FRAG_M runs of 4 maps, columns of FRAG_N runs of 4 pixels). VEC_Y (P*Q % 4 == 0, y 16-byte aligned): a run
// of 4 columns starting at a multiple of 4 lies in one image and is 16-byte aligned in y: one float4 store.
template <class T>
__device__ __forceinline__ void store_outputs(const GemmConv& g, bool vec_y, int block_m, int block_n,
                                              const matmul::ThreadTile<T>& th, const float (&acc)[T::TM][T::TN]) {
    float bias[T::TM];
#pragma unroll
    for (int i = 0; i < T::TM; ++i) {
        const int k = block_m + th.m + (i / 4) * T::FRAG_STRIDE_M + i % 4;
        bias[i] = g.bias != nullptr && k < g.K ? __ldg(g.bias + k) : 0.f;
    }
#pragma unroll
    for (int fn = 0; fn < T::FRAG_N; ++fn) {
        const int col0 = block_n + th.n + fn * T::FRAG_STRIDE_N;
        if (vec_y) {
            const Column col = column_of(g, col0);
            if (!col.ok) continue;
#pragma unroll
            for (int i = 0; i < T::TM; ++i) {
                const int k = block_m + th.m + (i / 4) * T::FRAG_STRIDE_M + i % 4;
                if (k >= g.K) continue;
                const float* a = &acc[i][fn * 4];
                const float4 v = make_float4(epilogue(g, a[0], bias[i]), epilogue(g, a[1], bias[i]),
                                             epilogue(g, a[2], bias[i]), epilogue(g, a[3], bias[i]));
                // The intrinsic (st.global.wb.v4: a plain store's caching): a float4 assignment here was split
                // into four 4-byte stores by nvcc 13.0 (the activation's branches sit between the FMAs and it).
                __stwb(reinterpret_cast<float4*>(g.y + col.y_off + static_cast<i64>(k) * g.PQ), v);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const Column col = column_of(g, col0 + j);
                if (!col.ok) continue;
#pragma unroll
                for (int i = 0; i < T::TM; ++i) {
                    const int k = block_m + th.m + (i / 4) * T::FRAG_STRIDE_M + i % 4;
                    if (k < g.K) g.y[col.y_off + static_cast<i64>(k) * g.PQ] = epilogue(g, acc[i][fn * 4 + j], bias[i]);
                }
            }
        }
    }
}

// Block i computes output tile tile_of_block<8>(i) (the matmul kernels' grouped order: consecutive blocks take
// the map tiles of one run of columns, which then share the gathered input in L2).
//
// Pipeline (two stages, one barrier per k-step): k-step kt+1's tiles are requested (A into registers or by
// cp.async, B by cp.async) before k-step kt's FMAs and land in the other stage, whose last readers finished
// before the previous barrier. The tap table has two slots, filled two k-steps ahead: during k-step kt the B
// loads of kt+1 read slot (kt+1)%2 and threads 0..BK-1 decode the taps of kt+2 into slot kt%2, whose last
// readers (the B loads of kt, issued during kt-1) finished before the previous barrier.
template <class T, class ALoader, class BLoader>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS) implicit_gemm_fast_kernel(GemmConv g, int vec_y) {
    static_assert(T::SLICE_K == 1 && T::FRAG_BUFFERS == 1, "sliced k and fragment double buffering are not used here");
    static_assert(T::THREADS >= 2 * T::BK, "the prologue decodes two k-steps of taps, one per thread");
    constexpr int BM = T::BM, BN = T::BN, BK = T::BK, STAGE = T::A_FLOATS + T::B_FLOATS;
    extern __shared__ __align__(16) float smem[];
    Tap* taps = reinterpret_cast<Tap*>(smem + 2 * STAGE);  // [2][BK]
    const dev::TileCoord tile =
        dev::tile_of_block<8>(static_cast<int>(blockIdx.x), ceil_div(g.K, BM), ceil_div(g.NPQ, BN));
    const int block_m = tile.m * BM, block_n = tile.n * BN;
    const int t = static_cast<int>(threadIdx.x);
    const int k_steps = ceil_div(g.CRS, BK);

    ALoader a(g, block_m, t);
    BLoader b(g, block_n, t);
    if (t < 2 * BK) taps[t] = tap_of(g, t);  // k-steps 0 and 1 (slots 0 and 1)
    __syncthreads();
    a.fetch(g, 0, taps, smem);
    b.fetch(g, 0, taps, smem);
    a.store(smem);
    dev::cp_async_commit();
    dev::cp_async_wait<0>();
    __syncthreads();

    const matmul::ThreadTile<T> th;
    float acc[T::TM][T::TN] = {};
    for (int kt = 0; kt < k_steps; ++kt) {
        float* cur = smem + (kt & 1) * STAGE;
        float* next = smem + ((kt + 1) & 1) * STAGE;
        const bool more = kt + 1 < k_steps;
        if (more) {
            const Tap* slot = taps + ((kt + 1) & 1) * BK;
            a.fetch(g, kt + 1, slot, next);
            b.fetch(g, kt + 1, slot, next);
        }
        dev::cp_async_commit();
        if (t < BK) taps[(kt & 1) * BK + t] = tap_of(g, (kt + 2) * BK + t);
        matmul::warp_tile_fma<T>(cur, cur + T::A_FLOATS, th, acc);
        if (more) a.store(next);
        dev::cp_async_wait<0>();
        __syncthreads();
    }
    // Where this thread's outputs lie, recomputed (not kept in registers through the main loop).
    const matmul::ThreadTile<T> th_out(dev::fresh_thread_index());
    store_outputs<T>(g, vec_y != 0, block_m, block_n, th_out, acc);
}

using FastKernel = void (*)(GemmConv, int);

struct FastLaunch {
    FastKernel kernel = nullptr;
    int threads = 0;
    std::size_t shared_bytes = 0;
    i64 blocks = 0;
    std::string name;
};

template <class T>
FastLaunch fast_launch(bool vec_w, i64 K, i64 NPQ) {
    FastLaunch l;
    l.kernel = vec_w ? implicit_gemm_fast_kernel<T, WeightTileVec4<T>, Im2colTileAsync<T>>
                     : implicit_gemm_fast_kernel<T, WeightTileAsync4<T>, Im2colTileAsync<T>>;
    l.threads = T::THREADS;
    l.shared_bytes = fast_shared_bytes<T>();
    l.blocks = ceil_div<i64>(K, T::BM) * ceil_div<i64>(NPQ, T::BN);
    l.name = "implicit_gemm_fast<" + matmul::warp_tiling_name<T>() + (vec_w ? " vecW>" : " asyncW>");
    return l;
}

// The tilings of kFastTiles (conv2d_choices.hpp), entry by entry.
using FastTilings =
    std::tuple<FastTiling64x64x8, FastTiling128x128x8, FastTiling128x64x8, FastTiling64x128x8, FastTiling32x128x8>;
static_assert(tilings_match<FastTilings>(kFastTiles), "FastTilings must have kFastTiles' BM x BN x BK, in its order");

FastLaunch fast_launch(FastTile tile, bool vec_w, i64 K, i64 NPQ) {
    const auto i = static_cast<std::size_t>(tile);
    GPUOPT_REQUIRE(i < kFastTiles.size(), "conv2d implicit_gemm_fast: tile must be an index into kFastTiles, got " +
                                              std::to_string(static_cast<int>(tile)));
    return at_index<kFastTiles.size()>(
        i, [&](auto e) { return fast_launch<std::tuple_element_t<decltype(e)::value, FastTilings>>(vec_w, K, NPQ); });
}

unsigned grid_y(i64 n) { return static_cast<unsigned>(std::min<i64>(n, kMaxGridY)); }

}  // namespace

// ------------------------------------------------------------------------------------------------ launchers

std::int64_t conv2d_unroll_chunk_images(const Conv2dShape& s, std::int64_t scratch_limit_bytes) {
    check_gemm_shape(s, "unroll", false);
    check_unroll_budget(scratch_limit_bytes);
    return unroll_chunk(s, scratch_limit_bytes);
}

void conv2d_unroll_check(const Conv2dShape& s, UnrollGemm gemm, std::int64_t scratch_limit_bytes) {
    check_gemm_shape(s, "unroll", false);
    check_unroll_gemm(gemm);
    check_unroll_budget(scratch_limit_bytes);
    GPUOPT_REQUIRE(gemm != UnrollGemm::Naive || s.K <= 65535LL * 16,
                   "conv2d unroll: gemm 'naive' takes at most 1048560 maps (K; its grid y of 65535 blocks of 16 rows), "
                   "got " + std::to_string(s.K));
}

void conv2d_unroll(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                   Activation act, UnrollGemm gemm, std::int64_t scratch_limit_bytes) {
    conv2d_unroll_check(s, gemm, scratch_limit_bytes);
    GemmConv g = make_gemm_conv(x, w, bias, y, s, act, "unroll", false);
    const i64 chunk = unroll_chunk(s, scratch_limit_bytes);
    const i64 PQ = g.PQ, chunk_cols = chunk * PQ;
    // X_unrolled for a chunk, and Y' unless a chunk is one image (then Y' is y[n0] itself).
    DeviceBuffer<float> xu(static_cast<std::size_t>(s.C * s.R * s.S * chunk_cols));
    DeviceBuffer<float> yp(chunk == 1 ? 0 : static_cast<std::size_t>(s.K * chunk_cols));
    const bool epilogue_needed = chunk > 1 || bias != nullptr || act != Activation::None;
    for (i64 n0 = 0; n0 < s.N; n0 += chunk) {
        const i64 images = std::min(chunk, s.N - n0);
        const int ncols = static_cast<int>(images * PQ);
        // Columns of this chunk: npq in [n0*PQ, n0*PQ + ncols); column_of needs them below 2^31, so the view
        // is shifted to start at image n0 (x, y advanced; columns counted from 0).
        GemmConv gc = g;
        gc.x = x + n0 * g.CHW;
        gc.y = y + n0 * g.KPQ;
        gc.NPQ = ncols;
        float* out = chunk == 1 ? gc.y : yp.data();
        const dim3 cols_grid(static_cast<unsigned>(ceil_div<i64>(ncols, kUnrollThreads)));
        im2col_kernel<<<dim3(cols_grid.x, grid_y(g.CRS)), kUnrollThreads, 0, current_stream()>>>(gc, ncols, xu.data());
        GPUOPT_CHECK_LAUNCH("conv2d im2col_kernel");
        run_gemm(gemm, w, xu.data(), out, s.K, ncols, g.CRS);
        if (epilogue_needed) {
            unroll_epilogue_kernel<<<dim3(cols_grid.x, grid_y(g.K)), kUnrollThreads, 0, current_stream()>>>(gc, out, ncols);
            GPUOPT_CHECK_LAUNCH("conv2d unroll_epilogue_kernel");
        }
    }
}

void conv2d_implicit_gemm_check(const Conv2dShape& s, int tile) {
    check_gemm_shape(s, "implicit_gemm", true);
    require_choice(kImplicitGemmTiles, tile, "conv2d implicit_gemm");
}

void conv2d_implicit_gemm(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                          Activation act, int tile) {
    conv2d_implicit_gemm_check(s, tile);
    const GemmConv g = make_gemm_conv(x, w, bias, y, s, act, "implicit_gemm", true);
    check_block_threads(static_cast<i64>(tile) * tile, true);
    const dim3 grid(static_cast<unsigned>(ceil_div<i64>(g.NPQ, tile)), grid_y(ceil_div<i64>(g.K, tile)));
    at_value<kImplicitGemmTiles>(tile, [&](auto t) {
        constexpr int T = decltype(t)::value;
        implicit_gemm_kernel<T><<<grid, T * T, 0, current_stream()>>>(g);
    });
    GPUOPT_CHECK_LAUNCH("conv2d implicit_gemm_kernel");
}

namespace {
void check_fast_grid(const FastLaunch& l) {
    GPUOPT_REQUIRE(l.blocks < (i64{1} << 31), "conv2d implicit_gemm_fast: " + std::to_string(l.blocks) +
                                                  " output tiles; the grid allows at most 2^31-1 blocks");
}
}  // namespace

void conv2d_implicit_gemm_fast_check(const Conv2dShape& s, FastTile tile) {
    check_gemm_shape(s, "implicit_gemm_fast", true);
    check_fast_grid(fast_launch(tile, true, s.K, s.N * s.P() * s.Q()));
}

void conv2d_implicit_gemm_fast(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                               Activation act, FastTile tile) {
    const GemmConv g = make_gemm_conv(x, w, bias, y, s, act, "implicit_gemm_fast", true);
    const bool vec_w = g.CRS % 4 == 0 && aligned16(w);
    const FastLaunch l = fast_launch(tile, vec_w, g.K, g.NPQ);
    check_fast_grid(l);
    check_block_threads(l.threads, true);
    require_shared_memory(l.kernel, l.shared_bytes, l.name.c_str());
    const int vec_y = g.PQ % 4 == 0 && aligned16(y) ? 1 : 0;
    l.kernel<<<static_cast<unsigned>(l.blocks), l.threads, l.shared_bytes, current_stream()>>>(g, vec_y);
    GPUOPT_CHECK_LAUNCH("conv2d implicit_gemm_fast_kernel");
}

std::vector<KernelInfo> conv2d_gemm_kernel_info() {
    auto info = [](auto kernel, const std::string& name, int threads, std::size_t smem) {
        return kernel_info(reinterpret_cast<const void*>(kernel), name, threads, smem);
    };
    std::vector<KernelInfo> out;
    out.push_back(info(im2col_kernel, "unroll im2col", kUnrollThreads, 0));
    out.push_back(info(unroll_epilogue_kernel, "unroll epilogue", kUnrollThreads, 0));
    for (int tile : kImplicitGemmTiles.values)
        at_value<kImplicitGemmTiles>(tile, [&](auto t) {
            constexpr int T = decltype(t)::value;
            out.push_back(info(implicit_gemm_kernel<T>, "implicit_gemm<" + std::to_string(T) + ">", T * T, 0));
        });
    for (std::size_t tile = 0; tile < kFastTiles.size(); ++tile)
        for (bool vec_w : {true, false}) {
            const FastLaunch l = fast_launch(static_cast<FastTile>(tile), vec_w, 1, 1);
            out.push_back(info(l.kernel, l.name, l.threads, l.shared_bytes));
        }
    return out;
}

}  // namespace gpuopt::conv
