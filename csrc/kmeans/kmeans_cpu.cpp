#include <algorithm>
#include <string>
#include <vector>

#include "../common/error.hpp"
#include "kmeans.hpp"

namespace gpuopt::kmeans {

namespace {

// Liao: float32 sums from 0 in object order, mean = sum / count in float.
void update_liao(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d, std::int64_t k,
                 float* centroids, CentreScratch& scratch) {
    auto& sums = scratch.sums_f;
    auto& counts = scratch.counts;
    sums.assign(static_cast<std::size_t>(k * d), 0.f);
    counts.assign(static_cast<std::size_t>(k), 0);
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t m = membership[i];
        ++counts[m];
        for (std::int64_t j = 0; j < d; ++j) sums[m * d + j] += x[i * d + j];
    }
    for (std::int64_t c = 0; c < k; ++c)
        if (counts[c] > 0)
            for (std::int64_t j = 0; j < d; ++j)
                centroids[c * d + j] = sums[c * d + j] / static_cast<float>(counts[c]);
}

// Chunked: the tree of Summation::Chunked walked in object order, objects 0..n-1 with object 0 at a group boundary.
// Level 0 holds the open leaf's sums, 1 the open chunk's, 2 the open group's; when a leaf (chunk) closes, its sums
// are added into the level above and restart at 0. When a group closes, on_group(g, sums, counts, members) sees its
// [k][d] sums, its member counts [k] and the clusters with members in it (the only rows and counts not 0), then
// they restart at 0. Only clusters with members are added: +0 is the identity for a sum that starts at +0 (never
// -0 when rounding to nearest), so skipping the others changes no bit and keeps this O(n d). Serial on purpose:
// the order is the definition. One walk for the whole-data update and for a shard's group sums, so the two cannot
// drift apart.
template <typename OnGroup>
void walk_groups(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d, std::int64_t k,
                 CentreScratch& scratch, OnGroup&& on_group) {
    constexpr int kLevels = 3;
    const std::int64_t kd = k * d;
    auto& sums = scratch.sums_d;
    auto& counts = scratch.counts;
    sums.assign(static_cast<std::size_t>(kLevels * kd), 0.0);
    counts.assign(static_cast<std::size_t>(k), 0);
    scratch.is_open.assign(static_cast<std::size_t>(kLevels * k), 0);
    for (auto& list : scratch.open) list.clear();
    auto open = [&](int level, std::int32_t c) {
        unsigned char& flag = scratch.is_open[static_cast<std::size_t>(level * k + c)];
        if (!flag) {
            flag = 1;
            scratch.open[level].push_back(c);
        }
    };
    auto close = [&](int level) {  // add level's open sums into level + 1, restart them at 0
        for (const std::int32_t c : scratch.open[level]) {
            double* from = sums.data() + level * kd + c * d;
            double* to = from + kd;
            for (std::int64_t j = 0; j < d; ++j) {
                to[j] += from[j];
                from[j] = 0.0;
            }
            scratch.is_open[static_cast<std::size_t>(level * k + c)] = 0;
            open(level + 1, c);
        }
        scratch.open[level].clear();
    };
    auto close_group = [&](std::int64_t g) {
        auto& members = scratch.open[2];
        double* group = sums.data() + 2 * kd;
        on_group(g, static_cast<const double*>(group), static_cast<const std::int64_t*>(counts.data()),
                 static_cast<const std::vector<std::int32_t>&>(members));
        for (const std::int32_t c : members) {
            std::fill(group + c * d, group + (c + 1) * d, 0.0);
            counts[static_cast<std::size_t>(c)] = 0;
            scratch.is_open[static_cast<std::size_t>(2 * k + c)] = 0;
        }
        members.clear();
    };
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int32_t m = membership[i];
        ++counts[m];
        open(0, m);
        double* leaf = sums.data() + m * d;
        for (std::int64_t j = 0; j < d; ++j) leaf[j] += static_cast<double>(x[i * d + j]);
        const std::int64_t done = i + 1;
        if (done % kSumLeaf == 0 || done == n) close(0);
        if (done % kSumChunk == 0 || done == n) close(1);
        if (done % kSumGroup == 0 || done == n) close_group(i / kSumGroup);
    }
}

// The whole-data update: the group sums added in group order into a total that starts at 0; mean rounded once.
void update_chunked(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d, std::int64_t k,
                    float* centroids, CentreScratch& scratch) {
    const std::int64_t kd = k * d;
    auto& total = scratch.total_d;
    auto& total_counts = scratch.total_counts;
    total.assign(static_cast<std::size_t>(kd), 0.0);
    total_counts.assign(static_cast<std::size_t>(k), 0);
    walk_groups(x, membership, n, d, k, scratch,
                [&](std::int64_t, const double* group, const std::int64_t* counts,
                    const std::vector<std::int32_t>& members) {
                    for (const std::int32_t c : members) {
                        for (std::int64_t j = 0; j < d; ++j) total[c * d + j] += group[c * d + j];
                        total_counts[c] += counts[c];  // integers: exact in any order
                    }
                });
    for (std::int64_t c = 0; c < k; ++c)
        if (total_counts[c] > 0)
            for (std::int64_t j = 0; j < d; ++j)
                centroids[c * d + j] = static_cast<float>(total[c * d + j] / static_cast<double>(total_counts[c]));
}

}  // namespace

void chunked_group_sums(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d,
                        std::int64_t k, double* sums, std::int64_t* counts, CentreScratch& scratch) {
    GPUOPT_REQUIRE(n >= 0 && d >= 1 && k >= 1, "kmeans_group_sums: need n >= 0 objects, d >= 1 coordinates, k >= 1");
    for (std::int64_t i = 0; i < n; ++i)  // the walk indexes by membership: out of range would write out of bounds
        GPUOPT_REQUIRE(membership[i] >= 0 && membership[i] < k,
                       "kmeans_group_sums: membership must hold cluster indices in 0..k-1 (k=" + std::to_string(k) +
                           "), got " + std::to_string(membership[i]) + " at index " + std::to_string(i));
    const std::int64_t kd = k * d, groups = (n + kSumGroup - 1) / kSumGroup;
    std::fill(sums, sums + groups * kd, 0.0);
    std::fill(counts, counts + groups * k, std::int64_t{0});
    walk_groups(x, membership, n, d, k, scratch,
                [&](std::int64_t g, const double* group, const std::int64_t* group_counts,
                    const std::vector<std::int32_t>& members) {
                    for (const std::int32_t c : members) {
                        std::copy(group + c * d, group + (c + 1) * d, sums + g * kd + c * d);
                        counts[g * k + c] = group_counts[c];
                    }
                });
}

void update_centroids(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d,
                      std::int64_t k, Summation summation, float* centroids, CentreScratch& scratch) {
    if (summation == Summation::Chunked)
        update_chunked(x, membership, n, d, k, centroids, scratch);
    else
        update_liao(x, membership, n, d, k, centroids, scratch);
}

void predict_cpu(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                 std::int32_t* membership) {
    GPUOPT_REQUIRE(n >= 0 && d > 0 && k >= 1, "kmeans_predict: need d >= 1 coordinates and k >= 1 centres");
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) membership[i] = nearest_centre(x + i * d, centroids, k, d);
}

KMeansStats kmeans_cpu(const float* x, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                       std::int64_t max_iter, float* centroids, std::int32_t* membership, Summation summation) {
    GPUOPT_REQUIRE(n > 0 && d > 0, "kmeans: x must have at least one object and one coordinate");
    GPUOPT_REQUIRE(k >= 1 && k <= n, "kmeans: k must be in 1..n");
    GPUOPT_REQUIRE(max_iter >= 1, "kmeans: max_iter must be at least 1");

    KMeansStats stats;
    CentreScratch scratch;
    std::fill(membership, membership + n, -1);
    float delta = 0.f;
    do {
        std::int64_t changed = 0;
        // The assignment is independent per object, so it parallelises without changing
        // a single bit of the result.
#pragma omp parallel for reduction(+ : changed) schedule(static)
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int32_t idx = nearest_centre(x + i * d, centroids, k, d);
            if (membership[i] != idx) ++changed;
            membership[i] = idx;
        }
        update_centroids(x, membership, n, d, k, summation, centroids, scratch);
        delta = record_iteration(stats, changed, n);
    } while (delta > threshold && stats.iterations < max_iter);
    return stats;
}

}  // namespace gpuopt::kmeans
