// conv2d: cross-correlation of NCHW input with KCRS filters (the convention of every
// report and of cuDNN's CUDNN_CROSS_CORRELATION mode).
#pragma once

#include <cstdint>

#include "../common/activation.hpp"
#include "../common/error.hpp"

namespace gpuopt::conv {

struct Conv2dShape {
    std::int64_t N = 0, C = 0, H = 0, W = 0;  // input  x[N][C][H][W]
    std::int64_t K = 0, R = 0, S = 0;         // filter w[K][C / groups][R][S]
    std::int64_t stride_h = 1, stride_w = 1;  // u, v in the CS6235 report
    std::int64_t pad_h = 0, pad_w = 0;
    // Tap (r, s) reads input row p*u - ph + r*dilation_h (columns likewise); groups: the channels split into groups
    // of C / groups, output map k reading group k / (K / groups) only. Only the CPU reference and cuDNN take values
    // other than 1 so far; the other launchers are reached with 1 (gpuopt/conv/problem.py rejects the rest first).
    std::int64_t dilation_h = 1, dilation_w = 1;
    std::int64_t groups = 1;

    // The filter's extent on the input: (R - 1) * dilation + 1.
    std::int64_t R_span() const { return (R - 1) * dilation_h + 1; }
    std::int64_t S_span() const { return (S - 1) * dilation_w + 1; }
    // Output y[N][K][P][Q].
    std::int64_t P() const { return (H + 2 * pad_h - R_span()) / stride_h + 1; }
    std::int64_t Q() const { return (W + 2 * pad_w - S_span()) / stride_w + 1; }
    bool plain() const { return dilation_h == 1 && dilation_w == 1 && groups == 1; }

    void validate() const {
        GPUOPT_REQUIRE(N > 0 && C > 0 && H > 0 && W > 0 && K > 0 && R > 0 && S > 0,
                       "conv2d: every dimension must be positive");
        GPUOPT_REQUIRE(stride_h > 0 && stride_w > 0, "conv2d: stride must be positive");
        GPUOPT_REQUIRE(pad_h >= 0 && pad_w >= 0, "conv2d: padding must be non-negative");
        GPUOPT_REQUIRE(dilation_h > 0 && dilation_w > 0, "conv2d: dilation must be positive");
        GPUOPT_REQUIRE(groups > 0 && C % groups == 0 && K % groups == 0,
                       "conv2d: groups must divide both C and K");
        GPUOPT_REQUIRE(H + 2 * pad_h >= R_span() && W + 2 * pad_w >= S_span(),
                       "conv2d: filter larger than the padded input (its dilated span)");
    }
};

// Reference: y = act(conv(x, w) + bias), accumulated in double, any stride, padding, dilation and groups (w is
// [K][C / groups][R][S]). bias may be null.
void conv2d_cpu(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                Activation act);

}  // namespace gpuopt::conv
