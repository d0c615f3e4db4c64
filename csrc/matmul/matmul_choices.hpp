// The matmul ladder's parameters whose values pick a kernel instantiation or a code path: each one's allowed
// values and default, once. Plain C++ (no CUDA): gpuopt._core exports them (kernel_choices()) and the registry's
// Params read them; the launchers take the enums below (the tables' indices) or the numbers; the bindings convert.
#pragma once

#include "../common/choices.hpp"

namespace gpuopt::matmul {

// The ladder steps whose launch matmul_prepare / matmul_kernel_info describe (the variants' names).
enum class Step : int { Naive, Coalesced, Shared, TileBuffer, Blocktile1d, Blocktile2d, Vectorized, Warptile, Async,
                        Tf32x3, Tf32x3Wgmma };
inline constexpr NameChoices<11> kSteps{"variant", {"naive", "coalesced", "shared", "tile_buffer", "blocktile_1d",
                                                    "blocktile_2d", "vectorized", "warptile", "async", "tf32x3",
                                                    "tf32x3_wgmma"}, 0};

// coalesced: row: a warp reads 32 consecutive floats of b per k; column: 32 rows of a, K floats apart.
enum class WarpLayout : int { Row, Column };
inline constexpr NameChoices<2> kWarpLayouts{"warp_layout", {"row", "column"}, 0};

// shared: tile edge, 16 (256 threads) or 32 (1024 threads), the CMU report's occupancy experiment.
inline constexpr IntChoices<2> kSharedBlocks{"block", {16, 32}, 0};
// tile_buffer: consecutive output tiles per block sharing one A tile (4: what gpuopt.matmul runs by default).
inline constexpr IntChoices<3> kTileBufferSizes{"tile_sz", {1, 2, 4}, 2};

// blocktile_2d and vectorized: block tile BMxBNxBK, 8x8 per thread. Their defaults differ: blocktile_2d's is
// the table's, vectorized's kVectorizedDefaultTile.
enum class Tile2d : int {};  // an index into kTiles2d
inline constexpr NameChoices<2> kTiles2d{"tile", {"128x128x8", "64x64x8"}, 1};
inline constexpr std::size_t kVectorizedDefaultTile = kTiles2d.find("128x128x8");

// warptile: block tile BMxBNxBK (warp and thread tiles follow).
enum class WarpTile : int {};  // an index into kWarpTiles
inline constexpr NameChoices<4> kWarpTiles{"tile", {"128x128x16", "128x128x8", "128x64x16", "64x64x16"}, 0};

// async: block tile (_k2: two k-slices); auto (index 0): per shape, by the tile-quantisation cost model.
enum class AsyncTile : int {};  // an index into kAsyncTiles; 0: auto
inline constexpr NameChoices<8> kAsyncTiles{
    "tile", {"auto", "128x256x32", "128x256x16", "128x128x32", "128x128x16", "128x64x16", "64x64x16", "64x64x16_k2"}, 0};
inline constexpr IntChoices<3> kAsyncStages{"stages", {2, 3, 4}, 1};
inline constexpr IntChoices<4> kAsyncSplitK{"split_k", {0, 1, 2, 4}, 0, "auto"};

// tf32x3: cp.async stages; k summed inside the tensor cores before an FP32 add; where operands become hi + lo.
inline constexpr IntChoices<2> kTf32x3Stages{"stages", {3, 4}, 0};
inline constexpr IntChoices<3> kTf32x3FlushK{"flush_k", {8, 16, 32}, 1};
enum class Tf32x3Split : int { Fragment, Tile };
inline constexpr NameChoices<2> kTf32x3Splits{"split", {"fragment", "tile"}, 0};

}  // namespace gpuopt::matmul
