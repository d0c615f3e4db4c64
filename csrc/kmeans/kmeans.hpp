// k-means exactly as Wei-keng Liao's seq_kmeans.c computes it, so that every gpuopt
// variant can be held to identical memberships and iteration counts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace gpuopt::kmeans {

struct KMeansStats {
    int iterations = 0;        // loops run (Liao's loop_iterations)
    std::vector<float> delta;  // fraction of objects that changed membership, per loop
};

// Liao's convergence measure, appended to the history: delta = changed / n in float (he
// counts in a float in steps of 1.0, then divides by numObjs). Returns delta.
inline float record_iteration(KMeansStats& stats, std::int64_t changed, std::int64_t n) {
    const float delta = static_cast<float>(changed) / static_cast<float>(n);
    stats.delta.push_back(delta);
    ++stats.iterations;
    return delta;
}

// How the centre sums are formed.
//   Liao:    float32, in object order (his seq_kmeans, bit for bit).
//   Chunked: float64 over a fixed tree of the object indices, so that parallel hardware can follow it on any
//            grid: leaves of kSumLeaf consecutive objects, chunks of kSumFanout leaves, groups of kSumFanout
//            chunks. Each cluster's coordinate sum of a leaf starts at 0 and adds the leaf's members in object
//            order; a chunk's sum starts at 0 and adds its leaf sums in order; a group's, its chunk sums in
//            order; the total starts at 0 and adds the group sums in order. The mean is rounded once,
//            float32(total / count). The device-resident k-means variants sum this way (the same bits on every
//            run and launch shape).
enum class Summation : int { Liao, Chunked };  // kSummations (kmeans_choices.hpp)
constexpr std::int64_t kSumLeaf = 32;                        // objects per leaf
constexpr std::int64_t kSumFanout = 32;                      // leaves per chunk, chunks per group
constexpr std::int64_t kSumChunk = kSumLeaf * kSumFanout;    // 1024 objects
constexpr std::int64_t kSumGroup = kSumChunk * kSumFanout;   // 32768 objects

// x: [n][d] objects. centroids: [k][d], in = initial centres, out = final centres.
// membership: [n], out. Loops until delta <= threshold or max_iter loops ran.
// Float32 arithmetic in Liao's order: squared distances summed over coordinates in
// order, ties to the lower centre index; centre sums as `summation` says.
KMeansStats kmeans_cpu(const float* x, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                       std::int64_t max_iter, float* centroids, std::int32_t* membership,
                       Summation summation);

// One assignment step (shared by the reference and by host-side parts of GPU variants):
// the nearest centre of one object.
inline std::int32_t nearest_centre(const float* object, const float* centroids, std::int64_t k,
                                   std::int64_t d) {
    std::int32_t best = 0;
    float best_dist = 0.f;
    for (std::int64_t c = 0; c < k; ++c) {
        const float* centre = centroids + c * d;
        float dist = 0.f;
        for (std::int64_t j = 0; j < d; ++j) {
            const float diff = object[j] - centre[j];
            dist += diff * diff;  // built with -ffp-contract=off: no fused multiply-add
        }
        if (c == 0 || dist < best_dist) {
            best_dist = dist;
            best = static_cast<std::int32_t>(c);
        }
    }
    return best;
}

// The nearest centre of each of n objects (Liao's assignment step on its own: kmeans_predict's
// reference). Parallel over objects; every object's answer is the same as nearest_centre's.
void predict_cpu(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                 std::int32_t* membership);

// Scratch of the centre update, kept by a caller across loops (no allocation per loop).
struct CentreScratch {
    std::vector<float> sums_f;   // Liao: [k][d]
    std::vector<double> sums_d;  // Chunked: one [k][d] per level of the tree below the total (leaf, chunk, group)
    std::vector<double> total_d;  // Chunked: [k][d], the group sums added in group order
    std::vector<std::int64_t> counts;  // members per cluster (Chunked: of the open group)
    std::vector<std::int64_t> total_counts;  // Chunked: members per cluster, all groups
    std::vector<std::int32_t> open[3];  // Chunked: clusters with members in the open leaf, chunk, group
    std::vector<unsigned char> is_open;  // [3][k]
};

// The centre update as `summation` says (see Summation): each cluster's mean of its members; an empty
// cluster keeps its centre.
void update_centroids(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d,
                      std::int64_t k, Summation summation, float* centroids, CentreScratch& scratch);

// Summation::Chunked's group sums of a shard of the data: objects 0..n-1 of x, where x's object 0 is a group
// boundary of the whole data's tree (its global index a multiple of kSumGroup), so each of the shard's
// ceil(n / kSumGroup) groups is a group of the global tree (the last one partial only where the shard ends the
// data). Writes sums [groups][k][d] (each group's sums, 0 for a cluster without members in it) and counts
// [groups][k]. Every shard's group sums added in global group order into a total that starts at 0, then
// float32(total / count), are update_centroids(Chunked) over the whole data, bit for bit (they share the walk).
// membership values must be in 0..k-1 (checked).
void chunked_group_sums(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d,
                        std::int64_t k, double* sums, std::int64_t* counts, CentreScratch& scratch);

// gpuopt.distributed.kmeans: a rank's slot of the exchange, float64, the same on the CPU and the GPU: the group sums
// [groups_max][k][d] (groups_max: the most groups, ceil(rows / kSumGroup), any rank holds), then at `tail` the k
// member counts and the change count (integers, exact below 2^53), padded to an even size (16-byte rows).
struct SlotLayout {
    std::int64_t tail = 0, size = 0;
};
inline SlotLayout slot_layout(const std::vector<std::int64_t>& rows, std::int64_t k, std::int64_t d) {
    std::int64_t groups_max = 0;
    for (std::int64_t r : rows) groups_max = std::max(groups_max, (r + kSumGroup - 1) / kSumGroup);
    const std::int64_t tail = groups_max * k * d, size = tail + k + 1;
    return {tail, size + (size & 1)};
}

}  // namespace gpuopt::kmeans
