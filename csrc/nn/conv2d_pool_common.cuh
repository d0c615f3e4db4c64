// What the fused conv2d_pool kernels share (conv2d_pool.cu, conv2d_pool_skip.cu): the 2x2 window's activation and
// pool in the CPU reference's order.
#pragma once

#include <cstdint>

#include "../common/activation.hpp"
#include "nn.hpp"

namespace gpuopt::nn {
namespace {

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
