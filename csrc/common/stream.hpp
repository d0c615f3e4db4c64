// The stream gpuopt's work goes on: the caller's. Every launch, async copy, memset, pool allocation and
// cuBLAS/cuDNN call of a launcher is queued on current_stream(), which the bindings set for the duration of a
// call (StreamScope) from the stream the Python layer resolved: an explicit `stream=`, the input framework's
// current stream (the stream a __cuda_array_interface__ names), or the legacy default stream. A thread-local, as
// PyTorch's current stream is: launchers running on other threads keep their own.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gpuopt {

// The stream this thread queues on (nullptr: the legacy default stream).
cudaStream_t current_stream() noexcept;
void set_current_stream(cudaStream_t stream) noexcept;

// A stream handle as the CUDA Array Interface and DLPack number them: 0 and 1 the legacy default stream,
// 2 the per-thread default stream, anything else a cudaStream_t.
inline cudaStream_t stream_from_handle(std::uintptr_t handle) noexcept {
    return handle == 1 ? nullptr : reinterpret_cast<cudaStream_t>(handle);  // 2 is cudaStreamPerThread
}

// Sets the current stream for a scope and restores the previous one after it, an error included.
class StreamScope {
public:
    explicit StreamScope(cudaStream_t stream) noexcept : previous_(current_stream()) { set_current_stream(stream); }
    ~StreamScope() { set_current_stream(previous_); }
    StreamScope(const StreamScope&) = delete;
    StreamScope& operator=(const StreamScope&) = delete;

private:
    cudaStream_t previous_;
};

// Whether `stream` lives as long as the process and is not being captured: the legacy default stream, or the
// per-thread default stream outside a capture. Work queued there can leave state for the next call on the same
// stream (stream order), which a destroyed stream's reused handle could not promise.
bool process_stream(cudaStream_t stream) noexcept;
// Whether `stream` is being captured into a graph (false where the query fails).
bool capturing(cudaStream_t stream) noexcept;

// Make `waiter` wait, on the device, for the work queued so far on `producer` (a reused per-thread event; no host
// wait). Nothing when they are the same stream.
void stream_wait(cudaStream_t waiter, cudaStream_t producer);

// A device-to-host copy ordered on the current stream, waited for on the host: the one round trip an op
// allows itself (k-means' stop rule, the synchronous report variants). Not capturable.
void copy_to_host_sync(void* host, const void* device, std::size_t bytes);

}  // namespace gpuopt
