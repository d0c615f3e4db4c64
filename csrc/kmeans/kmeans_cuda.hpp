// k-means on the GPU. Every variant reproduces kmeans_cpu (Liao's seq_kmeans) bit for
// bit: same memberships, iterations, delta history and centres. The current stream (common/stream.hpp) throughout;
// launchers check their configuration up front and every CUDA call and launch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kmeans.hpp"
#include "kmeans_choices.hpp"

namespace gpuopt::kmeans {

// Milliseconds accumulated over the loop of kmeans_liao, measured with CUDA events on
// the current stream (the device timeline).
struct KMeansLiaoTiming {
    double setup_ms = 0.0;     // once, before the loop: transpose of x to SoA (not for AoS), membership = -1
    double upload_ms = 0.0;    // per loop: centres (SoA) host -> device
    double kernels_ms = 0.0;   // per loop: find_nearest_cluster + compute_delta
    double download_ms = 0.0;  // per loop: membership device -> host
};

// The CMU 18-645 report's ladder over Liao's port; each step keeps the ones before it:
//   liao            threads 128, compute_delta as many threads as partials (to 1024), SoA
//   liao_occupancy  threads 256, compute_delta 512 (the report's occupancy fix)
//   liao_aos        objects and centres row-major (array of structs): no transpose, each thread
//                   reads its own object's coordinates in a row
//   liao_vec        AoS rows and centres read as float4 where D % 4 == 0 and x is 16-byte aligned
//                   (the report's "auto vectorized" step, made explicit)
// Every step sums the squared differences in coordinate order without fused multiply-adds, so all
// four give kmeans_cpu's memberships and centres bit for bit.
struct LiaoConfig {
    int threads = kLiaoThreads.default_value();  // find_nearest_cluster block: one of kLiaoThreads
    int reduction_threads = 0;    // compute_delta block: one of kLiaoReductionThreads; 0: Liao's rule
    bool aos = false;             // array-of-structs objects and centres
    bool vector_loads = false;    // float4 loads of AoS rows (needs aos)
};

// Rejects, before anything is allocated or launched, a configuration kmeans_liao cannot
// run: n, d, k out of range, thread counts not in their tables (kmeans_choices.hpp), or k*d centre
// coordinates (plus one int per thread) that do not fit this GPU's shared memory per
// block (the message names the limit). Needs a current device.
void kmeans_liao_check(std::int64_t n, std::int64_t d, std::int64_t k, const LiaoConfig& cfg);

// "liao": Wei-keng Liao's cuda_kmeans with the CMU 18-645 report's fix of compute_delta
// (made deterministic for any number of blocks).
//   x_dev:  [n][d] row-major float32 on the device (read only; transposed on the device
//           into a [d][n] SoA scratch copy).
//   x_host: the same [n][d] objects on the host, for the centre update (Liao updates the
//           centres on the host every loop; a caller holding only a device copy must
//           download it once).
//   centroids_host: [k][d], in: initial centres, out: final centres.
//   membership_host: [n], out.
//   cfg: the ladder step (LiaoConfig above).
//   timing: nullable; when given, phase times are accumulated into it.
// Each loop uploads the centres, assigns every object on the GPU, downloads the
// membership and the change count, and updates the centres on the host with
// update_centroids (object-order float sums, as the CPU reference). Stops when
// delta = changed / n <= threshold or after max_iter loops.
KMeansStats kmeans_liao(const float* x_dev, const float* x_host, std::int64_t n, std::int64_t d, std::int64_t k,
                        float threshold, std::int64_t max_iter, float* centroids_host, std::int32_t* membership_host,
                        const LiaoConfig& cfg, KMeansLiaoTiming* timing);

// "device": the whole loop on the GPU for k*D <= 1024 (kmeans_device.cu), one pass over the points a loop. x_dev [n][d]; centroids_dev [k][d],
// in: initial centres, out: final; membership_dev [n], out. Loops are queued loops_per_sync at a time, the
// stop flag read once per batch. blocks: assign_and_sum's grid (0: as many as are resident at once). Sums as
// Summation::Chunked: equal to kmeans_cpu(..., Chunked) bit for bit, for any blocks.
// "device_fused": the same, one launch a loop: the last assign_and_sum block to finish closes the loop (the
// group/chunk tree, new centres, delta, stop flag), so no finish_loop kernel; the same bits as "device".
// Both start with two memsets (counts with the loop state, memberships) and read one copy (stop flag + delta
// history) per batch.
void kmeans_device_check(std::int64_t n, std::int64_t d, std::int64_t k);
KMeansStats kmeans_device_fused(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                                std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                                int loops_per_sync, int blocks);
// "device_persistent": the whole run in ONE cooperative launch (kmeans_persistent.cu): grid barriers between a loop's
// phases, every block closing each loop itself, x and memberships kept in shared memory where a block's chunks fit;
// the host reads the loop count and the history once. k*D <= 1024; the same bits as "device" on any grid.
// init_dev: the initial centres [k][d], read on the device by every block (may be x's first rows, or alias
// centroids_dev); nullptr: centroids_dev holds them. No memset, no copy: the loop's counters are cached and left at
// 0 by every run, the loop count and history are written into pinned host memory mapped into the device, which
// the host reads after one event wait (kmeans_persistent.cu; a copy back where mapped memory cannot be had).
// result_dev (int32 [1 + max_iter], device memory, or nullptr): where given, the run is DEFERRED: the loop count and
// then the history (float32 bits) are written there, and the call returns at once with iterations 0 -- the caller
// reads them when it needs them (a captured run writes them at each replay). Without it the call waits and returns
// them, which a stream being captured refuses.
struct PersistentConfig {
    // The grid at most (0: as many as are co-resident); clamped to the co-resident count.
    int blocks = kPersistentBlocks.default_value();
    bool global_x = false;    // read x from global memory every loop even where it would fit shared memory
};
void kmeans_device_persistent_check(std::int64_t n, std::int64_t d, std::int64_t k);
KMeansStats kmeans_device_persistent(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k,
                                     float threshold, std::int64_t max_iter, float* centroids_dev,
                                     std::int32_t* membership_dev, const PersistentConfig& cfg,
                                     const float* init_dev, std::int32_t* result_dev);
// Testing aid: whether device_persistent's result goes through mapped host memory (true, the default) or the
// fallback's copy back; returns the previous setting.
bool kmeans_device_persistent_mapped(bool on);
// The cost of `barriers` grid barriers alone (a cooperative grid of blocks_per_sm x SMs blocks of 256 threads doing
// nothing else), CUDA-event milliseconds of one launch after a warm-up one: device_persistent's hand-written barrier,
// or (cg) cooperative_groups' grid sync, which it was measured against.
double kmeans_grid_barrier_ms(int blocks_per_sm, int barriers, bool cg);
// "device_gemm": the same loop (two kernels a loop) for k*D <= 4096, the nearest centre by the dot form
// ||c||^2 - 2 x.c (one fused multiply-add per centre coordinate), Liao's distances recomputed for an object
// whose two nearest the form's rounding bound cannot separate: Liao's memberships, the same bits as "device"
// (and cpu(summation="chunked")).
void kmeans_device_gemm_check(std::int64_t n, std::int64_t d, std::int64_t k);
KMeansStats kmeans_device_gemm(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                               std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                               int loops_per_sync, int blocks);
// "device_tiled": device_gemm's loop with the assignment as a register-tiled SGEMM (8 x 8 points x centres a
// thread) with a row-argmin epilogue (Liao's distance where the dot form's bound cannot separate the two nearest)
// and the chunk sums from a per-chunk stable sort of the memberships (work by members, not k*D per leaf):
// kmeans_tiled.cu. The same bits as device_gemm and cpu(summation="chunked"). products: the screen's dot products
// (kTiledProducts, kmeans_choices.hpp).
void kmeans_device_tiled_check(std::int64_t n, std::int64_t d, std::int64_t k, tiled::Products products);
KMeansStats kmeans_device_tiled(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                                std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                                int loops_per_sync, int blocks, tiled::Products products);
KMeansStats kmeans_device(const float* x_dev, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                          std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                          int loops_per_sync, int blocks);

// "stream": points that need not fit in device memory (kmeans_stream.cu). x stays where it is (host memory,
// pinned or not, or the device) and every loop streams it through a device slab of `buffers` slabs of
// chunk_points objects: the copy of slab s + 1 (a stream of its own) overlaps the kernels of slab s (the call's stream:
// device's assign_and_sum and finish_loop over the slab's groups, the total carried from slab to slab in group
// order). chunk_points is a multiple of kSumGroup, so every slab holds whole groups of the summation tree and the
// result is device's (and cpu(summation="chunked")'s) bit for bit, for any chunk_points; memberships and centres
// stay on the device (4 bytes an object there). Pageable host x is page-locked in place for the call
// (cudaHostRegister) or, with staged (or where that fails), copied chunk by chunk through pinned staging buffers
// allocated once per call.
enum class StreamAssign : int { Auto, Liao, Dot };  // kStreamAssign's order  // Auto: Liao's distance (device's) for k*D <= 1024, else the dot form
struct StreamConfig {
    // Objects a slab: 0 or a positive multiple of kSumGroup; 0: kStreamBudgetBytes.
    std::int64_t chunk_points = kStreamChunkPoints.default_value();
    int buffers = kStreamBuffers.default_value();  // slabs on the device: one of kStreamBuffers
    bool staged = false;            // pageable x through pinned staging copies instead of registering it
    StreamAssign assign = StreamAssign::Auto;
};
constexpr std::int64_t kStreamBudgetBytes = std::int64_t{256} << 20;  // one slab's points by default
// Objects a slab for d coordinates: chunk_points, or (0) as many whole groups as kStreamBudgetBytes holds (>= 1).
std::int64_t stream_chunk_points(std::int64_t d, std::int64_t chunk_points);
void kmeans_stream_check(std::int64_t n, std::int64_t d, std::int64_t k, const StreamConfig& cfg);
// How x reached the copy engine: 0 device memory, 1 already pinned, 2 registered for the call, 3 staged.
KMeansStats kmeans_stream(const float* x, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                          std::int64_t max_iter, float* centroids_dev, std::int32_t* membership_dev,
                          const StreamConfig& cfg, int* host_path);

// kmeans_predict "device": the nearest centre of each of n objects (Liao's distance, ties to the lower index),
// one thread an object, the centres staged through shared memory; equal to predict_cpu. x_dev [n][d],
// centroids_dev [k][d], membership_dev [n] out. Checks (d <= 8192) before launching.
void kmeans_predict_device_check(std::int64_t n, std::int64_t d, std::int64_t k);
void kmeans_predict_device(const float* x_dev, std::int64_t n, std::int64_t d, const float* centroids_dev,
                           std::int64_t k, std::int32_t* membership_dev);

}  // namespace gpuopt::kmeans

// gpuopt.distributed.kmeans on GPUs (kmeans_multi.cu): one rank's share of a k-means run split over ranks, the
// same bits as one process's device loop for any number of ranks.
//
// Each rank holds a shard of whole groups of the summation tree (kSumGroup objects; only the shard that ends the
// data may end in a partial group). A loop, on every rank, on the current stream:
//   local()   the single-GPU loop's assignment and chunk sums over the shard (device's, device_gemm's or
//             device_tiled's kernels), then group_sums: each group's 32 chunk sums added in order (finish_loop's
//             first level), written to this rank's slot of the exchange with its member counts and change count;
//   (the caller all-gathers every rank's slot: NCCL through torch.distributed, or any other transport)
//   close()   finish_loop's second level over the gathered slots: every group sum in global group order from 0,
//             mean = float(total / count), delta = float(changed) / float(N), the stop flag.
// close() adds the same values in the same order as finish_loop over the whole data, so centres, delta history and
// loop count are the single-GPU run's on every rank, and each rank's memberships are its rows of that run's.
namespace gpuopt::kmeans::multi {

// Where the shards lie: each rank's rows, and the ranks in row order (the shards tile [0, N) in that order).
struct Layout {
    std::vector<std::int64_t> rows;  // n_local of every rank, by rank
    std::vector<int> order;          // the ranks with rows, in row order
};

struct RankConfig {
    Loop loop = Loop::DeviceTiled;
    tiled::Products products = tiled::Products::Auto;  // device_tiled's screen
    int blocks = 0;                                    // the assignment's grid at most (0: as many as are resident)
    // 0: x is on the device. Else x is host memory (a shard past the GPU's memory), streamed every loop through two
    // device slabs of stream_rows objects (a multiple of kSumGroup: whole groups, so the group sums are the same)
    // on a copy stream of the rank's own, the copy of slab s + 1 overlapping the kernels of slab s (the stream
    // variant's pipeline). Pageable x is page-locked for the rank's life (cudaHostRegister).
    std::int64_t stream_rows = 0;
    // 1, or 2 (not with stream_rows): the slot in two parts, each all-gathered as soon as its group sums are
    // queued, so the first part's exchange runs under the second part's kernels. Part 0 holds groups [0, h) of
    // every rank, part 1 the rest and the counts (h = groups_max - ceil(groups_max / 4), at least 1); gathered is
    // [part 0 of every rank][part 1 of every rank]. The same sums in the same order: the same bits.
    int parts = 1;
};

// Doubles of one rank's slot of the exchange (kmeans.hpp's slot_layout).
std::int64_t slot_doubles(const Layout& layout, std::int64_t d, std::int64_t k);

// ValueError-style failures for what this rank cannot run (its loop's limits, the layout), before any allocation.
void check(const Layout& layout, int rank, std::int64_t d, std::int64_t k, std::int64_t max_iter,
           const RankConfig& cfg);

class Rank {
public:
    // x [n_local][d] on the device (this rank's rows; host memory with cfg.stream_rows); centres [k][d] on the
    // device, the initial centres in and the
    // result out (the same on every rank); membership [n_local] int32 on the device, out. Allocates the loop's
    // buffers and starts the loop state on the current stream (every membership -1: the first loop counts every
    // object as changed).
    Rank(const float* x, const Layout& layout, int rank, std::int64_t d, std::int64_t k, float threshold,
         std::int64_t max_iter, const RankConfig& cfg, float* centres, std::int32_t* membership);
    ~Rank();
    Rank(const Rank&) = delete;
    Rank& operator=(const Rank&) = delete;

    std::int64_t slot_doubles() const { return slot_; }
    // Doubles of the slot's first part (slot_doubles() with one part).
    std::int64_t part_doubles() const { return part0_; }
    // parts = 2: a stream of the rank's own for the first part's exchange (0 with one part).
    std::uintptr_t side_stream() const;
    // This rank's part `part` (0 .. cfg.parts - 1) of a loop: memberships, and its slot (slot_doubles() doubles on
    // the device; part p writes only its part). Queued on the current stream; nothing once the loop has stopped.
    void local(double* slot, int part);
    // The loop's end from every rank's slot (gathered as RankConfig::parts says, rank order in each part).
    void close(const double* gathered);
    // Waits for the stream; whether the loop has stopped, the loops run and the delta history so far.
    bool read(int* iterations, std::vector<float>* delta);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::int64_t slot_ = 0, part0_ = 0;
};

}  // namespace gpuopt::kmeans::multi
