"""conv2d as a matrix product: the GEMM-based variants.

All three compute ``Y[K][N*P*Q] = W[K][C*R*S] x X_unrolled[C*R*S][N*P*Q]``: W's (K, C, R, S) memory
already is the unrolled filter matrix, and column ``(n, p, q)`` of ``X_unrolled`` holds the input window
of output pixel (p, q) of image n (zeros where it reaches into the padding). The kernels are in
csrc/conv/conv2d_gemm.cu.

* ``unroll`` -- the ECE408 Fashion-MNIST report's Optimization 1 (explicit unrolling). The report used
  three kernels around its multiply; here an im2col kernel writes ``X_unrolled`` into scratch memory from
  gpuopt's pool, ONE gpuopt matmul (``gemm``: the async, warptile, shared or naive kernel of the matmul
  ladder, called in C++) multiplies, and a permute kernel writes ``y[n][k][p][q]`` with bias and
  activation. The whole batch goes through one GEMM when its scratch, ``(C*R*S + K) * N*P*Q`` floats, fits
  1 GiB (``kernel_limits()["conv2d_unroll_scratch_bytes"]``); otherwise the batch is split into chunks of
  as many images as fit (at least one image, even when one image alone needs more; see
  :func:`unroll_chunk_images`). With one image per GEMM the matmul writes ``y`` directly.
* ``implicit_gemm`` -- the ECE408 MNIST report's "unrolling by index": a shared-memory tiled matrix
  multiply (``tile`` x ``tile`` threads) whose X tiles are gathered from x on the fly; no unrolled buffer.
* ``implicit_gemm_fast`` -- gpuopt's: the matmul ladder's warp-tiled kernel (block, warp and 8x8 / 8x4
  thread tiles, its fragment loads and FMA loop) with convolution tile loaders: W tiles by 16-byte loads
  (C*R*S a multiple of 4 and w 16-byte aligned; 4-byte asynchronous copies otherwise), X tiles gathered by
  4-byte asynchronous copies, double-buffered.

Caveats a caller can see: the implicit kernels index with 32-bit ints, so N*P*Q, C*R*S and K must be
below 2**31 - 1024 (``kernel_limits()["conv2d_gemm_index_limit"]``) and an image (C*H*W) below 2**31
elements (split a larger batch); ``unroll`` has the same limits except N*P*Q (it chunks the batch). Such
shapes are rejected with ValueError before anything is copied to the device. All three are deterministic.
"""

from __future__ import annotations

from .._ext import cuda_host_module, kernel_choices
from ..registry import Param, register
from .launch import run_gpu
from .problem import check_shapes

__all__ = ["GEMMS", "TILES", "FAST_TILES", "unroll_chunk_images"]

#: The matmul kernels ``unroll`` can multiply with (the matmul ladder's variants of the same names): the FFMA
#: kernels, and the 3xTF32 tensor-core ones (FP32-level error; ``tf32x3_wgmma`` on Hopper GPUs only).
GEMMS = kernel_choices()["conv2d/unroll/gemm"]["allowed"]  # csrc/conv/conv2d_choices.hpp
#: ``implicit_gemm``'s tile (tile x tile threads per block).
TILES = kernel_choices()["conv2d/implicit_gemm/tile"]["allowed"]  # csrc/conv/conv2d_choices.hpp
#: ``implicit_gemm_fast``'s block tiles, "BMxBNxBK": output maps x output pixels x filter taps per k-step.
FAST_TILES = kernel_choices()["conv2d/implicit_gemm_fast/tile"]["allowed"]  # csrc/conv/conv2d_choices.hpp

_GEMM = dict(needs_cuda=True, kernel="csrc/conv/conv2d_gemm.cu", test="tests/conv/test_gpu_gemm.py")


def unroll_chunk_images(x_shape, w_shape, stride=1, padding=0, scratch_limit_bytes: int | None = None) -> int:
    """Images that share one GEMM in ``unroll``: the launcher's rule, asked of the compiled module (host only,
    needs a CUDA build, not a GPU).

    As many as fit ``scratch_limit_bytes`` (default: the launcher's budget) at ``(C*R*S + K) * P*Q`` floats
    per image, at least 1, at most N, and never more than 2**31 - 1025 GEMM columns.
    """
    (n, c, h, w), (k, _, r, s), (u, v), (ph, pw) = check_shapes(x_shape, w_shape, stride, padding)
    cuda = cuda_host_module("gpuopt.conv.gemm.unroll_chunk_images")
    shape = cuda.Conv2dShape(n, c, h, w, k, r, s, u, v, ph, pw)
    if scratch_limit_bytes is None:
        return cuda.conv2d_unroll_chunk_images(shape)
    return cuda.conv2d_unroll_chunk_images(shape, scratch_limit_bytes=scratch_limit_bytes)


register("conv2d", "unroll",
         description="explicit unrolling: im2col kernel into pool scratch, ONE gpuopt matmul "
                     "W[K][C*R*S] x X_unrolled[C*R*S][N*P*Q] (chunks of images past 1 GiB of scratch), permute + "
                     "bias + activation kernel (the report used three kernels around its multiply)",
         report="ece408-fashion", **_GEMM,
         params=(Param.from_kernels("conv2d/unroll/gemm",
                       "the matmul ladder's kernel that multiplies (called in C++ at its default parameters); "
                       "async: the fastest"),))(run_gpu)

register("conv2d", "implicit_gemm",
         description="implicit GEMM: shared-memory tiled matrix multiply (tile x tile threads) of W and the "
                     "unrolled input, each X tile gathered from x by index (no unrolled buffer); bias and "
                     "activation in the store",
         report="ece408-mnist", **_GEMM,
         params=(Param.from_kernels("conv2d/implicit_gemm/tile",
                       "side of the output tile and the k-step (tile x tile threads per block; 16: the report's "
                       "TILE_WIDTH)"),))(run_gpu)

register("conv2d", "implicit_gemm_tf32x3",
         description="implicit GEMM on the TF32 tensor cores at FP32 accuracy (3xTF32: operands split into TF32 hi "
                     "and lo, lo*hi + hi*lo + hi*hi by mma.sync, every 32 taps added in FP32): one whole image "
                     "staged split in shared memory per block, A fragments gathered from it by tap offset; for "
                     "K <= 32 output maps (Fashion-MNIST conv2)",
         report="gpuopt", needs_cuda=True, kernel="csrc/conv/conv2d_tf32x3.cu", test="tests/conv/test_gpu_gemm.py")(
    run_gpu)

register("conv2d", "pointwise_tf32x3",
         description="1x1 convolutions (any stride, no padding, one group) as ONE GEMM on Hopper's warpgroup MMA at "
                     "FP32 accuracy (matmul's tf32x3_wgmma: operands split into TF32 hi and lo once, three products "
                     "a k-step): W[K][C] x the batch's pixels as C x N*P*Q columns, gathered by the split (no "
                     "unrolled copy); bias and activation in the store into y's planes; Hopper GPUs only",
         report="gpuopt", needs_cuda=True, kernel="csrc/conv/conv2d_pointwise_sm90a.cu",
         test="tests/conv/test_gpu_conv2d_pointwise.py")(run_gpu)

register("conv2d", "unroll_tf32x3",
         description="any plain convolution (filter, stride, padding; one group, no dilation) as GEMMs on Hopper's "
                     "warpgroup MMA at FP32 accuracy (pointwise_tf32x3's product): W[K][C*R*S] x the unrolled input, "
                     "which the operand split writes as TF32 hi and lo (8 bytes an entry; chunks of images within "
                     "unroll's 1 GiB scratch budget, one product a chunk); bias and activation in the store into y's "
                     "planes; Hopper GPUs only",
         report="gpuopt", needs_cuda=True, kernel="csrc/conv/conv2d_unroll_tf32x3_sm90a.cu",
         test="tests/conv/test_gpu_conv2d_unroll_tf32x3.py")(run_gpu)

register("conv2d", "implicit_gemm_tf32x3_wgmma",
         description="any plain convolution (filter, stride, padding; one group, no dilation) as ONE GEMM on Hopper's "
                     "warpgroup MMA at FP32 accuracy (unroll_tf32x3's product): W[K][C*R*S] split once, the input "
                     "windows gathered inside the product (each thread loads its column's taps a stage ahead, splits "
                     "them and stores them into the MMA's tiles: no unrolled buffer); bias and activation in the "
                     "store into y's planes; Hopper GPUs only",
         report="gpuopt", needs_cuda=True, kernel="csrc/conv/conv2d_implicit_wgmma_sm90a.cu",
         test="tests/conv/test_gpu_conv2d_implicit_wgmma.py")(run_gpu)

register("conv2d", "implicit_gemm_fast",
         description="implicit GEMM on the matmul ladder's warp tiles (8x8 / 8x4 outputs per thread): W tiles by "
                     "16-byte loads, X tiles gathered by cp.async with zero fill, double-buffered shared memory, "
                     "bias and activation in the store",
         report="gpuopt", **_GEMM,
         params=(Param.from_kernels("conv2d/implicit_gemm_fast/tile",
                       "block tile BMxBNxBK (output maps x output pixels x filter taps per k-step); 64x64x8 fits "
                       "the MNIST layers' 32/64 maps and CS6235 conf4's 128 maps with the most blocks"),))(run_gpu)
