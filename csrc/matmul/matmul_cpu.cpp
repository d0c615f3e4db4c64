#include <algorithm>
#include <vector>

#include "../common/error.hpp"
#include "matmul.hpp"

namespace gpuopt::matmul {

void gemm_bias_cpu(const float* a, const float* b, const float* bias, float* c, std::int64_t M,
                   std::int64_t N, std::int64_t K) {
    GPUOPT_REQUIRE(M > 0 && N > 0 && K > 0, "matmul: M, N and K must be positive");
    // i-k-j order: the inner loop streams a row of B and a row of the accumulator, which
    // vectorises; double accumulation keeps the reference far below float32 rounding.
#pragma omp parallel
    {
        std::vector<double> acc(static_cast<std::size_t>(N));
#pragma omp for schedule(static)
        for (std::int64_t i = 0; i < M; ++i) {
            if (bias)
                for (std::int64_t j = 0; j < N; ++j) acc[j] = bias[j];
            else
                std::fill(acc.begin(), acc.end(), 0.0);
            const float* arow = a + i * K;
            for (std::int64_t k = 0; k < K; ++k) {
                const double av = arow[k];
                const float* brow = b + k * N;
                for (std::int64_t j = 0; j < N; ++j) acc[j] += av * static_cast<double>(brow[j]);
            }
            float* crow = c + i * N;
            for (std::int64_t j = 0; j < N; ++j) crow[j] = static_cast<float>(acc[j]);
        }
    }
}

}  // namespace gpuopt::matmul
