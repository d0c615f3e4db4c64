#include <algorithm>

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

// Chunked: the tree of Summation::Chunked walked in object order. Level 0 holds the open leaf's sums, 1 the open
// chunk's, 2 the open group's, 3 the total; when a leaf (chunk, group) closes, its sums are added into the level
// above and restart at 0. Only clusters with members are added: +0 is the identity for a sum that starts at +0
// (never -0 when rounding to nearest), so skipping the others changes no bit and keeps this O(n d). Serial on
// purpose: the order is the definition.
void update_chunked(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d, std::int64_t k,
                    float* centroids, CentreScratch& scratch) {
    constexpr int kLevels = 4;
    const std::int64_t kd = k * d;
    auto& sums = scratch.sums_d;
    auto& counts = scratch.counts;
    sums.assign(static_cast<std::size_t>(kLevels * kd), 0.0);
    counts.assign(static_cast<std::size_t>(k), 0);
    scratch.is_open.assign(static_cast<std::size_t>(3 * k), 0);
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
            if (level + 1 < 3) open(level + 1, c);
        }
        scratch.open[level].clear();
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
        if (done % kSumGroup == 0 || done == n) close(2);
    }
    const double* total = sums.data() + 3 * kd;
    for (std::int64_t c = 0; c < k; ++c)
        if (counts[c] > 0)
            for (std::int64_t j = 0; j < d; ++j)
                centroids[c * d + j] = static_cast<float>(total[c * d + j] / static_cast<double>(counts[c]));
}

}  // namespace

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
