// softmax of each row, variant "cuda": a group of 4..32 lanes per row (nn_rows.cuh; a block of
// 256 threads for rows past 4096 floats), three passes over the row, which stays in L1/L2
// between them: the row max (group reduction), the sum of exp(x - max) (group reduction), and
// exp(x - max) / sum written out. Subtracting the max keeps exp from overflowing.
//
// NaN: fmaxf skips NaNs in the max, but exp(NaN - max) puts NaN into the sum and so into every
// output of the row; +inf gives max = inf and inf - inf = NaN; a row of -inf gives
// -inf - (-inf) = NaN. The reference (nn_cpu.cpp) reaches NaN rows in the same cases. Float
// arithmetic (the reference sums in double): within 1e-6 of it.
#include <cuda_runtime.h>

#include <cmath>

#include "../common/cuda_check.cuh"
#include "../common/launch.cuh"
#include "nn_cuda.hpp"
#include "nn_rows.cuh"

namespace gpuopt::nn {

namespace {

using i64 = std::int64_t;
constexpr int kThreads = rows::kThreads;

template <int LANES>
__global__ void __launch_bounds__(kThreads) softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                                i64 nrows, int cols) {
    __shared__ float scratch[kThreads / 32];
    const auto fmax_op = [](float a, float b) { return fmaxf(a, b); };
    const auto add_op = [](float a, float b) { return a + b; };
    rows::for_each_row<LANES>(nrows, [&](i64 row, bool valid, int lane) {
        const float* r = x + (valid ? row : 0) * cols;
        float m = -INFINITY;
        if (valid)
            for (int j = lane; j < cols; j += LANES) m = fmaxf(m, __ldg(r + j));
        m = rows::group_reduce<LANES>(m, fmax_op, scratch);
        float s = 0.f;
        if (valid)
            for (int j = lane; j < cols; j += LANES) s += expf(__ldg(r + j) - m);
        s = rows::group_reduce<LANES>(s, add_op, scratch);
        if (valid) {
            float* out = y + row * cols;
            for (int j = lane; j < cols; j += LANES) out[j] = expf(__ldg(r + j) - m) / s;
        }
    });
}

}  // namespace

void softmax_cuda(const float* x, float* y, i64 nrows, i64 cols) {
    row_op_check(nrows, cols, "softmax");
    GPUOPT_REQUIRE(nrows == 0 || (x != nullptr && y != nullptr), "softmax: null pointer");
    if (nrows == 0) return;
    rows::with_lanes(cols, [&](auto lanes) {
        constexpr int L = decltype(lanes)::value;
        softmax_rows_kernel<L><<<rows::row_blocks<L>(nrows), kThreads, 0, current_stream()>>>(x, y, nrows, static_cast<int>(cols));
    });
    GPUOPT_CHECK_LAUNCH("softmax_rows_kernel");
}

}  // namespace gpuopt::nn
