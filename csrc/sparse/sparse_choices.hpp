// The sparse layer's parameters whose values pick a kernel: allowed values and default, once. Plain C++ (no CUDA):
// gpuopt._core exports them (kernel_choices()) and the registry's Params read them; the bindings convert.
#pragma once

#include "../common/choices.hpp"

namespace gpuopt::sparse {

// fast_fused: window, one 2x2 pool window per thread; int32 / fp32, the register-blocked 3x3 kernel
// (sparse_conv_cuda.hpp has when each is exact); auto: window.
enum class FusedKernel : int { kAuto, kWindow, kInt32, kFp32 };
inline constexpr NameChoices<4> kFusedKernels{"kernel", {"auto", "window", "int32", "fp32"}, 0};

}  // namespace gpuopt::sparse
