// "device": the whole k-means loop on the GPU for small k*D (the centres fit shared memory). Per loop, two
// kernels and no host round trip:
//   assign_and_sum  blocks stride over chunks of kSumChunk objects (one pass over the points): each thread
//                   assigns its objects with Liao's distance (float32, coordinates in order, unfused, ties to
//                   the lower index) and counts changes and members (integers: any order); then the chunk's
//                   sums follow Summation::Chunked (kmeans.hpp): for k <= 4 one thread per (leaf, coordinate)
//                   adds the leaf's objects in object order to its cluster's float64 sum in registers (every load
//                   issued first),
//                   for larger k one thread per (leaf, coordinate) adds each object into its cluster's sum in
//                   shared memory (each point read once); then one thread per (cluster,
//                   coordinate) adds the 32 leaf sums in order into the chunk sum, written to chunk_sums;
//   finish_loop     one warp per (cluster, coordinate): lanes add a group's 32 chunk sums in order, the warp
//                   adds the group sums in order; the mean rounded once. The last block to finish computes
//                   delta = changed / n (Liao's float32), records it and sets the done flag when delta <=
//                   threshold or the loop cap is reached, and zeroes the counters for the next loop.
// Every kernel returns at once when the done flag is set, so the host queues loops in batches and reads the
// flag (with the delta history, one copy) once per batch. The result equals kmeans_cpu(..., Summation::Chunked)
// bit for bit, on any grid.
// "device_fused": assign_and_sum<D, Fused=true>: the block that writes a group's last chunk sum adds the group's
// chunk sums (a counter per group); the loop's last block (threadfence + counter) adds the group sums in order
// (finish_in_block): finish_loop's tree, one launch a loop.
// Both: for D <= 8 a block's chunk of x is staged in shared memory by cp.async before it waits for the previous
// kernel (every launch after a run's first is a programmatic dependent one), so the next loop's loads overlap this
// loop's tail and the leaf sums read shared memory. "device_gemm": assign_and_sum<D, false, Dot=true>: nearest_dot
// (kmeans_device.cuh) for k*D up to 4096, then finish_loop.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../common/cluster.cuh"
#include "../common/cuda_check.cuh"
#include "../common/device.hpp"
#include "../common/device_buffer.cuh"
#include "../common/error.hpp"
#include "../common/launch.cuh"
#include "../common/async_copy.cuh"
#include "kmeans_cuda.hpp"
#include "kmeans_device.cuh"
#include "kmeans_loop_parts.hpp"
#include "kmeans_tiled.hpp"

namespace gpuopt::kmeans {

namespace {

struct FinishArgs {
    float threshold;
    int max_iter;
    float* delta_history;      // [max_iter]
    unsigned int* group_done;  // fused: [groups] chunks of the group summed this loop (reset by its last one)
    double* group_sums;        // fused: [groups][k*d]
};

// acc[q] (e = threadIdx.x + q * kThreads < kd) += rows[r][e] for r = 0..count-1 in order, the rows staged
// through the slab: every load of a round issued before any add (one L2 round trip a round instead of one per
// few rows a thread); the same adds in the same order as a thread reading the rows itself. Through L2 (ld.cg):
// other blocks wrote the rows.
__device__ inline void add_rows_in_order(const double* rows, int count, int kd, double (&acc)[kCoordsPerThread<false>],
                                         double* slab, int slab_doubles) {
    const int per_round = slab_doubles / kd;  // >= 1: the slab holds >= k*d
    for (int r0 = 0; r0 < count; r0 += per_round) {
        const int in_round = count - r0 < per_round ? count - r0 : per_round;
#pragma unroll 2
        for (int item = threadIdx.x; item < in_round * kd; item += kThreads)
            slab[item] = __ldcg(rows + static_cast<std::int64_t>(r0) * kd + item);
        __syncthreads();
#pragma unroll
        for (int q = 0; q < kCoordsPerThread<false>; ++q) {
            const int e = threadIdx.x + q * kThreads;
            if (e < kd)
                for (int r = 0; r < in_round; ++r) acc[q] += slab[r * kd + e];
        }
        __syncthreads();  // the slab is rewritten by the next round
    }
}

// Closes a loop with one block of kThreads (the fused path), once every group sum is written (by the block that
// summed the group's last chunk): the group sums added in group order, exactly finish_loop's tree; then the new
// centres, delta, the stop flag, and the counters zeroed.
__device__ inline void finish_in_block(std::int64_t n, int d, int k, std::int64_t chunks,
                                       unsigned long long* counts, float* centres, const FinishArgs& fin,
                                       LoopState* state, double* slab, int slab_doubles) {
    const int kd = k * d;
    const std::int64_t groups = (chunks + kGroup - 1) / kGroup;
    // The member counts (of a thread's first pair: k*D <= 256 has no other) and the change count read first: their
    // round trip overlaps the group sums' (all final: every block added its counts before it was counted). Registers
    // for the rest would spill.
    const volatile unsigned long long* vcounts = counts;
    const unsigned long long count0 = static_cast<int>(threadIdx.x) < kd ? vcounts[threadIdx.x / d] : 0;
    unsigned long long changed = 0;
    if (threadIdx.x == 0) changed = *reinterpret_cast<volatile unsigned long long*>(&state->changed);
    double total[kCoordsPerThread<false>];
#pragma unroll
    for (int q = 0; q < kCoordsPerThread<false>; ++q) total[q] = 0.0;
    add_rows_in_order(fin.group_sums, static_cast<int>(groups), kd, total, slab, slab_doubles);  // ends at a barrier
#pragma unroll
    for (int q = 0; q < kCoordsPerThread<false>; ++q) {
        const int e = threadIdx.x + q * kThreads;
        const unsigned long long count = q == 0 ? count0 : (e < kd ? vcounts[e / d] : 0);
        if (count > 0) centres[e] = close_mean(total[q], static_cast<double>(count), &state->nonfinite);
    }
    __syncthreads();  // every count read (and used) before it is zeroed; the nonfinite flag set
    for (int c = threadIdx.x; c < k; c += kThreads) counts[c] = 0;
    if (threadIdx.x == 0) record_loop(state, changed, n, fin.threshold, fin.max_iter, fin.delta_history);
}

// Chunk `chunk`'s x into xs (leaf l at xs + l * stage_stride(D)), by cp.async: 16-byte pieces for a whole chunk of
// 16-byte aligned x (a leaf's 32 D floats are whole pieces), else 4 bytes a float, zeros past n. Committed as one
// group; the caller waits for it (cp_async_wait<0> and a barrier) before reading.
template <int D>
__device__ inline void stage_chunk(const float* __restrict__ x, std::int64_t n, std::int64_t chunk, bool vec16,
                                   float* xs) {
    constexpr int kLeafFloats = kLeaf * D, kStride = stage_stride(D);
    const float* src = x + chunk * kChunk * D;
    const std::int64_t left = (n - chunk * kChunk) * D;  // floats of x from src on
    if (vec16 && left >= kChunk * D) {
        for (int p = threadIdx.x; p < kChunk * D / 4; p += kThreads) {
            const int l = p / (kLeafFloats / 4), q = 4 * (p % (kLeafFloats / 4));
            dev::cp_async_16(xs + l * kStride + q, src + l * kLeafFloats + q, 16);
        }
    } else {
        for (int f = threadIdx.x; f < kChunk * D; f += kThreads) {
            const bool ok = f < left;
            dev::cp_async_4(xs + (f / kLeafFloats) * kStride + f % kLeafFloats, ok ? src + f : x, ok ? 4 : 0);
        }
    }
    dev::cp_async_commit();
}

// At most 64 registers (4 blocks an SM): left alone, ptxas picks 32 and spills for some D, or 80 and fits only 3.
// Fused: the last block to finish also closes the loop (finish_in_block), so a loop is one launch.
// Dot: the nearest centre by the dot form (nearest_dot: Liao's answer, fewer instructions) for k*D up to 4096;
// 128 registers (16 chunk sums a thread), 2 blocks an SM as its shared memory allows.
template <int D, bool Fused, bool Dot>
__global__ void __launch_bounds__(kThreads, Dot ? 2 : 4) assign_and_sum(
    const float* __restrict__ x, std::int64_t n, int d, int k,
    float* centres,  // [k][d]; rewritten by Fused's last block
    std::int32_t* __restrict__ membership, double* __restrict__ chunk_sums,  // [chunks][k][d]
    unsigned long long* __restrict__ counts,                                  // [k]
    LoopState* __restrict__ state, FinishArgs fin) {
    static_assert(!(Fused && Dot), "the dot form's k*D is finished by finish_loop's many blocks");
    constexpr int kPerThread = kCoordsPerThread<Dot>;
    constexpr bool kStage = D > 0 && stages_x(D, Dot);
    // Programmatic dependent launch: the next launch's blocks may start (and stage their x) while this one runs.
    cluster::allow_dependents();
    if constexpr (D > 0) d = D;  // constant from here on
    const int kd = k * d;
    const int leaves = leaves_per_pass(kd, kStage);
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float* xs = reinterpret_cast<float*>(smem_raw);                          // kStage: [kLeaves][stage_stride]
    double* leaf_s = reinterpret_cast<double*>(xs + (kStage ? kLeaves * stage_stride(D) : 0));  // [leaves][k*d]
    float* centres_s = reinterpret_cast<float*>(leaf_s + leaves * kd);       // [k][d]
    float* m2c_s = centres_s + kd;                                           // Dot: [k+1][d], -2 c
    float* cn_s = m2c_s + (Dot ? (k + 1) * d : 0);                           // Dot: [k+1], ||c||^2
    std::int32_t* members_s = reinterpret_cast<std::int32_t*>(cn_s + (Dot ? k + 1 : 0));  // [kChunk]
    int* counts_s = members_s + kChunk;                                      // [k], this block's chunks
    __shared__ float cmax_s;
    // x is never written by the loop: the block's first chunk is staged before the previous loop is waited for.
    const bool vec16 = (reinterpret_cast<std::uintptr_t>(x) & 15) == 0;
    if constexpr (kStage)
        if (blockIdx.x < chunks) stage_chunk<D>(x, n, blockIdx.x, vec16, xs);
    cluster::wait_for_previous();  // the previous loop's centres, memberships, counters and stop flag
    // The stop flag, the centres and (below) the first chunk's old memberships in flight together: one L2 round
    // trip on the loop's critical path, not three (reading the centres of a finished loop is harmless).
    const int done = *static_cast<volatile int*>(&state->done);
    for (int i = threadIdx.x; i < kd; i += kThreads) centres_s[i] = centres[i];
    if (done) {
        if constexpr (kStage) dev::cp_async_wait<0>();  // no copy left in flight into a finished block
        return;
    }
    for (int c = threadIdx.x; c < k; c += kThreads) counts_s[c] = 0;
    if constexpr (Dot) {
        // -2c is exact (a power of two); the pad centre k: zeros and ||c||^2 = +inf, never the nearest.
        for (int i = threadIdx.x; i < (k + 1) * d; i += kThreads) m2c_s[i] = i < kd ? -2.f * centres[i] : 0.f;
        centre_norms(centres, k, d, k + 1, cn_s, &cmax_s);
    }
    __syncthreads();

    int changed = 0;
    for (std::int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const std::int64_t start = chunk * kChunk;
        const int len = static_cast<int>(n - start < kChunk ? n - start : kChunk);
        if constexpr (kStage) {
            // (the previous chunk's last reads of xs are behind its leaf pass's closing barrier)
            if (chunk != blockIdx.x) stage_chunk<D>(x, n, chunk, vec16, xs);
            dev::cp_async_wait<0>();
            __syncthreads();
        }
        // Object i of the chunk, and coordinate j of the leaf from object `first` on (objects d floats apart).
        auto object = [&](int i) -> const float* {
            if constexpr (kStage) return xs + (i / kLeaf) * stage_stride(D) + (i % kLeaf) * D;
            else return x + (start + i) * d;
        };
        auto leaf_column = [&](int first, int j) -> const float* {
            if constexpr (kStage) return xs + (first / kLeaf) * stage_stride(D) + j;
            else return x + (start + first) * d + j;
        };
        // A thread's objects in groups whose loads are issued together (as many as registers allow: 4 x D floats).
        constexpr int kTogether = D > 0 && D <= 4 ? 4 : (D > 0 && D <= 12 ? 2 : 1);
        for (int r0 = 0; r0 < kChunk / kThreads; r0 += kTogether)
#pragma unroll
        for (int r = r0; r < r0 + kTogether; ++r) {
            const int i = r * kThreads + threadIdx.x;  // consecutive threads, consecutive objects: a warp, a leaf
            std::int32_t best = -1;
            if (i < len) {
                const std::int32_t old = membership[start + i];  // issued before the distances need no register long
                float best_dist = 0.f;
                if constexpr (Dot)
                    best = nearest_dot<D>(object(i), centres_s, m2c_s, cn_s, cmax_s, k, d);
                else
                    best = nearest<D>(object(i), centres_s, 0, k, d, 0, best_dist);
                changed += old != best;
                membership[start + i] = best;
            }
            members_s[i] = best;  // -1 past the end: a member of no cluster
            if (k <= kGatherMaxK) ballot_counts(best, k, counts_s);  // k is uniform: every lane takes it together
        }
        __syncthreads();  // members_s complete
        if (k > kGatherMaxK)
            for (int i = threadIdx.x; i < len; i += kThreads) atomicAdd(&counts_s[members_s[i]], 1);

        // Chunk sums of the (cluster, coordinate) pairs this thread owns: the leaf sums added in leaf order.
        double chunk_sum[kPerThread];
#pragma unroll
        for (int q = 0; q < kPerThread; ++q) chunk_sum[q] = 0.0;
        for (int leaf0 = 0; leaf0 < kLeaves; leaf0 += leaves) {
            // 8 loads in flight in registers (64 registers); the scatter's 16 (the dot form's 128 registers: all 32).
            leaf_sums_pass<kLeaf / 4, Dot ? kLeaf : kLeaf / 2>(k, d, len, leaf0, leaves, members_s, leaf_column, leaf_s);
            __syncthreads();
#pragma unroll
            for (int q = 0; q < kPerThread; ++q) {
                const int e = threadIdx.x + q * kThreads;
                if (e < kd)
                    for (int leaf = 0; leaf < leaves; ++leaf) chunk_sum[q] += leaf_s[leaf * kd + e];
            }
            __syncthreads();  // leaf_s is rewritten by the next pass, members_s by the next chunk
        }
#pragma unroll
        for (int q = 0; q < kPerThread; ++q) {
            const int e = threadIdx.x + q * kThreads;
            if (e < kd) chunk_sums[chunk * kd + e] = chunk_sum[q];
        }
        if constexpr (Fused) {
            // The block that writes a group's last chunk sum adds the group's 32 in order (one L2 round trip
            // for k*D <= 256, the slab holding the group) and writes the group sum, so the last block of the
            // loop reads groups x k*D values instead of 32 times as many. Threadfence pattern: a block's writes
            // are visible device-wide before it is counted; the last one counted sees every counted block's.
            __shared__ bool group_last;
            const std::int64_t g = chunk / kGroup;
            __threadfence();
            __syncthreads();
            if (threadIdx.x == 0) {
                const unsigned in_group = static_cast<unsigned>(chunks - g * kGroup < kGroup ? chunks - g * kGroup : kGroup);
                group_last = atomicAdd(&fin.group_done[g], 1u) == in_group - 1;
                if (group_last) fin.group_done[g] = 0;  // every other chunk of g counted: ready for the next loop
            }
            __syncthreads();
            if (group_last) {
                __threadfence();
                double group_sum[kPerThread];
#pragma unroll
                for (int q = 0; q < kPerThread; ++q) group_sum[q] = 0.0;
                const int in_group = static_cast<int>(chunks - g * kGroup < kGroup ? chunks - g * kGroup : kGroup);
                add_rows_in_order(chunk_sums + g * kGroup * kd, in_group, kd, group_sum, leaf_s, leaves * kd);
#pragma unroll
                for (int q = 0; q < kPerThread; ++q) {
                    const int e = threadIdx.x + q * kThreads;
                    if (e < kd) fin.group_sums[g * kd + e] = group_sum[q];
                }
            }
        }
    }
    // The block's change and member counts (integers: the same total in any order).
    add_changed<kThreads>(changed, state);
    for (int c = threadIdx.x; c < k; c += kThreads)
        if (counts_s[c]) atomicAdd(&counts[c], static_cast<unsigned long long>(counts_s[c]));
    if constexpr (Fused) {
        // Threadfence pattern: this block's group sums and counts are visible device-wide before it is counted;
        // the last block counted sees every block's (each group summed by a block counted before it).
        __shared__ bool last;
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) last = atomicAdd(&state->finished_blocks, 1u) == gridDim.x - 1;
        __syncthreads();
        if (!last) return;
        __threadfence();
        finish_in_block(n, d, k, chunks, counts, centres, fin, state, leaf_s, leaves * kd);
    }
}

// Streamed (the stream variant, kmeans_stream.cu): the chunks are one slab's of the points, whole groups of the
// tree; the total starts from running[e] (the groups of the slabs before, in order) and, unless `close`, is
// stored back there instead of closing the loop: the same adds in the same order as one pass over all groups.
// Coords (1 or 4; 4 needs k*d % 4 == 0): (cluster, coordinate) entries a warp, 32 / Coords groups a round. With 4, a
// load instruction reads whole 32-byte sectors (4 entries of 8 groups' chunk rows) instead of one double from each
// of 32 sectors a megabyte apart: worth it where the groups take more than one round (device_tiled at 10M points).
template <bool Streamed, int Coords = 1>
__global__ void __launch_bounds__(kFinishWarps * 32) finish_loop(std::int64_t n, int d, int k, std::int64_t chunks,
                                                                 const double* __restrict__ chunk_sums,
                                                                 unsigned long long* __restrict__ counts,
                                                                 float* __restrict__ centres, float threshold,
                                                                 int max_iter, float* __restrict__ delta_history,
                                                                 LoopState* __restrict__ state,
                                                                 double* __restrict__ running, bool close) {
    cluster::allow_dependents();   // the next loop's assign_and_sum may stage its x meanwhile
    cluster::wait_for_previous();  // launched dependent: the loop's chunk sums and counts
    if (state->done) return;  // read by every block before the last one can change it
    if constexpr (!Streamed) close = true;
    static_assert(Coords == 1 || Coords == 4, "a warp's lanes split evenly over its entries");
    constexpr int kSlots = 32 / Coords;  // groups a round
    const int kd = k * d;
    const int lane = threadIdx.x % 32, sub = lane % Coords, slot = lane / Coords;
    const int e0 = (blockIdx.x * kFinishWarps + threadIdx.x / 32) * Coords;  // warp-uniform (k*d % Coords == 0)
    const int e = e0 + sub;
    if (e0 < kd) {
        // Groups of 32 chunks, one a lane of the entry; the group sums (chunks in order) then added in group order
        // by the entry's lanes (every lane forms the same total).
        double total = 0.0;
        if constexpr (Streamed) total = running[e];  // +0.0 before a loop's first slab: 0.0 + x == x
        const std::int64_t groups = (chunks + kGroup - 1) / kGroup;
        for (std::int64_t g0 = 0; g0 < groups; g0 += kSlots) {
            double gsum = 0.0;  // group g's
            const std::int64_t g = g0 + slot;
            if constexpr (Coords == 1) {
                if (g < groups) gsum = group_sum(chunk_sums, g, chunks, kd, e);
            } else if (g < groups) {
                // The group's chunk sums through shared memory by cp.async, 16 in flight a lane (as registers, ptxas
                // issues each load one add before its use: a round trip an add). Past the last chunk: zero-filled.
                __shared__ __align__(16) double part_s[kFinishWarps][kGroup / 2][32];
                double* mine = &part_s[threadIdx.x / 32][0][lane];
#pragma unroll
                for (int h = 0; h < kGroup; h += kGroup / 2) {
#pragma unroll
                    for (int u = 0; u < kGroup / 2; ++u) {
                        const std::int64_t q = g * kGroup + h + u;
                        dev::cp_async_8(mine + u * 32, chunk_sums + (q < chunks ? q : chunks - 1) * kd + e,
                                                q < chunks ? 8 : 0);
                    }
                    dev::cp_async_commit();
                    dev::cp_async_wait<0>();  // this lane's own copies: no other lane reads them
#pragma unroll
                    for (int u = 0; u < kGroup / 2; ++u) gsum += mine[u * 32];
                }
            }
            const int in_round = groups - g0 < kSlots ? static_cast<int>(groups - g0) : kSlots;
            for (int r = 0; r < in_round; ++r) total += __shfl_sync(0xffffffffu, gsum, r * Coords + sub);
        }
        if constexpr (Streamed)
            if (slot == 0) running[e] = close ? 0.0 : total;  // every lane read it before the shuffles above
        if (close) {
            const int c = e / d;
            const unsigned long long count = counts[c];
            if (slot == 0 && count > 0) centres[e] = close_mean(total, static_cast<double>(count), &state->nonfinite);
        }
    }
    // The last block to get here closes the loop.
    if (!last_block(state)) return;
    if (!close) {  // a slab of a streamed loop: counts and changes go on adding up
        if (threadIdx.x == 0) state->finished_blocks = 0;
        return;
    }
    for (int c = threadIdx.x; c < k; c += blockDim.x) counts[c] = 0;
    if (threadIdx.x == 0) record_loop(state, state->changed, n, threshold, max_iter, delta_history);
}

constexpr int kPredictThreads = 256;
constexpr int kPredictTile = 8192;  // centre coordinates staged in shared memory at once (32 KiB)

// One thread per object; the centres pass through shared memory in tiles of whole centres, in index order, so
// the strict "closer than the best so far" keeps Liao's ties to the lower index across tiles.
template <int D>
__global__ void __launch_bounds__(kPredictThreads) predict_kernel(const float* __restrict__ x, std::int64_t n, int d,
                                                                  int k, const float* __restrict__ centres,
                                                                  std::int32_t* __restrict__ membership) {
    __shared__ float tile_s[kPredictTile];
    if constexpr (D > 0) d = D;
    const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kPredictThreads + threadIdx.x;
    const float* o = x + (i < n ? i : 0) * d;
    const int per_tile = kPredictTile / d;
    std::int32_t best = 0;
    float best_dist = 0.f;
    for (int c0 = 0; c0 < k; c0 += per_tile) {
        const int count = k - c0 < per_tile ? k - c0 : per_tile;
        __syncthreads();  // the previous tile is no longer read
        for (int t = threadIdx.x; t < count * d; t += kPredictThreads) tile_s[t] = centres[c0 * d + t];
        __syncthreads();
        if (i < n) best = nearest<D>(o, tile_s, c0, count, d, best, best_dist);
    }
    if (i < n) membership[i] = best;
}

}  // namespace

namespace {

template <bool Fused, bool Dot>
void check_loop(std::int64_t n, std::int64_t d, std::int64_t k, const char* name) {
    const std::string what = std::string("kmeans ") + name;
    GPUOPT_REQUIRE(n > 0 && d > 0, what + ": x must have at least one object and one coordinate");
    GPUOPT_REQUIRE(k >= 1 && k <= n, what + ": k must be in 1..n");
    GPUOPT_REQUIRE(n <= (std::int64_t{1} << 40), what + ": at most 2^40 objects");
    GPUOPT_REQUIRE(k * d <= kMaxCentreCoords<Dot>,
                   what + ": k*D = " + std::to_string(k * d) + " centre coordinates; this variant holds at most " +
                       std::to_string(kMaxCentreCoords<Dot>));
    with_dim(d, [&](auto dim) {
        require_shared_memory(assign_and_sum<dim.value, Fused, Dot>, assign_shared_bytes(d, k, Dot),
                              (what + ": assign_and_sum").c_str());
    });
}

}  // namespace

void kmeans_device_check(std::int64_t n, std::int64_t d, std::int64_t k) {
    check_loop<false, false>(n, d, k, "device");
    check_loop<true, false>(n, d, k, "device");
}

void kmeans_device_gemm_check(std::int64_t n, std::int64_t d, std::int64_t k) {
    check_loop<false, true>(n, d, k, "device_gemm");
}

void kmeans_device_tiled_check(std::int64_t n, std::int64_t d, std::int64_t k, tiled::Products products) {
    const std::string what = "kmeans device_tiled";
    GPUOPT_REQUIRE(n > 0 && d > 0, what + ": x must have at least one object and one coordinate");
    GPUOPT_REQUIRE(k >= 1 && k <= n, what + ": k must be in 1..n");
    GPUOPT_REQUIRE(n <= (std::int64_t{1} << 40), what + ": at most 2^40 objects");
    tiled::check(n, d, k, products);
}

namespace {

// The loop's small state in one allocation, so one memset starts it and one copy a batch reads the stop flag
// with the delta history: [counts: k][LoopState][history: max_iter floats].
static_assert(sizeof(LoopState) % sizeof(unsigned long long) == 0, "LoopState packs into 64-bit words");
constexpr std::size_t kStateWords = sizeof(LoopState) / sizeof(unsigned long long);

// Tiled: device_tiled (kmeans_tiled.cu: assign_tiled + sum_members, then finish_loop).
template <bool Fused, bool Dot, bool Tiled = false>
KMeansStats run_device(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                       std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev, int loops_per_sync,
                       int blocks_wanted, tiled::Products products = tiled::Products::Auto) {
    GPUOPT_REQUIRE(x_dev && centroids_dev && membership_dev, "kmeans device: null pointer argument");
    GPUOPT_REQUIRE(max_iter >= 1 && max_iter <= (1 << 30), "kmeans device: max_iter must be in 1..2^30");
    GPUOPT_REQUIRE(loops_per_sync >= 1, "kmeans device: loops_per_sync must be >= 1");
    GPUOPT_REQUIRE(blocks_wanted >= 0, "kmeans device: blocks must be >= 0 (0: as many as are resident)");
    if constexpr (Tiled) kmeans_device_tiled_check(n, d, k, products);
    else check_loop<Fused, Dot>(n, d, k, Dot ? "device_gemm" : "device");
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    const int kd = static_cast<int>(k * d);
    // Fused: the group sums after the chunk sums, and a chunk counter per group ahead of the counts.
    const std::int64_t groups = Fused ? (chunks + kGroup - 1) / kGroup : 0;
    DeviceBuffer<double> chunk_sums(static_cast<std::size_t>((chunks + groups) * kd));
    const std::size_t history_words = static_cast<std::size_t>((max_iter + 1) / 2);
    const std::size_t group_words = static_cast<std::size_t>((groups + 1) / 2);
    DeviceBuffer<unsigned long long> small(group_words + static_cast<std::size_t>(k) + kStateWords + history_words);
    unsigned long long* counts = small.data() + group_words;
    auto* state = reinterpret_cast<LoopState*>(counts + k);
    const FinishArgs fin{threshold, static_cast<int>(max_iter), reinterpret_cast<float*>(state + 1),
                         reinterpret_cast<unsigned int*>(small.data()), chunk_sums.data() + chunks * kd};
    // Group counters, counts and state zeroed in one call. Every membership starts at -1, so the first loop
    // counts all n objects as changed (as the reference).
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(small.data(), 0,
                                      (group_words + static_cast<std::size_t>(k) + kStateWords) * sizeof(unsigned long long),
                                      current_stream()));
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(membership_dev, 0xFF, static_cast<std::size_t>(n) * sizeof(std::int32_t),
                                      current_stream()));

    // The host's copy of [LoopState][history], read once per batch.
    std::vector<unsigned char> host(sizeof(LoopState) + static_cast<std::size_t>(max_iter) * sizeof(float));
    LoopState host_state{};
    // finish_loop with 4 entries a warp where that still leaves >= 1024 warps (8 MB of chunk rows in flight) and
    // the groups fill more than one of its rounds of 8; one entry a warp otherwise. (Past 32 groups measured at 10M
    // x 16, k=256. At 1M x 256, k=1000, 31 groups, one entry a warp read 2 GB of chunk rows in 3.2 ms on the H200:
    // each load one double from each of 32 sectors.)
    const int coords = kd % 4 == 0 && kd >= 4096 && chunks > 8 * kGroup ? 4 : 1;
    const auto finish = coords == 4 ? finish_loop<false, 4> : finish_loop<false, 1>;
    const unsigned finish_blocks = static_cast<unsigned>((kd / coords + kFinishWarps - 1) / kFinishWarps);
    // Batches of queued loops until the stop flag is read set; launch_loop(dependent) queues one loop's kernels.
    // Every launch but the run's first is a programmatic dependent launch (cluster::launch_ex): its blocks may
    // start while the kernel before it runs, and wait for it (wait_for_previous) before reading what it writes.
    bool first = true;
    auto run_batches = [&](auto&& launch_loop) {
        while (!host_state.done) {
            // Queued without waiting; loops past the stop return at once. No more than the cap allows.
            const std::int64_t batch = std::min<std::int64_t>(loops_per_sync, max_iter - host_state.iterations);
            for (std::int64_t b = 0; b < batch; ++b) {
                launch_loop(!first);
                first = false;
                if constexpr (!Fused) {
                    cluster::launch_ex(finish, finish_blocks, kFinishWarps * 32, 0, 1, true, n,
                                       static_cast<int>(d), static_cast<int>(k), chunks,
                                       static_cast<const double*>(chunk_sums.data()), counts, centroids_dev,
                                       threshold, static_cast<int>(max_iter), fin.delta_history, state,
                                       static_cast<double*>(nullptr), true);
                }
            }
            // The stop flag and the history up to the batch's last possible loop, in one copy.
            const std::size_t bytes = sizeof(LoopState) + static_cast<std::size_t>(host_state.iterations + batch) * sizeof(float);
            copy_to_host_sync(host.data(), state, bytes);
            std::memcpy(&host_state, host.data(), sizeof(LoopState));
            parts::require_finite(host_state.nonfinite != 0, host_state.iterations);
        }
    };
    if constexpr (Tiled) {
        const tiled::Launch plan = tiled::plan(n, d, k, blocks_wanted, products);
        DeviceBuffer<unsigned char> workspace(plan.workspace_bytes);
        run_batches([&](bool) {  // assign_tiled waits for the finish_loop before it (an ordinary launch)
            tiled::launch(plan, x_dev, n, d, k, centroids_dev, membership_dev, chunk_sums.data(), counts, state,
                          workspace.data());
        });
    } else {
        with_dim(d, [&](auto dim) {
            const auto assign = assign_and_sum<dim.value, Fused, Dot>;
            int per_sm = 0;
            const std::size_t shared = assign_shared_bytes(d, k, Dot);
            GPUOPT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, assign, kThreads, shared));
            const std::int64_t resident = static_cast<std::int64_t>(multiprocessor_count()) * std::max(per_sm, 1);
            const unsigned blocks =
                static_cast<unsigned>(std::min<std::int64_t>(chunks, blocks_wanted > 0 ? blocks_wanted : resident));
            run_batches([&](bool dependent) {
                cluster::launch_ex(assign, blocks, kThreads, shared, 1, dependent, x_dev, n, static_cast<int>(d),
                                   static_cast<int>(k), centroids_dev, membership_dev, chunk_sums.data(), counts,
                                   state, fin);
            });
        });
    }
    KMeansStats stats;
    stats.iterations = host_state.iterations;
    const auto* delta = reinterpret_cast<const float*>(host.data() + sizeof(LoopState));
    stats.delta.assign(delta, delta + host_state.iterations);
    return stats;
}

}  // namespace

KMeansStats kmeans_device(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                          std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                          int loops_per_sync, int blocks_wanted) {
    return run_device<false, false>(x_dev, n, d, k, threshold, max_iter, centroids_dev, membership_dev,
                                    loops_per_sync, blocks_wanted);
}

KMeansStats kmeans_device_fused(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                                std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                                int loops_per_sync, int blocks_wanted) {
    return run_device<true, false>(x_dev, n, d, k, threshold, max_iter, centroids_dev, membership_dev,
                                   loops_per_sync, blocks_wanted);
}

KMeansStats kmeans_device_tiled(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                                std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                                int loops_per_sync, int blocks_wanted, tiled::Products products) {
    return run_device<false, true, true>(x_dev, n, d, k, threshold, max_iter, centroids_dev, membership_dev,
                                         loops_per_sync, blocks_wanted, products);
}

KMeansStats kmeans_device_gemm(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                               std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                               int loops_per_sync, int blocks_wanted) {
    return run_device<false, true>(x_dev, n, d, k, threshold, max_iter, centroids_dev, membership_dev,
                                   loops_per_sync, blocks_wanted);
}

void kmeans_predict_device_check(std::int64_t n, std::int64_t d, std::int64_t k) {
    GPUOPT_REQUIRE(n >= 0 && d > 0 && k >= 1, "kmeans_predict device: need d >= 1 coordinates and k >= 1 centres");
    GPUOPT_REQUIRE(d <= kPredictTile, "kmeans_predict device: at most " + std::to_string(kPredictTile) +
                                          " coordinates (one centre a shared-memory tile), got " + std::to_string(d));
    GPUOPT_REQUIRE(k <= (std::int64_t{1} << 31) - 1 && k * d <= (std::int64_t{1} << 31) - 1,
                   "kmeans_predict device: k*D must fit 32-bit indexing");
    GPUOPT_REQUIRE(n / kPredictThreads < (std::int64_t{1} << 31) - 1, "kmeans_predict device: too many objects");
}

void kmeans_predict_device(const float* x_dev, std::int64_t n, std::int64_t d, const float* centroids_dev,
                           std::int64_t k, std::int32_t* membership_dev) {
    kmeans_predict_device_check(n, d, k);
    if (n == 0) return;
    GPUOPT_REQUIRE(x_dev && centroids_dev && membership_dev, "kmeans_predict device: null pointer argument");
    const auto blocks = static_cast<unsigned>((n + kPredictThreads - 1) / kPredictThreads);
    with_dim(d, [&](auto dim) {
        predict_kernel<dim.value><<<blocks, kPredictThreads, 0, current_stream()>>>(x_dev, n, static_cast<int>(d), static_cast<int>(k),
                                                               centroids_dev, membership_dev);
        GPUOPT_CHECK_LAUNCH("kmeans predict_kernel");
    });
}

}  // namespace gpuopt::kmeans

namespace gpuopt::kmeans::parts {

std::size_t head_words(std::int64_t k) { return static_cast<std::size_t>(k) + kStateWords; }
std::size_t loop_words(std::int64_t k, std::int64_t max_iter) {
    return head_words(k) + static_cast<std::size_t>((max_iter + 1) / 2);
}
void* state_of(unsigned long long* loop, std::int64_t k) { return loop + k; }
std::size_t state_bytes(std::int64_t iterations) {
    return sizeof(LoopState) + static_cast<std::size_t>(iterations) * sizeof(float);
}
void require_finite(bool nonfinite, int loops) {
    GPUOPT_REQUIRE(!nonfinite, "kmeans: x must contain only finite values: the centre sums of loop " +
                                   std::to_string(loops) + " were NaN or inf (found on the device; nothing returned)");
}
bool copy_done(const unsigned char* copy, int* iterations) {
    LoopState s;
    std::memcpy(&s, copy, sizeof(LoopState));
    *iterations = s.iterations;
    require_finite(s.nonfinite != 0, s.iterations);
    return s.done != 0;
}
const float* copy_history(const unsigned char* copy) { return reinterpret_cast<const float*>(copy + sizeof(LoopState)); }

unsigned assign_grid(std::int64_t chunks, std::int64_t d, std::int64_t k, bool dot) {
    unsigned blocks = 0;
    auto grid = [&](auto assign, std::size_t shared) {
        require_shared_memory(assign, shared, "kmeans stream: assign_and_sum");
        int per_sm = 0;
        GPUOPT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, assign, kThreads, shared));
        const std::int64_t resident = static_cast<std::int64_t>(multiprocessor_count()) * std::max(per_sm, 1);
        blocks = static_cast<unsigned>(std::min<std::int64_t>(chunks, resident));
    };
    with_dim(d, [&](auto dim) {
        if (dot) grid(assign_and_sum<dim.value, false, true>, assign_shared_bytes(d, k, true));
        else grid(assign_and_sum<dim.value, false, false>, assign_shared_bytes(d, k, false));
    });
    return blocks;
}

void launch_assign(const float* x, std::int64_t n, std::int64_t d, std::int64_t k, bool dot, unsigned blocks,
                   const float* centres, std::int32_t* membership, double* chunk_sums, unsigned long long* loop,
                   cudaStream_t stream) {
    unsigned long long* counts = loop;
    auto* state = static_cast<LoopState*>(state_of(loop, k));
    const FinishArgs fin{0.f, 0, nullptr, nullptr, nullptr};  // not fused: only the fused path reads it
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    const int di = static_cast<int>(d), ki = static_cast<int>(k);
    // assign_and_sum's centres are not const (the fused path writes them); the unfused one only reads them.
    float* c = const_cast<float*>(centres);
    const unsigned grid = static_cast<unsigned>(std::min<std::int64_t>(blocks, chunks));
    with_dim(d, [&](auto dim) {
        if (dot)
            assign_and_sum<dim.value, false, true><<<grid, kThreads, assign_shared_bytes(d, k, true), stream>>>(
                x, n, di, ki, c, membership, chunk_sums, counts, state, fin);
        else
            assign_and_sum<dim.value, false, false><<<grid, kThreads, assign_shared_bytes(d, k, false), stream>>>(
                x, n, di, ki, c, membership, chunk_sums, counts, state, fin);
        GPUOPT_CHECK_LAUNCH("assign_and_sum");
    });
}

void launch_slab(const float* x, std::int64_t n, std::int64_t n_total, std::int64_t d, std::int64_t k, bool dot,
                 unsigned blocks, float* centres, std::int32_t* membership, double* chunk_sums,
                 unsigned long long* loop, double* running, bool close, float threshold, std::int64_t max_iter,
                 cudaStream_t stream) {
    launch_assign(x, n, d, k, dot, blocks, centres, membership, chunk_sums, loop, stream);
    unsigned long long* counts = loop;
    auto* state = static_cast<LoopState*>(state_of(loop, k));
    auto* history = reinterpret_cast<float*>(state + 1);
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    const int di = static_cast<int>(d), ki = static_cast<int>(k);
    const auto finish_blocks = static_cast<unsigned>((k * d + kFinishWarps - 1) / kFinishWarps);
    finish_loop<true><<<finish_blocks, kFinishWarps * 32, 0, stream>>>(n_total, di, ki, chunks, chunk_sums, counts,
                                                                       centres, threshold, static_cast<int>(max_iter),
                                                                       history, state, running, close);
    GPUOPT_CHECK_LAUNCH("finish_loop");
}

}  // namespace gpuopt::kmeans::parts
