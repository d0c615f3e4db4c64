// The loop-on-the-GPU kernels of kmeans_device.cu launched one piece at a time, on a given stream, for a driver
// other than its own (the stream variant, kmeans_stream.cu). The kernels stay in kmeans_device.cu: a kernel is
// launched from the translation unit that compiles it (no relocatable device code), so they are compiled once.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gpuopt::kmeans::parts {

// The loop's small state, one allocation of loop_words(k, max_iter) 64-bit words as run_device lays it out:
// [counts: k][LoopState][delta history: max_iter floats]. Zeroing the first head_words(k) starts a run.
std::size_t loop_words(std::int64_t k, std::int64_t max_iter);
std::size_t head_words(std::int64_t k);

// ValueError where a loop's centre sums came out not finite: x holds NaN or inf, found on the device by the loop's
// close (no pass of its own over x) at the loop `loops` ended with.
void require_finite(bool nonfinite, int loops);

// Bytes from the LoopState on, with the history of `iterations` loops (one copy reads both); what such a host
// copy says: whether the loop has stopped, the loops run, and the delta history after the state (ValueError
// through require_finite where the sums were not finite).
void* state_of(unsigned long long* loop, std::int64_t k);
std::size_t state_bytes(std::int64_t iterations);
bool copy_done(const unsigned char* copy, int* iterations);
const float* copy_history(const unsigned char* copy);

// assign_and_sum's grid for `chunks` chunks of kSumChunk objects: as many blocks as are resident at once, at most
// one a chunk. dot: the dot form (k*D <= 4096, device_gemm's), else Liao's distance (k*D <= 1024, device's).
// Sets the kernel's shared-memory opt-in.
unsigned assign_grid(std::int64_t chunks, std::int64_t d, std::int64_t k, bool dot);

// assign_and_sum for every chunk of x (n objects): memberships, chunk sums [chunks][k*d], counts and changes added to
// the loop's; no finish (kmeans_multi.cu closes the loop over every rank's groups).
void launch_assign(const float* x, std::int64_t n, std::int64_t d, std::int64_t k, bool dot, unsigned blocks,
                   const float* centres, std::int32_t* membership, double* chunk_sums, unsigned long long* loop,
                   cudaStream_t stream);

// One slab of the points (x: n objects, a whole number of chunks but for the last slab): assign_and_sum for
// every chunk of it (memberships of the slab, chunk sums [chunks][k*d] from the slab's first chunk, counts and
// changes added to the loop's), then finish_loop<Streamed> over its groups from `running` [k*d] (zeroed before
// the first loop); `close` (the last slab) closes the loop: centres, delta of n_total, stop flag, counters.
void launch_slab(const float* x, std::int64_t n, std::int64_t n_total, std::int64_t d, std::int64_t k, bool dot,
                 unsigned blocks, float* centres, std::int32_t* membership, double* chunk_sums,
                 unsigned long long* loop, double* running, bool close, float threshold, std::int64_t max_iter,
                 cudaStream_t stream);

}  // namespace gpuopt::kmeans::parts
