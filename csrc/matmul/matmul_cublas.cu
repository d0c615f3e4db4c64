// "cublas": cuBLAS SGEMM in strict FP32 (TF32 off), the reference the ladder is measured against
// (not a step of the ladder).
#include "../common/error.hpp"
#include "../common/libraries.hpp"
#include "matmul_cuda.hpp"

namespace gpuopt::matmul {

void matmul_cublas(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K) {
    GPUOPT_REQUIRE(M > 0 && N > 0 && K > 0, "matmul: M, N and K must be positive");
    GPUOPT_REQUIRE(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "matmul cublas: dimensions must be < 2^31");
    const float alpha = 1.f, beta = 0.f;
    // cuBLAS is column-major: row-major C = A @ B is column-major C^T = B^T @ A^T.
    GPUOPT_CUBLAS_CHECK(cublasSgemm(cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                    static_cast<int>(K), &alpha, b, static_cast<int>(N), a, static_cast<int>(K), &beta, c,
                                    static_cast<int>(N)));
}

}  // namespace gpuopt::matmul
