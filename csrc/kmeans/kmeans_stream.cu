// "stream": the k-means loop of "device" over points streamed from where they are (host memory) through a
// device slab, for N past device memory. Per loop, slab by slab in object order:
//   copy stream  x[slab s] -> buffer s % buffers (cudaMemcpyAsync), after the kernels of the buffer's last slab
//                (event free[b]); then event ready[b]
//   the call's   waits ready[b]; assign_and_sum over the slab's chunks and finish_loop<Streamed> over its groups
//                (kmeans_loop_parts.hpp: device's kernels); event free[b]
// The copies run up to buffers - 1 slabs ahead, across the loop boundary too, so the copy engine keeps going while
// the host reads the stop flag (one small copy a loop). Slabs are whole groups of the summation tree (kSumGroup
// objects), so the group sums and their order are device's: the same bits for any chunk_points.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/device_buffer.cuh"
#include "../common/error.hpp"
#include "../common/staging.hpp"
#include "../common/stream.hpp"
#include "kmeans_cuda.hpp"
#include "kmeans_loop_parts.hpp"

namespace gpuopt::kmeans {

namespace {

// The slab events: a pair for each buffer, as many as kStreamBuffers offers at most (buffers is checked against it).
constexpr int most_buffers() {
    int most = 0;
    for (int b : kStreamBuffers.values) most = b > most ? b : most;
    return most;
}
constexpr int kMaxBuffers = most_buffers();

// A non-blocking copy stream (a blocking one would serialise with the legacy stream the kernels may run on) and the
// slab events, created once per device; the mutex serialises calls (they share them).
struct StreamPipeline {
    cudaStream_t copy = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t ready[kMaxBuffers] = {};
    cudaEvent_t free[kMaxBuffers] = {};
};
std::mutex pipeline_mutex;

StreamPipeline& pipeline() {
    static auto* pipelines = new std::map<int, StreamPipeline>();  // never freed (driver shutdown)
    int device = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    StreamPipeline& p = (*pipelines)[device];
    if (p.copy == nullptr) GPUOPT_CUDA_CHECK(cudaStreamCreateWithFlags(&p.copy, cudaStreamNonBlocking));
    auto make = [](cudaEvent_t& e) {
        if (e == nullptr) GPUOPT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    };
    make(p.start);
    for (int b = 0; b < kMaxBuffers; ++b) make(p.ready[b]), make(p.free[b]);
    return p;
}

// Host memory the call holds until every copy has drained (declared before Drain: released after it).
struct Registered {
    void* ptr = nullptr;
    ~Registered() {
        if (ptr) cudaHostUnregister(ptr);
    }
};
struct PinnedStaging {
    void* ptr = nullptr;
    ~PinnedStaging() {
        if (ptr) cudaFreeHost(ptr);
    }
};
// Waits for the copy stream when the call ends, an error included: no copy in flight into a freed slab or from
// unregistered or freed host memory.
struct Drain {
    cudaStream_t copy;
    ~Drain() { cudaStreamSynchronize(copy); }
};

bool uses_dot(std::int64_t d, std::int64_t k, StreamAssign assign) {
    return assign == StreamAssign::Dot || (assign == StreamAssign::Auto && k * d > 1024);
}

}  // namespace

std::int64_t stream_chunk_points(std::int64_t d, std::int64_t chunk_points) {
    if (chunk_points > 0) return chunk_points;
    const std::int64_t groups = kStreamBudgetBytes / (d * static_cast<std::int64_t>(sizeof(float)) * kSumGroup);
    return std::max<std::int64_t>(groups, 1) * kSumGroup;
}

void kmeans_stream_check(std::int64_t n, std::int64_t d, std::int64_t k, const StreamConfig& cfg) {
    GPUOPT_REQUIRE(cfg.chunk_points >= 0 && cfg.chunk_points % kSumGroup == 0,
                   "kmeans stream: chunk_points must be 0 (a " + std::to_string(kStreamBudgetBytes >> 20) +
                       " MiB slab) or a positive multiple of " + std::to_string(kSumGroup) +
                       " (whole groups of the summation tree), got " + std::to_string(cfg.chunk_points));
    require_choice(kStreamBuffers, cfg.buffers, "kmeans stream");
    if (uses_dot(d, k, cfg.assign))
        kmeans_device_gemm_check(n, d, k);
    else
        kmeans_device_check(n, d, k);
}

KMeansStats kmeans_stream(const float* x, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                          std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                          const StreamConfig& cfg, int* host_path) {
    GPUOPT_REQUIRE(x && centroids_dev && membership_dev, "kmeans stream: null pointer argument");
    GPUOPT_REQUIRE(max_iter >= 1 && max_iter <= (1 << 30), "kmeans stream: max_iter must be in 1..2^30");
    kmeans_stream_check(n, d, k, cfg);
    const bool dot = uses_dot(d, k, cfg.assign);
    // A slab no larger than the points (rounded up to a group); no more buffers than slabs, but two for one slab:
    // the next loop's copy then overlaps this loop's kernels (the points are copied every loop, as for many slabs).
    const std::int64_t groups_n = (n + kSumGroup - 1) / kSumGroup;
    const std::int64_t chunk = std::min(stream_chunk_points(d, cfg.chunk_points), groups_n * kSumGroup);
    const std::int64_t slabs = (n + chunk - 1) / chunk;
    const int nbuf = static_cast<int>(std::min<std::int64_t>(cfg.buffers, std::max<std::int64_t>(slabs, 2)));
    const std::size_t slab_floats = static_cast<std::size_t>(chunk * d);

    std::lock_guard<std::mutex> lock(pipeline_mutex);
    StreamPipeline& p = pipeline();
    DeviceBuffer<float> slab(slab_floats * nbuf);
    DeviceBuffer<double> chunk_sums(static_cast<std::size_t>((chunk / kSumChunk) * k * d));
    DeviceBuffer<double> running(static_cast<std::size_t>(k * d));
    DeviceBuffer<unsigned long long> loop(parts::loop_words(k, max_iter));
    const cudaStream_t on = current_stream();
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(loop.data(), 0, parts::head_words(k) * sizeof(unsigned long long), on));
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(running.data(), 0, running.bytes(), on));
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(membership_dev, 0xFF, static_cast<std::size_t>(n) * sizeof(std::int32_t), on));

    // Where x is: device memory and pinned host memory are copied from as they are; pageable memory is registered
    // for the call, or staged (asked for, or registration refused).
    cudaPointerAttributes attr{};
    GPUOPT_CUDA_CHECK(cudaPointerGetAttributes(&attr, x));
    const std::size_t x_bytes = static_cast<std::size_t>(n * d) * sizeof(float);
    Registered registered;
    PinnedStaging staging;
    int path = attr.type == cudaMemoryTypeUnregistered ? 2 : (attr.type == cudaMemoryTypeHost ? 1 : 0);
    if (path == 2 && !cfg.staged) {
        if (cudaHostRegister(const_cast<float*>(x), x_bytes, cudaHostRegisterDefault) == cudaSuccess)
            registered.ptr = const_cast<float*>(x);
        else
            cudaGetLastError(), path = 3;  // e.g. pages already registered by someone else: stage instead
    }
    if (path == 2 && cfg.staged) path = 3;
    if (path == 3)
        GPUOPT_CUDA_CHECK(cudaHostAlloc(&staging.ptr, slab_floats * sizeof(float) * nbuf, cudaHostAllocPortable));
    if (host_path) *host_path = path;

    // The copies start after the work queued before on the call's stream (a device x's producer).
    GPUOPT_CUDA_CHECK(cudaEventRecord(p.start, current_stream()));
    GPUOPT_CUDA_CHECK(cudaStreamWaitEvent(p.copy, p.start, 0));
    Drain drain{p.copy};
    const unsigned blocks = parts::assign_grid((std::min(chunk, n) + kSumChunk - 1) / kSumChunk, d, k, dot);

    auto issue_copy = [&](std::int64_t g) {  // g: slab number over all loops
        const int b = static_cast<int>(g % nbuf);
        const std::int64_t first = (g % slabs) * chunk, len = std::min(chunk, n - first);
        const std::size_t bytes = static_cast<std::size_t>(len * d) * sizeof(float);
        float* dst = slab.data() + slab_floats * b;
        const float* src = x + first * d;
        if (g >= nbuf) GPUOPT_CUDA_CHECK(cudaStreamWaitEvent(p.copy, p.free[b], 0));  // kernels of slab g - nbuf
        if (path == 3) {
            // The previous copy out of this staging buffer has drained (ready[b] is its last record).
            GPUOPT_CUDA_CHECK(cudaEventSynchronize(p.ready[b]));
            float* stage = static_cast<float*>(staging.ptr) + slab_floats * b;
            copy_host_parallel(stage, src, bytes);
            src = stage;
        }
        GPUOPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, p.copy));
        GPUOPT_CUDA_CHECK(cudaEventRecord(p.ready[b], p.copy));
    };

    std::vector<unsigned char> host(parts::state_bytes(max_iter));
    int iterations = 0;
    std::int64_t issued = 0;
    for (std::int64_t it = 0;; ++it) {
        for (std::int64_t s = 0; s < slabs; ++s) {
            const std::int64_t g = it * slabs + s;
            while (issued < g + nbuf) issue_copy(issued++);  // up to nbuf - 1 slabs ahead
            const int b = static_cast<int>(g % nbuf);
            const std::int64_t first = s * chunk, len = std::min(chunk, n - first);
            GPUOPT_CUDA_CHECK(cudaStreamWaitEvent(current_stream(), p.ready[b], 0));
            parts::launch_slab(slab.data() + slab_floats * b, len, n, d, k, dot, blocks, centroids_dev,
                               membership_dev + first, chunk_sums.data(), loop.data(), running.data(),
                               s == slabs - 1, threshold, max_iter, current_stream());
            GPUOPT_CUDA_CHECK(cudaEventRecord(p.free[b], current_stream()));
        }
        // The stop flag and the history so far; the copy stream goes on with the next loop's first slabs.
        copy_to_host_sync(host.data(), parts::state_of(loop.data(), k), parts::state_bytes(it + 1));
        if (parts::copy_done(host.data(), &iterations)) break;
    }
    KMeansStats stats;
    stats.iterations = iterations;
    const float* delta = parts::copy_history(host.data());
    stats.delta.assign(delta, delta + iterations);
    return stats;
}

}  // namespace gpuopt::kmeans
