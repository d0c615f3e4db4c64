// The output side of conv2d's 3xTF32 warpgroup-MMA GEMMs (pointwise_tf32x3, unroll_tf32x3): the product's
// (map k, column col) pairs written into y's NCHW planes, col = n*PQ + p*Q + q, with the bias and activation. A
// Store of matmul's tf32x3_wgmma product (../matmul/tf32x3_wgmma.cuh: one(), pair()).
#pragma once

#include <cstdint>

#include "../common/activation.hpp"

namespace gpuopt::conv {

// vec: PQ even and y 8-byte aligned, so a pair (col even) lies in one plane and is aligned.
struct PlanesStore {
    float* y;
    const float* bias;
    std::int64_t kpq;
    int PQ, cols;
    Activation act;
    bool vec;
    __device__ void one(int k, int col, float x) const {
        const int n = col / PQ;
        y[n * kpq + static_cast<std::int64_t>(k) * PQ + (col - n * PQ)] =
            apply_activation(x + (bias ? bias[k] : 0.f), act);
    }
    __device__ void pair(int k, int col, float x0, float x1) const {
        if (vec) {
            if (col >= cols) return;
            const float b = bias ? bias[k] : 0.f;
            const int n = col / PQ;
            *reinterpret_cast<float2*>(y + n * kpq + static_cast<std::int64_t>(k) * PQ + (col - n * PQ)) =
                make_float2(apply_activation(x0 + b, act), apply_activation(x1 + b, act));
        } else {
            if (col < cols) one(k, col, x0);
            if (col + 1 < cols) one(k, col + 1, x1);
        }
    }
};

}  // namespace gpuopt::conv
