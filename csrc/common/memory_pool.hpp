// A caching device allocator: freed blocks are kept by size and handed out again, so
// ops allocate their outputs without a cudaMalloc (which synchronises the device) on
// every call. Thread-safe. Sizes are rounded up to 512 bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuopt {

void* pool_alloc(std::size_t bytes);           // throws CudaError when the device is out of memory
void pool_free(void* ptr, std::size_t bytes) noexcept;
void pool_release_cached() noexcept;           // cudaFree every cached block
std::size_t pool_cached_bytes() noexcept;
std::size_t pool_in_use_bytes() noexcept;

// Testing aid: when on, every allocation is filled with 0xFF bytes (NaN as float32, -1 as
// int32) before it is handed out, so elements a kernel forgets to write are caught.
void pool_set_poison(bool on) noexcept;
bool pool_poison() noexcept;

}  // namespace gpuopt
