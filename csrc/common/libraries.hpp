// Process-wide cuBLAS and cuDNN handles, created on first use; each use binds them to the current stream
// (stream.hpp).
#pragma once

#include <cublas_v2.h>

#include <string>

#include "cuda_check.cuh"

#if defined(GPUOPT_WITH_CUDNN)
#include <cudnn.h>
#endif

namespace gpuopt {

inline void cublas_check(cublasStatus_t status, const char* expr, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS)
        detail::fail_cuda("cuBLAS", cublasGetStatusString(status), expr, file, line);
}

// cuBLAS in strict FP32: CUBLAS_DEFAULT_MATH never uses TF32 tensor cores for SGEMM.
cublasHandle_t cublas_handle();
// A second handle with TF32 tensor cores allowed (CUBLAS_TF32_TENSOR_OP_MATH): the matmul baseline
// "cublas_tf32" only.
cublasHandle_t cublas_handle_tf32();

#if defined(GPUOPT_WITH_CUDNN)
inline void cudnn_check(cudnnStatus_t status, const char* expr, const char* file, int line) {
    if (status != CUDNN_STATUS_SUCCESS) detail::fail_cuda("cuDNN", cudnnGetErrorString(status), expr, file, line);
}
cudnnHandle_t cudnn_handle();
#endif

}  // namespace gpuopt

#define GPUOPT_CUBLAS_CHECK(expr) ::gpuopt::cublas_check((expr), #expr, __FILE__, __LINE__)
#define GPUOPT_CUDNN_CHECK(expr) ::gpuopt::cudnn_check((expr), #expr, __FILE__, __LINE__)
