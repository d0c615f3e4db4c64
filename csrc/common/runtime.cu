#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

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
// Eight values a thread (one 16-byte load, two 16-byte stores) where src and dst are aligned, else one by one.
__device__ __forceinline__ float half_bits_to_float(std::uint32_t h, bool bfloat16) {
    return bfloat16 ? __uint_as_float(h << 16) : __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

__global__ void widen_kernel(float* __restrict__ dst, const std::uint16_t* __restrict__ src, std::int64_t n,
                             bool bfloat16, bool vec) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (vec) {
        for (; 8 * i + 7 < n; i += stride) {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(src) + i);
            const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
            float out[8];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                out[2 * j] = half_bits_to_float(w[j] & 0xFFFFu, bfloat16);
                out[2 * j + 1] = half_bits_to_float(w[j] >> 16, bfloat16);
            }
            reinterpret_cast<float4*>(dst)[2 * i] = make_float4(out[0], out[1], out[2], out[3]);
            reinterpret_cast<float4*>(dst)[2 * i + 1] = make_float4(out[4], out[5], out[6], out[7]);
        }
        // The tail past the last whole 8: thread t of the grid takes element 8 * (n / 8) + t.
        const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, j = n / 8 * 8 + t;
        if (t < 8 && j < n) dst[j] = half_bits_to_float(src[j], bfloat16);
        return;
    }
    for (; i < n; i += stride) dst[i] = half_bits_to_float(src[i], bfloat16);
}

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

void widen_half_to_float(float* dst, const std::uint16_t* src, std::int64_t n, bool bfloat16) {
    GPUOPT_REQUIRE(n >= 0 && (n == 0 || (dst && src)), "widen_half_to_float: null pointer or negative count");
    if (n == 0) return;
    constexpr int kThreads = 256;
    const bool vec = reinterpret_cast<std::uintptr_t>(src) % 16 == 0 && reinterpret_cast<std::uintptr_t>(dst) % 16 == 0;
    const std::int64_t items = vec ? std::max<std::int64_t>(n / 8, 1) : n;
    widen_kernel<<<grid_for(items, kThreads), kThreads, 0, current_stream()>>>(dst, src, n, bfloat16, vec);
    GPUOPT_CHECK_LAUNCH("widen_kernel");
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
