// Small runtime services used by the bindings and the benchmark harness. Everything is queued on the
// current stream (stream.hpp).
#pragma once

#include <cstdint>

namespace gpuopt {

void device_synchronize();
// Keep the GPU busy for `microseconds` (one thread spinning on the global timer): queued
// ahead of a timed region, it hides the host's launch overhead from the events.
void spin(double microseconds);
void memset_device(void* ptr, int value, std::size_t bytes);
void copy_device_to_device(void* dst, const void* src, std::size_t bytes);
// dst[i] = float(src[i]) for n half-precision values (IEEE float16, or bfloat16: the top half of a float32), on the
// device: exact (every float16 and bfloat16 is a float32), NaN and inf kept. 16 bytes a thread-load where aligned.
void widen_half_to_float(float* dst, const std::uint16_t* src, std::int64_t n, bool bfloat16);
// Raise CudaError if a kernel queued earlier failed (synchronises).
void check_device_errors();

}  // namespace gpuopt
