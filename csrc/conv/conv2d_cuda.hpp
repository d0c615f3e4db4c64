// conv2d on the GPU: device pointers, NCHW input, KCRS filters, NKPQ output, float32, stream 0.
// Same semantics as conv2d_cpu (conv2d.hpp): y = act(conv(x, w) + bias), bias nullable.
// Launchers validate the shape and check every CUDA call and launch.
#pragma once

#include <string>

#include "../common/activation.hpp"
#include "conv2d.hpp"

namespace gpuopt::conv {

// "basic": one thread per output element y[n][k][p][q] (the starting kernel of the CS6235
// and ECE408 reports), q fastest so a warp writes consecutive outputs; bias and activation
// fused. Any shape, stride and padding.
void conv2d_basic(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                  Activation act);

#if defined(GPUOPT_WITH_CUDNN)
// Which cuDNN algorithms the search may pick. Precise: the GEMM family and DIRECT, which
// sum products like the reference does (errors ~1e-7 relative). Any: also FFT and Winograd,
// whose transforms lose accuracy on larger filters (seen on the H200: 3e-4 relative on a
// 5x5 layer); faster on some shapes, and what a framework's benchmark mode would pick.
enum class CudnnAlgorithms : int { Precise = 0, Any = 1 };
CudnnAlgorithms cudnn_algorithms_from_string(const std::string& name);

// cuDNN forward in strict FP32 (no TF32), the algorithm found once per shape and cached;
// bias and activation by a small epilogue kernel when asked for.
void conv2d_cudnn(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                  Activation act, CudnnAlgorithms algorithms = CudnnAlgorithms::Precise);

// Name of the cuDNN algorithm conv2d_cudnn uses for this shape (e.g. "IMPLICIT_PRECOMP_GEMM");
// finds and caches it first if this shape has not run yet.
std::string conv2d_cudnn_algorithm(const Conv2dShape& s, CudnnAlgorithms algorithms = CudnnAlgorithms::Precise);
#endif

}  // namespace gpuopt::conv

// ================================================================ CS6235 report variants
// (conv2d_cs6235.cu). One templated kernel family: a 1-D grid, each thread one output or
// an unrolled group of outputs (n_unroll images x k_unroll maps at one (p, q)); see the .cu
// for the mapping, loop orders and the shared-memory tiling.
namespace gpuopt::conv {

enum class Cs6235Variant : int { Plain = 0, Reorder, UnrollK, UnrollC, UnrollNK, Shared, General };
enum class Cs6235LoopOrder : int { Crs = 0, Rsc = 1 };

// What the caller asks for. block_size: 32..1024, a multiple of 32. unroll: UnrollK 2, 4, 8
// or 16 maps per thread; UnrollC 0 (none), 2, 4, 8 or 16 channels per step; ignored (must
// be 0) by the others. loop_order: UnrollK only (the others have a fixed order).
struct Cs6235Config {
    Cs6235Variant variant = Cs6235Variant::Plain;
    int block_size = 128;
    int unroll = 0;
    Cs6235LoopOrder loop_order = Cs6235LoopOrder::Crs;
};

// The instantiation a config runs on a shape (General switches on the shape).
struct Cs6235Plan {
    bool map_n_before_k = false;  // false: q, p, k, n (q fastest); true: q, p, n, k
    int k_unroll = 1, n_unroll = 1, c_unroll = 1;
    Cs6235LoopOrder loop_order = Cs6235LoopOrder::Crs;
    bool shared = false;
    std::int64_t tile_channels = 0;  // shared: input channels per shared-memory tile
    std::int64_t shared_bytes = 0;   // shared: dynamic shared memory per block
};

Cs6235Variant cs6235_variant_from_string(const std::string& name);  // "plain", ..., "general"
Cs6235LoopOrder cs6235_loop_order_from_string(const std::string& name);  // "crs" or "rsc"

// Validates shape and config (InvalidArgument), then returns the plan; needs no GPU.
Cs6235Plan conv2d_cs6235_plan(const Conv2dShape& s, const Cs6235Config& cfg);

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

// Shared-memory tiled kernels: a tile_width x tile_width block of outputs per (tile, k, n), the input
// tile ((T-1)*u + R) x ((T-1)*v + S) and the filters staged in shared memory per input channel.
// tile_width: T*T <= 1024 (the report sweeps 4..32); the tile is shrunk to the output map when larger.
// Rejected up front: more than 1024 threads per block, a tile that exceeds the GPU's shared memory.
void conv2d_tiled(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                  Activation act, int tile_width = 16);
// __restrict__ and fully unrolled filter loops (1x1, 3x3, 5x5, 7x7; generic loops otherwise).
void conv2d_tiled_unrolled(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                           Activation act, int tile_width = 16);
// A third block dimension of channels_per_block threads over input channels, partial sums added to y
// with atomicAdd: y is set to the bias (or 0) first and the activation runs after all channels (two
// extra small kernels); float atomics make the result nondeterministic in the last bits.
// T*T*channels_per_block <= 1024.
void conv2d_tiled_channels(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                           Activation act, int tile_width = 16, int channels_per_block = 2);
// tiled_unrolled with coalesced, corner-turned (tap-major) loads of the filters of 32 channels at a time.
void conv2d_tiled_corner_turn(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                              Activation act, int tile_width = 16);
// Unrolled weights (K x C*R*S) in constant memory times the input unrolled on the fly. Filter banks over
// kConstantWeightBytes are rejected; concurrent calls from several host threads are serialised (one
// constant bank per process).
void conv2d_unroll_constmem(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                            Activation act);

}  // namespace gpuopt::conv
// ================================================================ end of ECE408 section
