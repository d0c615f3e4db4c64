#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "cuda_check.cuh"
#include "error.hpp"
#include "memory_pool.hpp"
#include "scratch.hpp"
#include "stream.hpp"

namespace gpuopt {

namespace {
constexpr int kMaxDevices = 64;

struct Pools {
    std::mutex mutex;
    std::atomic<cudaMemPool_t> pool[kMaxDevices] = {};
    std::atomic<std::size_t> in_use{0};
    std::atomic<bool> poison{false};
    std::vector<PoolBlock> deferred;  // frees that wait for a capture of their stream to end (under mutex)
};

Pools& pools() {
    static Pools* p = new Pools();  // never destroyed: no CUDA call after the driver shut down
    return *p;
}

cudaMemPool_t create_pool(int device) {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    GPUOPT_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    std::uint64_t keep_everything = UINT64_MAX;  // the pool caches: nothing goes back at a synchronisation
    GPUOPT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    return pool;
}

cudaMemPool_t device_pool() {
    int device = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    GPUOPT_REQUIRE(device >= 0 && device < kMaxDevices, "gpuopt's pool handles devices 0..63");
    Pools& p = pools();
    cudaMemPool_t pool = p.pool[device].load(std::memory_order_acquire);
    if (pool) return pool;
    std::lock_guard<std::mutex> lock(p.mutex);
    pool = p.pool[device].load(std::memory_order_relaxed);
    if (!pool) p.pool[device].store(pool = create_pool(device), std::memory_order_release);
    return pool;
}

// This thread in relaxed capture mode for a scope: while another stream is being captured in the global mode
// (torch.cuda.graph's), the pool's calls on streams outside that capture are then allowed (PyTorch's allocator does
// the same).
class RelaxedCapture {
public:
    RelaxedCapture() noexcept { cudaThreadExchangeStreamCaptureMode(&mode_); }
    ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
    RelaxedCapture(const RelaxedCapture&) = delete;
    RelaxedCapture& operator=(const RelaxedCapture&) = delete;

private:
    cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// The capture sequence `stream` is in (0: not capturing). A stream that cannot be asked (the legacy stream while
// a blocking stream is captured elsewhere) counts as not capturing; its error is cleared.
unsigned long long capture_of(cudaStream_t stream) noexcept {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    if (cudaStreamGetCaptureInfo(stream, &status, &id) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return status == cudaStreamCaptureStatusActive ? id : 0;
}

// Frees deferred blocks whose stream's capture has ended (caller holds the mutex).
void flush_deferred(Pools& p) noexcept {
    std::size_t kept = 0;
    for (PoolBlock& b : p.deferred) {
        if (capture_of(b.stream) != 0) p.deferred[kept++] = b;
        else if (cudaFreeAsync(b.ptr, b.stream) != cudaSuccess) cudaGetLastError();
    }
    p.deferred.resize(kept);
}
}  // namespace

PoolBlock pool_alloc(std::size_t bytes) {
    RelaxedCapture relaxed;
    PoolBlock b;
    b.bytes = bytes;
    b.stream = current_stream();
    b.capture = capture_of(b.stream);
    cudaMemPool_t pool = device_pool();
    // In a capture the allocation is the graph's (an allocation node, from the device's graph memory): only
    // cudaMallocAsync makes one; an explicit pool's allocation is refused there.
    cudaError_t status = b.capture != 0 ? cudaMallocAsync(&b.ptr, bytes == 0 ? 1 : bytes, b.stream)
                                        : cudaMallocFromPoolAsync(&b.ptr, bytes == 0 ? 1 : bytes, pool, b.stream);
    if (status == cudaErrorMemoryAllocation && b.capture == 0) {
        cudaGetLastError();
        cudaMemPoolTrimTo(pool, 0);  // give back what is cached and idle, and try once more
        status = cudaMallocFromPoolAsync(&b.ptr, bytes == 0 ? 1 : bytes, pool, b.stream);
    }
    GPUOPT_CUDA_CHECK(status);
    Pools& p = pools();
    p.in_use.fetch_add(bytes, std::memory_order_relaxed);
    if (p.poison.load(std::memory_order_relaxed)) GPUOPT_CUDA_CHECK(cudaMemsetAsync(b.ptr, 0xFF, bytes, b.stream));
    return b;
}

void pool_free(const PoolBlock& b) noexcept {
    if (!b.ptr) return;
    RelaxedCapture relaxed;
    Pools& p = pools();
    p.in_use.fetch_sub(b.bytes, std::memory_order_relaxed);
    const unsigned long long capture = capture_of(b.stream);
    if (capture != 0 && capture != b.capture) {
        // Freed while its stream is captured by a sequence it was not allocated in (an output of an earlier call
        // replaced inside a capture): a free node would free it on every replay. It waits for the capture's end.
        std::lock_guard<std::mutex> lock(p.mutex);
        p.deferred.push_back(b);
        return;
    }
    if (cudaFreeAsync(b.ptr, b.stream) != cudaSuccess) cudaGetLastError();
    if (capture == 0) {
        std::lock_guard<std::mutex> lock(p.mutex);
        if (!p.deferred.empty()) flush_deferred(p);
    }
}

namespace {
// Events for pool_free_after, reused: an event can be recorded again once a wait on it is queued.
std::mutex events_mutex;
std::vector<cudaEvent_t> spare_events;
}  // namespace

void pool_free_after(const PoolBlock& b, const cudaStream_t* users, std::size_t count) noexcept {
    for (std::size_t i = 0; i < count && b.ptr; ++i) {
        const cudaStream_t user = users[i];
        if (user == b.stream || capture_of(user) != 0 || capture_of(b.stream) != 0) continue;  // (graphs own theirs)
        cudaEvent_t ev = nullptr;
        {
            std::lock_guard<std::mutex> lock(events_mutex);
            if (!spare_events.empty()) ev = spare_events.back(), spare_events.pop_back();
        }
        if (!ev && cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
            cudaGetLastError();
            ev = nullptr;
        }
        if (ev && cudaEventRecord(ev, user) == cudaSuccess && cudaStreamWaitEvent(b.stream, ev, 0) == cudaSuccess) {
            std::lock_guard<std::mutex> lock(events_mutex);
            spare_events.push_back(ev);
            continue;
        }
        cudaGetLastError();  // no event, or a stream gone: wait for the whole device rather than free too early
        if (ev) cudaEventDestroy(ev);
        if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
    }
    pool_free(b);
}

void pool_release_cached() noexcept {
    scratch_release_idle();  // (their frees queued first: complete at the synchronisation below)
    if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
    Pools& p = pools();
    std::lock_guard<std::mutex> lock(p.mutex);
    flush_deferred(p);
    for (auto& slot : p.pool)
        if (cudaMemPool_t pool = slot.load(std::memory_order_acquire)) cudaMemPoolTrimTo(pool, 0);
}

std::size_t pool_cached_bytes() noexcept {
    std::size_t total = 0;
    for (auto& slot : pools().pool) {
        cudaMemPool_t pool = slot.load(std::memory_order_acquire);
        if (!pool) continue;
        std::uint64_t reserved = 0, used = 0;
        if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) != cudaSuccess ||
            cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        total += reserved > used ? static_cast<std::size_t>(reserved - used) : 0;
    }
    return total;
}

std::size_t pool_in_use_bytes() noexcept { return pools().in_use.load(std::memory_order_relaxed); }

void pool_set_poison(bool on) noexcept { pools().poison.store(on, std::memory_order_relaxed); }
bool pool_poison() noexcept { return pools().poison.load(std::memory_order_relaxed); }

}  // namespace gpuopt
