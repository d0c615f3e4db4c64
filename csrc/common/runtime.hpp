// Small runtime services used by the bindings and the benchmark harness. Everything runs
// on the CUDA legacy default stream (stream 0), which orders with the default streams of
// CuPy and PyTorch.
#pragma once

#include <cstdint>

namespace gpuopt {

void device_synchronize();
// Make stream 0 wait (on the device, not the host) for work queued so far on `stream`,
// the producer stream named by a __cuda_array_interface__.
void wait_for_stream(std::uintptr_t stream);
// Keep the GPU busy for `microseconds` (one thread spinning on the global timer): queued
// ahead of a timed region, it hides the host's launch overhead from the events.
void spin(double microseconds);
void memset_device(void* ptr, int value, std::size_t bytes);
void copy_device_to_device(void* dst, const void* src, std::size_t bytes);
void copy_host_to_device(void* dst, const void* src, std::size_t bytes);
void copy_device_to_host(void* dst, const void* src, std::size_t bytes);
// Raise CudaError if a kernel queued earlier failed (synchronises).
void check_device_errors();

}  // namespace gpuopt
