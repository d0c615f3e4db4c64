// conv2d implicit_gemm_tf32x3_wgmma: any plain convolution (filter, stride, padding; one group, no dilation) as ONE
// GEMM on Hopper's warpgroup MMA in 3xTF32, FP32-level accuracy, with the input windows gathered inside the
// product (matmul's tf32x3_wgmma run_gathered): A = w as K x C*R*S, split once a call; B = the windows, element
// (tap, col) = x[n][c][p*u - ph + r][q*v - pw + s], which each thread loads for its column and 16 taps a stage a
// stage ahead, splits and stores into the MMA's shared-memory tiles. unroll_tf32x3's product without its unrolled
// buffer (2 x 8 C*R*S N*P*Q bytes written and re-read: at VGG-16's 64 > 64 @224, 2.6 of its 4.66 ms by bytes),
// and no chunks of images.
#include <climits>

#include "../matmul/tf32x3_wgmma.cuh"
#include "conv2d_cuda.hpp"
#include "conv2d_planes_store.cuh"

namespace gpuopt::conv {

namespace implicit_wgmma {  // (not anonymous: for targets without wgmma the kernel is empty and these go unused)

using i64 = std::int64_t;

// B's columns: output pixel col = n*PQ + p*Q + q reads the window at (p*u - ph, q*v - pw) of image n; taps in
// (c, r, s) order, walked incrementally over a thread's 16.
struct WindowsGather {
    const float* x;
    i64 chw, hw;
    int cols, taps, H, W, R, S, u, v, ph, pw, Q, PQ;
    struct Column {
        const float* image;
        int h0, w0;
        bool in;
    };
    __device__ Column column(int col) const {
        if (col >= cols) return {x, 0, 0, false};
        const int n = col / PQ, j = col - n * PQ, p = j / Q, q = j - p * Q;
        return {x + n * chw, p * u - ph, q * v - pw, true};
    }
    __device__ void values(const Column& col, int k0, float (&out)[16]) const {
        const int RS = R * S;
        int c = k0 / RS, rs = k0 - c * RS, r = rs / S, s = rs - r * S;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int h = col.h0 + r, w = col.w0 + s;
            out[i] = col.in && k0 + i < taps && h >= 0 && h < H && w >= 0 && w < W
                         ? __ldg(col.image + c * hw + static_cast<i64>(h) * W + w)
                         : 0.f;
            if (++s == S) {
                s = 0;
                if (++r == R) r = 0, ++c;
            }
        }
    }
};

constexpr const char* kWhat = "conv2d/implicit_gemm_tf32x3_wgmma";

}  // namespace implicit_wgmma

using implicit_wgmma::i64;
using implicit_wgmma::kWhat;
using implicit_wgmma::WindowsGather;

void conv2d_implicit_gemm_tf32x3_wgmma_check(const Conv2dShape& s) {
    s.validate();
    GPUOPT_REQUIRE(s.plain(), std::string(kWhat) + ": takes one group and no dilation; got groups " +
                                  std::to_string(s.groups) + ", dilation (" + std::to_string(s.dilation_h) + ", " +
                                  std::to_string(s.dilation_w) + ")");
    GPUOPT_REQUIRE(s.N * s.P() * s.Q() <= INT_MAX - 256 && s.C * s.R * s.S <= INT_MAX - 32 && s.K <= INT_MAX,
                   std::string(kWhat) + ": N*P*Q (the product's columns), C*R*S and K must be < 2^31");
}

void conv2d_implicit_gemm_tf32x3_wgmma(const float* x, const float* w, const float* bias, float* y,
                                       const Conv2dShape& s, Activation act) {
    conv2d_implicit_gemm_tf32x3_wgmma_check(s);
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr, std::string(kWhat) + ": x, w and y must be device "
                                                                                      "pointers");
    const int PQ = static_cast<int>(s.P() * s.Q()), cols = static_cast<int>(s.N * PQ);
    const i64 taps = s.C * s.R * s.S;
    const WindowsGather b{x, s.C * s.H * s.W, s.H * s.W, cols, static_cast<int>(taps), static_cast<int>(s.H),
                          static_cast<int>(s.W), static_cast<int>(s.R), static_cast<int>(s.S),
                          static_cast<int>(s.stride_h), static_cast<int>(s.stride_w), static_cast<int>(s.pad_h),
                          static_cast<int>(s.pad_w), static_cast<int>(s.Q()), PQ};
    const bool vec_a = taps % 4 == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
    const bool vec = PQ % 2 == 0 && reinterpret_cast<std::uintptr_t>(y) % 8 == 0;
    const PlanesStore store{y, bias, s.K * PQ, PQ, cols, act, vec};
    matmul::tf32x3_wgmma::run_gathered(w, s.K, taps, vec_a, b, cols, store, kWhat,
                                       " (use implicit_gemm_fast or cudnn there)");
}

}  // namespace gpuopt::conv
