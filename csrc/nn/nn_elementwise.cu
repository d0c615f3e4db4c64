// relu and tanh, variant "cuda": one grid-stride kernel per activation, memory bound, so the
// only thing that matters is moving 16 bytes per load and store. The activation is the same
// apply_activation the CPU reference calls (relu: v < 0 ? 0 : v, so NaN stays NaN, as
// numpy.maximum; tanh: CUDA's tanhf, within 2 ulp), so relu matches the reference bit for bit.
#include <cuda_runtime.h>

#include "../common/cuda_check.cuh"
#include "../common/launch.cuh"
#include "nn_cuda.hpp"

namespace gpuopt::nn {

namespace {

constexpr int kThreads = 256;

// VEC: x and y are 16-byte aligned; the n/4 float4s are done vectorised and the (at most 3)
// trailing floats by the first threads. Otherwise every float on its own (an offset view of
// another library's array: a float4 load from it would be a misaligned-address fault).
// x and y are not __restrict__: x == y (in place) is allowed, each element read then written
// by one thread.
template <Activation ACT, bool VEC>
__global__ void __launch_bounds__(kThreads) activation_kernel(const float* x, float* y, std::int64_t n) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
    std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    std::int64_t done = 0;
    if constexpr (VEC) {
        const std::int64_t n4 = n / 4;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (std::int64_t k = i; k < n4; k += stride) {
            float4 v = x4[k];
            v.x = apply_activation(v.x, ACT);
            v.y = apply_activation(v.y, ACT);
            v.z = apply_activation(v.z, ACT);
            v.w = apply_activation(v.w, ACT);
            y4[k] = v;
        }
        done = n4 * 4;
    }
    for (std::int64_t k = done + i; k < n; k += stride) y[k] = apply_activation(x[k], ACT);
}

template <Activation ACT>
void launch(const float* x, float* y, std::int64_t n) {
    const bool vec = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
    const unsigned blocks = grid_for(vec ? ceil_div<std::int64_t>(n, 4) : n, kThreads);
    if (vec) activation_kernel<ACT, true><<<blocks, kThreads, 0, current_stream()>>>(x, y, n);
    else activation_kernel<ACT, false><<<blocks, kThreads, 0, current_stream()>>>(x, y, n);
    GPUOPT_CHECK_LAUNCH("activation_kernel");
}

}  // namespace

void activation_cuda(const float* x, float* y, std::int64_t n, Activation act) {
    GPUOPT_REQUIRE(n >= 0, "activation: n must be >= 0");
    GPUOPT_REQUIRE(n == 0 || (x != nullptr && y != nullptr), "activation: null pointer");
    GPUOPT_REQUIRE(reinterpret_cast<std::uintptr_t>(x) % 4 == 0 && reinterpret_cast<std::uintptr_t>(y) % 4 == 0,
                   "activation: x and y must be 4-byte aligned float32 arrays");
    if (n == 0) return;
    switch (act) {
        case Activation::Relu: launch<Activation::Relu>(x, y, n); break;
        case Activation::Tanh: launch<Activation::Tanh>(x, y, n); break;
        default: launch<Activation::None>(x, y, n); break;
    }
}

}  // namespace gpuopt::nn
