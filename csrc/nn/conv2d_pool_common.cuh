// What the fused conv2d_pool kernels share (conv2d_pool.cu, conv2d_pool_skip.cu): the filters rearranged so a block's
// output maps are contiguous a tap, and the 2x2 window's activation and pool in the CPU reference's order.
#pragma once

#include <cstdint>

#include "../common/activation.hpp"
#include "nn.hpp"

namespace gpuopt::nn {
namespace {

// w (K, C, R, S) -> wt[K / cpb blocks][C][R][S][cpb], zero past K. A block's slot j holds map (j % kpl) (cpb / kpl) +
// j / kpl of it: with kpl = 1 the maps in order (fused); with kpl = 2 and cpb = 64, slots 2 l and 2 l + 1 hold maps l
// and 32 + l, one 8-byte load for lane l (zero_skip, whose lane l stores maps l and 32 + l: the faster stores).
__global__ void arrange_filters(const float* __restrict__ w, float* __restrict__ wt, int K, int C, int RS, int cpb,
                                int kpl, std::int64_t total) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const int slot = static_cast<int>(i % cpb);
        std::int64_t rest = i / cpb;
        const int tap = static_cast<int>(rest % RS);
        rest /= RS;
        const int c = static_cast<int>(rest % C);
        const int kb = static_cast<int>(rest / C);
        const int k = kb * cpb + slot % kpl * (cpb / kpl) + slot / kpl;
        wt[i] = k < K ? w[(static_cast<std::int64_t>(k) * C + c) * RS + tap] : 0.f;
    }
}

template <Activation ACT, PoolKind POOL>
__device__ __forceinline__ float pool4(float a, float b, float c, float d) {
    a = apply_activation(a, ACT);
    b = apply_activation(b, ACT);
    c = apply_activation(c, ACT);
    d = apply_activation(d, ACT);
    if constexpr (POOL == PoolKind::Average) {
        return (((a + b) + c) + d) / 4.f;  // the CPU reference's order: window rows, then columns
    } else {
        // The CPU reference's rule: a NaN wins, else the largest.
        float m = a;
        m = (b > m || isnan(b)) && !isnan(m) ? b : m;
        m = (c > m || isnan(c)) && !isnan(m) ? c : m;
        m = (d > m || isnan(d)) && !isnan(m) ? d : m;
        return m;
    }
}

}  // namespace
}  // namespace gpuopt::nn
