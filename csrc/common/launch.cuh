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
// The kernel's attributes are read once per device and its opt-in only ever raised, by this
// function alone (cudaFuncGetAttributes and cudaFuncSetAttribute cost microseconds: every call
// of a launcher asked both before).
int max_shared_memory_per_block_optin();
void require_shared_memory_bytes(const void* kernel, std::size_t bytes, const char* what);

template <typename Kernel>
void require_shared_memory(Kernel kernel, std::size_t bytes, const char* what) {
    require_shared_memory_bytes(reinterpret_cast<const void*>(kernel), bytes, what);
}

// The occupancy API's blocks per SM for `kernel` at a configuration, asked once per (device, kernel, threads,
// shared bytes): a launcher that sizes a persistent grid from it paid the query on every call.
int resident_blocks_per_sm_of(const void* kernel, int threads, std::size_t dynamic_smem);

template <typename Kernel>
int resident_blocks_per_sm(Kernel kernel, int threads, std::size_t dynamic_smem) {
    return resident_blocks_per_sm_of(reinterpret_cast<const void*>(kernel), threads, dynamic_smem);
}

}  // namespace gpuopt
