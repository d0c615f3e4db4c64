#include <algorithm>

#include "../common/error.hpp"
#include "kmeans.hpp"

namespace gpuopt::kmeans {

void update_centroids(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d,
                      std::int64_t k, float* centroids, std::vector<float>& sums,
                      std::vector<std::int64_t>& counts) {
    sums.assign(static_cast<std::size_t>(k * d), 0.f);
    counts.assign(static_cast<std::size_t>(k), 0);
    // Serial on purpose: float sums depend on their order, and Liao adds in object order.
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t m = membership[i];
        ++counts[m];
        float* s = sums.data() + m * d;
        const float* o = x + i * d;
        for (std::int64_t j = 0; j < d; ++j) s[j] += o[j];
    }
    for (std::int64_t c = 0; c < k; ++c) {
        if (counts[c] == 0) continue;
        const float count = static_cast<float>(counts[c]);
        for (std::int64_t j = 0; j < d; ++j) centroids[c * d + j] = sums[c * d + j] / count;
    }
}

void predict_cpu(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                 std::int32_t* membership) {
    GPUOPT_REQUIRE(n >= 0 && d > 0 && k >= 1, "kmeans_predict: need d >= 1 coordinates and k >= 1 centres");
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) membership[i] = nearest_centre(x + i * d, centroids, k, d);
}

void update_centroids_chunked(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d,
                              std::int64_t k, float* centroids, std::vector<double>& totals,
                              std::vector<double>& chunk_sums, std::vector<std::int64_t>& counts) {
    totals.assign(static_cast<std::size_t>(k * d), 0.0);
    counts.assign(static_cast<std::size_t>(k), 0);
    for (std::int64_t start = 0; start < n; start += kSumChunk) {
        chunk_sums.assign(static_cast<std::size_t>(k * d), 0.0);
        const std::int64_t stop = std::min(n, start + kSumChunk);
        for (std::int64_t i = start; i < stop; ++i) {  // each cluster's members in object order
            const std::int64_t m = membership[i];
            ++counts[m];
            double* s = chunk_sums.data() + m * d;
            const float* o = x + i * d;
            for (std::int64_t j = 0; j < d; ++j) s[j] += static_cast<double>(o[j]);
        }
        for (std::int64_t e = 0; e < k * d; ++e) totals[e] += chunk_sums[e];  // chunk order
    }
    for (std::int64_t c = 0; c < k; ++c) {
        if (counts[c] == 0) continue;
        const double count = static_cast<double>(counts[c]);
        for (std::int64_t j = 0; j < d; ++j) centroids[c * d + j] = static_cast<float>(totals[c * d + j] / count);
    }
}

KMeansStats kmeans_cpu(const float* x, std::int64_t n, std::int64_t d, std::int64_t k, float threshold,
                       std::int64_t max_iter, float* centroids, std::int32_t* membership, Summation summation) {
    GPUOPT_REQUIRE(n > 0 && d > 0, "kmeans: x must have at least one object and one coordinate");
    GPUOPT_REQUIRE(k >= 1 && k <= n, "kmeans: k must be in 1..n");
    GPUOPT_REQUIRE(max_iter >= 1, "kmeans: max_iter must be at least 1");

    KMeansStats stats;
    std::vector<float> sums;
    std::vector<double> totals, chunk_sums;
    std::vector<std::int64_t> counts;
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
        if (summation == Summation::Chunked)
            update_centroids_chunked(x, membership, n, d, k, centroids, totals, chunk_sums, counts);
        else
            update_centroids(x, membership, n, d, k, centroids, sums, counts);
        delta = record_iteration(stats, changed, n);
    } while (delta > threshold && stats.iterations < max_iter);
    return stats;
}

}  // namespace gpuopt::kmeans
