#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "cuda_check.cuh"
#include "memory_pool.hpp"

namespace gpuopt {

namespace {
constexpr std::size_t kGranule = 512;

struct Pool {
    std::mutex mutex;
    std::multimap<std::size_t, void*> cached;  // rounded size -> block
    std::size_t cached_bytes = 0;
    std::size_t in_use_bytes = 0;
    bool poison = false;
};

Pool& pool() {
    static Pool* p = new Pool();  // never destroyed: no cudaFree after the driver shut down
    return *p;
}

std::size_t round_up(std::size_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }
}  // namespace

void* pool_alloc(std::size_t bytes) {
    const std::size_t size = round_up(bytes == 0 ? 1 : bytes);
    Pool& p = pool();
    void* ptr = nullptr;
    bool poison = false;
    {
        std::lock_guard<std::mutex> lock(p.mutex);
        // Exact-size reuse: ops are called with the same shapes over and over, and a
        // block is always returned under the size it was allocated with.
        auto it = p.cached.find(size);
        if (it != p.cached.end()) {
            ptr = it->second;
            p.cached_bytes -= size;
            p.in_use_bytes += size;
            p.cached.erase(it);
        }
        poison = p.poison;
    }
    if (!ptr) {
        cudaError_t status = cudaMalloc(&ptr, size);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            pool_release_cached();  // give the cache back and try once more
            status = cudaMalloc(&ptr, size);
        }
        GPUOPT_CUDA_CHECK(status);
        std::lock_guard<std::mutex> lock(p.mutex);
        p.in_use_bytes += size;
    }
    if (poison) GPUOPT_CUDA_CHECK(cudaMemsetAsync(ptr, 0xFF, bytes));
    return ptr;
}

void pool_free(void* ptr, std::size_t bytes) noexcept {
    if (!ptr) return;
    const std::size_t size = round_up(bytes == 0 ? 1 : bytes);
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.cached.emplace(size, ptr);
    p.cached_bytes += size;
    p.in_use_bytes -= std::min(p.in_use_bytes, size);
}

void pool_release_cached() noexcept {
    Pool& p = pool();
    std::vector<void*> blocks;
    {
        std::lock_guard<std::mutex> lock(p.mutex);
        for (auto& kv : p.cached) blocks.push_back(kv.second);
        p.cached.clear();
        p.cached_bytes = 0;
    }
    for (void* b : blocks) cudaFree(b);
}

std::size_t pool_cached_bytes() noexcept {
    std::lock_guard<std::mutex> lock(pool().mutex);
    return pool().cached_bytes;
}

std::size_t pool_in_use_bytes() noexcept {
    std::lock_guard<std::mutex> lock(pool().mutex);
    return pool().in_use_bytes;
}

void pool_set_poison(bool on) noexcept {
    std::lock_guard<std::mutex> lock(pool().mutex);
    pool().poison = on;
}

bool pool_poison() noexcept {
    std::lock_guard<std::mutex> lock(pool().mutex);
    return pool().poison;
}

}  // namespace gpuopt
