// fully_connected, y = act(x @ w + bias) with x (N x I), w (I x O) row-major (the ECE408 model's
// [in, out] layout), bias (O) or null. The report's "fully forward" steps, then gpuopt's:
//
//   basic   one thread per output, every operand read from global memory: (N*O) * (I + I) loads
//           (the report's count). Consecutive threads take consecutive outputs of a row, so the
//           reads of w are coalesced and the reads of x are one broadcast per warp.
//   tiled   the report's 16x16 shared-memory tiled multiply: each x and w element loaded from
//           global memory is used 16 times from shared memory (1/16 of basic's global reads);
//           bias and activation in its epilogue, so y is written once.
//   matmul  gpuopt's own fastest GEMM (the matmul ladder's async, tile and split-k "auto") writes
//           x @ w into y, then one pass adds the bias and applies the activation (skipped when
//           there is neither). For the few rows of a forward pass (N < 64) the ladder's auto
//           choice already takes its smallest tile and splits k; a GEMV kernel would save a little
//           at those sizes, but every launch there is ~microseconds, so one path is kept.
//   cublas  cuBLAS SGEMM, strict FP32 (the handle's math mode is CUBLAS_DEFAULT_MATH: no TF32),
//           then the same bias + activation pass: the baseline.
//
// All accumulate in float32 (the tests hold them to 1e-5 relative of a float64 product).
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "../common/cuda_check.cuh"
#include "../common/launch.cuh"
#include "../matmul/matmul_cuda.hpp"
#include "nn_cuda.hpp"

namespace gpuopt::nn {

namespace {

using i64 = std::int64_t;
constexpr int kThreads = 256;
constexpr int kTile = 16;  // the report's 16x16 tiles

template <Activation ACT>
__global__ void __launch_bounds__(kThreads) fc_basic_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                            const float* __restrict__ bias, float* __restrict__ y,
                                                            i64 N, i64 I, i64 O) {
    const i64 total = N * O;
    for (i64 t = static_cast<i64>(blockIdx.x) * kThreads + threadIdx.x; t < total;
         t += static_cast<i64>(gridDim.x) * kThreads) {
        const i64 n = t / O, o = t % O;
        float acc = 0.f;
        for (i64 k = 0; k < I; ++k) acc += x[n * I + k] * w[k * O + o];
        if (bias != nullptr) acc += bias[o];
        y[t] = apply_activation(acc, ACT);
    }
}

// Block (16, 16): thread (tx, ty) computes y[tile_n*16 + ty][tile_o*16 + tx]. Per k-step the block
// stages x[16 rows][16 k] and w[16 k][16 cols], zero-filled outside the matrices, so edge tiles need
// no other test. The tile loops are block-uniform (every thread of a block runs the same trip
// counts), so the barriers inside them are reached by all threads; they stride by the grid, so
// any N and O run with grid.y capped at 65535.
template <Activation ACT>
__global__ void __launch_bounds__(kTile* kTile) fc_tiled_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                                const float* __restrict__ bias, float* __restrict__ y,
                                                                i64 N, i64 I, i64 O) {
    __shared__ float xs[kTile][kTile];  // xs[row][k]: a row's 16 threads read one word (broadcast)
    __shared__ float ws[kTile][kTile];  // ws[k][col]: 16 consecutive words, distinct banks
    const int tx = threadIdx.x, ty = threadIdx.y;
    const i64 tiles_n = ceil_div<i64>(N, kTile), tiles_o = ceil_div<i64>(O, kTile);
    for (i64 tn = blockIdx.y; tn < tiles_n; tn += gridDim.y)
        for (i64 to = blockIdx.x; to < tiles_o; to += gridDim.x) {
            const i64 n = tn * kTile + ty, o = to * kTile + tx;
            float acc = 0.f;
            for (i64 k0 = 0; k0 < I; k0 += kTile) {
                xs[ty][tx] = n < N && k0 + tx < I ? x[n * I + k0 + tx] : 0.f;
                ws[ty][tx] = k0 + ty < I && o < O ? w[(k0 + ty) * O + o] : 0.f;
                __syncthreads();
#pragma unroll
                for (int kk = 0; kk < kTile; ++kk) acc += xs[ty][kk] * ws[kk][tx];
                __syncthreads();  // the tiles are overwritten next step
            }
            if (n < N && o < O) {
                if (bias != nullptr) acc += bias[o];
                y[n * O + o] = apply_activation(acc, ACT);
            }
        }
}

// The epilogue of matmul and cublas: y[n][o] = act(y[n][o] + bias[o]) in place.
template <Activation ACT>
__global__ void __launch_bounds__(kThreads) bias_activation_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                                                   i64 total, i64 O) {
    for (i64 t = static_cast<i64>(blockIdx.x) * kThreads + threadIdx.x; t < total;
         t += static_cast<i64>(gridDim.x) * kThreads) {
        float v = y[t];
        if (bias != nullptr) v += bias[t % O];
        y[t] = apply_activation(v, ACT);
    }
}

void check_fc(const float* x, const float* w, const float* y, i64 N, i64 I, i64 O, const char* what) {
    GPUOPT_REQUIRE(N > 0 && I > 0 && O > 0,
                   std::string("fully_connected ") + what + ": N, in_features and out_features must be positive");
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr, std::string("fully_connected ") + what + ": null pointer");
}

void bias_activation(float* y, const float* bias, i64 N, i64 O, Activation act) {
    if (bias == nullptr && act == Activation::None) return;
    with_activation(act, [&](auto a) {
        bias_activation_kernel<decltype(a)::value><<<grid_for(N * O, kThreads), kThreads, 0, current_stream()>>>(y, bias, N * O, O);
    });
    GPUOPT_CHECK_LAUNCH("bias_activation_kernel");
}

}  // namespace

void fully_connected_basic(const float* x, const float* w, const float* bias, float* y, i64 N, i64 I, i64 O,
                           Activation act) {
    check_fc(x, w, y, N, I, O, "basic");
    with_activation(act, [&](auto a) {
        fc_basic_kernel<decltype(a)::value><<<grid_for(N * O, kThreads), kThreads, 0, current_stream()>>>(x, w, bias, y, N, I, O);
    });
    GPUOPT_CHECK_LAUNCH("fc_basic_kernel");
}

void fully_connected_tiled(const float* x, const float* w, const float* bias, float* y, i64 N, i64 I, i64 O,
                           Activation act) {
    check_fc(x, w, y, N, I, O, "tiled");
    const i64 tiles_n = ceil_div<i64>(N, kTile), tiles_o = ceil_div<i64>(O, kTile);
    const dim3 grid(static_cast<unsigned>(tiles_o < 2147483647LL ? tiles_o : 2147483647LL),
                    static_cast<unsigned>(tiles_n < 65535 ? tiles_n : 65535));
    const dim3 block(kTile, kTile);
    with_activation(act, [&](auto a) { fc_tiled_kernel<decltype(a)::value><<<grid, block, 0, current_stream()>>>(x, w, bias, y, N, I, O); });
    GPUOPT_CHECK_LAUNCH("fc_tiled_kernel");
}

void fully_connected_matmul_check(i64 N, i64 I, i64 O) {
    GPUOPT_REQUIRE(N > 0 && I > 0 && O > 0, "fully_connected matmul: N, in_features and out_features must be positive");
    matmul::require_shape(N, O, I, "async (run by fully_connected matmul with M = N, N = out_features, K = in_features)");
}

void fully_connected_matmul(const float* x, const float* w, const float* bias, float* y, i64 N, i64 I, i64 O,
                            Activation act) {
    check_fc(x, w, y, N, I, O, "matmul");
    fully_connected_matmul_check(N, I, O);
    // (M, N, K) = (rows, outputs, inputs), at the async variant's defaults (matmul_choices.hpp)
    matmul::matmul_async(x, w, y, N, O, I, static_cast<matmul::AsyncTile>(matmul::kAsyncTiles.default_index),
                         matmul::kAsyncStages.default_value(), matmul::kAsyncSplitK.default_value());
    bias_activation(y, bias, N, O, act);
}

void fully_connected_cublas_check(i64 N, i64 I, i64 O) {
    GPUOPT_REQUIRE(N > 0 && I > 0 && O > 0, "fully_connected cublas: N, in_features and out_features must be positive");
    GPUOPT_REQUIRE(N < (1LL << 31) && I < (1LL << 31) && O < (1LL << 31),
                   "fully_connected cublas: N, in_features and out_features must be < 2^31 (cuBLAS's int dimensions)");
}

void fully_connected_cublas(const float* x, const float* w, const float* bias, float* y, i64 N, i64 I, i64 O,
                            Activation act) {
    check_fc(x, w, y, N, I, O, "cublas");
    fully_connected_cublas_check(N, I, O);
    matmul::matmul_cublas(x, w, y, N, O, I);
    bias_activation(y, bias, N, O, act);
}

}  // namespace gpuopt::nn
