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
// Raise CudaError if a kernel queued earlier failed (synchronises).
void check_device_errors();

}  // namespace gpuopt
