#include <algorithm>

#include "../common/error.hpp"
#include "kmeans.hpp"

namespace gpuopt::kmeans {

namespace {

// Both summations are one procedure: the objects in chunks of `chunk`; within a chunk each cluster's sums
// start at 0 and add its members in object order; a cluster's chunk sums are added from 0 in chunk order;
// mean = Sum(total) / Sum(count), rounded to float once. Liao's is Sum = float with one chunk of all n
// objects: 0 + s == s (a sum that starts at +0 is never -0 when rounding to nearest), so his object-order
// float sums come out exactly. Chunked is Sum = double, chunks of kSumChunk. Serial on purpose: the order
// is the definition.
template <class Sum>
void update_in_chunks(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d, std::int64_t k,
                      std::int64_t chunk, float* centroids, std::vector<Sum>& totals, std::vector<Sum>& chunk_sums,
                      std::vector<std::int64_t>& counts) {
    totals.assign(static_cast<std::size_t>(k * d), Sum(0));
    counts.assign(static_cast<std::size_t>(k), 0);
    for (std::int64_t start = 0; start < n; start += chunk) {
        chunk_sums.assign(static_cast<std::size_t>(k * d), Sum(0));
        const std::int64_t stop = std::min(n, start + chunk);
        for (std::int64_t i = start; i < stop; ++i) {
            const std::int64_t m = membership[i];
            ++counts[m];
            Sum* s = chunk_sums.data() + m * d;
            const float* o = x + i * d;
            for (std::int64_t j = 0; j < d; ++j) s[j] += static_cast<Sum>(o[j]);
        }
        for (std::int64_t e = 0; e < k * d; ++e) totals[e] += chunk_sums[e];
    }
    for (std::int64_t c = 0; c < k; ++c) {
        if (counts[c] == 0) continue;
        const Sum count = static_cast<Sum>(counts[c]);
        for (std::int64_t j = 0; j < d; ++j) centroids[c * d + j] = static_cast<float>(totals[c * d + j] / count);
    }
}

}  // namespace

void update_centroids(const float* x, const std::int32_t* membership, std::int64_t n, std::int64_t d,
                      std::int64_t k, Summation summation, float* centroids, CentreScratch& scratch) {
    if (summation == Summation::Chunked)
        update_in_chunks<double>(x, membership, n, d, k, kSumChunk, centroids, scratch.totals_d, scratch.chunk_sums_d,
                                 scratch.counts);
    else
        update_in_chunks<float>(x, membership, n, d, k, std::max<std::int64_t>(n, 1), centroids, scratch.totals_f,
                                scratch.chunk_sums_f, scratch.counts);
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
