// "device": the whole k-means loop on the GPU for small k*D (the centres fit one block's shared memory and
// one thread each). Per loop, two kernels and no host round trip:
//   assign_and_sum  blocks stride over chunks of kSumChunk objects: each thread assigns its objects (Liao's
//                   distance: float32, coordinates in order, unfused, ties to the lower index), memberships
//                   and changes are counted, then one thread per (cluster, coordinate) sums that cluster's
//                   members of the chunk in object order in float64 (Summation::Chunked, kmeans.hpp);
//   finish_loop     one block: each (cluster, coordinate) adds its chunk sums in chunk order and divides once;
//                   delta = changed / n (Liao's float32), recorded; the done flag set when delta <= threshold
//                   or the loop cap is reached.
// Every kernel returns at once when the done flag is set, so the host queues loops in batches and reads
// the flag once per batch. The result equals kmeans_cpu(..., Summation::Chunked) bit for bit, on any grid.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/device.hpp"
#include "../common/device_buffer.cuh"
#include "../common/error.hpp"
#include "../common/launch.cuh"
#include "kmeans_cuda.hpp"

namespace gpuopt::kmeans {

namespace {

constexpr int kThreads = 256;                  // assign_and_sum block; kSumChunk / kThreads objects a thread
constexpr int kFinishThreads = 1024;           // finish_loop: one thread per (cluster, coordinate)
constexpr int kObjectsPerThread = static_cast<int>(kSumChunk) / kThreads;
static_assert(kSumChunk % kThreads == 0, "a chunk splits evenly over the block");

struct LoopState {
    int done;        // 1 once the loop has stopped
    int iterations;  // loops run
};

__global__ void __launch_bounds__(kThreads) assign_and_sum(const float* __restrict__ x, std::int64_t n, int d, int k,
                                                           const float* __restrict__ centres,  // [k][d]
                                                           std::int32_t* __restrict__ membership,
                                                           double* __restrict__ chunk_sums,       // [chunks][k][d]
                                                           int* __restrict__ chunk_counts,        // [chunks][k]
                                                           int* __restrict__ chunk_changed,       // [chunks]
                                                           const LoopState* __restrict__ state) {
    if (state->done) return;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float* centres_s = reinterpret_cast<float*>(smem_raw);
    std::int32_t* members_s = reinterpret_cast<std::int32_t*>(centres_s + k * d);  // kSumChunk
    __shared__ int changed_s[kThreads / 32];
    for (int i = threadIdx.x; i < k * d; i += kThreads) centres_s[i] = centres[i];
    __syncthreads();

    const std::int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
    for (std::int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const std::int64_t start = chunk * kSumChunk;
        const int len = static_cast<int>(n - start < kSumChunk ? n - start : kSumChunk);
        int changed = 0;
        for (int r = 0; r < kObjectsPerThread; ++r) {
            const int i = r * kThreads + threadIdx.x;  // consecutive threads, consecutive objects
            std::int32_t best = 0;
            if (i < len) {
                const float* o = x + (start + i) * d;
                float best_dist = 0.f;
                for (int c = 0; c < k; ++c) {
                    float dist = 0.f;
                    for (int j = 0; j < d; ++j) {
                        const float diff = __fsub_rn(o[j], centres_s[c * d + j]);
                        dist = __fadd_rn(dist, __fmul_rn(diff, diff));
                    }
                    if (c == 0 || dist < best_dist) {
                        best_dist = dist;
                        best = c;
                    }
                }
                changed += membership[start + i] != best;
                membership[start + i] = best;
            }
            members_s[i] = best;
        }
        // The chunk's change count (an int sum: any order gives the same).
        for (int off = 16; off > 0; off /= 2) changed += __shfl_xor_sync(0xffffffffu, changed, off);
        if (threadIdx.x % 32 == 0) changed_s[threadIdx.x / 32] = changed;
        __syncthreads();  // members_s and changed_s complete
        if (threadIdx.x == 0) {
            int total = 0;
            for (int w = 0; w < kThreads / 32; ++w) total += changed_s[w];
            chunk_changed[chunk] = total;
        }
        // One thread per (cluster, coordinate): the members of this chunk in object order, float64 from 0.
        for (int t = threadIdx.x; t < k * d; t += kThreads) {
            const int c = t / d, j = t % d;
            double s = 0.0;
            int count = 0;
            for (int i = 0; i < len; ++i) {
                if (members_s[i] == c) {
                    s += static_cast<double>(x[(start + i) * d + j]);
                    ++count;
                }
            }
            chunk_sums[(chunk * k + c) * d + j] = s;
            if (j == 0) chunk_counts[chunk * k + c] = count;
        }
        __syncthreads();  // members_s is rewritten by the next chunk
    }
}

__global__ void __launch_bounds__(kFinishThreads) finish_loop(std::int64_t n, int d, int k, std::int64_t chunks,
                                                              const double* __restrict__ chunk_sums,
                                                              const int* __restrict__ chunk_counts,
                                                              const int* __restrict__ chunk_changed,
                                                              float* __restrict__ centres, float threshold,
                                                              int max_iter, float* __restrict__ delta_history,
                                                              LoopState* __restrict__ state) {
    if (state->done) return;
    for (int t = threadIdx.x; t < k * d; t += kFinishThreads) {
        const int c = t / d, j = t % d;
        double total = 0.0;
        std::int64_t count = 0;
        for (std::int64_t ch = 0; ch < chunks; ++ch) {  // chunk order
            total += chunk_sums[(ch * k + c) * d + j];
            count += chunk_counts[ch * k + c];
        }
        if (count > 0) centres[c * d + j] = static_cast<float>(total / static_cast<double>(count));
    }
    __shared__ long long changed_total;
    if (threadIdx.x == 0) changed_total = 0;
    __syncthreads();
    long long mine = 0;
    for (std::int64_t ch = threadIdx.x; ch < chunks; ch += kFinishThreads) mine += chunk_changed[ch];
    atomicAdd(reinterpret_cast<unsigned long long*>(&changed_total), static_cast<unsigned long long>(mine));
    __syncthreads();
    if (threadIdx.x == 0) {
        // Liao's measure: the change count as a float over numObjs as a float.
        const float delta = static_cast<float>(changed_total) / static_cast<float>(n);
        delta_history[state->iterations] = delta;
        state->iterations += 1;
        if (!(delta > threshold) || state->iterations >= max_iter) state->done = 1;
    }
}

std::size_t assign_shared_bytes(std::int64_t d, std::int64_t k) {
    return static_cast<std::size_t>(k * d) * sizeof(float) + static_cast<std::size_t>(kSumChunk) * sizeof(std::int32_t);
}

}  // namespace

void kmeans_device_check(std::int64_t n, std::int64_t d, std::int64_t k) {
    GPUOPT_REQUIRE(n > 0 && d > 0, "kmeans device: x must have at least one object and one coordinate");
    GPUOPT_REQUIRE(k >= 1 && k <= n, "kmeans device: k must be in 1..n");
    GPUOPT_REQUIRE(n <= (std::int64_t{1} << 40), "kmeans device: at most 2^40 objects");
    GPUOPT_REQUIRE(k * d <= kFinishThreads,
                   "kmeans device: k*D = " + std::to_string(k * d) + " centre coordinates; this variant holds at most " +
                       std::to_string(kFinishThreads) + " (one thread each)");
    require_shared_memory(assign_and_sum, assign_shared_bytes(d, k), "kmeans device: assign_and_sum");
}

KMeansStats kmeans_device(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                          std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                          int loops_per_sync) {
    GPUOPT_REQUIRE(x_dev && centroids_dev && membership_dev, "kmeans device: null pointer argument");
    GPUOPT_REQUIRE(max_iter >= 1 && max_iter <= (1 << 30), "kmeans device: max_iter must be in 1..2^30");
    GPUOPT_REQUIRE(loops_per_sync >= 1, "kmeans device: loops_per_sync must be >= 1");
    kmeans_device_check(n, d, k);
    const std::int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
    DeviceBuffer<double> chunk_sums(static_cast<std::size_t>(chunks * k * d));
    DeviceBuffer<int> chunk_counts(static_cast<std::size_t>(chunks * k));
    DeviceBuffer<int> chunk_changed(static_cast<std::size_t>(chunks));
    DeviceBuffer<float> history(static_cast<std::size_t>(max_iter));
    DeviceBuffer<LoopState> state(1);
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(state.data(), 0, sizeof(LoopState)));
    // Every membership starts at -1, so the first loop counts all n objects as changed (as the reference).
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(membership_dev, 0xFF, static_cast<std::size_t>(n) * sizeof(std::int32_t)));

    int per_sm = 0;
    const std::size_t shared = assign_shared_bytes(d, k);
    GPUOPT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, assign_and_sum, kThreads, shared));
    const std::int64_t resident = static_cast<std::int64_t>(multiprocessor_count()) * std::max(per_sm, 1);
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(chunks, resident));

    LoopState host_state{0, 0};
    while (!host_state.done) {
        for (int b = 0; b < loops_per_sync; ++b) {  // queued; kernels past the stop return at once
            assign_and_sum<<<blocks, kThreads, shared>>>(x_dev, n, static_cast<int>(d), static_cast<int>(k),
                                                         centroids_dev, membership_dev, chunk_sums.data(),
                                                         chunk_counts.data(), chunk_changed.data(), state.data());
            GPUOPT_CHECK_LAUNCH("assign_and_sum");
            finish_loop<<<1, kFinishThreads>>>(n, static_cast<int>(d), static_cast<int>(k), chunks, chunk_sums.data(),
                                               chunk_counts.data(), chunk_changed.data(), centroids_dev, threshold,
                                               static_cast<int>(max_iter), history.data(), state.data());
            GPUOPT_CHECK_LAUNCH("finish_loop");
        }
        GPUOPT_CUDA_CHECK(cudaMemcpy(&host_state, state.data(), sizeof(LoopState), cudaMemcpyDeviceToHost));
    }
    KMeansStats stats;
    stats.iterations = host_state.iterations;
    stats.delta.resize(static_cast<std::size_t>(host_state.iterations));
    GPUOPT_CUDA_CHECK(cudaMemcpy(stats.delta.data(), history.data(), stats.delta.size() * sizeof(float),
                                 cudaMemcpyDeviceToHost));
    return stats;
}

}  // namespace gpuopt::kmeans
