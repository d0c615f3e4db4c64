// matmul: C[M][N] = A[M][K] @ B[K][N] (+ bias[N]), row-major float32.
#pragma once

#include <cstdint>

namespace gpuopt::matmul {

// Reference, accumulated in double; bias may be null (then this is plain matmul).
void gemm_bias_cpu(const float* a, const float* b, const float* bias, float* c, std::int64_t M,
                   std::int64_t N, std::int64_t K);

inline void matmul_cpu(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N,
                       std::int64_t K) {
    gemm_bias_cpu(a, b, nullptr, c, M, N, K);
}

}  // namespace gpuopt::matmul
