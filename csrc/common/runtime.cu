#include <cuda_runtime.h>

#include "cuda_check.cuh"
#include "launch.cuh"
#include "runtime.hpp"

namespace gpuopt {

namespace {
__global__ void spin_kernel(unsigned long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}
}  // namespace

void device_synchronize() { GPUOPT_CUDA_CHECK(cudaDeviceSynchronize()); }

void check_device_errors() {
    GPUOPT_CHECK_LAUNCH("(earlier kernels)");
    GPUOPT_CUDA_CHECK(cudaDeviceSynchronize());
}

void wait_for_stream(std::uintptr_t stream) {
    // 1 and 2 name the legacy and per-thread default streams (CUDA Array Interface v3):
    // stream 0 already orders with the first; the second is synchronised through it.
    if (stream == 0 || stream == 1) return;
    cudaStream_t s = stream == 2 ? cudaStreamPerThread : reinterpret_cast<cudaStream_t>(stream);
    cudaEvent_t ev;
    GPUOPT_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cudaError_t status = cudaEventRecord(ev, s);
    if (status == cudaSuccess) status = cudaStreamWaitEvent(nullptr, ev, 0);
    cudaEventDestroy(ev);  // safe: destruction is deferred until the event completes
    GPUOPT_CUDA_CHECK(status);
}

void spin(double microseconds) {
    GPUOPT_REQUIRE(microseconds >= 0 && microseconds <= 1e6, "spin: 0..1e6 microseconds");
    spin_kernel<<<1, 1>>>(static_cast<unsigned long long>(microseconds * 1000.0));
    GPUOPT_CHECK_LAUNCH("spin_kernel");
}

void memset_device(void* ptr, int value, std::size_t bytes) { GPUOPT_CUDA_CHECK(cudaMemsetAsync(ptr, value, bytes)); }

void copy_device_to_device(void* dst, const void* src, std::size_t bytes) {
    GPUOPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

void copy_host_to_device(void* dst, const void* src, std::size_t bytes) {
    GPUOPT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void copy_device_to_host(void* dst, const void* src, std::size_t bytes) {
    GPUOPT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

int max_shared_memory_per_block_optin() {
    int device = 0, value = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return value;
}

}  // namespace gpuopt
