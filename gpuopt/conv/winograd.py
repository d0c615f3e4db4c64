"""conv2d ``winograd``: fused Winograd F(m x m, r x r) convolution, a fast algorithm (Lavin and Gray, 2016).

Stride 1, 3x3 and 5x5 filters, any padding, bias and activation. Each m x m output tile is
``A^T [sum_c (G g G^T) .* (B^T d B)] A`` with the exact transforms of :mod:`.winograd_math` rounded to float32
once (generated into csrc/conv/winograd_transforms.cuh by scripts/gen_winograd_transforms.py). One kernel
does it all (csrc/conv/conv2d_winograd.cu): a block stages and transforms the input patches of its tiles
chunk by chunk of channels, accumulates the per-point products in registers and applies the output transform,
bias and activation before storing; the filters are transformed once per call by a small kernel. F(4x4, 5x5)
with C <= 32 and K > 16 (MNIST conv2) runs winograd_resident.cuh instead: the input transformed once for all
maps, V of every channel kept in shared memory, the per-point products in 3xTF32 (FP32-level error).

Precision class "fast": the transforms round, so the error grows with the tile (relative Frobenius error
against float64 on the reports' layers, measured in NumPy: F(2,3) ~1e-7, F(4,3) ~7e-7, F(2,5) ~7e-7,
F(4,5) ~1.2e-6; an FP32 direct sum is ~1e-7 to 4e-7). Only ``auto(algorithms="fast")`` picks it.
Deterministic: each output is one thread's fixed-order sum.
"""

from __future__ import annotations

from .._exec import ExecContext
from .._ext import kernel_choices
from ..registry import Param, register
from .launch import run_gpu
from .problem import Conv2dProblem

# The NumPy algorithm, importable from here as before it moved to winograd_math (gpuopt.conv.winograd was its module).
from .winograd_math import conv2d_winograd, winograd_points, winograd_transforms  # noqa: F401

__all__ = ["TILES", "ERROR_BOUNDS"]

#: Output tile side m ("auto": 4, F(4,3) or F(4,5): 4x and 6.25x fewer multiplies than direct), from
#: csrc/conv/conv2d_choices.hpp's table.
TILES = kernel_choices()["conv2d/winograd/m"]["allowed"]

#: Relative Frobenius error against float64 each F(m, r) is held to (tests/conv/test_gpu_winograd.py): a few
#: times the NumPy float32 measurement of notes/winograd.md (the kernel sums channels in another order).
ERROR_BOUNDS = {(2, 3): 1e-6, (4, 3): 4e-6, (2, 5): 4e-6, (4, 5): 6e-6}


@register("conv2d", "winograd",
          description="fused Winograd F(m x m, r x r) (stride 1, 3x3/5x5): input patches transformed in shared "
                      "memory per channel chunk, per-point products in registers (8x8 per thread), output "
                      "transform + bias + activation before the store; filters transformed once per call; F(4x4, "
                      "5x5) with C <= 32 and K > 16: one block per 16 tiles and all maps, V of every channel kept "
                      "in shared memory, products in 3xTF32 on the tensor cores",
          report="gpuopt", needs_cuda=True, kernel="csrc/conv/conv2d_winograd.cu",
          test="tests/conv/test_gpu_winograd.py",
          params=(Param.from_kernels("conv2d/winograd/m",
                                     "output tile side (auto: 4); F(2, r) rounds less, F(4, r) multiplies less"),))
def _winograd(ctx: ExecContext, p: Conv2dProblem, *, m):
    # The launcher takes 0 for "auto".
    return run_gpu(ctx, p, m=0 if m == "auto" else m)
