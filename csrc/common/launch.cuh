// Launch-configuration helpers: checked up front, so a kernel never starts with a
// configuration it cannot run.
#pragma once

#include <cstdint>
#include <string>

#include "cuda_check.cuh"
#include "error.hpp"
#include "stream.hpp"  // every launch goes on current_stream()

namespace gpuopt {

template <typename T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
    return (a + b - 1) / b;
}

// Threads per block must be 1..1024 (every CUDA GPU's limit) and, where asked, a
// multiple of the warp size.
inline void check_block_threads(std::int64_t threads, bool warp_multiple = false) {
    GPUOPT_REQUIRE(threads >= 1 && threads <= 1024,
                   "block of " + std::to_string(threads) + " threads: the limit is 1024 threads per block");
    GPUOPT_REQUIRE(!warp_multiple || threads % 32 == 0,
                   "block of " + std::to_string(threads) + " threads: must be a multiple of 32");
}

// Blocks for n items at `threads` per block, capped at the grid-x limit; kernels that use
// it loop grid-stride so any n is covered.
inline unsigned grid_for(std::int64_t n, int threads) {
    const std::int64_t blocks = ceil_div<std::int64_t>(n, threads);
    return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 2147483647LL ? 2147483647LL : blocks));
}

// Dynamic shared memory above 48 KiB needs an opt-in per kernel; beyond the device's
// opt-in limit the configuration is rejected with the limit in the message. The kernel's
// static shared memory counts towards both (48 KiB of static + dynamic without the opt-in).
int max_shared_memory_per_block_optin();

template <typename Kernel>
void require_shared_memory(Kernel kernel, std::size_t bytes, const char* what) {
    const int limit = max_shared_memory_per_block_optin();
    cudaFuncAttributes attr{};
    GPUOPT_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    const std::size_t total = bytes + attr.sharedSizeBytes;
    GPUOPT_REQUIRE(total <= static_cast<std::size_t>(limit),
                   std::string(what) + " needs " + std::to_string(total) + " bytes of shared memory per block; this GPU allows " +
                       std::to_string(limit));
    if (total > 48 * 1024)
        GPUOPT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace gpuopt
