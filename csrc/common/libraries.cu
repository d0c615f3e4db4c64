#include <mutex>

#include "libraries.hpp"

namespace gpuopt {

cublasHandle_t cublas_handle() {
    static std::once_flag once;
    static cublasHandle_t handle = nullptr;
    std::call_once(once, [] {
        GPUOPT_CUBLAS_CHECK(cublasCreate(&handle));
        GPUOPT_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // no TF32
        GPUOPT_CUBLAS_CHECK(cublasSetStream(handle, nullptr));
    });
    return handle;
}

cublasHandle_t cublas_handle_tf32() {
    static std::once_flag once;
    static cublasHandle_t handle = nullptr;
    std::call_once(once, [] {
        GPUOPT_CUBLAS_CHECK(cublasCreate(&handle));
        GPUOPT_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH));
        GPUOPT_CUBLAS_CHECK(cublasSetStream(handle, nullptr));
    });
    return handle;
}

#if defined(GPUOPT_WITH_CUDNN)
cudnnHandle_t cudnn_handle() {
    static std::once_flag once;
    static cudnnHandle_t handle = nullptr;
    std::call_once(once, [] {
        GPUOPT_CUDNN_CHECK(cudnnCreate(&handle));
        GPUOPT_CUDNN_CHECK(cudnnSetStream(handle, nullptr));
    });
    return handle;
}
#endif

}  // namespace gpuopt
