// A whole convolutional layer in one pass: valid stride-1 convolution, bias, activation and
// non-overlapping 2x2 pooling, so the unpooled output never goes to memory. The ECE408 MNIST
// report fuses ReLU into its tiled convolution; this goes on and fuses the pool as well.
//
// x (N, C, H, W) float32 or uint8 (uint8 is divided by `input_divisor` as it is loaded, rounded as a
// float32 division: raw MNIST pixels to [0, 1] on the device), w (K, C, R, S) float32, bias (K,) or
// null, y (N, K, (H-R+1)/2, (W-S+1)/2) float32 (trailing conv rows/columns that do not fill a window
// are dropped, as pool2d does). pool 1 stores the convolution itself, y (N, K, H-R+1, W-S+1): conv2d's
// `direct_fused`. Device pointers, the current stream (common/stream.hpp).
#pragma once

#include <cstdint>

#include "../common/activation.hpp"
#include "conv2d_pool_choices.hpp"
#include "nn.hpp"

namespace gpuopt::nn {

struct ConvPoolShape {
    std::int64_t N = 0, C = 0, H = 0, W = 0;  // input
    std::int64_t K = 0, R = 0, S = 0;         // filters
    std::int64_t pool = 2;                    // window side (and stride): 2, or 1 (no pooling)
    std::int64_t pooled_h() const { return (H - R + 1) / pool; }
    std::int64_t pooled_w() const { return (W - S + 1) / pool; }
};

// The launch the fused kernel makes for a shape (block tile, images and channels per block,
// shared memory); the planner is the host-side check too.
struct ConvPoolLaunch {
    int tile_p = 0, tile_q = 0;      // conv outputs per block tile (rows even, columns a multiple of 4)
    int images = 0;                  // images per block
    int channels_per_block = 0;      // output channels per block (multiple of 8)
    int channels_per_thread = 0;     // 8 (a 2 x 4 x 8 register tile) or 4 (short reductions)
    int chunk_channels = 0;          // input channels staged in shared memory at a time
    int threads = 0;
    std::int64_t shared_bytes = 0;
    std::int64_t blocks = 0;
};

// What the caller may fix (values of conv2d_pool_choices.hpp's kFused* tables); 0 picks per shape.
struct ConvPoolConfig {
    int channels_per_block = 0;
    int images = 0;
    int channels_per_thread = 0;
};

// Filter sides the fused kernel is compiled for.
constexpr int kConvPoolFilterSides[] = {3, 5};

// Validates the shape (InvalidArgument naming what is wrong) and returns the launch; no GPU needed.
ConvPoolLaunch conv2d_pool_plan(const ConvPoolShape& s, const ConvPoolConfig& cfg);

void conv2d_pool_fused(const void* x, InputType input_type, float input_divisor, const float* w,
                       const float* bias, float* y, const ConvPoolShape& s, Activation act, PoolKind pool,
                       const ConvPoolConfig& cfg);

// direct_smallc (conv2d_pool_smallc.cu): first layers, few input channels (C*R*S <= kSmallcMaxTaps). A block
// stages whole images and its maps' filters in shared memory once; a thread keeps a 4x4 output patch's input
// ((4+R-1) x (4+S-1) values) in registers, reused for every map (C = 1), and reads each map's weights by
// broadcast 16-byte shared loads; bias, activation and the pool in registers.
constexpr int kSmallcPatch = 4;          // a thread's patch side: 2x2 pooling windows whole inside it
constexpr int kSmallcMaxTaps = 100;      // C*R*S: the per-map reduction this kernel is for (C = 4 at 5x5)
constexpr int kSmallcMaxThreads = 256;   // block size bound (__launch_bounds__(256, 2): <= 128 registers; 288
                                         // threads cap them at 96 per SMSP's share, and the tanh kernels spill)
constexpr int kSmallcMaxMaps = 64;       // output maps a block stages filters for
constexpr std::int64_t kSmallcStageBudget = 100 * 1024;  // staged images + filters + table: two blocks an SM

struct SmallcLaunch {
    int images = 0;            // images a block stages
    int maps = 0;              // output maps a block computes (its filters staged)
    int patches = 0;           // 4x4 patches an image (the thread items: images * patches a block)
    int threads = 0;
    int rows = 0, pitch = 0;   // a staged input plane: rows x pitch floats (zero past the image)
    std::int64_t shared_bytes = 0;
    std::int64_t blocks = 0;
};

struct SmallcConfig {  // values of kSmallcImages, kSmallcMaps (conv2d_pool_choices.hpp)
    int images = 0;  // 0: per shape (the fewest idle lanes; see conv2d_pool_smallc.cu)
    int maps = 0;    // 0: per shape (all K up to 32; see conv2d_pool_smallc.cu)
};

SmallcLaunch conv2d_pool_smallc_plan(const ConvPoolShape& s, const SmallcConfig& cfg);

void conv2d_pool_direct_smallc(const void* x, InputType input_type, float input_divisor, const float* w,
                               const float* bias, float* y, const ConvPoolShape& s, Activation act, PoolKind pool,
                               const SmallcConfig& cfg);

// zero_skip (conv2d_pool_skip.cu): the same layer computed by scattering the input, a warp per (image, 4 output
// rows), lanes the output maps; a zero input value costs one warp-uniform test and no FMAs. The same bits as
// conv2d_pool_fused for finite weights. float32 input; compiled for (H, W, R, S) = (12, 12, 5, 5) and (8, 12, 5, 5),
// K <= 64, pool_size 2. The check throws InvalidArgument naming what is wrong; no GPU needed.
void conv2d_pool_skip_check(const ConvPoolShape& s);
void conv2d_pool_skip(const float* x, const float* w, const float* bias, float* y, const ConvPoolShape& s,
                      Activation act, PoolKind pool);

}  // namespace gpuopt::nn
