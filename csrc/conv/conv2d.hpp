// conv2d: cross-correlation of NCHW input with KCRS filters (the convention of every
// report and of cuDNN's CUDNN_CROSS_CORRELATION mode).
#pragma once

#include <cstdint>

#include "../common/activation.hpp"
#include "../common/error.hpp"

namespace gpuopt::conv {

struct Conv2dShape {
    std::int64_t N = 0, C = 0, H = 0, W = 0;  // input  x[N][C][H][W]
    std::int64_t K = 0, R = 0, S = 0;         // filter w[K][C][R][S]
    std::int64_t stride_h = 1, stride_w = 1;  // u, v in the CS6235 report
    std::int64_t pad_h = 0, pad_w = 0;

    // Output y[N][K][P][Q].
    std::int64_t P() const { return (H + 2 * pad_h - R) / stride_h + 1; }
    std::int64_t Q() const { return (W + 2 * pad_w - S) / stride_w + 1; }

    void validate() const {
        GPUOPT_REQUIRE(N > 0 && C > 0 && H > 0 && W > 0 && K > 0 && R > 0 && S > 0,
                       "conv2d: every dimension must be positive");
        GPUOPT_REQUIRE(stride_h > 0 && stride_w > 0, "conv2d: stride must be positive");
        GPUOPT_REQUIRE(pad_h >= 0 && pad_w >= 0, "conv2d: padding must be non-negative");
        GPUOPT_REQUIRE(H + 2 * pad_h >= R && W + 2 * pad_w >= S,
                       "conv2d: filter larger than the padded input");
    }
};

// Reference: y = act(conv(x, w) + bias), accumulated in double. bias may be null.
void conv2d_cpu(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                Activation act);

}  // namespace gpuopt::conv
