// The sparse layer's parameters whose values pick a kernel: allowed values and default, once. Plain C++ (no CUDA):
// gpuopt._core exports them (kernel_choices()) and the registry's Params read them; the bindings convert.
#pragma once

#include "../common/choices.hpp"

namespace gpuopt::sparse {

// fast_fused: window, one 2x2 pool window per thread; int32 / fp32, the register-blocked 3x3 kernel
// (sparse_conv_cuda.hpp has when each is exact); auto: window.
enum class FusedKernel : int { kAuto, kWindow, kInt32, kFp32 };
inline constexpr NameChoices<4> kFusedKernels{"kernel", {"auto", "window", "int32", "fp32"}, 0};

// fast_fused: blocks of a thread-block cluster sharing one (maps, tile), each summing 1/split of the channels
// (a cluster holds at most 8 portably); 0: chosen from the shape (spelled 0 in Python too, as users wrote it).
inline constexpr IntChoices<5> kFusedSplits{"split", {0, 1, 2, 4, 8}, 0};

}  // namespace gpuopt::sparse
