#include <mutex>

#include "libraries.hpp"
#include "stream.hpp"

namespace gpuopt {

namespace {

cublasHandle_t create_cublas(cublasMath_t mode) {
    cublasHandle_t handle = nullptr;
    GPUOPT_CUBLAS_CHECK(cublasCreate(&handle));
    GPUOPT_CUBLAS_CHECK(cublasSetMathMode(handle, mode));
    return handle;
}

// A handle's stream follows the caller's: set on every use (cheap; the handle keeps no per-stream state).
cublasHandle_t on_current_stream(cublasHandle_t handle) {
    GPUOPT_CUBLAS_CHECK(cublasSetStream(handle, current_stream()));
    return handle;
}

}  // namespace

cublasHandle_t cublas_handle() {
    static const cublasHandle_t handle = create_cublas(CUBLAS_DEFAULT_MATH);  // no TF32
    return on_current_stream(handle);
}

cublasHandle_t cublas_handle_tf32() {
    static const cublasHandle_t handle = create_cublas(CUBLAS_TF32_TENSOR_OP_MATH);
    return on_current_stream(handle);
}

#if defined(GPUOPT_WITH_CUDNN)
cudnnHandle_t cudnn_handle() {
    static std::once_flag once;
    static cudnnHandle_t handle = nullptr;
    std::call_once(once, [] {
        GPUOPT_CUDNN_CHECK(cudnnCreate(&handle));
    });
    GPUOPT_CUDNN_CHECK(cudnnSetStream(handle, current_stream()));
    return handle;
}
#endif

}  // namespace gpuopt
