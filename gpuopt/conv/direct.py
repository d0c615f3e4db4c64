"""conv2d ``direct_regblock``: gpuopt's register-blocked direct convolution; ``direct_fused``: conv2d_pool's kernel unpooled.

Made for layers whose filter window, C*R*S taps, is too short for a GEMM to pay off, such as the CS6235
report's conf3 (3 input channels, 3x3 filters, stride 2: 27 taps): an implicit GEMM there spends its time
moving tiles, not multiplying. A block of 128 threads takes a run of ``128 * pixels`` consecutive output
pixels of one image and a group of output maps; it stages the input rows the run reads (every channel
that fits, else chunks of channels; columns de-interleaved by the stride so neighbouring threads read
neighbouring words) and the filters of ``k_tile`` maps in shared memory, and each thread accumulates
``pixels x k_tile`` outputs in registers: per filter tap, ``pixels`` loads of x and ``k_tile / 4``
float4 loads of w feed ``pixels * k_tile`` FMAs. Stores are coalesced along the output row. The kernel
is in csrc/conv/conv2d_direct.cu.

Caveats a caller can see: one input channel's staged rows (about ``(128*pixels/Q + 2) * stride * W``
floats) plus its filters must fit the GPU's shared memory, so very wide images with large strides can be
rejected (ValueError naming the limit); positions inside an image are 32-bit (P*Q < 2**31).
Deterministic: each output is one thread's sum, in (c, r, s) order.
"""

from __future__ import annotations

from .._exec import ExecContext
from .._ext import kernel_choices
from ..registry import Param, register
from .launch import run_gpu
from .problem import Conv2dProblem

__all__ = ["K_TILES", "PIXELS"]

#: Output maps per thread ("auto": 8 when K <= 8, else 16): csrc/conv/conv2d_choices.hpp's table.
K_TILES = kernel_choices()["conv2d/direct_regblock/k_tile"]["allowed"]
#: Output pixels per thread ("auto": 2, or 4 when K <= 8; fewer when an image's last run would waste > 1/8).
PIXELS = kernel_choices()["conv2d/direct_regblock/pixels"]["allowed"]

@register("conv2d", "direct_regblock",
          description="register-blocked direct convolution for short filter windows (small C*R*S): the input rows "
                      "of a run of 128*pixels output pixels and k_tile maps' filters in shared memory, "
                      "pixels x k_tile outputs per thread, coalesced stores",
          report="gpuopt", needs_cuda=True, kernel="csrc/conv/conv2d_direct.cu", test="tests/conv/test_gpu_direct.py",
          params=(Param.from_kernels("conv2d/direct_regblock/k_tile",
                                     "output maps per thread (auto: 8 when K <= 8, else 16)"),
                  Param.from_kernels("conv2d/direct_regblock/pixels",
                        "output pixels per thread (auto: 2, or 4 when K <= 8; fewer when an image's last run of "
                        "128*pixels would waste more than 1/8 of its slots)")))
def _direct_regblock(ctx: ExecContext, p: Conv2dProblem, *, k_tile, pixels):
    # The launcher takes 0 for "auto" (it picks per shape).
    return run_gpu(ctx, p, k_tile=0 if k_tile == "auto" else k_tile, pixels=0 if pixels == "auto" else pixels)


@register("conv2d", "direct_fused",
          description="valid stride-1 3x3/5x5 layers through conv2d_pool's fused kernel with no pooling: a persistent, "
                      "cp.async double-buffered direct convolution, 2x4 outputs x 8 maps (4 for short windows) per "
                      "thread, bias and activation in registers",
          report="gpuopt", needs_cuda=True, kernel="csrc/nn/conv2d_pool.cu", test="tests/conv/test_gpu_direct.py",
          params=(Param.from_kernels("conv2d/direct_fused/channels_per_block",
                        "output maps a block computes; 0 picks per shape (all of them, up to 64)"),
                  Param.from_kernels("conv2d/direct_fused/images",
                        "images a block computes at once; 0 picks per shape (about 256 threads a block)")))
def _direct_fused(ctx: ExecContext, p: Conv2dProblem, *, channels_per_block, images):
    return run_gpu(ctx, p, channels_per_block=channels_per_block, images=images)
