// conv2d unroll_tf32x3: any plain convolution (filter, stride, padding, dilation; one group) as GEMMs on Hopper's
// warpgroup MMA in 3xTF32, FP32-level accuracy (matmul's tf32x3_wgmma, ../matmul/tf32x3_wgmma.cuh). y[n][k][p][q] =
// sum_{c,r,s} w[k][c][r][s] x[n][c][p*u - ph + r*dh][q*v - pw + s*dw]: A = w as K x C*R*S (row-major as it is),
// B = the unrolled input, C*R*S x N*P*Q, column (n, p, q) the window that output reads, zero where it falls in the
// padding. Unlike pointwise_tf32x3 (1x1: B is x itself), B here is C*R*S / 1 times larger than x, so the operand
// split writes it out: the unrolled matrix exists, in TF32 hi and lo parts (8 bytes an entry), as unroll's im2col
// buffer does. Chunks of images keep it within the unroll scratch budget, one product a chunk, each chunk's
// images the columns of one product (so a small image still fills the GPU). What a gathered-tile kernel would
// save: writing and re-reading that buffer, 2 x 8 C*R*S*N*P*Q bytes.
#include <algorithm>
#include <climits>

#include "../matmul/tf32x3_wgmma.cuh"
#include "conv2d_cuda.hpp"
#include "conv2d_planes_store.cuh"

namespace gpuopt::conv {

namespace {

using i64 = std::int64_t;

// B's element (tap, col): tap = c*R*S + r*S + s, col = n*PQ + p*Q + q (n within the chunk at x).
struct WindowsB {
    const float* x;
    i64 chw, hw;
    int H, W, RS, S, u, v, ph, pw, dh, dw, Q, PQ;
    __device__ float operator()(int tap, int col) const {
        const int c = tap / RS, rs = tap - c * RS, r = rs / S, s = rs - r * S;
        const int n = col / PQ, j = col - n * PQ, p = j / Q, q = j - p * Q;
        const int h = p * u - ph + r * dh, w = q * v - pw + s * dw;
        return h >= 0 && h < H && w >= 0 && w < W ? __ldg(x + n * chw + c * hw + static_cast<i64>(h) * W + w) : 0.f;
    }
};

constexpr const char* kWhat = "conv2d/unroll_tf32x3";

}  // namespace

std::int64_t conv2d_unroll_tf32x3_chunk_images(const Conv2dShape& s, std::int64_t scratch_limit_bytes) {
    // The split B of a chunk: TF32 hi and lo of (C*R*S to a multiple of 32) x (chunk*P*Q to a multiple of 128).
    const i64 taps = (s.C * s.R * s.S + 31) / 32 * 32, per_image = 8 * taps * s.P() * s.Q();
    return std::clamp<i64>(scratch_limit_bytes / std::max<i64>(per_image, 1), 1, s.N);
}

void conv2d_unroll_tf32x3_check(const Conv2dShape& s, std::int64_t scratch_limit_bytes) {
    s.validate();
    GPUOPT_REQUIRE(s.plain(), std::string(kWhat) + ": takes one group and no dilation; got groups " +
                                  std::to_string(s.groups) + ", dilation (" + std::to_string(s.dilation_h) + ", " +
                                  std::to_string(s.dilation_w) + ")");
    GPUOPT_REQUIRE(scratch_limit_bytes > 0, std::string(kWhat) + ": scratch_limit_bytes must be positive");
    const i64 chunk = conv2d_unroll_tf32x3_chunk_images(s, scratch_limit_bytes);
    GPUOPT_REQUIRE(chunk * s.P() * s.Q() <= INT_MAX - 256 && s.C * s.R * s.S <= INT_MAX - 32 && s.K <= INT_MAX,
                   std::string(kWhat) + ": a chunk's N*P*Q (the product's columns), C*R*S and K must be < 2^31");
}

void conv2d_unroll_tf32x3(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                          Activation act, std::int64_t scratch_limit_bytes) {
    conv2d_unroll_tf32x3_check(s, scratch_limit_bytes);
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr, std::string(kWhat) + ": x, w and y must be device "
                                                                                      "pointers");
    const int PQ = static_cast<int>(s.P() * s.Q());
    const i64 taps = s.C * s.R * s.S, chw = s.C * s.H * s.W, kpq = s.K * PQ;
    const i64 chunk = conv2d_unroll_tf32x3_chunk_images(s, scratch_limit_bytes);
    const bool vec_a = taps % 4 == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
    for (i64 n0 = 0; n0 < s.N; n0 += chunk) {
        const i64 images = std::min(chunk, s.N - n0), cols = images * PQ;
        const WindowsB b{x + n0 * chw, chw, s.H * s.W, static_cast<int>(s.H), static_cast<int>(s.W),
                         static_cast<int>(s.R * s.S), static_cast<int>(s.S), static_cast<int>(s.stride_h),
                         static_cast<int>(s.stride_w), static_cast<int>(s.pad_h), static_cast<int>(s.pad_w),
                         static_cast<int>(s.dilation_h), static_cast<int>(s.dilation_w), static_cast<int>(s.Q()), PQ};
        float* y0 = y + n0 * kpq;
        const bool vec = PQ % 2 == 0 && reinterpret_cast<std::uintptr_t>(y0) % 8 == 0;
        const PlanesStore store{y0, bias, kpq, PQ, static_cast<int>(cols), act, vec};
        matmul::tf32x3_wgmma::run(w, s.K, taps, vec_a, b, cols, store, kWhat, " (use implicit_gemm_fast or cudnn there)");
    }
}

}  // namespace gpuopt::conv
