"""conv2d by shared-memory tiling: the tiled variants of the ECE408 Fashion-MNIST report (``report="ece408-fashion"``).

The report (../shared/seeds/ece408-fashion-mnist-conv-report.txt) starts from one thread per
output (``basic``) and tries, in order: matrix unrolling with the unrolled masks in constant
memory (``unroll_constmem``), a shared-memory tiled convolution (``tiled``), ``__restrict__``
and unrolled filter loops (``tiled_unrolled``), a third block dimension over input channels
with atomic accumulation (``tiled_channels``), corner-turned loads of the filters
(``tiled_corner_turn``), and a TILE_WIDTH sweep from 4 to 32 (the ``tile_width`` parameter).
Its unrolling step, ``unroll_constmem``, is in :mod:`.constmem`. The kernels are in csrc/conv/conv2d_ece408.cu,
which says how each one is generalised to any shape, stride and padding.

Caveats a caller can see:

* ``tiled_channels`` adds partial sums with float atomics, so its results differ from run to run
  in the last bits (within 1e-5 relative of the reference, not bitwise reproducible); bias and
  activation run as separate small kernels around the atomic sums.
* A block has tile_width**2 (times channels_per_block) threads: more than 1024 is rejected before
  anything is copied, as is (at launch) a staged tile that does not fit the GPU's shared memory.
"""

from __future__ import annotations

from .._ext import kernel_choices
from ..registry import Param, register
from .launch import run_gpu

__all__ = ["TILE_WIDTHS", "CHANNELS_PER_BLOCK"]

#: The report's TILE_WIDTH sweep (Optimization 9): csrc/conv/conv2d_choices.hpp's table.
TILE_WIDTHS = kernel_choices()["conv2d/tiled/tile_width"]["allowed"]
#: Threads along the channel dimension of a ``tiled_channels`` block (the same header's table).
CHANNELS_PER_BLOCK = kernel_choices()["conv2d/tiled_channels/channels_per_block"]["allowed"]

_ECE408 = dict(report="ece408-fashion", needs_cuda=True, kernel="csrc/conv/conv2d_ece408.cu",
               test="tests/conv/test_gpu_ece408.py")


def _tile_width_param(variant: str) -> Param:
    return Param.from_kernels(f"conv2d/{variant}/tile_width",
                              "side T of the output tile (block of T x T threads; input tile ((T-1)*u + R) x "
                              "((T-1)*v + S))")


register("conv2d", "tiled",
         description="shared-memory tiling: per input channel the ((T-1)*u+R) x ((T-1)*v+S) input tile and the R x S "
                     "filter in shared memory, T x T threads per block over (p, q), grid over (tiles, k, n)",
         params=(_tile_width_param("tiled"),), **_ECE408)(run_gpu)

register("conv2d", "tiled_unrolled",
         description="tiled with __restrict__ pointers and the filter loops fully unrolled (1x1, 3x3, 5x5, 7x7; "
                     "generic loops otherwise)",
         params=(_tile_width_param("tiled_unrolled"),), **_ECE408)(run_gpu)

register("conv2d", "tiled_channels",
         description="tiled_unrolled with a third block dimension over input channels, partial sums added with "
                     "atomicAdd (bias before, activation after; float atomics: not bitwise reproducible)",
         params=(_tile_width_param("tiled_channels"),
                 Param.from_kernels("conv2d/tiled_channels/channels_per_block",
                       "threads along the channel dimension of a block (thread z sums channels z, z + this, ...); "
                       "tile_width**2 * channels_per_block must be <= 1024")), **_ECE408)(run_gpu)

register("conv2d", "tiled_corner_turn",
         description="tiled_unrolled with coalesced loads of the filters of 32 channels at a time, corner-turned "
                     "(tap-major) into shared memory",
         params=(_tile_width_param("tiled_corner_turn"),), **_ECE408)(run_gpu)
