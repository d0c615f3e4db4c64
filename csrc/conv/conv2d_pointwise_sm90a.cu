// conv2d pointwise_tf32x3: a 1x1 convolution (any stride, no padding, one group) as one GEMM on Hopper's warpgroup
// MMA in 3xTF32, FP32-level accuracy (matmul's tf32x3_wgmma, ../matmul/tf32x3_wgmma.cuh). y[n][k][p][q] =
// sum_c w[k][c] x[n][c][p*u][q*v]: A = w (K x C, row-major as it is), B = the input read as a C x (N*P*Q) matrix
// whose column (n, p, q) is the pixel the output reads (gathered by the split of B: no unrolled copy of x), and
// the product's output pairs written into y's NCHW planes with the bias and activation. One launch for the whole
// batch: the images are columns of one product, so a small image still fills the GPU.
#include <climits>

#include "../matmul/tf32x3_wgmma.cuh"
#include "conv2d_cuda.hpp"
#include "conv2d_planes_store.cuh"

namespace gpuopt::conv {

namespace {

using i64 = std::int64_t;

// B's element (c, col): x[n][c][p*u][q*v], col = n*PQ + p*Q + q.
struct PixelsB {
    const float* x;
    i64 chw, hw;
    int W, u, v, Q, PQ;
    __device__ float operator()(int c, int col) const {
        const int n = col / PQ, j = col - n * PQ, p = j / Q, q = j - p * Q;
        return __ldg(x + n * chw + c * hw + static_cast<i64>(p) * u * W + static_cast<i64>(q) * v);
    }
};

}  // namespace

void conv2d_pointwise_tf32x3_check(const Conv2dShape& s) {
    const std::string what = "conv2d/pointwise_tf32x3";
    s.validate();
    GPUOPT_REQUIRE(s.R == 1 && s.S == 1 && s.pad_h == 0 && s.pad_w == 0 && s.plain(),
                   what + ": takes 1x1 filters without padding, one group and no dilation (any stride); got " +
                       std::to_string(s.R) + "x" + std::to_string(s.S) + ", padding (" + std::to_string(s.pad_h) +
                       ", " + std::to_string(s.pad_w) + "), groups " + std::to_string(s.groups));
    GPUOPT_REQUIRE(s.N * s.P() * s.Q() <= INT_MAX - 256 && s.C <= INT_MAX && s.K <= INT_MAX,
                   what + ": N*P*Q (the product's columns), C and K must be < 2^31");
}

void conv2d_pointwise_tf32x3(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                             Activation act) {
    conv2d_pointwise_tf32x3_check(s);
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr,
                   "conv2d pointwise_tf32x3: x, w and y must be device pointers");
    const int PQ = static_cast<int>(s.P() * s.Q());
    const i64 cols = s.N * PQ;
    const PixelsB b{x, s.C * s.H * s.W, s.H * s.W, static_cast<int>(s.W), static_cast<int>(s.stride_h),
                    static_cast<int>(s.stride_w), static_cast<int>(s.Q()), PQ};
    const bool vec = PQ % 2 == 0 && reinterpret_cast<std::uintptr_t>(y) % 8 == 0;
    const PlanesStore store{y, bias, s.K * PQ, PQ, static_cast<int>(cols), act, vec};
    matmul::tf32x3_wgmma::run(w, s.K, s.C, s.C % 4 == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0, b, cols,
                              store, "conv2d/pointwise_tf32x3", " (use implicit_gemm_fast or cudnn there)");
}

}  // namespace gpuopt::conv
