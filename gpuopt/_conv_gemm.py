"""conv2d as a matrix product: the GEMM-based variants (registered on import by gpuopt.conv).

All three compute ``Y[K][N*P*Q] = W[K][C*R*S] x X_unrolled[C*R*S][N*P*Q]``: W's (K, C, R, S) memory
already is the unrolled filter matrix, and column ``(n, p, q)`` of ``X_unrolled`` holds the input window
of output pixel (p, q) of image n (zeros where it reaches into the padding). The kernels are in
csrc/conv/conv2d_gemm.cu.

* ``unroll`` -- the ECE408 Fashion-MNIST report's Optimization 1 (explicit unrolling). The report used
  three kernels around its multiply; here an im2col kernel writes ``X_unrolled`` into scratch memory from
  gpuopt's pool, ONE gpuopt matmul (``gemm``: the async, warptile, shared or naive kernel of the matmul
  ladder, called in C++) multiplies, and a permute kernel writes ``y[n][k][p][q]`` with bias and
  activation. The whole batch goes through one GEMM when its scratch, ``(C*R*S + K) * N*P*Q`` floats, fits
  1 GiB; otherwise the batch is split into chunks of as many images as fit (at least one image, even when
  one image alone needs more). With one image per GEMM the matmul writes ``y`` directly.
* ``implicit_gemm`` -- the ECE408 MNIST report's "unrolling by index": a shared-memory tiled matrix
  multiply (``tile`` x ``tile`` threads) whose X tiles are gathered from x on the fly; no unrolled buffer.
* ``implicit_gemm_fast`` -- gpuopt's: the matmul ladder's warp-tiled kernel (block, warp and 8x8 / 8x4
  thread tiles, its fragment loads and FMA loop) with convolution tile loaders: W tiles by 16-byte loads
  (C*R*S a multiple of 4 and w 16-byte aligned; 4-byte asynchronous copies otherwise), X tiles gathered by
  4-byte asynchronous copies, double-buffered.

Caveats a caller can see: the implicit kernels index with 32-bit ints, so N*P*Q, C*R*S and K must be
below 2**31 - 1024 and an image (C*H*W) below 2**31 elements (split a larger batch); ``unroll`` has the
same limits except N*P*Q (it chunks the batch). Such shapes are rejected with ValueError before anything
is copied to the device. All three are deterministic.
"""

from __future__ import annotations

from .conv import Conv2dProblem, _gpu_conv2d
from .registry import Param, register

__all__ = ["GEMMS", "TILES", "FAST_TILES", "UNROLL_SCRATCH_BYTES", "INDEX_LIMIT", "unroll_chunk_images"]

#: The matmul kernels ``unroll`` can multiply with (the matmul ladder's variants of the same names).
GEMMS = ("async", "warptile", "shared", "naive")
#: ``implicit_gemm``'s tile (tile x tile threads per block).
TILES = (16, 32)
#: ``implicit_gemm_fast``'s block tiles, "BMxBNxBK": output maps x output pixels x filter taps per k-step.
FAST_TILES = ("64x64x8", "128x128x8", "128x64x8", "64x128x8", "32x128x8")
#: Scratch budget of ``unroll`` (X_unrolled and the GEMM's output for the images of one GEMM).
UNROLL_SCRATCH_BYTES = 1 << 30
#: Column, tap and map counts must stay below this (int indices with room for a tile).
INDEX_LIMIT = 2**31 - 1024
_INT_MAX = 2**31 - 1
_NAIVE_MAX_MAPS = 65535 * 16


def _check_index_range(variant: str, p: Conv2dProblem, *, implicit: bool) -> None:
    """ValueError for shapes the int-indexed kernels cannot run (the C++ launchers check the same)."""
    n, c, h, w = p.x.shape
    k, _, r, s = p.w.shape
    (ph, pw) = p.padding
    _, _, out_h, out_w = p.output_shape
    checks = [
        (c * r * s < INDEX_LIMIT, f"C*R*S = {c}*{r}*{s} = {c * r * s} must be < 2^31 - 1024"),
        (k < INDEX_LIMIT, f"K = {k} must be < 2^31 - 1024"),
        (h + 2 * ph < INDEX_LIMIT and w + 2 * pw < INDEX_LIMIT, "H + 2*ph and W + 2*pw must be < 2^31 - 1024"),
        (out_h * out_w < INDEX_LIMIT, f"P*Q = {out_h}*{out_w} = {out_h * out_w} must be < 2^31 - 1024"),
        (c * h * w <= _INT_MAX, f"C*H*W = {c}*{h}*{w} = {c * h * w} must be < 2^31"),
    ]
    if implicit:
        checks.append((n * out_h * out_w < INDEX_LIMIT,
                       f"N*P*Q = {n}*{out_h * out_w} = {n * out_h * out_w} must be < 2^31 - 1024; split the batch"))
    for ok, message in checks:
        if not ok:
            raise ValueError(f"conv2d/{variant}: {message} (the kernels index with 32-bit ints)")


def unroll_chunk_images(x_shape, w_shape, stride=1, padding=0, scratch_limit_bytes: int = UNROLL_SCRATCH_BYTES) -> int:
    """Images that share one GEMM in ``unroll`` (the C++ launcher's rule, computed here without a GPU).

    As many as fit ``scratch_limit_bytes`` at ``(C*R*S + K) * P*Q`` floats per image, at least 1, at most
    N, and never more than 2**31 - 1025 GEMM columns.
    """
    from .conv import _check_problem_shapes, conv2d_output_shape

    (n, c, _, _), (k, _, r, s), stride, padding = _check_problem_shapes(x_shape, w_shape, stride, padding)
    if scratch_limit_bytes <= 0:
        raise ValueError(f"scratch_limit_bytes must be positive, got {scratch_limit_bytes}")
    _, _, out_h, out_w = conv2d_output_shape(x_shape, w_shape, stride, padding)
    pq = out_h * out_w
    chunk = max(1, scratch_limit_bytes // 4 // ((c * r * s + k) * pq))
    chunk = min(chunk, (INDEX_LIMIT - 1) // pq)
    return max(1, min(chunk, n))


_run_unroll = _gpu_conv2d("conv2d_unroll")
_run_implicit_gemm = _gpu_conv2d("conv2d_implicit_gemm")
_run_implicit_gemm_fast = _gpu_conv2d("conv2d_implicit_gemm_fast")


@register("conv2d", "unroll",
          description="explicit unrolling: im2col kernel into pool scratch, ONE gpuopt matmul "
                      "W[K][C*R*S] x X_unrolled[C*R*S][N*P*Q] (chunks of images past 1 GiB of scratch), permute + "
                      "bias + activation kernel (the report used three kernels around its multiply)",
          report="ece408-fashion", needs_cuda=True,
          params=(Param("gemm", "async", GEMMS,
                        "the matmul ladder's kernel that multiplies (called in C++ at its default parameters); "
                        "async: the fastest"),))
def _unroll(ctx, p: Conv2dProblem, *, gemm: str):
    _check_index_range("unroll", p, implicit=False)
    if gemm == "naive" and p.w.shape[0] > _NAIVE_MAX_MAPS:
        raise ValueError(f"conv2d/unroll: gemm='naive' takes at most {_NAIVE_MAX_MAPS} maps (K), got {p.w.shape[0]}")
    return _run_unroll(ctx, p, gemm=gemm)


@register("conv2d", "implicit_gemm",
          description="implicit GEMM: shared-memory tiled matrix multiply (tile x tile threads) of W and the "
                      "unrolled input, each X tile gathered from x by index (no unrolled buffer); bias and "
                      "activation in the store",
          report="ece408-mnist", needs_cuda=True,
          params=(Param("tile", 16, TILES,
                        "side of the output tile and the k-step (tile x tile threads per block; 16: the report's "
                        "TILE_WIDTH)"),))
def _implicit_gemm(ctx, p: Conv2dProblem, *, tile: int):
    _check_index_range("implicit_gemm", p, implicit=True)
    return _run_implicit_gemm(ctx, p, tile=tile)


@register("conv2d", "implicit_gemm_fast",
          description="implicit GEMM on the matmul ladder's warp tiles (8x8 / 8x4 outputs per thread): W tiles by "
                      "16-byte loads, X tiles gathered by cp.async with zero fill, double-buffered shared memory, "
                      "bias and activation in the store",
          report="gpuopt", needs_cuda=True,
          params=(Param("tile", "64x64x8", FAST_TILES,
                        "block tile BMxBNxBK (output maps x output pixels x filter taps per k-step); 64x64x8 fits "
                        "the MNIST layers' 32/64 maps and CS6235 conf4's 128 maps with the most blocks"),))
def _implicit_gemm_fast(ctx, p: Conv2dProblem, *, tile: str):
    _check_index_range("implicit_gemm_fast", p, implicit=True)
    return _run_implicit_gemm_fast(ctx, p, tile=tile)
