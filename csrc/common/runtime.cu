#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

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

bool capturing(cudaStream_t s) noexcept {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamGetCaptureInfo(s, &status) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return status != cudaStreamCaptureStatusNone;
}

// The legacy stream cannot be captured; the per-thread stream can.
bool process_stream(cudaStream_t s) noexcept {
    return s == nullptr || (s == cudaStreamPerThread && !capturing(s));
}

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

namespace {
struct SharedMemoryOptIn {
    std::size_t static_bytes = 0;   // the kernel's static shared memory
    std::size_t dynamic_allowed = 0;  // its dynamic opt-in as last set (or its default)
    std::size_t limit = 0;          // the device's opt-in limit per block
};
std::mutex opt_in_mutex;
std::map<std::pair<int, const void*>, SharedMemoryOptIn> opt_ins;  // (device, kernel)
}  // namespace

void require_shared_memory_bytes(const void* kernel, std::size_t bytes, const char* what) {
    int device = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(opt_in_mutex);
    auto [it, fresh] = opt_ins.try_emplace(std::make_pair(device, kernel));
    SharedMemoryOptIn& s = it->second;
    if (fresh) {
        cudaFuncAttributes attr{};
        const cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
        if (err != cudaSuccess) opt_ins.erase(it);
        GPUOPT_CUDA_CHECK(err);
        s.static_bytes = attr.sharedSizeBytes;
        s.dynamic_allowed = static_cast<std::size_t>(attr.maxDynamicSharedSizeBytes);
        s.limit = static_cast<std::size_t>(max_shared_memory_per_block_optin());
    }
    const std::size_t total = bytes + s.static_bytes;
    GPUOPT_REQUIRE(total <= s.limit, std::string(what) + " needs " + std::to_string(total) +
                                         " bytes of shared memory per block; this GPU allows " + std::to_string(s.limit));
    if (bytes > s.dynamic_allowed) {
        GPUOPT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
        s.dynamic_allowed = bytes;
    }
}

int resident_blocks_per_sm_of(const void* kernel, int threads, std::size_t dynamic_smem) {
    static std::mutex mutex;
    static std::map<std::tuple<int, const void*, int, std::size_t>, int> known;
    int device = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    const auto key = std::make_tuple(device, kernel, threads, dynamic_smem);
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
    int blocks = 0;
    GPUOPT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic_smem));
    known.emplace(key, blocks);
    return blocks;
}

int max_shared_memory_per_block_optin() {
    int device = 0, value = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return value;
}

}  // namespace gpuopt
