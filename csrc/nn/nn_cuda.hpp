// The layer ops on the GPU: device pointers, row-major float32, the current stream
// (common/stream.hpp) unless a launcher says otherwise. Same semantics as the CPU references (nn.hpp);
// every launcher checks its arguments before any CUDA call and every launch after it. Sizes are
// 64-bit and every kernel loops grid-stride, so any size that fits in memory runs. Where a
// launcher has limits that need no device, they are also a `<launcher>_check` (run by gpuopt
// before it copies anything).
//
// The variants, simple to fast (the ECE408 MNIST report's steps, then gpuopt's):
//   relu / tanh        cuda (float4 grid-stride)                          nn_elementwise.cu
//   max/avg_pool2d     basic (report Table 3, uncoalesced) -> coalesced     nn_pool.cu
//   fully_connected    basic -> tiled (report, 16x16) -> matmul (gpuopt's matmul_async), cublas
//                                                                         nn_fully_connected.cu
//   argmax             basic (report) -> warp -> streams (report's final design)   nn_argmax.cu
//   softmax            cuda (a lane group per row)                        nn_softmax.cu
#pragma once

#include <cstdint>

#include "../common/activation.hpp"
#include "nn.hpp"

namespace gpuopt::nn {

// ------------------------------------------------------------------------- elementwise
// y[i] = act(x[i]) for n elements (x == y allowed): 16-byte loads and stores where x and y are
// both 16-byte aligned, 4-byte ones otherwise (offset views of other libraries' arrays).
void activation_cuda(const float* x, float* y, std::int64_t n, Activation act);

// ------------------------------------------------------------------------- pooling
// Non-overlapping size x size windows (stride = size) of planes x[planes][H][W] into
// y[planes][H/size][W/size], trailing rows/columns dropped; max: a NaN in a window gives NaN;
// avg: the window summed in the reference's order, so results equal the reference bit for bit.
// basic: one thread per output with consecutive threads on consecutive planes (H*W floats apart:
// the uncoalesced mapping the report fixed), the output itself the accumulator (size*size
// global writes per output, as before the report's accumulator). coalesced: consecutive threads
// on consecutive output columns, the window in a register, one write.
void pool2d_basic(const float* x, float* y, std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t size,
                  PoolKind kind);
void pool2d_coalesced(const float* x, float* y, std::int64_t planes, std::int64_t H, std::int64_t W,
                      std::int64_t size, PoolKind kind);

// ------------------------------------------------------------------------- fully connected
// y[N][O] = act(x[N][I] @ w[I][O] + bias[O]); bias may be null. Float accumulation.
// basic: one thread per output, every operand from global memory (report Table 3).
void fully_connected_basic(const float* x, const float* w, const float* bias, float* y, std::int64_t N,
                           std::int64_t I, std::int64_t O, Activation act);
// tiled: the report's 16x16 shared-memory tiled product, bias and activation in its epilogue.
void fully_connected_tiled(const float* x, const float* w, const float* bias, float* y, std::int64_t N,
                           std::int64_t I, std::int64_t O, Activation act);
// matmul: gpuopt's matmul_async (tile and split-k "auto") into y, then one bias + activation pass
// (skipped when there is neither). Its limits: N, I, O < 2^31 - 1024 (fully_connected_matmul_check).
void fully_connected_matmul(const float* x, const float* w, const float* bias, float* y, std::int64_t N,
                            std::int64_t I, std::int64_t O, Activation act);
void fully_connected_matmul_check(std::int64_t N, std::int64_t I, std::int64_t O);
// cublas: cuBLAS SGEMM in strict FP32 (no TF32), then the same bias + activation pass.
// Its limits: N, I, O < 2^31 (cuBLAS's int dimensions; fully_connected_cublas_check).
void fully_connected_cublas(const float* x, const float* w, const float* bias, float* y, std::int64_t N,
                            std::int64_t I, std::int64_t O, Activation act);
void fully_connected_cublas_check(std::int64_t N, std::int64_t I, std::int64_t O);

// ------------------------------------------------------------------------- argmax, softmax
// The row kernels of warp, streams and softmax index columns with int (a lane's column plus its
// stride must not overflow): cols < 2^31 - 1024.
constexpr std::int64_t kRowColumnLimit = (1LL << 31) - 1024;
void row_op_check(std::int64_t rows, std::int64_t cols, const char* what);

// out[i] = index of the largest x[i][:], first on ties, the first NaN if any (as numpy.argmax).
// basic: one thread per row, the reference's loop (report). warp: a group of 4..32 lanes per row
// (several rows per warp when rows are short; a block of 256 threads per row when they are long),
// shuffles carrying (value, index) under the same rules.
void argmax_basic(const float* x, std::int64_t* out, std::int64_t rows, std::int64_t cols);
void argmax_warp(const float* x, std::int64_t* out, std::int64_t rows, std::int64_t cols);
// streams (the report's final design): with host_out, rows are split in two halves, each half's
// warp kernel queued on its own stream and followed there by an async copy of that half's indices
// into a cached pinned buffer, so the first half's copy overlaps the second half's kernel; the
// streams wait for the work queued before on the current stream; returns once host_out[0..rows) is filled
// (out is the device scratch). Without host_out (nullptr: the caller wants a device array) it is
// argmax_warp on the current stream.
void argmax_streams(const float* x, std::int64_t* out, std::int64_t* host_out, std::int64_t rows,
                    std::int64_t cols);

// y[i][:] = exp(x[i][:] - max) / sum(exp(x[i][:] - max)), float arithmetic; a NaN or +inf in a
// row (or a row of -inf) gives a NaN row, as the reference.
void softmax_cuda(const float* x, float* y, std::int64_t rows, std::int64_t cols);

}  // namespace gpuopt::nn
