#include <cuda_runtime.h>

#include "cuda_check.cuh"
#include "launch.cuh"
#include "runtime.hpp"
#include "stream.hpp"

namespace gpuopt {

namespace {
__global__ void spin_kernel(unsigned long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}

thread_local cudaStream_t t_current_stream = nullptr;

// One event per thread for stream_wait: cudaStreamWaitEvent takes the event's state when it is called, so the
// event can be recorded again at once.
cudaEvent_t wait_event() {
    thread_local cudaEvent_t ev = nullptr;
    if (!ev) GPUOPT_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    return ev;
}
}  // namespace

cudaStream_t current_stream() noexcept { return t_current_stream; }
void set_current_stream(cudaStream_t stream) noexcept { t_current_stream = stream; }

void stream_wait(cudaStream_t waiter, cudaStream_t producer) {
    if (waiter == producer) return;
    cudaEvent_t ev = wait_event();
    GPUOPT_CUDA_CHECK(cudaEventRecord(ev, producer));
    GPUOPT_CUDA_CHECK(cudaStreamWaitEvent(waiter, ev, 0));
}

void copy_to_host_sync(void* host, const void* device, std::size_t bytes) {
    const cudaStream_t s = current_stream();
    GPUOPT_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, s));
    GPUOPT_CUDA_CHECK(cudaStreamSynchronize(s));
}

void device_synchronize() { GPUOPT_CUDA_CHECK(cudaDeviceSynchronize()); }

void check_device_errors() {
    GPUOPT_CHECK_LAUNCH("(earlier kernels)");
    GPUOPT_CUDA_CHECK(cudaDeviceSynchronize());
}

void spin(double microseconds) {
    GPUOPT_REQUIRE(microseconds >= 0 && microseconds <= 1e6, "spin: 0..1e6 microseconds");
    spin_kernel<<<1, 1, 0, current_stream()>>>(static_cast<unsigned long long>(microseconds * 1000.0));
    GPUOPT_CHECK_LAUNCH("spin_kernel");
}

void memset_device(void* ptr, int value, std::size_t bytes) {
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(ptr, value, bytes, current_stream()));
}

void copy_device_to_device(void* dst, const void* src, std::size_t bytes) {
    GPUOPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, current_stream()));
}

int max_shared_memory_per_block_optin() {
    int device = 0, value = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return value;
}

}  // namespace gpuopt
