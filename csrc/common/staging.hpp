// Host-to-device copies of pageable memory through pinned staging slots that several host threads fill while
// the copy engine drains the previous slot. The driver's own pageable path copies on one thread: 2.2-2.5 ms for
// the 31 MB MNIST test set on the H200's host, where 8 threads fill pinned memory in 0.84 ms and the DMA from
// pinned memory takes 0.59 ms.
#pragma once

#include <cstddef>

namespace gpuopt {

// Copy `bytes` from pageable host memory to the device, ordered on the current stream (stream.hpp): the host
// buffer may be reused when this returns; kernels queued later on that stream see the data. Copies up to 64 KiB go through
// a ring of small pinned slots (no stream synchronisation); copies under 2 MiB (or with one host thread) take the
// driver's path. With check_finite_f32 the bytes are read as float32 (bytes % 4 == 0) and the
// result says whether all of them are finite, checked on the staged copy while it is in cache (no second pass).
bool copy_host_to_device_staged(void* dst, const void* src, std::size_t bytes, bool check_finite_f32);

// Whether every float32 of [src, src + bytes) is finite (the check above, on its own).
bool all_finite_f32(const void* src, std::size_t bytes) noexcept;

// memcpy on up to 8 host threads in 64 KiB blocks (one thread fills pinned memory at a fraction of the DMA's
// rate); serial for small copies or without OpenMP.
void copy_host_parallel(void* dst, const void* src, std::size_t bytes) noexcept;

// Free the pinned slots (waits for the copies in flight); the next staged copy allocates them again.
void staging_release() noexcept;

}  // namespace gpuopt
