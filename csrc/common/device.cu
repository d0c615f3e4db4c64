#include "device.hpp"

#include <cublas_v2.h>
#if defined(GPUOPT_WITH_CUDNN)
#include <cudnn.h>
#endif

#include "cuda_check.cuh"

namespace gpuopt {

namespace {
cudaError_t query_device_count(int* count) {
    *count = 0;
    cudaError_t status = cudaGetDeviceCount(count);
    if (status != cudaSuccess) {
        cudaGetLastError();  // leave no sticky state behind
        *count = 0;
    }
    return status;
}
}  // namespace

int cuda_device_count() noexcept {
    int count = 0;
    query_device_count(&count);
    return count;
}

std::string cuda_unavailable_reason() {
    int count = 0;
    cudaError_t status = query_device_count(&count);
    if (status != cudaSuccess) return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    if (count == 0) return "no CUDA device found";
    return "";
}

DeviceInfo device_info(int index) {
    cudaDeviceProp p{};
    GPUOPT_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
    DeviceInfo d;
    d.index = index;
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.multiprocessors = p.multiProcessorCount;
    d.total_memory_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
    d.l2_cache_bytes = p.l2CacheSize;
    d.shared_memory_per_block_bytes = static_cast<std::int64_t>(p.sharedMemPerBlock);
    d.shared_memory_per_block_optin_bytes = static_cast<std::int64_t>(p.sharedMemPerBlockOptin);
    d.shared_memory_per_sm_bytes = static_cast<std::int64_t>(p.sharedMemPerMultiprocessor);
    d.constant_memory_bytes = static_cast<std::int64_t>(p.totalConstMem);
    d.registers_per_block = p.regsPerBlock;
    d.max_threads_per_block = p.maxThreadsPerBlock;
    d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    d.warp_size = p.warpSize;
    // Clock rates left cudaDeviceProp in CUDA 13; the attributes are the stable way.
    GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&d.clock_rate_khz, cudaDevAttrClockRate, index));
    GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&d.memory_clock_rate_khz, cudaDevAttrMemoryClockRate, index));
    GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&d.memory_bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, index));
    GPUOPT_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
    GPUOPT_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
    return d;
}

int cublas_runtime_version() {
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS) return 0;
    cublasGetProperty(MINOR_VERSION, &minor);
    cublasGetProperty(PATCH_LEVEL, &patch);
    return major * 10000 + minor * 100 + patch;
}

int cudnn_runtime_version() {
#if defined(GPUOPT_WITH_CUDNN)
    return static_cast<int>(cudnnGetVersion());
#else
    return 0;
#endif
}

int multiprocessor_count() {
    static int cached[64] = {};
    int device = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    if (device < 0 || device >= 64) {
        int value = 0;
        GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device));
        return value;
    }
    if (cached[device] == 0)
        GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&cached[device], cudaDevAttrMultiProcessorCount, device));
    return cached[device];
}

}  // namespace gpuopt
