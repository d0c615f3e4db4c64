// Building blocks of the reports' networks (ECE408 MNIST, ECE408 Fashion-MNIST, NCTU).
#pragma once

#include <cstdint>

#include "../common/activation.hpp"

namespace gpuopt::nn {

// y[i] = act(x[i]) for n elements (x == y allowed).
void activation_cpu(const float* x, float* y, std::int64_t n, Activation act);

enum class PoolKind : int { Max = 0, Average = 1 };

// Non-overlapping size x size pooling (stride = size) of planes x[planes][H][W] into
// y[planes][H/size][W/size]; trailing rows/columns that do not fill a window are dropped.
void pool2d_cpu(const float* x, float* y, std::int64_t planes, std::int64_t H, std::int64_t W,
                std::int64_t size, PoolKind kind);

// y[N][O] = x[N][I] @ w[I][O] + bias[O] (bias may be null), double accumulation.
void fully_connected_cpu(const float* x, const float* w, const float* bias, float* y, std::int64_t N,
                         std::int64_t I, std::int64_t O);

// out[i] = index of the largest x[i][:] (first one on ties; the first NaN, as NumPy).
void argmax_rows_cpu(const float* x, std::int64_t* out, std::int64_t rows, std::int64_t cols);

}  // namespace gpuopt::nn
