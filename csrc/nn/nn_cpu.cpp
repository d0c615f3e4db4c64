#include <cmath>

#include "../common/error.hpp"
#include "../matmul/matmul.hpp"
#include "nn.hpp"

namespace gpuopt::nn {

void activation_cpu(const float* x, float* y, std::int64_t n, Activation act) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (std::int64_t i = 0; i < n; ++i) y[i] = apply_activation(x[i], act);
}

void pool2d_cpu(const float* x, float* y, std::int64_t planes, std::int64_t H, std::int64_t W,
                std::int64_t size, PoolKind kind) {
    GPUOPT_REQUIRE(size >= 1 && H >= size && W >= size, "pool2d: window larger than the input");
    const std::int64_t OH = H / size, OW = W / size;
    const float area = static_cast<float>(size * size);
#pragma omp parallel for schedule(static) if (planes * H * W > (1 << 16))
    for (std::int64_t p = 0; p < planes; ++p) {
        const float* xp = x + p * H * W;
        float* yp = y + p * OH * OW;
        for (std::int64_t oh = 0; oh < OH; ++oh)
            for (std::int64_t ow = 0; ow < OW; ++ow) {
                const float* win = xp + oh * size * W + ow * size;
                float acc = kind == PoolKind::Max ? win[0] : 0.f;
                for (std::int64_t i = 0; i < size; ++i)
                    for (std::int64_t j = 0; j < size; ++j) {
                        const float v = win[i * W + j];
                        if (kind == PoolKind::Average)
                            acc += v;
                        else if (v > acc || std::isnan(v))
                            acc = std::isnan(acc) ? acc : v;  // NaN wins, as in PyTorch
                    }
                yp[oh * OW + ow] = kind == PoolKind::Average ? acc / area : acc;
            }
    }
}

void fully_connected_cpu(const float* x, const float* w, const float* bias, float* y, std::int64_t N,
                         std::int64_t I, std::int64_t O, Activation act) {
    matmul::gemm_bias_cpu(x, w, bias, y, N, O, I);
    if (act != Activation::None) activation_cpu(y, y, N * O, act);
}

void argmax_rows_cpu(const float* x, std::int64_t* out, std::int64_t rows, std::int64_t cols) {
    GPUOPT_REQUIRE(cols > 0, "argmax: rows must not be empty");
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
    for (std::int64_t i = 0; i < rows; ++i) {
        const float* row = x + i * cols;
        std::int64_t best = 0;
        for (std::int64_t j = 0; j < cols; ++j) {
            if (std::isnan(row[j])) {
                best = j;
                break;
            }
            if (row[j] > row[best]) best = j;
        }
        out[i] = best;
    }
}

void softmax_rows_cpu(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
    GPUOPT_REQUIRE(cols > 0, "softmax: rows must not be empty");
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
    for (std::int64_t i = 0; i < rows; ++i) {
        const float* row = x + i * cols;
        float* out = y + i * cols;
        float m = -INFINITY;
        for (std::int64_t j = 0; j < cols; ++j)
            if (row[j] > m) m = row[j];
        double sum = 0.0;
        for (std::int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(row[j]) - m);
        for (std::int64_t j = 0; j < cols; ++j) out[j] = static_cast<float>(std::exp(static_cast<double>(row[j]) - m) / sum);
    }
}

}  // namespace gpuopt::nn
