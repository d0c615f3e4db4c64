// max_pool2d and avg_pool2d, the ECE408 MNIST report's average-pool story (its Tables 3-5):
//
//   basic      the first parallel kernel: one thread per output, with the thread index mapped so
//              that consecutive threads take consecutive *planes* (images x channels). A warp's
//              32 loads of one window tap are H*W floats apart, one 32-byte sector each: the
//              uncoalesced access the report found (its threads were "128 bytes away from the
//              next thread", 12.5% load efficiency). The output element is the accumulator, so
//              an output is written size*size times (before the report's accumulator).
//   coalesced  the report's fix: consecutive threads take consecutive output columns of one row
//              (a warp reads one contiguous run of size*32 floats per tap row), the window summed
//              in a register and written once.
//
// Both visit a window in the CPU reference's order (row by row, left to right) with the same
// float operations, so both agree with the reference bit for bit: max keeps the first NaN it
// meets (NaN wins, as PyTorch), avg divides the float sum by size*size.
#include <cuda_runtime.h>

#include "../common/cuda_check.cuh"
#include "../common/launch.cuh"
#include "nn_cuda.hpp"

namespace gpuopt::nn {

namespace {

constexpr int kThreads = 256;
using i64 = std::int64_t;

// The reference's max step (nn_cpu.cpp), unchanged: a NaN in the window wins and stays.
__device__ __forceinline__ float max_step(float acc, float v) {
    if (v > acc || isnan(v)) return isnan(acc) ? acc : v;
    return acc;
}

template <PoolKind KIND>
__global__ void __launch_bounds__(kThreads) pool_basic_kernel(const float* x, float* y, i64 planes, i64 H, i64 W,
                                                              i64 size, i64 OH, i64 OW) {
    const i64 total = planes * OH * OW;
    const float area = static_cast<float>(size * size);
    for (i64 t = static_cast<i64>(blockIdx.x) * kThreads + threadIdx.x; t < total;
         t += static_cast<i64>(gridDim.x) * kThreads) {
        const i64 p = t % planes, r = t / planes;  // consecutive threads: consecutive planes
        const i64 oh = r / OW, ow = r % OW;
        const float* win = x + p * H * W + oh * size * W + ow * size;
        float* out = y + p * OH * OW + oh * OW + ow;
        *out = KIND == PoolKind::Max ? win[0] : 0.f;  // the output is the accumulator
        for (i64 i = 0; i < size; ++i)
            for (i64 j = 0; j < size; ++j) {
                const float v = win[i * W + j];
                if constexpr (KIND == PoolKind::Average) *out += v;
                else *out = max_step(*out, v);
            }
        if constexpr (KIND == PoolKind::Average) *out /= area;
    }
}

template <PoolKind KIND>
__global__ void __launch_bounds__(kThreads) pool_coalesced_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                                  i64 H, i64 W, i64 size, i64 OH, i64 OW,
                                                                  i64 total) {
    const float area = static_cast<float>(size * size);
    for (i64 t = static_cast<i64>(blockIdx.x) * kThreads + threadIdx.x; t < total;
         t += static_cast<i64>(gridDim.x) * kThreads) {
        const i64 ow = t % OW, r = t / OW;  // consecutive threads: consecutive output columns
        const i64 oh = r % OH, p = r / OH;
        const float* win = x + p * H * W + oh * size * W + ow * size;
        float acc = KIND == PoolKind::Max ? __ldg(win) : 0.f;
        for (i64 i = 0; i < size; ++i)
            for (i64 j = 0; j < size; ++j) {
                const float v = __ldg(win + i * W + j);
                if constexpr (KIND == PoolKind::Average) acc += v;
                else acc = max_step(acc, v);
            }
        y[t] = KIND == PoolKind::Average ? acc / area : acc;  // y[p][oh][ow] is y[t]
    }
}

void check_pool(const float* x, const float* y, i64 planes, i64 H, i64 W, i64 size) {
    GPUOPT_REQUIRE(planes >= 0 && H >= 1 && W >= 1, "pool2d: planes must be >= 0, H and W >= 1");
    GPUOPT_REQUIRE(size >= 1 && H >= size && W >= size, "pool2d: window larger than the input");
    GPUOPT_REQUIRE(planes == 0 || (x != nullptr && y != nullptr), "pool2d: null pointer");
}

}  // namespace

void pool2d_basic(const float* x, float* y, i64 planes, i64 H, i64 W, i64 size, PoolKind kind) {
    check_pool(x, y, planes, H, W, size);
    const i64 OH = H / size, OW = W / size, total = planes * OH * OW;
    if (total == 0) return;
    const unsigned blocks = grid_for(total, kThreads);
    if (kind == PoolKind::Max) pool_basic_kernel<PoolKind::Max><<<blocks, kThreads, 0, current_stream()>>>(x, y, planes, H, W, size, OH, OW);
    else pool_basic_kernel<PoolKind::Average><<<blocks, kThreads, 0, current_stream()>>>(x, y, planes, H, W, size, OH, OW);
    GPUOPT_CHECK_LAUNCH("pool_basic_kernel");
}

void pool2d_coalesced(const float* x, float* y, i64 planes, i64 H, i64 W, i64 size, PoolKind kind) {
    check_pool(x, y, planes, H, W, size);
    const i64 OH = H / size, OW = W / size, total = planes * OH * OW;
    if (total == 0) return;
    const unsigned blocks = grid_for(total, kThreads);
    if (kind == PoolKind::Max)
        pool_coalesced_kernel<PoolKind::Max><<<blocks, kThreads, 0, current_stream()>>>(x, y, H, W, size, OH, OW, total);
    else pool_coalesced_kernel<PoolKind::Average><<<blocks, kThreads, 0, current_stream()>>>(x, y, H, W, size, OH, OW, total);
    GPUOPT_CHECK_LAUNCH("pool_coalesced_kernel");
}

}  // namespace gpuopt::nn
