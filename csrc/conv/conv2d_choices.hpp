// The conv2d parameters whose values pick a kernel instantiation or a code path: each one's allowed values and
// default, once. Plain C++ (no CUDA): gpuopt._core exports them (kernel_choices()) and the registry's Params read
// them; the launchers take the enums below, whose values are the tables' indices; the bindings convert.
#pragma once

#include "../common/choices.hpp"

namespace gpuopt::conv {

// unroll: the matmul ladder's kernel that multiplies (called at its own defaults). async: the fastest.
enum class UnrollGemm : int { Async, Tf32x3, Tf32x3Wgmma, Warptile, Shared, Naive };
inline constexpr NameChoices<6> kUnrollGemms{"gemm", {"async", "tf32x3", "tf32x3_wgmma", "warptile", "shared", "naive"}, 0};

// implicit_gemm_fast: block tiles BMxBNxBK (output maps x output pixels x taps per k-step); conv2d_gemm.cu
// instantiates one warp tiling per entry, in this order (a static_assert there reads the sizes off the names).
// 64x64x8: fits the MNIST layers' 32/64 maps and CS6235 conf4's 128 maps with the most blocks.
enum class FastTile : int {};  // an index into kFastTiles
inline constexpr NameChoices<5> kFastTiles{"tile", {"64x64x8", "128x128x8", "128x64x8", "64x128x8", "32x128x8"}, 0};

// cudnn (and auto's cuDNN candidates): which algorithms cuDNN's search may pick, in auto's precision classes.
// Precise: the GEMM family and DIRECT, which sum products like the reference does (errors ~1e-7 relative). Fast:
// also FFT and Winograd, whose transforms lose accuracy on larger filters (seen on the H200: 3e-4 relative on a
// 5x5 layer). "any" is fast's older name here (what a framework's benchmark mode picks from), kept for callers.
enum class CudnnAlgorithms : int { Precise = 0, Fast = 1 };
inline constexpr NameChoices<3> kCudnnAlgorithms{"algorithms", {"precise", "fast", "any"}, 0};
// The class of a kCudnnAlgorithms entry ("any" is "fast").
inline CudnnAlgorithms cudnn_algorithms(std::size_t index) {
    return index == 0 ? CudnnAlgorithms::Precise : CudnnAlgorithms::Fast;
}

// CS6235 (every variant): threads per block of the 1-D grid, the report's sweep (Fig 2); 128: its best over its
// four configurations.
inline constexpr IntChoices<6> kCs6235BlockSizes{"block_size", {32, 64, 128, 256, 512, 1024}, 2};

// CS6235 unroll_k: the order of each thread's c, r, s loops (the other variants have a fixed order: crs, or rsc
// for unroll_nk, shared and general). rsc (c innermost, padding checks once per tap) beat crs in the report (Fig 5).
enum class Cs6235LoopOrder : int { Crs = 0, Rsc = 1 };
inline constexpr NameChoices<2> kCs6235LoopOrders{"loop_order", {"crs", "rsc"}, 1};
// unroll_k: output maps per thread (8: with rsc the report's best at N = 128, Sec. 4.1); unroll_c: input channels
// per step, 0 none (4: unrolling helped only at C = 832, Fig 4, and costs nothing at C < 4).
inline constexpr IntChoices<4> kCs6235UnrollK{"unroll", {2, 4, 8, 16}, 2};
inline constexpr IntChoices<5> kCs6235UnrollC{"unroll", {0, 2, 4, 8, 16}, 2};

// ECE408 tiled variants: the output tile side T (T x T threads), the report's TILE_WIDTH sweep (Optimization 9);
// tiled_channels: threads along the channel dimension of a block. The launchers also reject T*T*channels > 1024.
inline constexpr IntChoices<8> kEce408TileWidths{"tile_width", {4, 8, 12, 16, 20, 24, 28, 32}, 3};
inline constexpr IntChoices<6> kEce408ChannelsPerBlock{"channels_per_block", {1, 2, 4, 8, 16, 32}, 1};

// implicit_gemm: the side of its output tile and k-step (tile x tile threads); 16: the ECE408 MNIST report's.
inline constexpr IntChoices<2> kImplicitGemmTiles{"tile", {16, 32}, 0};

// direct_regblock: output maps per thread (auto: 8 when K <= 8, else 16) and output pixels per thread (auto: 2,
// or 4 when K <= 8; fewer when an image's last run would waste more than 1/8 of its slots). One instantiation
// per non-zero pair.
inline constexpr IntChoices<3> kDirectKTiles{"k_tile", {0, 8, 16}, 0, "auto"};
inline constexpr IntChoices<4> kDirectPixels{"pixels", {0, 1, 2, 4}, 0, "auto"};

// depthwise: which kernel. rows: a block stages whole input rows (a band of one plane, or whole small planes) by
// 16-byte loads and each thread sums 4 outputs down a column from registers; square 3x3, 5x5 and 7x7 filters,
// stride 1 or 2, no dilation. patch: any filter, stride and dilation (an output tile's input patch staged).
// auto: rows where it takes the layer and no patch tile is asked for, else patch.
enum class DepthwiseKernel : int { Auto = 0, Rows = 1, Patch = 2 };
inline constexpr NameChoices<3> kDepthwiseKernels{"kernel", {"auto", "rows", "patch"}, 0};
// depthwise patch kernel: the output tile side a block computes of each of its planes (32: one plane a block, 16:
// two, 8: four; 256 threads each); auto: by the plane's larger side (> 24: 32, > 12: 16, else 8), the tile that
// idles fewest.
inline constexpr IntChoices<4> kDepthwiseTiles{"tile", {0, 32, 16, 8}, 0, "auto"};

// winograd (conv2d's and conv2d_pool's): the output tile side m of F(m x m, r x r); auto: kWinogradDefaultTile.
inline constexpr IntChoices<3> kWinogradTiles{"m", {0, 2, 4}, 0, "auto"};

// winograd (conv2d_pool's): the per-point products. Auto: the resident-V 3xTF32 block for F(4x4, 5x5) with
// C <= 32 and K > 16 (MNIST conv2), else FFMA (notes/winograd.md).
enum class WinogradProducts : int { Auto = 0, Fma = 1, Tf32x3 = 2 };
inline constexpr NameChoices<3> kWinogradProducts{"products", {"auto", "fma", "tf32x3"}, 0};

}  // namespace gpuopt::conv
