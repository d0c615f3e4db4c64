// Building blocks of the reports' networks (ECE408 MNIST, ECE408 Fashion-MNIST, NCTU).
#pragma once

#include <cstdint>

#include "../common/activation.hpp"

namespace gpuopt::nn {

// y[i] = act(x[i]) for n elements (x == y allowed).
void activation_cpu(const float* x, float* y, std::int64_t n, Activation act);

enum class PoolKind : int { Max = 0, Average = 1 };
inline constexpr NameChoices<2> kPoolKinds{"kind", {"max", "avg"}, 0};  // the names the bindings take

// Non-overlapping size x size pooling (stride = size) of planes x[planes][H][W] into
// y[planes][H/size][W/size]; trailing rows/columns that do not fill a window are dropped.
void pool2d_cpu(const float* x, float* y, std::int64_t planes, std::int64_t H, std::int64_t W,
                std::int64_t size, PoolKind kind);

// y[N][O] = act(x[N][I] @ w[I][O] + bias[O]) (bias may be null), double accumulation; the
// activation is applied to the float result.
void fully_connected_cpu(const float* x, const float* w, const float* bias, float* y, std::int64_t N,
                         std::int64_t I, std::int64_t O, Activation act);

// out[i] = index of the largest x[i][:] (first one on ties; the first NaN, as NumPy).
void argmax_rows_cpu(const float* x, std::int64_t* out, std::int64_t rows, std::int64_t cols);

// y[i][:] = exp(x[i][:] - m) / sum_j exp(x[i][j] - m), m the row's largest value (exp cannot
// overflow); double exp and sum, rounded to float once. NaN skips the max but not the sum, so a
// NaN in a row gives a NaN row, as do +inf (inf - inf) and a row of -inf.
void softmax_rows_cpu(const float* x, float* y, std::int64_t rows, std::int64_t cols);

}  // namespace gpuopt::nn
