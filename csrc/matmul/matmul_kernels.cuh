// Internals shared by the matmul kernel families (not part of the public header): the
// planned launch every family produces, the block -> output-tile mapping, and cp.async.
//
// Every kernel of the ladder has one signature, kernel(a, b, c, M, N, K) on row-major
// float32 (a: M x K, b: K x N, c: M x N), and a 1-D grid: block i computes output tile
// tile_of_block(i). So one launcher and one kernel_info serve every instantiation, and no
// family meets the 65535 limit of grid y.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "../common/launch.cuh"
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

// M, N, K in 1..2^31-1 (kernels index rows and columns with int, offsets with 64 bits).
void require_shape(std::int64_t M, std::int64_t N, std::int64_t K, const char* what);
// Output tiles of BM x BN: the 1-D grid size (a launch is rejected beyond 2^31-1 blocks).
unsigned tile_count(std::int64_t M, std::int64_t N, int BM, int BN, const char* what);
// True when p is 16-byte aligned (a float4 load from it is legal).
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
// Launch a planned kernel on stream 0 and check the launch.
void run_launch(const MatmulLaunch& l, const float* a, const float* b, float* c, std::int64_t M, std::int64_t N,
                std::int64_t K);
// Registers, shared memory, spills and occupancy of a kernel at `threads` per block and `dynamic_smem`
// bytes of dynamic shared memory (also used by the conv2d kernels), and of a planned matmul kernel.
KernelInfo kernel_info(const void* kernel, const std::string& name, int threads, std::size_t dynamic_smem);
KernelInfo launch_info(const MatmulLaunch& l);

// Plans of each family (defined in the family's .cu; a and b only matter for alignment).
MatmulLaunch plan_naive();
MatmulLaunch plan_coalesced(std::int64_t M, std::int64_t N, WarpLayout warp_layout);
MatmulLaunch plan_shared(std::int64_t M, std::int64_t N, int block);
MatmulLaunch plan_tile_buffer(std::int64_t M, std::int64_t N, int tile_sz);
MatmulLaunch plan_blocktile_1d(std::int64_t M, std::int64_t N);
MatmulLaunch plan_blocktile_2d(std::int64_t M, std::int64_t N, Tile2d tile);
MatmulLaunch plan_vectorized(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N,
                             std::int64_t K, Tile2d tile);
MatmulLaunch plan_warptile(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N,
                           std::int64_t K, WarpTile tile);
MatmulLaunch plan_async(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                        AsyncTile tile, int stages, int split_k);
MatmulLaunch plan_tf32x3(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N,
                         std::int64_t K, int stages, int flush_k, Tf32x3Split split);
// tf32x3_wgmma's product kernel (its launch is not a MatmulLaunch: it takes the split operands).
KernelInfo tf32x3_wgmma_info();

namespace dev {

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

// threadIdx.x read afresh (an opaque asm the compiler cannot merge with earlier reads):
// for values needed only after the main loop, so they are recomputed there instead of
// occupying a register (or a spill slot) through it.
__device__ __forceinline__ int fresh_thread_index() {
    unsigned t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return static_cast<int>(t);
}

// row[col .. col+3] of a row of `cols` floats, zeros outside it (and for rows out of range:
// row_ok false, row is then never read). VEC: the row is 16-byte aligned and cols % 4 == 0,
// so with col % 4 == 0 the four floats are all in range or all out: one 16-byte load.
// Otherwise four checked 4-byte loads.
template <bool VEC>
__device__ __forceinline__ float4 load4(const float* __restrict__ row, int col, int cols, bool row_ok) {
    if constexpr (VEC) {
        return row_ok && col < cols ? __ldg(reinterpret_cast<const float4*>(row + col)) : make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
        float4 v;
        v.x = row_ok && col + 0 < cols ? __ldg(row + col + 0) : 0.f;
        v.y = row_ok && col + 1 < cols ? __ldg(row + col + 1) : 0.f;
        v.z = row_ok && col + 2 < cols ? __ldg(row + col + 2) : 0.f;
        v.w = row_ok && col + 3 < cols ? __ldg(row + col + 3) : 0.f;
        return v;
    }
}

// row[col .. col+3] = v where in range (the caller checks the row); VEC as for load4.
template <bool VEC>
__device__ __forceinline__ void store4(float* __restrict__ row, int col, int cols, float4 v) {
    if constexpr (VEC) {
        if (col < cols) *reinterpret_cast<float4*>(row + col) = v;
    } else {
        if (col + 0 < cols) row[col + 0] = v.x;
        if (col + 1 < cols) row[col + 1] = v.y;
        if (col + 2 < cols) row[col + 2] = v.z;
        if (col + 3 < cols) row[col + 3] = v.w;
    }
}

// cp.async: copy global -> shared without passing through registers. src_bytes < size
// zero-fills the rest (0: nothing is read, the whole destination is zeroed), which is how
// out-of-bounds elements of edge tiles become zeros. 16-byte copies bypass L1 (.cg); 4-byte
// copies must go through it (.ca).
__device__ __forceinline__ void cp_async_16(float* smem_dst, const float* gmem_src, int src_bytes) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_4(float* smem_dst, const float* gmem_src, int src_bytes) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_8(double* smem_dst, const double* gmem_src, int src_bytes) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Wait until at most PENDING of this thread's committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

}  // namespace dev
}  // namespace gpuopt::matmul
