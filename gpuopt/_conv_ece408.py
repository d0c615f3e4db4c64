"""conv2d variants of the ECE408 Fashion-MNIST report (registered on import by gpuopt.conv).

The report (../shared/seeds/ece408-fashion-mnist-conv-report.txt) starts from one thread per
output (``basic``) and tries, in order: matrix unrolling with the unrolled masks in constant
memory (``unroll_constmem``), a shared-memory tiled convolution (``tiled``), ``__restrict__``
and unrolled filter loops (``tiled_unrolled``), a third block dimension over input channels
with atomic accumulation (``tiled_channels``), corner-turned loads of the filters
(``tiled_corner_turn``), and a TILE_WIDTH sweep from 4 to 32 (the ``tile_width`` parameter).
The kernels are in csrc/conv/conv2d_ece408.cu, which says how each one is generalised to any
shape, stride and padding.

Caveats a caller can see:

* ``unroll_constmem`` keeps the whole filter bank in the GPU's 64 KB constant memory: filters
  with K*C*R*S*4 > 65536 bytes are rejected with ValueError, before anything is copied. The
  constant bank is one per process, so concurrent calls from several host threads are
  serialised.
* ``tiled_channels`` adds partial sums with float atomics, so its results differ from run to run
  in the last bits (within 1e-5 relative of the reference, not bitwise reproducible); bias and
  activation run as separate small kernels around the atomic sums.
* A block has tile_width**2 (times channels_per_block) threads: more than 1024 is rejected, as
  is a staged tile that does not fit the GPU's shared memory.
"""

from __future__ import annotations

from .conv import Conv2dProblem, _gpu_conv2d
from .registry import Param, register

#: The report's TILE_WIDTH sweep (Optimization 9).
TILE_WIDTHS = (4, 8, 12, 16, 20, 24, 28, 32)
#: Threads along the channel dimension of a ``tiled_channels`` block.
CHANNELS_PER_BLOCK = (1, 2, 4, 8, 16, 32)
#: Size of the constant bank that ``unroll_constmem`` keeps the filter bank in.
CONSTANT_WEIGHT_BYTES = 65536
MAX_BLOCK_THREADS = 1024

_REPORT = "ece408-fashion"


def _tile_width_param(default: int = 16) -> Param:
    return Param("tile_width", default, TILE_WIDTHS,
                 "side T of the output tile (block of T x T threads; input tile ((T-1)*u + R) x ((T-1)*v + S))")


def _check_constant_weights(p: Conv2dProblem) -> None:
    k, c, r, s = p.w.shape
    nbytes = 4 * k * c * r * s
    if nbytes > CONSTANT_WEIGHT_BYTES:
        raise ValueError(f"conv2d/unroll_constmem: the filter bank ({k}x{c}x{r}x{s} floats = {nbytes} bytes) does not "
                         f"fit the {CONSTANT_WEIGHT_BYTES}-byte (64 KB) constant memory; use a tiled variant")


def _check_block(tile_width: int, channels_per_block: int) -> None:
    threads = tile_width * tile_width * channels_per_block
    if threads > MAX_BLOCK_THREADS:
        raise ValueError(f"conv2d/tiled_channels: tile_width={tile_width} and channels_per_block={channels_per_block} "
                         f"make blocks of {tile_width} x {tile_width} x {channels_per_block} = {threads} threads; the "
                         f"limit is {MAX_BLOCK_THREADS} threads per block")


_run_unroll_constmem = _gpu_conv2d("conv2d_unroll_constmem")
_run_tiled_channels = _gpu_conv2d("conv2d_tiled_channels")


@register("conv2d", "unroll_constmem",
          description="unrolled weights (K x C*R*S) in constant memory times the input unrolled on the fly (each "
                      "thread gathers its column by index); filter banks over 64 KB are rejected",
          report=_REPORT, needs_cuda=True)
def _unroll_constmem(ctx, p: Conv2dProblem):
    _check_constant_weights(p)  # before any copy to the device
    return _run_unroll_constmem(ctx, p)


register("conv2d", "tiled",
         description="shared-memory tiling: per input channel the ((T-1)*u+R) x ((T-1)*v+S) input tile and the R x S "
                     "filter in shared memory, T x T threads per block over (p, q), grid over (tiles, k, n)",
         report=_REPORT, needs_cuda=True, params=(_tile_width_param(),))(_gpu_conv2d("conv2d_tiled"))

register("conv2d", "tiled_unrolled",
         description="tiled with __restrict__ pointers and the filter loops fully unrolled (1x1, 3x3, 5x5, 7x7; "
                     "generic loops otherwise)",
         report=_REPORT, needs_cuda=True, params=(_tile_width_param(),))(_gpu_conv2d("conv2d_tiled_unrolled"))


@register("conv2d", "tiled_channels",
          description="tiled_unrolled with a third block dimension over input channels, partial sums added with "
                      "atomicAdd (bias before, activation after; float atomics: not bitwise reproducible)",
          report=_REPORT, needs_cuda=True,
          params=(_tile_width_param(),
                  Param("channels_per_block", 2, CHANNELS_PER_BLOCK,
                        "threads along the channel dimension of a block (thread z sums channels z, z + this, ...); "
                        "tile_width**2 * channels_per_block must be <= 1024")))
def _tiled_channels(ctx, p: Conv2dProblem, *, tile_width: int, channels_per_block: int):
    _check_block(tile_width, channels_per_block)
    return _run_tiled_channels(ctx, p, tile_width=tile_width, channels_per_block=channels_per_block)


register("conv2d", "tiled_corner_turn",
         description="tiled_unrolled with coalesced loads of the filters of 32 channels at a time, corner-turned "
                     "(tap-major) into shared memory",
         report=_REPORT, needs_cuda=True, params=(_tile_width_param(),))(_gpu_conv2d("conv2d_tiled_corner_turn"))
