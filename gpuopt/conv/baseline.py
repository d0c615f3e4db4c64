"""What every conv2d variant is measured against: the CPU reference (``cpu``, the oracle), the
starting kernel of both conv reports (``basic``) and the vendor library (``cudnn``)."""

from __future__ import annotations

import numpy as np

from .. import _core
from .._exec import ExecContext
from .._ext import require_cuda
from ..registry import Param, register
from .launch import run_gpu
from .problem import Conv2dProblem, check_shapes

__all__ = ["cudnn_algorithm"]

_TEST_GPU = "tests/conv/test_gpu_conv2d.py"


@register("conv2d", "cpu", description="CPU reference (C++, OpenMP): direct loops, float64 accumulation",
          report="reference", needs_cuda=False, kernel="csrc/conv/conv2d_cpu.cpp", test="tests/conv/test_conv2d.py")
def _conv2d_cpu(ctx: ExecContext, p: Conv2dProblem) -> np.ndarray:
    x, w = ctx.host(p.x), ctx.host(p.w)
    bias = None if p.bias is None else ctx.host(p.bias)
    with ctx.kernel():
        y = _core.conv2d(x, w, bias, p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.activation,
                         p.dilation[0], p.dilation[1], p.groups)
    return ctx.finish(y)


register("conv2d", "basic",
         description="one thread per output (q fastest, then p, k, n), 1-D grid of 256: the starting kernel of both "
                     "conv reports", report="ece408-fashion", needs_cuda=True, kernel="csrc/conv/conv2d_basic.cu",
         test=_TEST_GPU)(run_gpu)

if _core.build_info()["cudnn"]:
    register("conv2d", "cudnn",
             description="cuDNN forward, strict FP32 (TF32 off), algorithm found once per shape and cached",
             report="library", needs_cuda=True, preferred=True, kernel="csrc/conv/conv2d_cudnn.cu", test=_TEST_GPU,
             params=(Param.from_kernels("conv2d/cudnn/algorithms",
                           "'precise': GEMM-family and direct algorithms only (reference-level accuracy); 'fast' "
                           "(auto's class of the same name; 'any' is its older name here): also FFT and Winograd, "
                           "faster on some shapes, ~1e-4 relative error on 5x5 filters"),))(
        run_gpu)


def cudnn_algorithm(x_shape, w_shape, stride=1, padding=0, algorithms: str = "precise") -> str:
    """Name of the cuDNN forward algorithm the ``"cudnn"`` variant uses for this problem.

    The algorithm is found (benchmarked) on the first call for a shape and cached, so this
    also warms the cache; e.g. ``"IMPLICIT_PRECOMP_GEMM"`` (the suffix of cuDNN's
    ``CUDNN_CONVOLUTION_FWD_ALGO_*`` name).

    Parameters
    ----------
    x_shape : (N, C, H, W)
    w_shape : (K, C, R, S)
    stride, padding : int or pair
        As in :func:`gpuopt.conv2d`.
    algorithms : "precise" or "fast" ("any": the same as "fast")
        The ``cudnn`` variant's parameter of the same name.

    Raises
    ------
    ValueError
        Shapes that :func:`gpuopt.conv2d` would reject.
    RuntimeError
        No usable GPU, gpuopt built without cuDNN, or a cuDNN error.
    """
    (n, c, h, w), (k, _, r, s), (u, v), (ph, pw) = check_shapes(x_shape, w_shape, stride, padding)
    if not _core.build_info()["cudnn"]:
        raise RuntimeError("gpuopt was built without cuDNN (not found at install time), so there is no cudnn variant")
    if algorithms not in ("precise", "fast", "any"):
        raise ValueError(f"algorithms must be 'precise' or 'fast' ('any': the same as 'fast'), got {algorithms!r}")
    cuda = require_cuda("gpuopt.conv.cudnn_algorithm")
    return cuda.conv2d_cudnn_algorithm(cuda.Conv2dShape(n, c, h, w, k, r, s, u, v, ph, pw), algorithms)
