// Pinned staging for pageable host-to-device copies (staging.hpp). Host code only, compiled with OpenMP.
#include "staging.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "cuda_check.cuh"
#include "error.hpp"
#include "parallel.hpp"
#include "runtime.hpp"
#include "stream.hpp"

namespace gpuopt {

namespace {

constexpr std::size_t kSlotBytes = std::size_t{4} << 20;    // one DMA: ~75 us at the H200's 53 GB/s
constexpr int kSlots = 3;                                    // the host runs up to two slots ahead of the DMA
constexpr std::size_t kBlockBytes = std::size_t{64} << 10;   // one thread's unit: copied, then scanned in cache
constexpr std::size_t kMinStagedBytes = std::size_t{2} << 20;  // below this the driver's path is as fast
constexpr int kMaxThreads = 8;                               // more threads lose bandwidth on the H200's host
// Small copies (a NumPy caller's inputs on a tiny problem) go through a ring of small pinned slots: a memcpy
// into the slot and an asynchronous DMA, where the driver's pageable cudaMemcpy first synchronises the stream
// (the NumPy-in/out path, notes/overhead.md). 16 slots: the host waits for a slot only with 16 small copies in flight.
constexpr std::size_t kSmallBytes = std::size_t{64} << 10;
constexpr int kSmallSlots = 16;

struct Staging {
    std::mutex mutex;  // one staged copy at a time: the slots are shared
    void* slot[kSlots] = {};
    cudaEvent_t drained[kSlots] = {};  // recorded after the DMA from each slot

    bool ready = false;

    void acquire() {
        if (ready) return;
        try {
            for (int k = 0; k < kSlots; ++k) {
                GPUOPT_CUDA_CHECK(cudaHostAlloc(&slot[k], kSlotBytes, cudaHostAllocPortable));
                GPUOPT_CUDA_CHECK(cudaEventCreateWithFlags(&drained[k], cudaEventDisableTiming));
            }
        } catch (...) {
            release();  // all slots or none
            throw;
        }
        ready = true;
    }
    void release() noexcept {
        for (int k = 0; k < kSlots; ++k) {
            if (drained[k]) cudaEventSynchronize(drained[k]), cudaEventDestroy(drained[k]);
            if (slot[k]) cudaFreeHost(slot[k]);
            slot[k] = nullptr;
            drained[k] = nullptr;
        }
        ready = false;
    }
};

// Never destroyed: at process exit the driver may already be gone.
Staging& staging() {
    static Staging* s = new Staging;
    return *s;
}

struct SmallRing {
    std::mutex mutex;
    char* arena = nullptr;                   // kSmallSlots slots of kSmallBytes, pinned
    cudaEvent_t drained[kSmallSlots] = {};   // recorded after the DMA from each slot
    int next = 0;

    void acquire() {
        if (arena) return;
        try {
            for (int k = 0; k < kSmallSlots; ++k)
                GPUOPT_CUDA_CHECK(cudaEventCreateWithFlags(&drained[k], cudaEventDisableTiming));
            void* p = nullptr;
            GPUOPT_CUDA_CHECK(cudaHostAlloc(&p, kSmallBytes * kSmallSlots, cudaHostAllocPortable));
            arena = static_cast<char*>(p);
        } catch (...) {
            release();
            throw;
        }
    }
    void release() noexcept {
        for (int k = 0; k < kSmallSlots; ++k) {
            if (drained[k]) cudaEventSynchronize(drained[k]), cudaEventDestroy(drained[k]);
            drained[k] = nullptr;
        }
        if (arena) cudaFreeHost(arena);
        arena = nullptr;
        next = 0;
    }
};

SmallRing& small_ring() {
    static SmallRing* r = new SmallRing;
    return *r;
}

// bytes <= kSmallBytes, through the next slot of the ring, ordered on the current stream.
void copy_small(void* dst, const void* src, std::size_t bytes) {
    SmallRing& r = small_ring();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.acquire();
    const int k = r.next;
    r.next = (k + 1) % kSmallSlots;
    GPUOPT_CUDA_CHECK(cudaEventSynchronize(r.drained[k]));  // the slot's previous DMA is done (at once, usually)
    char* slot = r.arena + static_cast<std::size_t>(k) * kSmallBytes;
    std::memcpy(slot, src, bytes);
    GPUOPT_CUDA_CHECK(cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, current_stream()));
    GPUOPT_CUDA_CHECK(cudaEventRecord(r.drained[k], current_stream()));
}

int staging_threads() { return std::min(kMaxThreads, cpu_threads()); }

}  // namespace

bool all_finite_f32(const void* src, std::size_t bytes) noexcept {
    const auto* w = static_cast<const std::uint32_t*>(src);
    const std::size_t n = bytes / 4;
    std::uint32_t bad = 0;  // branch-free so the loop vectorises: an exponent of all ones is inf or NaN
    for (std::size_t i = 0; i < n; ++i) bad |= static_cast<std::uint32_t>((w[i] & 0x7f800000u) == 0x7f800000u);
    return bad == 0;
}

bool copy_host_to_device_staged(void* dst, const void* src, std::size_t bytes, bool check_finite_f32) {
    GPUOPT_REQUIRE(!check_finite_f32 || bytes % 4 == 0, "a float32 check needs a whole number of float32 values");
    const int threads = staging_threads();
    if (bytes <= kSmallBytes) {
        const bool finite = !check_finite_f32 || all_finite_f32(src, bytes);
        copy_small(dst, src, bytes);
        return finite;
    }
    if (bytes < kMinStagedBytes || threads < 2) {
        const bool finite = !check_finite_f32 || all_finite_f32(src, bytes);
        // (pageable: the driver stages the data before returning, so the host array may change at once)
        GPUOPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, current_stream()));
        return finite;
    }
    Staging& st = staging();
    std::lock_guard<std::mutex> lock(st.mutex);
    st.acquire();
    const auto* from = static_cast<const char*>(src);
    auto* to = static_cast<char*>(dst);
    int bad = 0;
    int k = 0;
    for (std::size_t offset = 0; offset < bytes; offset += kSlotBytes, k = (k + 1) % kSlots) {
        const std::size_t n = std::min(kSlotBytes, bytes - offset);
        GPUOPT_CUDA_CHECK(cudaEventSynchronize(st.drained[k]));  // the slot's previous DMA is done
        char* slot = static_cast<char*>(st.slot[k]);
        const auto blocks = static_cast<std::int64_t>((n + kBlockBytes - 1) / kBlockBytes);
#if defined(_OPENMP)
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad)
#endif
        for (std::int64_t b = 0; b < blocks; ++b) {
            const std::size_t at = static_cast<std::size_t>(b) * kBlockBytes;
            const std::size_t len = std::min(kBlockBytes, n - at);
            std::memcpy(slot + at, from + offset + at, len);
            if (check_finite_f32) bad |= static_cast<int>(!all_finite_f32(slot + at, len));
        }
        GPUOPT_CUDA_CHECK(cudaMemcpyAsync(to + offset, slot, n, cudaMemcpyHostToDevice, current_stream()));
        GPUOPT_CUDA_CHECK(cudaEventRecord(st.drained[k], current_stream()));
    }
    return bad == 0;
}

void copy_host_parallel(void* dst, const void* src, std::size_t bytes) noexcept {
    const int threads = bytes < kMinStagedBytes ? 1 : staging_threads();
    const auto blocks = static_cast<std::int64_t>((bytes + kBlockBytes - 1) / kBlockBytes);
    auto* to = static_cast<char*>(dst);
    const auto* from = static_cast<const char*>(src);
#if defined(_OPENMP)
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (std::int64_t b = 0; b < blocks; ++b) {
        const std::size_t at = static_cast<std::size_t>(b) * kBlockBytes;
        std::memcpy(to + at, from + at, std::min(kBlockBytes, bytes - at));
    }
    (void)threads;
}

void staging_release() noexcept {
    {
        Staging& st = staging();
        std::lock_guard<std::mutex> lock(st.mutex);
        st.release();
    }
    SmallRing& r = small_ring();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.release();
}

}  // namespace gpuopt
