// "liao": Wei-keng Liao's cuda_kmeans.cu (parallel k-means package), kept to its
// structure -- SoA objects and centres, one thread per object, the centres staged in
// shared memory, one partial change count per block, a second kernel reducing them, the
// centre update on the host -- with the CMU 18-645 report's compute_delta bug fixed
// properly and the memberships and centres bit-identical to kmeans_cpu. The report's
// further steps (liao_occupancy, liao_aos, liao_vec: kmeans_cuda.hpp) are configurations
// of the same loop: thread counts, the objects' layout, float4 loads.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "../common/device_buffer.cuh"
#include "../common/launch.cuh"
#include "../common/timing.cuh"
#include "kmeans_cuda.hpp"

// The centre update is the CPU reference's own update_centroids (gpuopt_cpu, linked into
// gpuopt_cuda), so the centres stay bit-identical to the reference's.
#include "kmeans.hpp"

namespace gpuopt::kmeans {

namespace {

constexpr int kTransposeTile = 32;     // 32x32 tile, blocks of 32x8 threads
constexpr int kTransposeRows = 8;
constexpr int kMaxReductionThreads = 1024;

constexpr bool is_power_of_two(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// What the kernels need of the tables' thread counts: whole warps, at most a block's 1024 threads, and a power of two
// (both block reductions halve it); reduction_threads 0 is Liao's rule.
template <std::size_t N>
constexpr bool block_reduction_sizes(const IntChoices<N>& table) {
    for (int v : table.values)
        if (v != 0 && !(v >= 32 && v <= kMaxReductionThreads && is_power_of_two(v))) return false;
    return true;
}
static_assert(block_reduction_sizes(kLiaoThreads) && !kLiaoThreads.contains(0), "kLiaoThreads: 32..1024, powers of 2");
static_assert(block_reduction_sizes(kLiaoReductionThreads), "kLiaoReductionThreads: 0 or 32..1024, powers of 2");

std::int64_t next_power_of_two(std::int64_t v) {
    std::int64_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

// x [n][d] (row-major) -> x_soa [d][n]. Through a padded shared tile so that both the
// read (along coordinates) and the write (along objects) are coalesced.
__global__ void transpose_to_soa(const float* __restrict__ x, float* __restrict__ x_soa, std::int64_t n, int d) {
    __shared__ float tile[kTransposeTile][kTransposeTile + 1];  // +1: no bank conflicts
    const std::int64_t object0 = static_cast<std::int64_t>(blockIdx.x) * kTransposeTile;
    const int coord0 = blockIdx.y * kTransposeTile;
    for (int row = threadIdx.y; row < kTransposeTile; row += kTransposeRows) {
        const std::int64_t object = object0 + row;
        const int coord = coord0 + threadIdx.x;
        if (object < n && coord < d) tile[row][threadIdx.x] = x[object * d + coord];
    }
    __syncthreads();
    for (int row = threadIdx.y; row < kTransposeTile; row += kTransposeRows) {
        const int coord = coord0 + row;
        const std::int64_t object = object0 + threadIdx.x;
        if (object < n && coord < d) x_soa[static_cast<std::int64_t>(coord) * n + object] = tile[threadIdx.x][row];
    }
}

// One thread per object: the nearest centre by Liao's squared distance, the membership
// written, and the block's number of changed memberships left in partials[blockIdx.x].
// Dynamic shared memory: the centres (k*d floats, [d][k] for SoA, [k][d] for AoS), then
// blockDim.x ints for the count. blockDim.x must be a power of two (the tree reduction halves
// it). AOS: x is [n][d] as given (no transpose); VEC (AoS, d % 4 == 0, x 16-byte aligned): each
// row and centre read as float4, the four products still added one by one in coordinate order.
template <bool AOS, bool VEC>
__global__ void find_nearest_cluster(const float* __restrict__ x,        // [d][n] (SoA) or [n][d] (AoS)
                                     const float* __restrict__ centres,  // [d][k] (SoA) or [k][d] (AoS)
                                     int n, int d, int k,
                                     std::int32_t* __restrict__ membership,  // [n], in: last loop's
                                     int* __restrict__ partials) {           // [gridDim.x]
    static_assert(AOS || !VEC, "float4 loads need the array-of-structs layout");
    extern __shared__ __align__(16) float shared[];
    float* centres_s = shared;
    int* changed_s = reinterpret_cast<int*>(shared + static_cast<std::int64_t>(k) * d);

    const int centre_floats = k * d;  // fits: checked against the shared-memory limit
    for (int i = threadIdx.x; i < centre_floats; i += blockDim.x) centres_s[i] = centres[i];
    __syncthreads();

    const int object = blockIdx.x * blockDim.x + threadIdx.x;
    int changed = 0;
    if (object < n) {
        // The rounded intrinsics are never fused into FMAs, so each distance is exactly
        // the CPU reference's float32 sum over coordinates in order.
        int best = 0;
        float best_dist = 0.f;
        for (int c = 0; c < k; ++c) {
            float dist = 0.f;
            if constexpr (VEC) {
                const float4* row = reinterpret_cast<const float4*>(x + static_cast<std::int64_t>(object) * d);
                const float4* centre = reinterpret_cast<const float4*>(centres_s + c * d);
                for (int j = 0; j < d / 4; ++j) {
                    const float4 a = __ldg(row + j), b = centre[j];
                    const float dx = __fsub_rn(a.x, b.x), dy = __fsub_rn(a.y, b.y);
                    const float dz = __fsub_rn(a.z, b.z), dw = __fsub_rn(a.w, b.w);
                    dist = __fadd_rn(dist, __fmul_rn(dx, dx));
                    dist = __fadd_rn(dist, __fmul_rn(dy, dy));
                    dist = __fadd_rn(dist, __fmul_rn(dz, dz));
                    dist = __fadd_rn(dist, __fmul_rn(dw, dw));
                }
            } else {
                for (int j = 0; j < d; ++j) {
                    const float xj = AOS ? x[static_cast<std::int64_t>(object) * d + j]
                                         : x[static_cast<std::int64_t>(j) * n + object];
                    const float diff = __fsub_rn(xj, AOS ? centres_s[c * d + j] : centres_s[j * k + c]);
                    dist = __fadd_rn(dist, __fmul_rn(diff, diff));
                }
            }
            if (c == 0 || dist < best_dist) {  // strict <: a tie keeps the lower index
                best_dist = dist;
                best = c;
            }
        }
        changed = membership[object] != best ? 1 : 0;
        membership[object] = best;
    }

    // Every thread of the block takes part, out-of-range ones with 0: Liao's original
    // reduced inside `if (objectId < numObjs)`, a __syncthreads() that the last block's
    // idle threads never reach. Ints, not Liao's unsigned char, which overflows beyond
    // 255 threads.
    changed_s[threadIdx.x] = changed;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) changed_s[threadIdx.x] += changed_s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = changed_s[0];
}

using FindNearest = void (*)(const float*, const float*, int, int, int, std::int32_t*, int*);

// The instantiation a configuration runs: float4 loads only where every row is 16-byte aligned.
FindNearest find_nearest_kernel(const LiaoConfig& cfg, bool rows_aligned16) {
    if (!cfg.aos) return find_nearest_cluster<false, false>;
    return cfg.vector_loads && rows_aligned16 ? find_nearest_cluster<true, true> : find_nearest_cluster<true, false>;
}

// Sum of the per-block partial counts, for any number of partials, in ONE block: each
// thread first adds a strided slice, then a tree reduction in shared memory. Liao's
// version launched nextPowerOfTwo(numClusterBlocks) threads, more than the 1024 a block
// may have once there are over 1024 partials (kmeans03: 1498 -> 2048, kmeans04: 3817 ->
// 4096), so it did not launch at all. The report's fix spreads the reduction over several
// blocks that each do `deviceIntermediates[0] += intermediates[0]` (and block 0 `=`): a
// non-atomic read-modify-write racing across blocks, with no order between block 0's
// store and the others' adds -- not copied here. blockDim.x: a power of two <= 1024.
__global__ void compute_delta(const int* __restrict__ partials, int num_partials, int* __restrict__ changed_total) {
    __shared__ int sums[kMaxReductionThreads];
    int sum = 0;
    for (int i = threadIdx.x; i < num_partials; i += blockDim.x) sum += partials[i];
    sums[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) sums[threadIdx.x] += sums[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) *changed_total = sums[0];
}

std::size_t find_nearest_cluster_shared_bytes(std::int64_t d, std::int64_t k, int threads) {
    return static_cast<std::size_t>(k * d) * sizeof(float) + static_cast<std::size_t>(threads) * sizeof(int);
}

// [k][d] -> [d][k] on the host: Liao keeps the centres dimension-major on the device.
void centres_to_soa(const float* centres, std::int64_t k, std::int64_t d, float* centres_soa) {
    for (std::int64_t c = 0; c < k; ++c)
        for (std::int64_t j = 0; j < d; ++j) centres_soa[j * k + c] = centres[c * d + j];
}

}  // namespace

void kmeans_liao_check(std::int64_t n, std::int64_t d, std::int64_t k, const LiaoConfig& cfg) {
    const int threads = cfg.threads;
    GPUOPT_REQUIRE(n > 0 && d > 0, "kmeans liao: x must have at least one object and one coordinate");
    GPUOPT_REQUIRE(k >= 1 && k <= n, "kmeans liao: k must be in 1..n");
    // One thread per object with int indices, and an int32 membership.
    GPUOPT_REQUIRE(n <= 2147483647LL, "kmeans liao: at most 2^31-1 objects, got " + std::to_string(n));
    require_choice(kLiaoThreads, threads, "kmeans liao");
    require_choice(kLiaoReductionThreads, cfg.reduction_threads, "kmeans liao");
    GPUOPT_REQUIRE(cfg.aos || !cfg.vector_loads, "kmeans liao: float4 loads need the array-of-structs layout");
    GPUOPT_REQUIRE(d <= 65535LL * kTransposeTile,
                   "kmeans liao: at most " + std::to_string(65535LL * kTransposeTile) + " coordinates (transpose grid y limit)");
    // k*d centre coordinates are staged in shared memory, as in Liao's kernel: beyond the
    // per-block limit the kernel cannot run at all.
    require_shared_memory(find_nearest_kernel(cfg, false), find_nearest_cluster_shared_bytes(d, k, threads),
                          ("kmeans liao: find_nearest_cluster with k*D = " + std::to_string(k) + "*" + std::to_string(d) +
                           " centre coordinates and " + std::to_string(threads) + " threads")
                              .c_str());
}

KMeansStats kmeans_liao(const float* x_dev, const float* x_host, std::int64_t n, std::int64_t d, std::int64_t k,
                        float threshold, std::int64_t max_iter, float* centroids_host, std::int32_t* membership_host,
                        const LiaoConfig& cfg, KMeansLiaoTiming* timing) {
    GPUOPT_REQUIRE(x_dev && x_host && centroids_host && membership_host, "kmeans liao: null pointer argument");
    GPUOPT_REQUIRE(max_iter >= 1, "kmeans liao: max_iter must be at least 1");
    kmeans_liao_check(n, d, k, cfg);
    const int threads = cfg.threads;

    const std::int64_t num_blocks = ceil_div<std::int64_t>(n, threads);  // <= 2^26 with n < 2^31, threads >= 32
    const int reduction_threads =
        cfg.reduction_threads > 0
            ? cfg.reduction_threads
            : static_cast<int>(std::min<std::int64_t>(kMaxReductionThreads,
                                                      std::max<std::int64_t>(32, next_power_of_two(num_blocks))));
    const std::size_t shared_bytes = find_nearest_cluster_shared_bytes(d, k, threads);
    const std::size_t centre_floats = static_cast<std::size_t>(k * d);
    const bool rows_aligned16 = d % 4 == 0 && reinterpret_cast<std::uintptr_t>(x_dev) % 16 == 0;
    const FindNearest find_nearest = find_nearest_kernel(cfg, rows_aligned16);
    require_shared_memory(find_nearest, shared_bytes, "kmeans liao: find_nearest_cluster");

    // SoA: a transposed scratch copy of x; AoS reads x as given.
    DeviceBuffer<float> x_soa(cfg.aos ? 0 : static_cast<std::size_t>(n * d));
    DeviceBuffer<float> centres_dev(centre_floats);
    DeviceBuffer<std::int32_t> membership_dev(static_cast<std::size_t>(n));
    DeviceBuffer<int> partials(static_cast<std::size_t>(num_blocks));
    DeviceBuffer<int> changed_dev(1);
    std::vector<float> centres_soa(cfg.aos ? 0 : centre_floats);
    CentreScratch scratch;

    std::optional<EventTimer> setup_timer, upload_timer, kernel_timer, download_timer;
    if (timing) {
        setup_timer.emplace();
        upload_timer.emplace();
        kernel_timer.emplace();
        download_timer.emplace();
        setup_timer->start();
    }
    if (!cfg.aos) {
        const dim3 block(kTransposeTile, kTransposeRows);
        const dim3 grid(static_cast<unsigned>(ceil_div<std::int64_t>(n, kTransposeTile)),
                        static_cast<unsigned>(ceil_div<std::int64_t>(d, kTransposeTile)));
        transpose_to_soa<<<grid, block, 0, current_stream()>>>(x_dev, x_soa.data(), n, static_cast<int>(d));
        GPUOPT_CHECK_LAUNCH("transpose_to_soa");
    }
    // Every membership starts at -1 (0xFFFFFFFF), so the first loop counts all n objects
    // as changed, as the CPU reference does.
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(membership_dev.data(), 0xFF, membership_dev.bytes(), current_stream()));
    if (timing) {
        setup_timer->stop();
        timing->setup_ms += setup_timer->elapsed_ms();
    }

    KMeansStats stats;
    float delta = 0.f;
    do {
        if (!cfg.aos) centres_to_soa(centroids_host, k, d, centres_soa.data());
        if (timing) upload_timer->start();
        GPUOPT_CUDA_CHECK(cudaMemcpyAsync(centres_dev.data(), cfg.aos ? centroids_host : centres_soa.data(),
                                          centre_floats * sizeof(float), cudaMemcpyHostToDevice, current_stream()));
        if (timing) {
            upload_timer->stop();
            kernel_timer->start();
        }
        find_nearest<<<static_cast<unsigned>(num_blocks), threads, shared_bytes, current_stream()>>>(
            cfg.aos ? x_dev : x_soa.data(), centres_dev.data(), static_cast<int>(n), static_cast<int>(d),
            static_cast<int>(k), membership_dev.data(), partials.data());
        GPUOPT_CHECK_LAUNCH("find_nearest_cluster");
        compute_delta<<<1, reduction_threads, 0, current_stream()>>>(partials.data(), static_cast<int>(num_blocks), changed_dev.data());
        GPUOPT_CHECK_LAUNCH("compute_delta");
        if (timing) {
            kernel_timer->stop();
            download_timer->start();
        }
        copy_to_host_sync(membership_host, membership_dev.data(), membership_dev.bytes());
        if (timing) download_timer->stop();
        // Synchronous and queued after every event of this loop: once it returns, the
        // events below are complete and reading them waits for nothing.
        int changed = 0;
        copy_to_host_sync(&changed, changed_dev.data(), sizeof(int));
        if (timing) {
            timing->upload_ms += upload_timer->elapsed_ms();
            timing->kernels_ms += kernel_timer->elapsed_ms();
            timing->download_ms += download_timer->elapsed_ms();
        }

        // The host update of the CPU reference itself: sums in object order, so the
        // centres stay bit-identical to kmeans_cpu.
        update_centroids(x_host, membership_host, n, d, k, Summation::Liao, centroids_host, scratch);
        delta = record_iteration(stats, changed, n);
    } while (delta > threshold && stats.iterations < max_iter);
    return stats;
}

}  // namespace gpuopt::kmeans
