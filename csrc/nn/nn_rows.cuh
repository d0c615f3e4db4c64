// The row kernels' shared machinery (argmax "warp"/"streams", softmax "cuda"): a group of LANES
// consecutive threads per row. Short rows (the MNIST network's 10 scores) would leave most of a
// warp idle with a warp per row, so groups shrink to 4, 8 or 16 lanes and a warp takes 8, 4 or 2
// rows at once (its loads still one contiguous run of rows); long rows take a whole block of
// 256 threads (8 warps reduced through shared memory).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../common/launch.cuh"

namespace gpuopt::nn::rows {

using i64 = std::int64_t;
constexpr int kThreads = 256;

// Lanes per row: about 4 or more elements per lane; rows past 4096 floats get a block each.
template <class F>
void with_lanes(i64 cols, F&& f) {
    if (cols <= 16) f(std::integral_constant<int, 4>{});
    else if (cols <= 32) f(std::integral_constant<int, 8>{});
    else if (cols <= 64) f(std::integral_constant<int, 16>{});
    else if (cols <= 4096) f(std::integral_constant<int, 32>{});
    else f(std::integral_constant<int, kThreads>{});
}

// Blocks for `rows` rows at kThreads / LANES rows per block (capped at the grid limit: the kernels
// loop over rows).
template <int LANES>
unsigned row_blocks(i64 rows) {
    return grid_for(rows, kThreads / LANES);
}

// Runs body(row, valid, lane) for this thread's row in each group of kThreads / LANES consecutive rows the
// block takes (grid-stride). The loop is block-uniform: every thread of the block runs every iteration,
// rows past the end with valid == false, as group_reduce's shuffles and barriers need.
template <int LANES, class Body>
__device__ __forceinline__ void for_each_row(i64 nrows, Body&& body) {
    constexpr int kRowsPerBlock = kThreads / LANES;
    const int lane = threadIdx.x % LANES, slot = threadIdx.x / LANES;
    for (i64 base = static_cast<i64>(blockIdx.x) * kRowsPerBlock; base < nrows;
         base += static_cast<i64>(gridDim.x) * kRowsPerBlock)
        body(base + slot, base + slot < nrows, lane);
}

__device__ __forceinline__ float shfl_xor(float v, int off) { return __shfl_xor_sync(0xffffffffu, v, off); }

// Reduces v over the LANES threads of each group with `op` (commutative and associative on the
// values it meets, so every lane ends with the same result). The kernels call it with every
// thread of the block (their row loops are block-uniform), as the full-warp shuffles and, for
// LANES > 32, the barriers need. scratch: kThreads / 32 values of shared memory.
template <int LANES, class T, class Op>
__device__ __forceinline__ T group_reduce(T v, Op op, T* scratch) {
    static_assert(LANES == 4 || LANES == 8 || LANES == 16 || LANES == 32 || LANES == kThreads, "group size");
    constexpr int kWarpLanes = LANES < 32 ? LANES : 32;
#pragma unroll
    for (int off = kWarpLanes / 2; off > 0; off /= 2) v = op(v, shfl_xor(v, off));  // xor < LANES: own group
    if constexpr (LANES > 32) {
        __syncthreads();  // every thread has read the previous reduction's scratch
        if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
        __syncthreads();
        v = scratch[0];
#pragma unroll
        for (int i = 1; i < kThreads / 32; ++i) v = op(v, scratch[i]);  // same order in every thread
    }
    return v;
}

}  // namespace gpuopt::nn::rows
