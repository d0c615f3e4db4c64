// Scratch from a per-thread, per-stream arena (scratch.hpp).
#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "cuda_check.cuh"
#include "error.hpp"
#include "scratch.hpp"
#include "stream.hpp"

namespace gpuopt {

struct ScratchArena {
    int device = 0;
    cudaStream_t stream = nullptr;
    PoolBlock block;                // its capacity is block.bytes
    std::atomic<bool> busy{false};  // held by a Scratch, or being released
};

namespace {

struct Registry {
    std::mutex mutex;
    std::vector<ScratchArena*> arenas;  // every thread's (scratch_release_idle frees the idle ones)
};

Registry& registry() {
    static Registry* r = new Registry();  // never destroyed: thread exits may come after static destruction
    return *r;
}

// The arenas of one thread, given back when the thread ends.
struct ThreadArenas {
    std::vector<ScratchArena*> mine;
    ~ThreadArenas() {
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.mutex);
        for (ScratchArena* a : mine) {
            r.arenas.erase(std::remove(r.arenas.begin(), r.arenas.end(), a), r.arenas.end());
            pool_free(a->block);  // in its stream's order (errors ignored: the runtime may be gone at exit)
            delete a;
        }
    }
};
thread_local ThreadArenas t_arenas;

ScratchArena* arena_for(int device, cudaStream_t stream) {
    for (ScratchArena* a : t_arenas.mine)
        if (a->device == device && a->stream == stream) return a;
    auto* a = new ScratchArena();
    a->device = device, a->stream = stream;
    {
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.mutex);
        r.arenas.push_back(a);
    }
    t_arenas.mine.push_back(a);
    return a;
}

constexpr std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

}  // namespace

Scratch::Scratch(std::initializer_list<std::size_t> bytes) {
    GPUOPT_REQUIRE(bytes.size() <= kScratchMaxParts, "Scratch: at most 8 parts");
    std::size_t offsets[kScratchMaxParts] = {};
    std::size_t total = 0, n = 0;
    for (std::size_t b : bytes) {
        offsets[n++] = total;
        total += round_up(std::max<std::size_t>(b, 1), kScratchAlign);
    }
    const cudaStream_t stream = current_stream();
    char* base = nullptr;
    if (total <= kScratchArenaMaxBytes && process_stream(stream)) {
        int device = 0;
        GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
        ScratchArena* a = arena_for(device, stream);
        if (!a->busy.exchange(true, std::memory_order_acquire)) {  // (busy: a Scratch inside another)
            arena_ = a;
            try {
                if (a->block.bytes < total) {  // grow: the old block freed in stream order, after its last use
                    const std::size_t grown = std::max(total, std::min(2 * a->block.bytes, kScratchArenaMaxBytes));
                    pool_free(a->block);
                    a->block = PoolBlock{};
                    a->block = pool_alloc(grown);
                } else if (pool_poison()) {
                    GPUOPT_CUDA_CHECK(cudaMemsetAsync(a->block.ptr, 0xFF, total, stream));
                }
            } catch (...) {
                arena_ = nullptr;
                a->busy.store(false, std::memory_order_release);
                throw;
            }
            base = static_cast<char*>(a->block.ptr);
        }
    }
    if (base == nullptr) {
        block_ = pool_alloc(total);
        base = static_cast<char*>(block_.ptr);
    }
    for (std::size_t i = 0; i < n; ++i) parts_[i] = base + offsets[i];
}

Scratch::~Scratch() {
    if (arena_) arena_->busy.store(false, std::memory_order_release);
    else pool_free(block_);
}

void scratch_release_idle() noexcept {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (ScratchArena* a : r.arenas) {
        if (a->busy.exchange(true, std::memory_order_acquire)) continue;
        pool_free(a->block);
        a->block = PoolBlock{};
        a->busy.store(false, std::memory_order_release);
    }
}

std::size_t scratch_arena_bytes() noexcept {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::size_t total = 0;
    for (const ScratchArena* a : r.arenas) total += a->block.bytes;
    return total;
}

}  // namespace gpuopt
