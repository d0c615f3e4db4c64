// gpuopt's device allocator: CUDA's stream-ordered allocator (cudaMallocFromPoolAsync) on a pool of gpuopt's own
// per device that keeps what is freed (release threshold: never), so ops allocate outputs and scratch without a
// cudaMalloc (which synchronises the device) on every call. Stream-ordered: a block is freed on the stream it
// was allocated on, and the driver reuses it on another stream only once that free is known complete (or after
// a dependency it inserts), so a buffer freed on one stream is never reused on another too early. Capturable:
// inside a CUDA graph capture an allocation becomes a graph allocation node (cudaMallocAsync; its free a free
// node), owned by the graph. A block
// allocated before a capture and freed while its stream is being captured is freed after the capture ends.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gpuopt {

struct PoolBlock {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    cudaStream_t stream = nullptr;      // allocated (and freed) in this stream's order
    unsigned long long capture = 0;     // the capture sequence it was allocated in (0: none)
};

PoolBlock pool_alloc(std::size_t bytes);  // on the current stream (stream.hpp); throws CudaError when out of memory
void pool_free(const PoolBlock& block) noexcept;
// pool_free after the work queued so far on `users` (streams other than the block's that read or wrote it): the
// block's stream waits for each first (an event), so the free -- and the block's reuse on its own stream -- is
// ordered after that work. A user stream being captured (or the block's own) is skipped: a graph orders its own
// nodes. One that can no longer be recorded on (destroyed) makes the free wait for the whole device.
void pool_free_after(const PoolBlock& block, const cudaStream_t* users, std::size_t count) noexcept;
void pool_release_cached() noexcept;      // waits for the device, then gives every unused byte back to the driver
std::size_t pool_cached_bytes() noexcept;
std::size_t pool_in_use_bytes() noexcept;

// Testing aid: when on, every allocation is filled with 0xFF bytes (NaN as float32, -1 as
// int32) before it is handed out, so elements a kernel forgets to write are caught.
void pool_set_poison(bool on) noexcept;
bool pool_poison() noexcept;

}  // namespace gpuopt
