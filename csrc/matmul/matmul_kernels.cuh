// Internals shared by the matmul kernel families (not part of the public header): the
// planned launch every family produces, and each family's planner.
//
// Every kernel of the ladder has one signature, kernel(a, b, c, M, N, K) on row-major
// float32 (a: M x K, b: K x N, c: M x N), and a 1-D grid: block i computes output tile
// dev::tile_of_block(i). So one launcher and one kernel_info serve every instantiation, and no
// family meets the 65535 limit of grid y. The device primitives the kernels use (cp.async, float4
// row access, the tile order) are op-neutral and live in ../common/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "../common/async_copy.cuh"
#include "../common/kernel_info.hpp"
#include "../common/launch.cuh"
#include "../common/thread_index.cuh"
#include "../common/tile_order.cuh"
#include "../common/vec4.cuh"
#include "matmul_cuda.hpp"

namespace gpuopt::matmul {

using MatmulKernel = void (*)(const float*, const float*, float*, int, int, int);

// One kernel instantiation and the launch configuration a shape needs.
struct MatmulLaunch {
    MatmulKernel kernel = nullptr;
    unsigned blocks = 0;
    int threads = 0;
    std::size_t dynamic_smem = 0;
    int cluster = 1;   // blocks per thread-block cluster (split-k), consecutive in x
    std::string name;  // the instantiation, e.g. "async<128x128x16 w64x32 t8x8 s3 vecN>"
};

// Thread-block clusters (split-k's reduction through distributed shared memory) need
// compute capability 9.0; cached per device.
bool device_has_clusters();

// Output tiles of BM x BN: the 1-D grid size (a launch is rejected beyond 2^31-1 blocks).
unsigned tile_count(std::int64_t M, std::int64_t N, int BM, int BN, const char* what);
// Launch a planned kernel on the current stream and check the launch.
void run_launch(const MatmulLaunch& l, const float* a, const float* b, float* c, std::int64_t M, std::int64_t N,
                std::int64_t K);
// Registers, shared memory, spills and occupancy of a planned matmul kernel (gpuopt::kernel_info of it).
KernelInfo launch_info(const MatmulLaunch& l);

// Plans of each family (defined in the family's .cu; a and b only matter for alignment).
MatmulLaunch launch_naive();
MatmulLaunch launch_coalesced(std::int64_t M, std::int64_t N, WarpLayout warp_layout);
MatmulLaunch launch_shared(std::int64_t M, std::int64_t N, int block);
MatmulLaunch launch_tile_buffer(std::int64_t M, std::int64_t N, int tile_sz);
MatmulLaunch launch_blocktile_1d(std::int64_t M, std::int64_t N);
MatmulLaunch launch_blocktile_2d(std::int64_t M, std::int64_t N, Tile2d tile);
MatmulLaunch launch_vectorized(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N,
                             std::int64_t K, Tile2d tile);
MatmulLaunch launch_warptile(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N,
                           std::int64_t K, WarpTile tile);
MatmulLaunch launch_async(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                        AsyncTile tile, int stages, int split_k);
MatmulLaunch launch_tf32x3(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N,
                         std::int64_t K, int stages, int flush_k, Tf32x3Split split);
// tf32x3_wgmma's product kernel (its launch is not a MatmulLaunch: it takes the split operands).
KernelInfo tf32x3_wgmma_info();

}  // namespace gpuopt::matmul
