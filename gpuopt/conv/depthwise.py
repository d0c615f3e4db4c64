"""conv2d ``depthwise``: gpuopt's kernels for depthwise layers, groups = C (MobileNet's 3x3 stride-1 and stride-2
layers, ConvNeXt's 7x7, and any other filter, stride, padding and dilation), each input channel with its own K / C
filters.

Memory-bound: an output reads R*S taps of one channel, a few FMAs per 8 bytes of x and y, so the floor is the
bytes (x read once, y written once) over the GPU's bandwidth. Two kernels (``kernel``):

* ``rows`` (square 3x3, 5x5 and 7x7 filters, stride 1 or 2, no dilation): a unit of work is a band of output
  rows of one plane, or whole small planes, whose input is one contiguous run of x. Persistent blocks of 256
  threads loop over units, double-buffered: the next unit's run comes into shared memory by 16-byte cp.async
  copies while each thread sums 4 outputs of the current one down a column, every input row it reads loaded once
  into registers. csrc/conv/conv2d_depthwise_rows.cu.
* ``patch`` (any filter, stride and dilation): a block owns a tile of 1, 2 or 4 output planes (32x32, 16x16 or
  8x8 outputs: ``tile``, by default the one that idles fewest threads at the plane's size) and stages the input
  patch the tile reads, zero outside the image. csrc/conv/conv2d_depthwise.cu.

``kernel="auto"`` runs ``rows`` where it takes the layer and no patch ``tile`` is asked for, else ``patch``. Both
sum an output's taps in (r, s) order, one float FMA chain: deterministic.

Limits a caller can see: groups must equal C (ValueError naming the variant otherwise); ``kernel="rows"`` on a
layer it does not take, or with a ``tile``, is a ValueError saying what it takes; the patch kernel's staged patch,
((tile - 1) * stride + (R - 1) * dilation + 1) squared floats, must fit the GPU's shared memory (ValueError naming
it: only very large dilated filters with large strides reach it), as must the rows kernel's input rows of a unit
(two buffers of 4 output rows' input: planes over ~2,200 (7x7, stride 2) to ~4,800 (3x3, stride 1) columns wide fall to the patch kernel); positions inside a plane are 32-bit.
"""

from __future__ import annotations

from .. import _core
from .._exec import ExecContext
from ..registry import Param, register
from .launch import run_gpu
from .problem import Conv2dProblem

__all__ = ["rows_takes"]

def rows_takes(x_shape, w_shape, stride, dilation, groups, shared_limit: int) -> bool:
    """Whether the rows kernel takes the layer (checked shapes; ``shared_limit``: the GPU's opt-in shared memory a
    block, bytes): groups = C and the launcher's own rules, read from gpuopt._core (square 3x3, 5x5 or 7x7 filters,
    stride 1 or 2, no dilation; its narrowest unit's input rows within ``shared_limit``)."""
    (_, c, h, w), (k, _, r, s) = x_shape, w_shape
    return (groups == c and _core.conv2d_depthwise_rows_takes(r, s, *stride, *dilation)
            and _core.conv2d_depthwise_rows_min_shared_bytes(h, w, r, stride[0], k // c) <= shared_limit)


@register("conv2d", "depthwise",
          description="depthwise layers (groups = C, K a multiple of C), any stride, padding and dilation; rows "
                      "kernel (3x3/5x5/7x7, stride 1-2): persistent blocks, whole input rows of a band or of small "
                      "planes double-buffered by 16-byte cp.async, 4 outputs a thread down a column from registers; "
                      "patch kernel (any layer): "
                      "the input patch of an output tile of 1, 2 or 4 planes staged (memory-bound: measured against "
                      "the bytes floor)",
          report="gpuopt", needs_cuda=True, kernel="csrc/conv/conv2d_depthwise.cu",
          test="tests/conv/test_gpu_conv2d_depthwise.py",
          params=(Param.from_kernels("conv2d/depthwise/kernel",
                                     "rows (square 3x3, 5x5, 7x7 filters, stride 1 or 2, no dilation), patch (any "
                                     "layer); auto: rows where it takes the layer and tile is auto"),
                  Param.from_kernels("conv2d/depthwise/tile",
                                     "the patch kernel's output tile side (auto: by the plane's larger side: > 24: "
                                     "32 (one plane a block), > 12: 16 (two), else 8 (four))")))
def _depthwise(ctx: ExecContext, p: Conv2dProblem, *, kernel, tile):
    return run_gpu(ctx, p, kernel=kernel, tile=0 if tile == "auto" else tile)
