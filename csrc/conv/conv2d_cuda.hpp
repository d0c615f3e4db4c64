// conv2d on the GPU: device pointers, NCHW input, KCRS filters, NKPQ output, float32, the current stream
// (common/stream.hpp).
// Same semantics as conv2d_cpu (conv2d.hpp): y = act(conv(x, w) + bias), bias nullable.
// Launchers validate the shape and check every CUDA call and launch.
#pragma once

#include <string>

#include "../common/activation.hpp"
#include "conv2d.hpp"
#include "conv2d_choices.hpp"

namespace gpuopt::conv {

// "basic": one thread per output element y[n][k][p][q] (the starting kernel of the CS6235
// and ECE408 reports), q fastest so a warp writes consecutive outputs; bias and activation
// fused. Any shape, stride and padding.
void conv2d_basic(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                  Activation act);

#if defined(GPUOPT_WITH_CUDNN)
// algorithms: which cuDNN algorithms the search may pick (kCudnnAlgorithms, conv2d_choices.hpp; fast is
// faster on some shapes, and what a framework's benchmark mode would pick).
// cuDNN forward in strict FP32 (no TF32), the algorithm found once per shape and cached;
// bias and activation by a small epilogue kernel when asked for.
void conv2d_cudnn(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                  Activation act, CudnnAlgorithms algorithms);

// Name of the cuDNN algorithm conv2d_cudnn uses for this shape (e.g. "IMPLICIT_PRECOMP_GEMM");
// finds and caches it first if this shape has not run yet.
std::string conv2d_cudnn_algorithm(const Conv2dShape& s, CudnnAlgorithms algorithms);
#endif

}  // namespace gpuopt::conv

// ================================================================ CS6235 report variants
// (conv2d_cs6235.cu). One templated kernel family: a 1-D grid, each thread one output or
// an unrolled group of outputs (n_unroll images x k_unroll maps at one (p, q)); see the .cu
// for the mapping, loop orders and the shared-memory tiling.
namespace gpuopt::conv {

enum class Cs6235Variant : int { Plain = 0, Reorder, UnrollK, UnrollC, UnrollNK, Shared, General };

// What the caller asks for (every field; no defaults here: the registry's come from conv2d_choices.hpp).
// block_size: kCs6235BlockSizes. unroll: UnrollK kCs6235UnrollK maps per thread; UnrollC kCs6235UnrollC
// channels per step (0: none); must be 0 for the others. loop_order: UnrollK's choice; Crs for the others.
struct Cs6235Config {
    Cs6235Variant variant;
    int block_size;
    int unroll;
    Cs6235LoopOrder loop_order;
};

// The instantiation a config runs on a shape (General switches on the shape).
struct Cs6235Launch {
    bool map_n_before_k = false;  // false: q, p, k, n (q fastest); true: q, p, n, k
    int k_unroll = 1, n_unroll = 1, c_unroll = 1;
    Cs6235LoopOrder loop_order = Cs6235LoopOrder::Crs;
    bool shared = false;
    std::int64_t tile_channels = 0;  // shared: input channels per shared-memory tile
    std::int64_t shared_bytes = 0;   // shared: dynamic shared memory per block
};

// The general variant's switch (see conv2d_cs6235.cu): n and k unrolled 4 x 4 when N >= kGeneralMinImages and
// K >= kGeneralMinMaps; else k and c unrolled 2 x 8 when C >= kGeneralMinChannels; else k unrolled by 2.
constexpr std::int64_t kGeneralMinImages = 8;
constexpr std::int64_t kGeneralMinMaps = 4;
constexpr std::int64_t kGeneralMinChannels = 256;

Cs6235Variant cs6235_variant_from_string(const std::string& name);  // "plain", ..., "general"

// Validates shape and config (InvalidArgument), then returns the plan; needs no GPU (the variants' check).
Cs6235Launch conv2d_cs6235_plan(const Conv2dShape& s, const Cs6235Config& cfg);

// y = act(conv(x, w) + bias) with the CS6235 variant cfg; any shape, stride, padding.
// Rejects (InvalidArgument) bad configs, and block sizes or shared-memory tiles the GPU
// cannot run, before launching.
void conv2d_cs6235(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                   Activation act, const Cs6235Config& cfg);

}  // namespace gpuopt::conv
// ================================================================ end of CS6235 section

// ================================================================ ECE408 Fashion-MNIST report variants
// (conv2d_ece408.cu; see its header comment for the kernels). Same semantics as conv2d_basic;
// each launcher validates shape and parameters (InvalidArgument) before anything runs.
namespace gpuopt::conv {

// unroll_constmem keeps the whole filter bank in __constant__ memory: K*C*R*S*4 bytes at most this.
constexpr std::int64_t kConstantWeightBytes = 65536;

// Each launcher's host-side checks (shape and parameters; no CUDA call, no pointers), which the launcher runs
// first: InvalidArgument for what it cannot run. The shared-memory limit of the GPU is checked at launch.
void conv2d_tiled_check(const Conv2dShape& s, int tile_width);
void conv2d_tiled_unrolled_check(const Conv2dShape& s, int tile_width);
void conv2d_tiled_channels_check(const Conv2dShape& s, int tile_width, int channels_per_block);
void conv2d_tiled_corner_turn_check(const Conv2dShape& s, int tile_width);
void conv2d_unroll_constmem_check(const Conv2dShape& s);

// Shared-memory tiled kernels: a tile_width x tile_width block of outputs per (tile, k, n), the input
// tile ((T-1)*u + R) x ((T-1)*v + S) and the filters staged in shared memory per input channel.
// tile_width: kEce408TileWidths (conv2d_choices.hpp); the tile is shrunk to the output map when larger.
// Rejected up front: more than 1024 threads per block, a tile that exceeds the GPU's shared memory.
void conv2d_tiled(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                  Activation act, int tile_width);
// __restrict__ and fully unrolled filter loops (1x1, 3x3, 5x5, 7x7; generic loops otherwise).
void conv2d_tiled_unrolled(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                           Activation act, int tile_width);
// A third block dimension of channels_per_block threads over input channels, partial sums added to y
// with atomicAdd: y is set to the bias (or 0) first and the activation runs after all channels (two
// extra small kernels); float atomics make the result nondeterministic in the last bits.
// channels_per_block: kEce408ChannelsPerBlock; T*T*channels_per_block <= 1024.
void conv2d_tiled_channels(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                           Activation act, int tile_width, int channels_per_block);
// tiled_unrolled with coalesced, corner-turned (tap-major) loads of the filters of 32 channels at a time.
void conv2d_tiled_corner_turn(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                              Activation act, int tile_width);
// Unrolled weights (K x C*R*S) in constant memory times the input unrolled on the fly. Filter banks over
// kConstantWeightBytes are rejected; concurrent calls from several host threads are serialised (one
// constant bank per process).
void conv2d_unroll_constmem(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                            Activation act);

}  // namespace gpuopt::conv
// ================================================================ end of ECE408 section

// ================================================================ GEMM-based variants
// (conv2d_gemm.cu; its header comment has the GEMM view, the kernels and the limits). The convolution as
// Y[K][N*P*Q] = W[K][C*R*S] x X_unrolled[C*R*S][N*P*Q]: W's KCRS memory is already the unrolled mask, row
// crs = (c*R + r)*S + s; column npq = (n*P + p)*Q + q; X_unrolled[crs][npq] = x[n][c][p*u - ph + r][q*v - pw + s]
// (zero in the padding). Each launcher validates shape and parameters (InvalidArgument) before anything runs.
#include <vector>

#include "../common/kernel_info.hpp"

namespace gpuopt::conv {

// The unroll variant's default scratch budget: X_unrolled and Y' of one batched GEMM.
constexpr std::int64_t kUnrollScratchBytes = std::int64_t{1} << 30;

// "unroll" (ECE408 Fashion-MNIST, Optimization 1): an im2col kernel writes X_unrolled (pool scratch), ONE
// gpuopt matmul (gemm: "async", "warptile", "shared" or "naive", the C++ launcher) computes Y' = W x
// X_unrolled, and a permute kernel writes y[n][k][p][q] = act(Y'[k][npq] + bias[k]). As many images per GEMM
// as fit scratch_limit_bytes of scratch ((C*R*S + K) * P*Q floats per image), at least one: the whole batch
// in one GEMM unless it does not fit (then chunks of images, one GEMM each). With one image per GEMM, Y' is
// y itself (same layout) and the epilogue runs in place, only when there is a bias or an activation.
void conv2d_unroll(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                   Activation act, UnrollGemm gemm, std::int64_t scratch_limit_bytes);
// Images per GEMM conv2d_unroll uses for this shape and budget (host only; validates like the launcher).
std::int64_t conv2d_unroll_chunk_images(const Conv2dShape& s, std::int64_t scratch_limit_bytes);

// Int indices: N*P*Q (implicit variants only), C*R*S, K, P*Q, H + 2ph and W + 2pw must be below this.
constexpr std::int64_t kGemmIndexLimit = (std::int64_t{1} << 31) - 1024;

// Each launcher's host-side checks (shape and parameters; no CUDA call, no pointers), which it runs first.
void conv2d_unroll_check(const Conv2dShape& s, UnrollGemm gemm, std::int64_t scratch_limit_bytes);
void conv2d_implicit_gemm_check(const Conv2dShape& s, int tile);
void conv2d_implicit_gemm_fast_check(const Conv2dShape& s, FastTile tile);

// "implicit_gemm" (ECE408 MNIST): the shared-memory tiled matrix multiply (tile x tile threads, kImplicitGemmTiles)
// of W and X_unrolled where each X tile is gathered from x by index (no unrolled buffer); bias and activation
// in the store. Int indices: N*P*Q, C*R*S, K, P*Q, H + 2ph and W + 2pw must be < 2^31 - 1024 and C*H*W < 2^31
// (unroll: the same but N*P*Q, which it splits), else InvalidArgument.
void conv2d_implicit_gemm(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                          Activation act, int tile);

// "implicit_gemm_fast": the matmul ladder's warp-tiled kernel (WarpTiling block/warp/thread tiles, fragment
// loads and FMA loop of matmul_warptile.cuh) with tile loaders for the convolution: W tiles by 16-byte loads
// (C*R*S % 4 == 0 and w 16-byte aligned; 4-byte cp.async otherwise), X tiles gathered by 4-byte cp.async
// with zero fill. tile: an index into kFastTiles (conv2d_choices.hpp). Same index limits as implicit_gemm.
void conv2d_implicit_gemm_fast(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                               Activation act, FastTile tile);

// "implicit_gemm_tf32x3" (conv2d_tf32x3.cu): the implicit GEMM on the TF32 tensor cores at FP32 accuracy (3xTF32,
// mma.sync), one whole staged image per block at a time, for K <= 32 output maps. The check validates and returns
// the shared memory a block needs (the whole padded image, split, must fit the GPU's opt-in limit).
// Its map tiles (8 maps each: 1, 2 or 4) and shared memory for a layer: x hi and lo planes [C][Hp][Wp] (Hp, Wp
// padded; to a multiple of 4 floats), the filters' hi and lo [taps to a multiple of 8][8 x map tiles] and the tap
// offsets [taps to 8]. Host arithmetic: the check holds it to the GPU's opt-in limit, and conv2d auto's heuristic
// reads it from _core (no GPU needed).
inline int conv2d_implicit_gemm_tf32x3_map_tiles(std::int64_t K) { return K <= 8 ? 1 : K <= 16 ? 2 : 4; }
inline std::int64_t conv2d_implicit_gemm_tf32x3_shared_bytes(std::int64_t C, std::int64_t Hp, std::int64_t Wp,
                                                              std::int64_t taps, std::int64_t K) {
    const std::int64_t taps8 = (taps + 7) / 8 * 8;
    return 4 * (2 * ((C * Hp * Wp + 3) / 4 * 4) + 2 * taps8 * 8 * conv2d_implicit_gemm_tf32x3_map_tiles(K) + taps8);
}
std::int64_t conv2d_implicit_gemm_tf32x3_check(const Conv2dShape& s);
void conv2d_implicit_gemm_tf32x3(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                                 Activation act);
// Registers and local memory of its three instantiations (1, 2 and 4 n8 tiles of maps).
std::vector<KernelInfo> conv2d_tf32x3_kernel_info();

// "pointwise_tf32x3" (conv2d_pointwise_sm90a.cu): a 1x1 convolution (any stride, no padding, one group) as one
// GEMM on Hopper's warpgroup MMA in 3xTF32 (matmul's tf32x3_wgmma product; the batch's pixels are its columns,
// gathered by the operand split, the output written into y's planes with bias and activation). Hopper only (the
// launcher says so elsewhere). The check validates (host only).
void conv2d_pointwise_tf32x3_check(const Conv2dShape& s);
void conv2d_pointwise_tf32x3(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                             Activation act);

// "unroll_tf32x3" (conv2d_unroll_tf32x3_sm90a.cu): any plain convolution as GEMMs on Hopper's warpgroup MMA in
// 3xTF32: w (K x C*R*S) times the unrolled input, written by the operand split as TF32 hi and lo, in chunks of
// images whose split input fits scratch_limit_bytes (at least one image a chunk); the output into y's planes
// with bias and activation. Hopper only. The check validates (host only).
std::int64_t conv2d_unroll_tf32x3_chunk_images(const Conv2dShape& s, std::int64_t scratch_limit_bytes);
void conv2d_unroll_tf32x3_check(const Conv2dShape& s, std::int64_t scratch_limit_bytes);
void conv2d_unroll_tf32x3(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                          Activation act, std::int64_t scratch_limit_bytes);

// "implicit_gemm_tf32x3_wgmma" (conv2d_implicit_wgmma_sm90a.cu): any plain convolution as ONE GEMM on Hopper's
// warpgroup MMA in 3xTF32, w (K x C*R*S) times the input windows gathered inside the product (no unrolled buffer, no
// chunks); the output into y's planes with bias and activation. Hopper only. The check validates (host only).
void conv2d_implicit_gemm_tf32x3_wgmma_check(const Conv2dShape& s);
void conv2d_implicit_gemm_tf32x3_wgmma(const float* x, const float* w, const float* bias, float* y,
                                       const Conv2dShape& s, Activation act);

// Registers, shared memory and local memory (stack + spills) of every kernel instantiation in conv2d_gemm.cu
// (the unroll variant's matmul kernels excepted: matmul_kernel_info has those).
std::vector<KernelInfo> conv2d_gemm_kernel_info();

}  // namespace gpuopt::conv
// ================================================================ end of GEMM-based section

// ================================================================ direct_regblock (conv2d_direct.cu; its header
// comment has the kernel). gpuopt's register-blocked direct convolution for short filter windows (small C*R*S):
// a block stages the input rows of a run of output pixels of one image (all channels that fit, else chunks) and
// its maps' filters in shared memory; each thread computes pixels x k_tile outputs in registers.
namespace gpuopt::conv {

// What conv2d_direct_regblock runs for a shape (host only; validates like the launcher).
struct DirectRegblockLaunch {
    int k_tile = 16;                     // maps per thread (auto resolved)
    int pixels = 4;                      // output pixels per thread (auto resolved)
    std::int64_t runs = 0;               // runs of <= 128 * pixels output pixels per image (blocks along x per image)
    std::int64_t segments = 0;           // 0: runs cross rows (Q < 128 * pixels); else runs per output row
    std::int64_t maps_per_block = 0;     // a multiple of k_tile
    std::int64_t map_groups = 0;         // blocks along y
    std::int64_t channels_per_chunk = 0;  // input channels staged at once
    std::int64_t input_buffers = 1;      // 1: all channels staged once; 2: chunks double-buffered
    std::int64_t rstep = 0, rows = 0;    // staged rows per output row, staged rows
    std::int64_t cw = 0, phases = 0, pitch = 0;  // slots per column phase, phases kept, floats per staged row
    std::int64_t shared_bytes = 0;       // dynamic shared memory per block
};

// k_tile, pixels: values of kDirectKTiles, kDirectPixels (conv2d_choices.hpp; 0: auto, resolved per shape).
// multiprocessors: the GPU's, for the maps-per-block choice.
DirectRegblockLaunch conv2d_direct_regblock_plan(const Conv2dShape& s, int k_tile, int pixels, int multiprocessors);

// y = act(conv(x, w) + bias); any shape, stride and padding whose single staged channel fits the GPU's shared
// memory (else InvalidArgument naming the limit), positions inside an image < 2^31.
void conv2d_direct_regblock(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                            Activation act, int k_tile, int pixels);

// Registers, shared memory (at a 32 KiB stage), local memory and occupancy of every instantiation.
std::vector<KernelInfo> conv2d_direct_kernel_info();

}  // namespace gpuopt::conv
// ================================================================ end of direct_regblock section

// ================================================================ depthwise (conv2d_depthwise.cu and
// conv2d_depthwise_rows.cu; their header comments have the kernels). groups = C: each input channel with its own
// K / C filters. Memory-bound. The rows kernel (square 3x3, 5x5, 7x7 filters, stride 1 or 2, no dilation) stages
// whole input rows by 16-byte loads; the patch kernel (any filter, stride, padding and dilation) stages the input
// patch of an output tile of 1, 2 or 4 planes.
namespace gpuopt::conv {

enum class DepthwiseTileKind : int { Tile32 = 32, Tile16 = 16, Tile8 = 8 };

// What conv2d_depthwise runs: the rows kernel, or the patch kernel with `tile`.
struct DepthwiseChoice {
    bool rows = false;
    DepthwiseTileKind tile = DepthwiseTileKind::Tile32;
};

// Whether the rows kernel takes a depthwise layer's filter, stride and dilation: square 3x3, 5x5 or 7x7 filters,
// stride 1 or 2 along both axes, no dilation (its launcher's rule; auto reads it through gpuopt._core).
inline bool conv2d_depthwise_rows_takes(std::int64_t R, std::int64_t S, std::int64_t stride_h, std::int64_t stride_w,
                                        std::int64_t dilation_h, std::int64_t dilation_w) {
    return R == S && (R == 3 || R == 5 || R == 7) && stride_h == stride_w && (stride_h == 1 || stride_h == 2) &&
           dilation_h == 1 && dilation_w == 1;
}

// One of a rows-kernel block's two buffers, in floats: a staged run of `staged` floats (shifted by up to 3 to keep
// its 16-byte copies aligned), then `taps` taps, each part padded to 16 bytes.
inline std::int64_t conv2d_depthwise_rows_buffer_floats(std::int64_t staged, std::int64_t taps) {
    return (staged + 3 + 3) / 4 * 4 + (taps + 3) / 4 * 4;
}

// The rows kernel's dynamic shared memory at its narrowest unit, 4 output rows of one plane (H x W input planes,
// an R x R filter at `stride`, M maps a channel): two buffers of those input rows and the taps. Its launcher
// narrows bands to stay within 32 KiB a buffer down to that; past the GPU's opt-in limit the kernel does not take
// the layer. auto reads it (gpuopt._core).
inline std::int64_t conv2d_depthwise_rows_min_shared_bytes(std::int64_t H, std::int64_t W, std::int64_t R,
                                                          std::int64_t stride, std::int64_t M) {
    const std::int64_t rows = H < 3 * stride + R ? H : 3 * stride + R;
    return 2 * 4 * conv2d_depthwise_rows_buffer_floats(rows * W, M * R * R);
}

// Validates like the launcher (groups = C, 32-bit positions inside a plane; kernel Rows on a layer it does not
// take, or with a patch tile, is InvalidArgument) and says what runs (kernel Auto: rows where it takes the layer
// and tile is 0 (auto), else the patch kernel; tile 0: by the plane's size). Host only; asks the device's limits.
DepthwiseChoice conv2d_depthwise_check(const Conv2dShape& s, DepthwiseKernel kernel, int tile);

// y = act(conv(x, w) + bias) for groups = C (K a multiple of C); InvalidArgument where the patch kernel's staged
// patch exceeds the GPU's shared memory (large dilated filters with large strides).
void conv2d_depthwise(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                      Activation act, DepthwiseKernel kernel, int tile);

// Registers, shared memory (at 16 KiB), local memory and occupancy of each patch tile's kernel, then of each rows
// kernel (filter and stride).
std::vector<KernelInfo> conv2d_depthwise_kernel_info();

}  // namespace gpuopt::conv
// ================================================================ end of depthwise section

// ================================================================ winograd (conv2d_winograd.cu; its header comment has
// the kernel). Fused Winograd F(m x m, r x r): stride 1, 3x3 or 5x5 filters, any padding; transforms from
// gpuopt/conv/winograd.py (winograd_transforms.cuh, generated). Optionally a 2x2 pool fused after the output
// transform (gpuopt.nn.conv2d_pool's winograd variant): y is then (N, K, P/2, Q/2).
namespace gpuopt::conv {

enum class WinogradPool : int { None = 0, Max = 1, Average = 2 };

// m = 0 ("auto") runs this output tile side: F(4,5) needs 6.25x fewer multiplies than direct, F(4,3) 4x.
constexpr int kWinogradDefaultTile = 4;

// The per-point products (kWinogradProducts in conv2d_choices.hpp): FFMA, or 3xTF32 on the tensor cores (F(4x4,
// 5x5) only; FP32-level error; with C <= 32 the resident-V block, winograd_resident.cuh).

// Host-side checks (InvalidArgument naming why: stride, filter side, m, products); returns the tile side m it runs.
int conv2d_winograd_check(const Conv2dShape& s, int m, WinogradPool pool, WinogradProducts products);

// y = pool(act(conv(x, w) + bias)); m: kWinogradTiles (0: auto).
void conv2d_winograd(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                     Activation act, int m, WinogradPool pool, WinogradProducts products);

// Registers, shared memory and local memory of every instantiation.
std::vector<KernelInfo> conv2d_winograd_kernel_info();

}  // namespace gpuopt::conv
// ================================================================ end of winograd section
