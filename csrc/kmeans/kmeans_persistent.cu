// "device_persistent": the whole k-means run in ONE cooperative launch (notes/kmeans.md, round 6). The grid is at most the
// co-resident block count (occupancy API; a cooperative launch that cannot be co-resident fails: RuntimeError), and
// every loop of the call runs inside it until the device-side stop; the host reads the loop count and the delta
// history once, at the end (or later, when the caller asks: deferred runs, see DeviceState). Per loop, each block over its own contiguous whole chunks (kSumChunk objects):
//   A  Liao's nearest centre (nearest<D>: float32, coordinates in order, unfused, ties to the lower index), the leaf
//      -> chunk float64 sums of Summation::Chunked (assign_and_sum's tree) and, in the same row, the chunk's member
//      counts and change count as doubles (integers below 2^53: exact in any order, no atomics, nothing to zero);
//      for resident x, D <= 16 and k <= 4 by chunk_pass (round 8: the same arithmetic in ~half the instructions);
//   B  a group's sum (its <= 32 chunk rows added in chunk order) by the group's LAST block to write its rows: each
//      block adds its chunks of the group to the group's arrival counter (acq_rel); the one that completes it sums the
//      group, resets the counter and adds 1 to the loop's done counter (release). A block that owns a whole group
//      sums it without the counter. Then every block waits for all groups of the loop (acquire spin on the done
//      counter): the loop's only grid-wide wait (round 8; two grid barriers before: A | B | C);
//   C  in EVERY block (redundant, the same bits everywhere): the group sums added in group order, the mean rounded
//      once (float32(total / count); an empty cluster keeps its centre), delta = changed / n in float32, the stop
//      test; block 0 records the history entry. The next loop uses the block's own centres in shared memory.
// Why no other wait: chunk rows are rewritten (A of loop t+1) only after the block saw every group of loop t summed,
// after their last read; group sums are double-buffered by loop parity, since a group's last block of loop t+1 may
// write while a slow block still reads loop t's in C (loop t+2's writer needs every block's A of t+1, after its C of
// t); an arrival counter is reset by the group's last block before its done signal, which every next arrival follows.
// Where a block's chunks fit shared memory (x_resident), its x and its memberships are staged there once (before the
// first loop; with chunk_pass by cp.async during it) and x is never read from global memory again; otherwise x is read
// every loop as assign_and_sum does.
// The result equals cpu(summation="chunked"), device and device_fused bit for bit, on any grid.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/device.hpp"
#include "../common/device_buffer.cuh"
#include "../common/scratch.hpp"
#include "../common/error.hpp"
#include "../common/launch.cuh"
#include "../common/async_copy.cuh"
#include "kmeans_chunk_pass.cuh"
#include "kmeans_cuda.hpp"
#include "kmeans_loop_parts.hpp"
#include "kmeans_device.cuh"

namespace gpuopt::kmeans {

namespace {

// Hand-written grid barrier on one word, no reset and no read before arriving: block 0 adds 2^31 - (blocks - 1), every
// other block 1, so the word's top bit flips exactly when the last block arrives; each block's thread 0 waits for its
// own add's top bit to flip (ld.acquire.gpu spin). Round 1 (call 1) read a generation word first and reset a counter:
// one more L2 round trip on the critical path, 1.5-1.9 us a barrier against cooperative_groups' 1.0-1.2.
struct GridBarrier {
    unsigned word;
    unsigned pad;
};

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ unsigned add_release(unsigned* p, unsigned v) {
    unsigned old;
    asm volatile("atom.add.release.gpu.global.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

__device__ __forceinline__ unsigned ld_relaxed(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ unsigned add_acq_rel(unsigned* p, unsigned v) {
    unsigned old;
    asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ void red_release(unsigned* p, unsigned v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

template <bool Cg>
__device__ __forceinline__ void grid_sync(GridBarrier* bar) {
    if constexpr (Cg) {
        cooperative_groups::this_grid().sync();
    } else {
        __syncthreads();  // the block's writes are ordered before thread 0's release (bar.sync, then the release add)
        if (threadIdx.x == 0) {
            const unsigned add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
            const unsigned old = add_release(&bar->word, add);
            while (((old ^ ld_acquire(&bar->word)) & 0x80000000u) == 0) {
            }
        }
        __syncthreads();
    }
}

struct PersistArgs {
    const float* x;
    std::int64_t n;
    int d, k;
    float threshold;
    int max_iter;
    const float* init;             // [k][d] the initial centres, read by every block before its first arrival
    float* centres;                // [k][d] out, the final ones (block 0 at the end; may alias init: see there)
    std::int32_t* membership;      // [n] out
    double* rows;                  // [chunks][row]: a chunk's k*d sums, k member counts, its change count
    double* group_sums;            // [2 (loop parity)][groups][row]
    unsigned* arrivals;            // [groups] chunks of the loop whose rows are written; 0 between loops and runs
    unsigned* done;                // groups summed in this run (0 between runs: see DeviceState)
    unsigned* exits;               // blocks that left this run (0 between runs)
    float* delta_history;          // [max_iter] device scratch, one entry a loop (block 0)
    int* result;                   // out, host-visible: [0] the loops run, then [1..] their history as floats
    int chunks_per_block;          // resident: the staged chunks a block holds at most
};

// A chunk row: k*d coordinate sums, k member counts, 1 change count.
__host__ __device__ inline int row_len(int k, int d) { return k * d + k + 1; }

// The slab (doubles): a pass's leaf sums, and the rows a group's sum or phase C stages; a whole group's rows where they
// fit in 2,048 (kmeans04: 32 x 28), so its last block reads them in one L2 round trip, not in slices.
__host__ __device__ inline int slab_len(int kd, int row) {
    const int leaves = leaves_per_pass(kd, true) * kd, group = kGroup * row < kLeafSlab / 4 ? kGroup * row : kLeafSlab / 4;
    return leaves > group ? leaves : group;
}

// Shared memory: [x: chunks_per_block x kLeaves leaves of stage_stride(d)] (resident only) [members: chunks_per_block
// x kChunk (resident) or kChunk] [masks: kLeaves x kMaskWords] [centres k*d, padded to 16 bytes] [slab] [totals: row
// doubles] [counts k+1, the last-block flag].
inline std::size_t persistent_shared_bytes(std::int64_t d, std::int64_t k, int chunks_per_block, bool resident) {
    const int kd = static_cast<int>(k * d), di = static_cast<int>(d);
    const std::size_t staged = resident ? static_cast<std::size_t>(chunks_per_block) : 1;
    std::size_t bytes = resident ? staged * kLeaves * stage_stride(di) * sizeof(float) : 0;
    bytes += staged * kChunk * sizeof(std::int32_t);
    bytes = (bytes + 15) / 16 * 16;
    const int row = row_len(static_cast<int>(k), di);
    bytes += kLeaves * kMaskWords * sizeof(unsigned) + static_cast<std::size_t>((kd + 3) / 4 * 4) * sizeof(float);
    bytes += static_cast<std::size_t>(slab_len(kd, row) + row) * sizeof(double);
    bytes += static_cast<std::size_t>(k + 2) * sizeof(int);
    return bytes;
}

// A group's sum: its in_group chunk rows staged through the slab (slices of `width` entries where the whole group does
// not fit; every load of a slice in flight at once: one L2 round trip), one thread an entry adding them in chunk order
// into out; then the loop's done counter gets the group (release: out and the arrival counter's reset before it).
__device__ inline void group_sum(const double* rows, int in_group, int row, int slab, double* slab_s, double* out,
                                 unsigned* done) {
    const int width = slab / kGroup < row ? slab / kGroup : row;  // >= 1: slab >= 32 (leaves_per_pass)
    for (int e0 = 0; e0 < row; e0 += width) {
        const int wide = row - e0 < width ? row - e0 : width;
#pragma unroll 4
        for (int t = threadIdx.x; t < in_group * wide; t += kThreads)
            slab_s[t] = __ldcg(rows + static_cast<std::int64_t>(t / wide) * row + e0 + t % wide);
        __syncthreads();
        for (int e = threadIdx.x; e < wide; e += kThreads) {
            double s = 0.0;
            for (int u = 0; u < in_group; ++u) s += slab_s[u * wide + e];
            out[e0 + e] = s;
        }
        __syncthreads();  // the slab is rewritten next; out complete before the release
    }
    if (threadIdx.x == 0) red_release(done, 1);
}

// At most 64 registers (4 blocks an SM), as assign_and_sum, where 4 blocks an SM can fit; resident chunks of D >= 12
// (>= 50 KB each) leave room for 3 at most (80 registers), of a generic D (> 24) for 2.
template <int D, bool Resident>
constexpr int kMinBlocks = !Resident ? 4 : (D == 0 ? 2 : (D >= 12 ? 3 : 4));
template <int D, bool Resident>
__global__ void __launch_bounds__(kThreads, kMinBlocks<D, Resident>) persistent_loop(PersistArgs a) {
    const int d = D > 0 ? D : a.d, k = a.k, kd = k * d, row = row_len(k, d);
    const std::int64_t n = a.n;
    const std::int64_t chunks = (n + kChunk - 1) / kChunk, groups = (chunks + kGroup - 1) / kGroup;
    // This block's chunks: a contiguous, balanced share.
    const std::int64_t c_begin = blockIdx.x * chunks / gridDim.x, c_end = (blockIdx.x + 1) * chunks / gridDim.x;
    const int mine = static_cast<int>(c_end - c_begin);
    const int leaves = leaves_per_pass(kd, true);
    const int stride = stage_stride(d);
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float* xs = reinterpret_cast<float*>(smem_raw);  // Resident: [mine][kLeaves][stride]
    std::int32_t* members_s =
        reinterpret_cast<std::int32_t*>(xs + (Resident ? a.chunks_per_block * kLeaves * stride : 0));
    const std::size_t head = ((Resident ? a.chunks_per_block * kLeaves * stride * sizeof(float) : 0) +
                              (Resident ? a.chunks_per_block : 1) * kChunk * sizeof(std::int32_t) + 15) / 16 * 16;
    const int slab = slab_len(kd, row);
    unsigned* masks_s = reinterpret_cast<unsigned*>(smem_raw + head);      // chunk_pass: [kLeaves][kMaskWords]
    float* centres_s = reinterpret_cast<float*>(masks_s + kLeaves * kMaskWords);  // [k][d], 16-byte aligned
    double* leaf_s = reinterpret_cast<double*>(centres_s + (kd + 3) / 4 * 4);  // the slab: [leaves][k*d], or rows
    double* totals_s = leaf_s + slab;                                      // [row]
    int* counts_s = reinterpret_cast<int*>(totals_s + row);  // this chunk's: [k] member counts, [1] changes
    int* last_s = counts_s + k + 1;                          // this block completed the group (thread 0's)

    // Once: the centres, the zeroed counts, memberships -1 (every object counts as changed in the first loop, as the
    // reference) and, resident, the block's x (16-byte pieces where x and its rows allow, else 4 bytes).
    for (int i = threadIdx.x; i < kd; i += kThreads) centres_s[i] = a.init[i];
    for (int c = threadIdx.x; c <= k; c += kThreads) counts_s[c] = 0;
    if constexpr (Resident) {
        for (int i = threadIdx.x; i < mine * kChunk; i += kThreads) members_s[i] = -1;
    }
    bool staging = false;  // x still being copied by stage_async (chunk_pass waits in the first loop)
    if constexpr (Resident && kChunkPassDim<D>) {
        if (uses_chunk_pass<D>(k)) {
            staging = true;
            stage_async<D>(xs, stride, a.x + c_begin * kChunk * d,
                           std::min<std::int64_t>(n - c_begin * kChunk, std::int64_t{mine} * kChunk),
                           (reinterpret_cast<std::uintptr_t>(a.x) & 15) == 0);
        }
    }
    if (Resident && !staging) {
        const float* src = a.x + c_begin * kChunk * d;
        const std::int64_t floats = std::min<std::int64_t>(n - c_begin * kChunk, std::int64_t{mine} * kChunk) * d;
        const int leaf_floats = kLeaf * d;
        if ((reinterpret_cast<std::uintptr_t>(src) & 15) == 0 && d % 4 == 0) {
            for (std::int64_t p = threadIdx.x; p < floats / 4; p += kThreads) {
                const std::int64_t f = 4 * p, l = f / leaf_floats;
                *reinterpret_cast<float4*>(xs + l * stride + f % leaf_floats) =
                    *reinterpret_cast<const float4*>(src + f);
            }
        } else {
            for (std::int64_t f = threadIdx.x; f < floats; f += kThreads)
                xs[(f / leaf_floats) * stride + f % leaf_floats] = src[f];
        }
    } else if (!Resident) {
        for (std::int64_t i = c_begin * kChunk + threadIdx.x; i < std::min(n, c_end * kChunk); i += kThreads)
            a.membership[i] = -1;
    }
    __syncthreads();

    for (int iter = 0;; ++iter) {
        // ---------------------------------------------------------------- A: assign, leaf and chunk sums, counts
        for (int ci = 0; ci < mine; ++ci) {
            const std::int64_t chunk = c_begin + ci, start = chunk * kChunk;
            const int len = static_cast<int>(n - start < kChunk ? n - start : kChunk);
            std::int32_t* mem = members_s + (Resident ? ci * kChunk : 0);
            const float* xc = xs + (Resident ? ci * kLeaves * stride : 0);
            auto object = [&](int i) -> const float* {
                if constexpr (Resident) return xc + (i / kLeaf) * stride + (i % kLeaf) * d;
                else return a.x + (start + i) * d;
            };
            auto leaf_column = [&](int first, int j) -> const float* {
                if constexpr (Resident) return xc + (first / kLeaf) * stride + j;
                else return a.x + (start + first) * d + j;
            };
            double chunk_sum[kCoordsPerThread<false>];  // zeroed where a path starts adding (not live across it)
            auto zero_chunk_sum = [&] {
#pragma unroll
                for (int q = 0; q < kCoordsPerThread<false>; ++q) chunk_sum[q] = 0.0;
            };
            auto add_leaves = [&](int count) {  // the pass's leaf sums into the chunk's, in leaf order
#pragma unroll
                for (int q = 0; q < kCoordsPerThread<false>; ++q) {
                    const int e = threadIdx.x + q * kThreads;
                    if (e < kd)
                        for (int leaf = 0; leaf < count; ++leaf) chunk_sum[q] += leaf_s[leaf * kd + e];
                }
            };
            // chunk_pass: resident x, D unrolled, k <= 4 (the chunk's leaf sums in one pass: kd <= 96).
            bool fast = false;
            if constexpr (Resident && kChunkPassDim<D>) {
                if (uses_chunk_pass<D>(k)) {
                    fast = true;
                    if (staging && ci == 1) {  // the first loop's other chunks: every copy in
                        dev::cp_async_wait<0>();
                        __syncthreads();
                    }
                    auto run = [&](auto kk) {
                        chunk_pass<D, decltype(kk)::value>(xc, stride, len, mem, centres_s, masks_s, counts_s, leaf_s,
                                                           staging && ci == 0);
                    };
                    switch (k) {
                        case 1: run(std::integral_constant<int, 1>{}); break;
                        case 2: run(std::integral_constant<int, 2>{}); break;
                        case 3: run(std::integral_constant<int, 3>{}); break;
                        default: run(std::integral_constant<int, 4>{}); break;
                    }
                    __syncthreads();
                    zero_chunk_sum();
                    add_leaves(kLeaves);
                    __syncthreads();  // leaf_s read before the group sum may stage rows in it
                }
            }
            if (!fast) {
                constexpr int kTogether = D > 0 && D <= 4 ? 4 : (D > 0 && D <= (Resident ? 8 : 12) ? 2 : 1);
                for (int r0 = 0; r0 < kChunk / kThreads; r0 += kTogether)
#pragma unroll
                for (int r = r0; r < r0 + kTogether; ++r) {
                    const int i = r * kThreads + threadIdx.x;  // a warp, a leaf
                    std::int32_t best = -1;
                    bool change = false;
                    if (i < len) {
                        const std::int32_t old = Resident ? mem[i] : a.membership[start + i];
                        float best_dist = 0.f;
                        best = nearest<D>(object(i), centres_s, 0, k, d, 0, best_dist);
                        change = old != best;
                        if constexpr (!Resident) a.membership[start + i] = best;
                    }
                    mem[i] = best;  // -1 past the end: a member of no cluster
                    const int changes = __popc(__ballot_sync(0xffffffffu, change));
                    if (changes && threadIdx.x % 32 == 0) atomicAdd(&counts_s[k], changes);
                    if (k <= kGatherMaxK) ballot_counts(best, k, counts_s);
                }
                __syncthreads();  // mem complete
                if (k > kGatherMaxK)
                    for (int i = threadIdx.x; i < len; i += kThreads) atomicAdd(&counts_s[mem[i]], 1);

                zero_chunk_sum();
                for (int leaf0 = 0; leaf0 < kLeaves; leaf0 += leaves) {
                    // assign_and_sum's pass; 4 loads in flight from shared memory past D = 8 (64 registers: D = 12
                    // spilled with 8).
                    constexpr int kFlight = Resident && D > 8 ? kLeaf / 8 : kLeaf / 4;
                    leaf_sums_pass<kFlight, kLeaf / 2>(k, d, len, leaf0, leaves, mem, leaf_column, leaf_s);
                    __syncthreads();
                    add_leaves(leaves);
                    __syncthreads();  // leaf_s is rewritten by the next pass
                }
            }
            double* out = a.rows + chunk * row;
#pragma unroll
            for (int q = 0; q < kCoordsPerThread<false>; ++q) {
                const int e = threadIdx.x + q * kThreads;
                if (e < kd) out[e] = chunk_sum[q];
            }
            // The reader zeroes the counts: the next chunk adds to them after the barrier below.
            for (int c = threadIdx.x; c <= k; c += kThreads) {
                out[kd + c] = static_cast<double>(counts_s[c]);
                counts_s[c] = 0;
            }
            __syncthreads();  // counts_s zeroed (and mem read) before the next chunk's atomics; the row written
            // ------------------------------------------------------------ B: the group's sum by its last block
            if (chunk + 1 == c_end || (chunk + 1) % kGroup == 0) {  // this block's last chunk of its group
                const std::int64_t g = chunk / kGroup, first = g * kGroup;
                const int in_group = static_cast<int>(chunks - first < kGroup ? chunks - first : kGroup);
                const int contrib = static_cast<int>(chunk + 1 - (c_begin > first ? c_begin : first));
                if (contrib < in_group) {  // shared with other blocks: the one completing the count sums it
                    if (threadIdx.x == 0) {  // release: the block's rows (bar.sync above); acquire: the others'
                        const unsigned before = add_acq_rel(a.arrivals + g, static_cast<unsigned>(contrib));
                        *last_s = before + contrib == static_cast<unsigned>(in_group);
                        if (*last_s) a.arrivals[g] = 0;  // for the next loop: every arrival of this one is in
                    }
                    __syncthreads();
                }
                if (contrib == in_group || *last_s)
                    group_sum(a.rows + first * row, in_group, row, slab, leaf_s,
                              a.group_sums + ((iter & 1) * groups + g) * row, a.done);
            }
        }
        if (staging) {  // the first loop is over: x is staged (nothing left in flight)
            dev::cp_async_wait<0>();
            staging = false;
        }
        // Every group of this loop summed (the done counter's release adds, one a group): the loop's one wait.
        if (threadIdx.x == 0) {  // a relaxed spin (an acquire load invalidates L1 each time: ncu), then one acquire
            const unsigned target = static_cast<unsigned>(iter + 1) * static_cast<unsigned>(groups);
            while (static_cast<int>(ld_relaxed(a.done) - target) < 0) {
            }
            ld_acquire(a.done);
        }
        __syncthreads();

        // ---------------------------------------------------------------- C: every block closes the loop itself
        // The group sums staged through the slab, `per_round` groups a round (kmeans04: all 15 in one), added in group
        // order by one thread an entry.
        const double* sums = a.group_sums + (iter & 1) * groups * row;
        const int per_round = slab / row;
        // An entry's total accumulates in totals_s[e], owned by one thread (no race, no registers held across rounds).
        // A flag in shared memory, not a register (the kernel is at its register budget): set below where a
        // total is not finite; the next write is the next loop's zeroing, many barriers after this loop's read.
        __shared__ int nonfinite_s;
        if (threadIdx.x == 0) nonfinite_s = 0;
        for (int e = threadIdx.x; e < row; e += kThreads) totals_s[e] = 0.0;
        for (std::int64_t g0 = 0; g0 < groups; g0 += per_round) {
            const int in_round = static_cast<int>(groups - g0 < per_round ? groups - g0 : per_round);
#pragma unroll 4
            for (int t = threadIdx.x; t < in_round * row; t += kThreads)
                leaf_s[t] = __ldcg(sums + g0 * row + t);
            __syncthreads();
            for (int e = threadIdx.x; e < row; e += kThreads) {
                double total = totals_s[e];
                for (int r = 0; r < in_round; ++r) total += leaf_s[r * row + e];
                totals_s[e] = total;
            }
            __syncthreads();  // the slab is rewritten by the next round; totals_s complete after the last
        }
        for (int e = threadIdx.x; e < kd; e += kThreads) {
            const double count = totals_s[kd + e / d];
            if (count > 0) centres_s[e] = close_mean(totals_s[e], count, &nonfinite_s);
        }
        // Liao's measure: the change count as a float over numObjs as a float (the count is an exact integer).
        const float delta = static_cast<float>(totals_s[kd + k]) / static_cast<float>(n);
        if (blockIdx.x == 0 && threadIdx.x == 0) a.delta_history[iter] = delta;
        __syncthreads();  // the new centres before the next loop's distances; totals_s read before it is rewritten
        // Every block sees the same totals, so every block stops at the same loop.
        if (!(delta > a.threshold) || iter + 1 >= a.max_iter || nonfinite_s) {
            // centres may alias init: every block read init before its first arrival, which block 0 has waited for.
            // The history and the loop count go to the result (mapped pinned host memory: no copy back; or device
            // memory the caller reads later), the count last, each thread's writes made visible to the host before
            // it (the host reads them after the launch's event anyway).
            if (blockIdx.x == 0) {
                for (int i = threadIdx.x; i < kd; i += kThreads) a.centres[i] = centres_s[i];
                float* history = reinterpret_cast<float*>(a.result + 1);
                // A stop on sums that were not finite: the last loop's delta NaN (a delta is never NaN otherwise; a
                // negative count would read like the test pool's poison, an unwritten record).
                for (int i = threadIdx.x; i <= iter; i += kThreads)
                    history[i] = i == iter && nonfinite_s ? __int_as_float(0x7fc00000) : a.delta_history[i];
                __threadfence_system();
                __syncthreads();
                if (threadIdx.x == 0) a.result[0] = iter + 1;
            }
            break;
        }
    }
    if constexpr (Resident) {
        const std::int64_t objects = std::min<std::int64_t>(n - c_begin * kChunk, std::int64_t{mine} * kChunk);
        for (std::int64_t i = threadIdx.x; i < objects; i += kThreads)
            a.membership[c_begin * kChunk + i] = members_s[i];
    }
    // The counters back to 0 for the next run on them, by the last block to leave: every block has passed its last
    // wait on `done` before it counts itself out, and the next run starts after this kernel ends (stream order).
    if (threadIdx.x == 0 && atomicAdd(a.exits, 1u) + 1 == gridDim.x) *a.done = 0, *a.exits = 0;
}

// Only the barriers: their cost alone (kmeans_grid_barrier_ms).
template <bool Cg>
__global__ void __launch_bounds__(kThreads) barrier_only(GridBarrier* bar, int count) {
    for (int i = 0; i < count; ++i) grid_sync<Cg>(bar);
}

// The grid of one run: the co-resident blocks (occupancy API at this shared memory), at most one a chunk and at most
// blocks_wanted; resident where the blocks' chunks fit (the most blocks an SM for which they do), else x from global.
struct PersistentLaunch {
    unsigned grid = 0;
    int chunks_per_block = 1;
    bool resident = false;
    std::size_t shared = 0;
};

template <class F>
void with_kernel(std::int64_t d, bool resident, F&& f) {
    with_dim(d, [&](auto dim) {
        constexpr int D = decltype(dim)::value;
        if (resident) f(persistent_loop<D, true>);
        else f(persistent_loop<D, false>);
    });
}

int resident_blocks_per_sm(std::int64_t d, bool resident, std::size_t shared) {
    int per_sm = 0;
    with_kernel(d, resident, [&](auto kernel) {
        cudaFuncAttributes attr{};
        GPUOPT_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
        if (shared + attr.sharedSizeBytes > static_cast<std::size_t>(max_shared_memory_per_block_optin())) return;
        require_shared_memory(kernel, shared, "kmeans device_persistent");
        GPUOPT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, shared));
    });
    return per_sm;
}

PersistentLaunch persistent_launch(std::int64_t n, std::int64_t d, std::int64_t k, int blocks_wanted, bool allow_resident) {
    const std::int64_t chunks = (n + kChunk - 1) / kChunk, sms = multiprocessor_count();
    auto capped = [&](std::int64_t g) { return std::min<std::int64_t>(blocks_wanted > 0 ? blocks_wanted : g, g); };
    PersistentLaunch p;
    if (allow_resident) {
        for (int per_sm = 4; per_sm >= 1; --per_sm) {
            const std::int64_t grid = capped(std::min(chunks, sms * per_sm));
            const int cpb = static_cast<int>((chunks + grid - 1) / grid);
            const std::size_t shared = persistent_shared_bytes(d, k, cpb, true);
            if (static_cast<std::int64_t>(resident_blocks_per_sm(d, true, shared)) * sms >= grid) {
                p.grid = static_cast<unsigned>(grid), p.chunks_per_block = cpb, p.resident = true, p.shared = shared;
                return p;
            }
        }
    }
    p.shared = persistent_shared_bytes(d, k, 1, false);
    const int per_sm = resident_blocks_per_sm(d, false, p.shared);
    GPUOPT_REQUIRE(per_sm >= 1, "kmeans device_persistent: the loop kernel does not fit one block an SM");
    p.grid = static_cast<unsigned>(capped(std::min(chunks, sms * per_sm)));
    return p;
}

// What every call of a device reuses, made once (a few host API calls each, otherwise part of every call's fixed
// cost): the loop's counters, the host-visible result, the event the host waits on, the kernels' opt-ins.
//  * The counters are zeroed when allocated and not by any call: no memset a call. The group arrival counters are 0
//    after every loop (each group's last block resets its own); the done and exit counters are 0 after every run
//    (its last block to leave resets them). A run that did not report its loop count (a bad result) leaves them in
//    doubt, and the next call on them zeroes them first.
//  * Runs that wait for their end (the host reads the loop count in the call) share their device's state: they are
//    serialised by `mutex` from the launch to the read. Their result, [loops][history], is pinned host memory mapped
//    into the device (cudaHostAllocMapped), written by block 0 at the end: the host waits on one event and reads it,
//    no copy back. Grown (never shrunk) when max_iter needs more; where mapped memory is unavailable (or switched off
//    for a test) a pool buffer is copied back.
//  * Runs that return at once (deferred: the result goes to the caller's device buffer, read when the caller asks)
//    on a stream that lives as long as the process (process_stream) have counters of their own per (thread,
//    stream): the next run on them starts after this one ends, in stream order. On any other stream (a user's,
//    whose handle may come back as another stream while this run's work is queued) a deferred run's counters are
//    the call's: part of its scratch, zeroed by a memset queued before the launch (in a captured graph: a memset
//    node before the kernel's, so every replay starts from 0).
constexpr std::int64_t kHistoryFirst = 64;  // history entries of the first result buffer

struct DeviceState {
    unsigned* counters = nullptr;     // [0] done, [1] exits
    unsigned* arrivals = nullptr;     // [arrivals_len] a group's arrival counter
    std::int64_t arrivals_len = 0;
    bool in_doubt = false;            // a run started whose end was not seen: zero the counters first
    int* host_result = nullptr;  // pinned, mapped: [0] loops, [1..capacity] history
    int* mapped_result = nullptr;  // its device address
    std::int64_t capacity = 0;
    cudaEvent_t done = nullptr;
    bool deferred = false;          // a (thread, stream)'s, whose runs are not waited for in the call
};

std::mutex mutex;  // the waiting calls, launch to result; the states' maps and the launch cache
std::atomic<bool> use_mapped{true};

void init_state(DeviceState& st) {
    if (st.counters) return;
    GPUOPT_CUDA_CHECK(cudaMalloc(&st.counters, 2 * sizeof(unsigned)));
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(st.counters, 0, 2 * sizeof(unsigned), current_stream()));
    GPUOPT_CUDA_CHECK(cudaEventCreateWithFlags(&st.done, cudaEventDisableTiming));
}

DeviceState& device_state(int device) {
    static std::map<int, DeviceState> states;
    DeviceState& st = states[device];
    init_state(st);
    return st;
}

// The deferred runs' counters on (device, stream) of the calling thread; freed with the thread (after its runs).
struct DeferredStates {
    std::map<std::pair<int, cudaStream_t>, DeviceState> states;
    ~DeferredStates() {
        for (auto& [key, st] : states) {  // errors ignored: the runtime may be gone at exit
            if (cudaSetDevice(key.first) != cudaSuccess || cudaStreamSynchronize(key.second) != cudaSuccess) continue;
            cudaFree(st.counters), cudaFree(st.arrivals), cudaEventDestroy(st.done);
        }
    }
};
thread_local DeferredStates t_deferred;

DeviceState& deferred_state(int device, cudaStream_t stream) {
    DeviceState& st = t_deferred.states[{device, stream}];
    st.deferred = true;
    init_state(st);
    return st;
}

// The counters for `groups` groups, zero (see DeviceState): grown (never shrunk), zeroed where in doubt.
void prepare_counters(DeviceState& st, std::int64_t groups) {
    if (st.arrivals_len < groups) {
        // No waiting run uses it (serialised); a deferred state's last run is waited for first.
        if (st.arrivals) {
            if (st.deferred) GPUOPT_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
            GPUOPT_CUDA_CHECK(cudaFree(st.arrivals));
        }
        const std::int64_t len = std::max<std::int64_t>(groups, 2 * st.arrivals_len + 64);
        st.arrivals = nullptr, st.arrivals_len = 0;
        GPUOPT_CUDA_CHECK(cudaMalloc(&st.arrivals, static_cast<std::size_t>(len) * sizeof(unsigned)));
        GPUOPT_CUDA_CHECK(cudaMemsetAsync(st.arrivals, 0, static_cast<std::size_t>(len) * sizeof(unsigned), current_stream()));
        st.arrivals_len = len;
    }
    if (st.in_doubt) {
        GPUOPT_CUDA_CHECK(cudaMemsetAsync(st.arrivals, 0, static_cast<std::size_t>(st.arrivals_len) * sizeof(unsigned),
                                          current_stream()));
        GPUOPT_CUDA_CHECK(cudaMemsetAsync(st.counters, 0, 2 * sizeof(unsigned), current_stream()));
        st.in_doubt = false;
    }
}

// The mapped result for max_iter loops, or nullptr where mapped pinned memory cannot be had.
int* mapped_result(DeviceState& st, int device, std::int64_t max_iter) {
    if (!use_mapped.load()) return nullptr;
    if (st.capacity >= max_iter) return st.mapped_result;
    int can_map = 0;
    if (cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, device) != cudaSuccess || !can_map) {
        cudaGetLastError();
        return nullptr;
    }
    std::int64_t capacity = std::max(kHistoryFirst, 2 * st.capacity);
    while (capacity < max_iter) capacity *= 2;
    if (st.host_result) GPUOPT_CUDA_CHECK(cudaFreeHost(st.host_result));  // no run uses it: the calls are serialised
    st.host_result = st.mapped_result = nullptr, st.capacity = 0;
    void* host = nullptr;
    void* dev = nullptr;
    if (cudaHostAlloc(&host, static_cast<std::size_t>(1 + capacity) * sizeof(int),
                      cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    if (cudaHostGetDevicePointer(&dev, host, 0) != cudaSuccess) {
        cudaGetLastError();
        cudaFreeHost(host);
        return nullptr;
    }
    st.host_result = static_cast<int*>(host), st.mapped_result = static_cast<int*>(dev), st.capacity = capacity;
    return st.mapped_result;
}

// The launch of a shape, made once per device (its occupancy queries and shared-memory opt-in are host API calls: a few
// µs of every call's fixed cost otherwise). (Making one raises kernels' opt-ins through require_shared_memory.)
PersistentLaunch cached_launch(int device, std::int64_t n, std::int64_t d, std::int64_t k,
                        int blocks_wanted, bool allow_resident) {
    static std::map<std::tuple<int, std::int64_t, std::int64_t, std::int64_t, int, bool>, PersistentLaunch> launches;
    const auto key = std::make_tuple(device, (n + kChunk - 1) / kChunk, d, k, blocks_wanted, allow_resident);
    auto it = launches.find(key);
    if (it == launches.end()) {
        it = launches.emplace(key, persistent_launch(n, d, k, blocks_wanted, allow_resident)).first;
    }
    return it->second;
}

}  // namespace

void kmeans_device_persistent_check(std::int64_t n, std::int64_t d, std::int64_t k) {
    const std::string what = "kmeans device_persistent";
    GPUOPT_REQUIRE(n > 0 && d > 0, what + ": x must have at least one object and one coordinate");
    GPUOPT_REQUIRE(k >= 1 && k <= n, what + ": k must be in 1..n");
    GPUOPT_REQUIRE(n <= (std::int64_t{1} << 40), what + ": at most 2^40 objects");
    GPUOPT_REQUIRE(k * d <= kMaxCentreCoords<false>,
                   what + ": k*D = " + std::to_string(k * d) + " centre coordinates; this variant holds at most " +
                       std::to_string(kMaxCentreCoords<false>));
}

bool kmeans_device_persistent_mapped(bool on) { return use_mapped.exchange(on); }

KMeansStats kmeans_device_persistent(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k,
                                     float threshold, std::int64_t max_iter, float* centroids_dev,
                                     std::int32_t* membership_dev, const PersistentConfig& cfg, const float* init_dev,
                                     std::int32_t* result_dev) {
    GPUOPT_REQUIRE(x_dev && centroids_dev && membership_dev, "kmeans device_persistent: null pointer argument");
    GPUOPT_REQUIRE(max_iter >= 1 && max_iter <= (1 << 30), "kmeans device_persistent: max_iter must be in 1..2^30");
    GPUOPT_REQUIRE(cfg.blocks >= 0, "kmeans device_persistent: blocks must be >= 0 (0: as many as are co-resident)");
    kmeans_device_persistent_check(n, d, k);
    int device = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    const cudaStream_t stream = current_stream();
    const bool deferred = result_dev != nullptr;
    GPUOPT_REQUIRE(deferred || !capturing(stream),
                   "kmeans device_persistent: a run that returns its loop count (NumPy x, timing=True) waits for it, "
                   "which a stream being captured into a CUDA graph cannot do: give x on the device");
    const bool own_counters = deferred && !process_stream(stream);  // the call's counters (see DeviceState)
    std::lock_guard<std::mutex> lock(mutex);  // a deferred run's to its launch, a waiting one's to its result
    DeviceState* st = own_counters ? nullptr : deferred ? &deferred_state(device, stream) : &device_state(device);
    const PersistentLaunch launch = cached_launch(device, n, d, k, cfg.blocks, !cfg.global_x);
    const std::int64_t chunks = (n + kChunk - 1) / kChunk, groups = (chunks + kGroup - 1) / kGroup;
    const int row = row_len(static_cast<int>(k), static_cast<int>(d));
    if (st) prepare_counters(*st, groups);
    // [chunk rows][group sums x 2][history scratch: max_iter floats]
    int* result = deferred ? result_dev : mapped_result(*st, device, max_iter);
    const bool mapped = !deferred && result != nullptr;
    // (scratch.hpp; the fallback's result copied back from its second part; the call's own counters in its third)
    const std::size_t counter_bytes = own_counters ? sizeof(unsigned) * static_cast<std::size_t>(2 + groups) : 0;
    const Scratch scratch({sizeof(double) * static_cast<std::size_t>((chunks + 2 * groups) * row + (max_iter + 1) / 2),
                           result ? 0 : sizeof(int) * static_cast<std::size_t>(1 + max_iter), counter_bytes});
    double* rows = scratch.get<double>(0);
    if (mapped) st->host_result[0] = -1;  // no run is using it (serialised); a run that ends writes its loop count
    else if (!result) result = scratch.get<int>(1);
    unsigned* counters = own_counters ? scratch.get<unsigned>(2) : st->counters;  // [done, exits]
    unsigned* arrivals = own_counters ? counters + 2 : st->arrivals;
    if (own_counters) GPUOPT_CUDA_CHECK(cudaMemsetAsync(counters, 0, counter_bytes, stream));
    PersistArgs args{x_dev, n, static_cast<int>(d), static_cast<int>(k), threshold, static_cast<int>(max_iter),
                     init_dev ? init_dev : centroids_dev, centroids_dev, membership_dev, rows, rows + chunks * row,
                     arrivals, counters, counters + 1,
                     reinterpret_cast<float*>(rows + (chunks + 2 * groups) * row), result, launch.chunks_per_block};
    void* params[] = {&args};
    with_kernel(d, launch.resident, [&](auto kernel) {
        // The kernel's shared-memory opt-in is per kernel, not per launch: raised where this launch needs more than
        // any launch before (require_shared_memory never lowers it: another shape's smaller launch once did, H200 call
        // 2: cudaErrorCooperativeLaunchTooLarge).
        const void* fn = reinterpret_cast<const void*>(kernel);
        require_shared_memory(kernel, launch.shared, "kmeans device_persistent");
        if (st) st->in_doubt = !deferred;  // a waiting run's until its loop count is read
        // Fails (RuntimeError) rather than deadlock where the grid cannot be co-resident.
        GPUOPT_CUDA_CHECK(cudaLaunchCooperativeKernel(fn, dim3(launch.grid), dim3(kThreads), params, launch.shared,
                                                      stream));
    });
    KMeansStats stats;
    if (deferred) return stats;  // iterations 0: the caller reads result_dev
    if (mapped) {  // one wait, then the host reads what block 0 wrote
        GPUOPT_CUDA_CHECK(cudaEventRecord(st->done, stream));
        GPUOPT_CUDA_CHECK(cudaEventSynchronize(st->done));
        const int* host = st->host_result;
        st->in_doubt = false;  // the run ended (its counters are reset): a non-finite x is the caller's error
        GPUOPT_REQUIRE(host[0] >= 1 && host[0] <= max_iter, "kmeans device_persistent: the run wrote no loop count");
        const auto* history = reinterpret_cast<const float*>(host + 1);
        parts::require_finite(std::isnan(history[host[0] - 1]), host[0]);
        stats.iterations = host[0];
        stats.delta.assign(history, history + host[0]);
        return stats;
    }
    // Fallback: one copy of the loop count and the first loops' history; a second only for a longer history.
    constexpr std::int64_t kFirst = 63;
    int host[1 + kFirst];
    const std::int64_t first = std::min<std::int64_t>(max_iter, kFirst);
    copy_to_host_sync(host, result, (1 + first) * sizeof(int));
    st->in_doubt = false;
    GPUOPT_REQUIRE(host[0] >= 1 && host[0] <= max_iter, "kmeans device_persistent: the run wrote no loop count");
    stats.iterations = host[0];
    stats.delta.resize(static_cast<std::size_t>(stats.iterations));
    std::memcpy(stats.delta.data(), host + 1, std::min<std::int64_t>(stats.iterations, first) * sizeof(float));
    if (stats.iterations > first)
        copy_to_host_sync(stats.delta.data() + first, result + 1 + first, (stats.iterations - first) * sizeof(float));
    parts::require_finite(std::isnan(stats.delta.back()), stats.iterations);
    return stats;
}

double kmeans_grid_barrier_ms(int blocks_per_sm, int barriers, bool cg) {
    GPUOPT_REQUIRE(blocks_per_sm >= 1 && blocks_per_sm <= 8 && barriers >= 1,
                   "kmeans_grid_barrier_ms: blocks_per_sm in 1..8, barriers >= 1");
    const unsigned grid = static_cast<unsigned>(multiprocessor_count() * blocks_per_sm);
    DeviceBuffer<unsigned long long> bar(1);
    const cudaStream_t on = current_stream();
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(bar.data(), 0, sizeof(unsigned long long), on));
    auto* b = reinterpret_cast<GridBarrier*>(bar.data());
    void* params[] = {&b, &barriers};
    const void* kernel = cg ? reinterpret_cast<const void*>(barrier_only<true>)
                            : reinterpret_cast<const void*>(barrier_only<false>);
    cudaEvent_t start, stop;
    GPUOPT_CUDA_CHECK(cudaEventCreate(&start));
    GPUOPT_CUDA_CHECK(cudaEventCreate(&stop));
    GPUOPT_CUDA_CHECK(cudaLaunchCooperativeKernel(kernel, dim3(grid), dim3(kThreads), params, 0, on));  // warm-up
    GPUOPT_CUDA_CHECK(cudaEventRecord(start, on));
    GPUOPT_CUDA_CHECK(cudaLaunchCooperativeKernel(kernel, dim3(grid), dim3(kThreads), params, 0, on));
    GPUOPT_CUDA_CHECK(cudaEventRecord(stop, on));
    GPUOPT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    GPUOPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms;
}

}  // namespace gpuopt::kmeans
