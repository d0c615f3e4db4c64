// The k-means parameters whose values pick a code path or a launch shape: each one's allowed values and default,
// once. Plain C++ (no CUDA): gpuopt._core exports them (kernel_choices()) and the registry's Params read them; the
// launchers take the enums (the tables' indices) or the numbers; the bindings convert.
#pragma once

#include "../common/choices.hpp"
#include "kmeans.hpp"  // kSumGroup: stream's slabs are whole groups

namespace gpuopt::kmeans {

// cpu: the order of the centre sums (Liao's running sums, or device's chunked tree; kmeans.hpp's Summation).
inline constexpr NameChoices<2> kSummations{"summation", {"liao", "chunked"}, 0};

// liao and the CMU report's steps: find_nearest_cluster's block, a power of two (its count reduction halves it).
// liao's default is the table's (Liao's 128); the steps' is kLiaoStepsDefaultThreads (the report's 256).
inline constexpr IntChoices<6> kLiaoThreads{"threads", {32, 64, 128, 256, 512, 1024}, 2};
inline constexpr std::size_t kLiaoStepsDefaultThreads = kLiaoThreads.find(256);
// The CMU steps: compute_delta's one block (the report's 512); 0: Liao's rule (the next power of two of the
// partial count, at most 1024), which liao itself runs (it has no such parameter).
inline constexpr IntChoices<7> kLiaoReductionThreads{"reduction_threads", {0, 32, 64, 128, 256, 512, 1024}, 5};

// device, device_fused, device_gemm, device_tiled: assign_and_sum's grid (0: as many blocks as are resident at
// once); the launchers take any blocks >= 0, these are the ones offered.
inline constexpr IntChoices<7> kLoopBlocks{"blocks", {0, 1, 2, 3, 8, 64, 1024}, 0};
// Loops queued before the host reads the stop flag (the launchers take any >= 1): device, device_gemm and
// device_tiled offer up to 32; device_fused, one launch a loop, up to 64 and by default 16.
inline constexpr IntChoices<6> kLoopsPerSync{"loops_per_sync", {1, 2, 4, 8, 16, 32}, 3};
inline constexpr IntChoices<7> kFusedLoopsPerSync{"loops_per_sync", {1, 2, 4, 8, 16, 32, 64}, 4};

// device_persistent: the grid at most (0: as many as are co-resident; larger values are clamped to that).
inline constexpr IntChoices<9> kPersistentBlocks{"blocks", {0, 1, 2, 3, 8, 64, 132, 264, 1024}, 0};

// device_persistent: x from shared memory where a block's chunks fit (auto), or from global memory every loop.
inline constexpr NameChoices<2> kPersistentXMemory{"x_memory", {"auto", "global"}, 0};

// stream: objects a slab, 0 (kStreamBudgetBytes of points) or kSumGroup objects times a power of two up to 2^9
// (whole groups of the summation tree; the launcher takes any multiple of kSumGroup).
constexpr IntChoices<11> stream_chunk_choices() {
    IntChoices<11> c{"chunk_points", {0}, 0};
    for (std::size_t i = 1; i < IntChoices<11>::size(); ++i) c.values[i] = static_cast<int>(kSumGroup << (i - 1));
    return c;
}
inline constexpr IntChoices<11> kStreamChunkPoints = stream_chunk_choices();
// stream: device slabs (copies run up to buffers - 1 slabs ahead).
inline constexpr IntChoices<3> kStreamBuffers{"buffers", {2, 3, 4}, 1};

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

namespace multi {
// gpuopt.distributed.kmeans on GPUs (kmeans_cuda.hpp): the single-GPU loop whose assignment and chunk sums a
// rank runs; the Python layer picks as the single-GPU auto does (device to k*D 1024, device_gemm to 4096).
enum class Loop : int { Device, DeviceGemm, DeviceTiled };
inline constexpr NameChoices<3> kMultiLoops{"loop", {"device", "device_gemm", "device_tiled"}, 2};
}  // namespace multi

}  // namespace gpuopt::kmeans
