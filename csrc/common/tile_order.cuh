// Which output tile a block of a 1-D grid computes, for kernels that tile a 2-D output (the matmul ladder,
// conv2d's implicit GEMM). A 1-D grid never meets the 65535 limit of grid y.
#pragma once

#include <cuda_runtime.h>

namespace gpuopt::dev {

struct TileCoord {
    int m, n;  // output tile row and column (in tiles)
};

// Output tile of linear block index `block`. GROUP_M = 1: row-major over tiles (n fastest). GROUP_M > 1:
// consecutive blocks walk down a column of GROUP_M tile rows before moving right, so the
// blocks resident at one time share A stripes and B stripes in L2 (Triton's grouped order).
template <int GROUP_M>
__device__ __forceinline__ TileCoord tile_of_block(int block, int tiles_m, int tiles_n) {
    if constexpr (GROUP_M == 1) {
        return {block / tiles_n, block % tiles_n};
    } else {
        const int per_group = GROUP_M * tiles_n;
        const int first_m = (block / per_group) * GROUP_M;
        const int rows = min(tiles_m - first_m, GROUP_M);
        const int in_group = block % per_group;
        return {first_m + in_group % rows, in_group / rows};
    }
}

}  // namespace gpuopt::dev
