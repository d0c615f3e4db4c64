// matmul on the GPU: device pointers, row-major float32, stream 0. Launchers check their
// configuration and every launch.
#pragma once

#include <cstdint>

namespace gpuopt::matmul {

// v0 "naive": one thread per output on a 2-D grid of 16x16 blocks (the CMU report's fix
// of its single-block kernel), correct for any M, N, K.
void matmul_naive(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K);

// cuBLAS SGEMM, strict FP32 (no TF32): the baseline every variant is compared with.
void matmul_cublas(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K);

}  // namespace gpuopt::matmul
