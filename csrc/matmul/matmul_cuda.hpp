// matmul on the GPU: device pointers, row-major float32 (a: M x K, b: K x N, c: M x N),
// the current stream (common/stream.hpp). Launchers check their configuration and every launch; they allocate nothing.
//
// The ladder, simple to fast (notes/matmul.md has each step's prediction and outcome):
//   naive -> coalesced -> shared -> tile_buffer (the CMU report) -> blocktile_1d ->
//   blocktile_2d -> vectorized -> warptile -> async -> tf32x3 -> tf32x3_wgmma, with cuBLAS as the baseline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../common/kernel_info.hpp"
#include "matmul_choices.hpp"

namespace gpuopt::matmul {

// M, N, K positive and below 2^31 - 1024 (kernels index rows and columns with int, offsets with 64 bits): every
// launcher's limit, for callers that check a shape before they call one (nn fully_connected).
void require_shape(std::int64_t M, std::int64_t N, std::int64_t K, const char* what);

// v0 "naive": one thread per output on a 2-D grid of 16x16 blocks (the CMU report's fix
// of its single-block kernel), correct for any M, N, K.
void matmul_naive(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K);

// One thread per output, no shared memory; warp_layout "row": a warp takes 32 consecutive
// columns of one row of c (reads of b and writes of c coalesced); "column": 32 consecutive
// rows of one column (every read of a and write of c strided): the uncoalesced baseline.
void matmul_coalesced(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                      WarpLayout warp_layout);

// Shared-memory tiles of block x block (16: 256 threads, 32: 1024 threads, the report's
// occupancy experiment).
void matmul_shared(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K, int block);

// The report's "tile buffering" (its Figure 3): a 16x16 block computes tile_sz (1, 2, 4)
// consecutive output tiles of its row stripe, loading each A tile once for all of them.
void matmul_tile_buffer(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                        int tile_sz);

// 1-D register blocking: 64x64x8 block tile, each of 512 threads computes 8 outputs of a column.
void matmul_blocktile_1d(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K);

// 2-D register blocking: each thread computes 8x8 outputs; tile: an index into kTiles2d.
void matmul_blocktile_2d(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                         Tile2d tile);

// 2-D register blocking with 16-byte global loads and A^T in shared memory (float4 reads
// in the inner loop); scalar loads where a row is not 16-byte aligned.
void matmul_vectorized(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                       Tile2d tile);

// Block tile -> warp tiles -> 8x8 (or 8x4) thread tiles, conflict-free shared memory.
void matmul_warptile(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                     WarpTile tile);

// The warp-tiled kernel fed by a `stages`-deep cp.async pipeline (2, 3 or 4), with split_k
// (1, 2, 4) blocks of a cluster sharing each output tile; tile 0 ("auto" in kAsyncTiles) and split_k 0 pick
// them from the shape (see matmul_async.cu).
void matmul_async(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                  AsyncTile tile, int stages, int split_k);

// FP32-accurate tensor cores: each operand split into a TF32 high part and a TF32 remainder, three
// products summed by mma.sync per k-step of 32 and added in FP32 (128x128x32 tiles, `stages` 3 or 4
// cp.async stages).
void matmul_tf32x3(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                   int stages, int flush_k, Tf32x3Split split);

// tf32x3's accuracy on Hopper's warpgroup MMA (wgmma, compute capability 9.0 only): the operands split
// into TF32 hi and lo once, before the product (B transposed), then 128x128x32 tiles, two warpgroups of
// m64n128k8, partial sums over 32 k added in FP32.
void matmul_tf32x3_wgmma(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K);

// cuBLAS SGEMM, strict FP32 (no TF32): the baseline every variant is compared with.
void matmul_cublas(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K);
// cuBLAS SGEMM with TF32 tensor cores allowed: a speed baseline for the 3xTF32 steps (TF32 accuracy).
void matmul_cublas_tf32(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K);

// Parameters of every variant (each variant reads its own; the caller sets the ones of its variant: no defaults
// here, they are matmul_choices.hpp's).
struct KernelParams {
    int block;                // shared
    int tile_sz;              // tile_buffer
    WarpLayout warp_layout;   // coalesced
    Tile2d tile_2d;           // blocktile_2d, vectorized
    WarpTile warp_tile;       // warptile
    AsyncTile async_tile;     // async
    int stages;               // async, tf32x3
    int split_k;              // async (0: auto)
    int flush_k;              // tf32x3
    Tf32x3Split split;        // tf32x3
};

// One kernel launch resolved once for a shape and parameters with 16-byte aligned operands, its checks
// (shape, block size, the shared-memory opt-in) done: what gpuopt's plan cache replays, so a repeated call
// skips the configuration (tile choice, split-k estimate, device queries). Only for operands that are all
// 16-byte aligned (the launch it stands for); others take the variant's launcher.
struct PreparedLaunch {
    const void* kernel = nullptr;  // a kernel(a, b, c, M, N, K) of the ladder
    unsigned blocks = 0;
    int threads = 0;
    std::size_t dynamic_smem = 0;
    int cluster = 1;
    int M = 0, N = 0, K = 0;
};

// The prepared launch of `variant` (every ladder step whose launch is one planned kernel: not naive, whose
// launch has a 2-D grid, nor tf32x3_wgmma, nor cublas); ValueError for others.
PreparedLaunch matmul_prepare(Step variant, const KernelParams& params, std::int64_t M, std::int64_t N,
                              std::int64_t K);
// Launch it on the current stream (a, b, c 16-byte aligned) and check the launch.
void run_prepared(const PreparedLaunch& l, const float* a, const float* b, float* c);

// The kernel `variant` runs for an M x N x K product with 16-byte aligned operands (the
// fast path). Variants without a kernel of gpuopt's own (cublas, cpu) are rejected.
KernelInfo matmul_kernel_info(Step variant, const KernelParams& params, std::int64_t M, std::int64_t N,
                              std::int64_t K);

}  // namespace gpuopt::matmul
