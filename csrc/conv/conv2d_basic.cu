#include "../common/launch.cuh"
#include "conv2d_cuda.hpp"

namespace gpuopt::conv {

namespace {
constexpr int kThreads = 256;

// One thread per output y[n][k][p][q]. The flat output index is decoded q fastest, then p,
// k, n (the CS6235 mapping): consecutive threads write consecutive addresses of y.
// Grid-stride with 64-bit indices, so a grid capped by grid_for still covers every output.
// The sum runs in the natural c, r, s order in float; taps that fall into the zero padding
// are skipped.
__global__ void conv2d_basic_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                    const float* __restrict__ bias, float* __restrict__ y, Conv2dShape shape,
                                    std::int64_t P, std::int64_t Q, Activation act) {
    // The reports' names: x[N][C][H][W], w[K][C][R][S], stride (u, v), padding (ph, pw).
    const std::int64_t C = shape.C, H = shape.H, W = shape.W, K = shape.K, R = shape.R, S = shape.S;
    const std::int64_t u = shape.stride_h, v = shape.stride_w, ph = shape.pad_h, pw = shape.pad_w;
    const std::int64_t total = shape.N * K * P * Q;
    for (std::int64_t out = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; out < total;
         out += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t q = out % Q;
        std::int64_t rest = out / Q;
        const std::int64_t p = rest % P;
        rest /= P;
        const std::int64_t k = rest % K;
        const std::int64_t n = rest / K;

        // Top-left input position of this output's window (negative inside the padding).
        const std::int64_t row0 = p * u - ph;
        const std::int64_t col0 = q * v - pw;
        const float* x_image = x + n * C * H * W;
        const float* w_map = w + k * C * R * S;

        float acc = 0.f;
        for (std::int64_t c = 0; c < C; ++c) {
            const float* x_channel = x_image + c * H * W;
            const float* w_channel = w_map + c * R * S;
            for (std::int64_t r = 0; r < R; ++r) {
                const std::int64_t row = row0 + r;
                if (row < 0 || row >= H) continue;  // zero padding contributes nothing
                for (std::int64_t s = 0; s < S; ++s) {
                    const std::int64_t col = col0 + s;
                    if (col < 0 || col >= W) continue;
                    acc += x_channel[row * W + col] * w_channel[r * S + s];
                }
            }
        }
        if (bias) acc += bias[k];
        y[out] = apply_activation(acc, act);
    }
}
}  // namespace

void conv2d_basic(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                  Activation act) {
    s.validate();
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr, "conv2d basic: x, w and y must be device pointers");
    check_block_threads(kThreads, true);
    const std::int64_t P = s.P(), Q = s.Q();
    const std::int64_t total = s.N * s.K * P * Q;
    conv2d_basic_kernel<<<grid_for(total, kThreads), kThreads, 0, current_stream()>>>(x, w, bias, y, s, P, Q, act);
    GPUOPT_CHECK_LAUNCH("conv2d_basic_kernel");
}

}  // namespace gpuopt::conv
