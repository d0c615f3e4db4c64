// The k-means parameters whose values pick a code path: each one's allowed values and default, once. Plain C++
// (no CUDA): gpuopt._core exports them (kernel_choices()) and the registry's Params read them; the launchers take
// the enums (the tables' indices); the bindings convert.
#pragma once

#include "../common/choices.hpp"

namespace gpuopt::kmeans {

// cpu: the order of the centre sums (Liao's running sums, or device's chunked tree; kmeans.hpp's Summation).
inline constexpr NameChoices<2> kSummations{"summation", {"liao", "chunked"}, 0};

// device_persistent: x from shared memory where a block's chunks fit (auto), or from global memory every loop.
inline constexpr NameChoices<2> kPersistentXMemory{"x_memory", {"auto", "global"}, 0};

// stream: pageable x page-locked in place for the call (register) or copied through pinned staging buffers.
inline constexpr NameChoices<2> kStreamHostMemory{"host_memory", {"register", "staged"}, 0};
// stream: the assignment (StreamAssign in kmeans_cuda.hpp): Liao's distance, the dot form, or auto by k*D.
inline constexpr NameChoices<3> kStreamAssign{"assign", {"auto", "liao", "dot"}, 0};

namespace tiled {
// device_tiled: the screen's dot products, FP32 FFMA or the tensor cores in 3xTF32 (kmeans_tiled_tc.cuh: a wider
// rounding bound, the same memberships); auto picks by shape (tiled::resolve).
enum class Products : int { Auto, Tf32x3, Ffma };
inline constexpr NameChoices<3> kTiledProducts{"products", {"auto", "tf32x3", "ffma"}, 0};
}  // namespace tiled

}  // namespace gpuopt::kmeans
