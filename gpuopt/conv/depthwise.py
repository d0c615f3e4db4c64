"""conv2d ``depthwise``: gpuopt's kernel for depthwise layers, groups = C (MobileNet's 3x3 stride-1 and stride-2
layers, and any other filter, stride, padding and dilation), each input channel with its own K / C filters.

Memory-bound: an output reads R*S taps of one channel, a few FMAs per 8 bytes of x and y, so the floor is the
bytes (x read once, y written once) over the GPU's bandwidth. A block of 256 threads owns a tile of 1, 2 or 4
output planes (32x32, 16x16 or 8x8 outputs: the tile that idles fewest threads at the plane's size), stages the
input patch the tile reads in shared memory (coalesced along the rows, zero outside the image) with the plane's
R*S taps, and each thread sums its outputs down one column in (r, s) order: deterministic, one float FMA chain an
output. The kernel is in csrc/conv/conv2d_depthwise.cu.

Limits a caller can see: groups must equal C (ValueError naming the variant otherwise); the staged patch,
((tile - 1) * stride + (R - 1) * dilation + 1) squared floats, must fit the GPU's shared memory (ValueError naming
it: only very large dilated filters with large strides reach it); positions inside a plane are 32-bit.
"""

from __future__ import annotations

from .._exec import ExecContext
from ..registry import Param, register
from .launch import run_gpu
from .problem import Conv2dProblem

__all__: list[str] = []


@register("conv2d", "depthwise",
          description="depthwise layers (groups = C, K a multiple of C), any stride, padding and dilation: a block "
                      "stages the input patch of an output tile of 1, 2 or 4 planes and the planes' taps in shared "
                      "memory, each thread sums a column of outputs (memory-bound: measured against the bytes floor)",
          report="gpuopt", needs_cuda=True, kernel="csrc/conv/conv2d_depthwise.cu",
          test="tests/conv/test_gpu_conv2d_depthwise.py",
          params=(Param.from_kernels("conv2d/depthwise/tile",
                                     "output tile side of a block's planes (auto: by the plane's larger side: > 24: "
                                     "32 (one plane), > 12: 16 (two), else 8 (four))"),))
def _depthwise(ctx: ExecContext, p: Conv2dProblem, *, tile):
    return run_gpu(ctx, p, tile=0 if tile == "auto" else tile)
