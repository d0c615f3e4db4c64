// "cublas": cuBLAS SGEMM in strict FP32 (TF32 off), the reference the ladder is measured against
// (not a step of the ladder); "cublas_tf32": the same call with TF32 tensor cores allowed, the rate the
// 3xTF32 steps trade two thirds of for FP32 accuracy (a baseline of speed, not of accuracy).
#include "../common/error.hpp"
#include "../common/libraries.hpp"
#include "matmul_cuda.hpp"

namespace gpuopt::matmul {

namespace {

void sgemm(cublasHandle_t handle, const float* a, const float* b, float* c, std::int64_t M, std::int64_t N,
           std::int64_t K) {
    GPUOPT_REQUIRE(M > 0 && N > 0 && K > 0, "matmul: M, N and K must be positive");
    GPUOPT_REQUIRE(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "matmul cublas: dimensions must be < 2^31");
    const float alpha = 1.f, beta = 0.f;
    // cuBLAS is column-major: row-major C = A @ B is column-major C^T = B^T @ A^T.
    GPUOPT_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                    static_cast<int>(K), &alpha, b, static_cast<int>(N), a, static_cast<int>(K), &beta, c,
                                    static_cast<int>(N)));
}

}  // namespace

void matmul_cublas(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K) {
    sgemm(cublas_handle(), a, b, c, M, N, K);
}

void matmul_cublas_tf32(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K) {
    sgemm(cublas_handle_tf32(), a, b, c, M, N, K);
}

}  // namespace gpuopt::matmul
