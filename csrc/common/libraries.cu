#include <mutex>

#include "libraries.hpp"

namespace gpuopt {

namespace {

cublasHandle_t create_cublas(cublasMath_t mode) {
    cublasHandle_t handle = nullptr;
    GPUOPT_CUBLAS_CHECK(cublasCreate(&handle));
    GPUOPT_CUBLAS_CHECK(cublasSetMathMode(handle, mode));
    GPUOPT_CUBLAS_CHECK(cublasSetStream(handle, nullptr));
    return handle;
}

}  // namespace

cublasHandle_t cublas_handle() {
    static const cublasHandle_t handle = create_cublas(CUBLAS_DEFAULT_MATH);  // no TF32
    return handle;
}

cublasHandle_t cublas_handle_tf32() {
    static const cublasHandle_t handle = create_cublas(CUBLAS_TF32_TENSOR_OP_MATH);
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
