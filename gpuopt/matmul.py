"""Matrix multiply (``gpuopt.matmul``) and its variants."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core
from ._validate import float_array
from ._exec import ExecContext, dispatch
from ._ext import cuda_module
from .registry import register

__all__ = ["matmul"]


def matmul(a, b, *, variant: str | None = None, timing: bool = False, **params: Any):
    """Single-precision matrix product ``c = a @ b``.

    Parameters
    ----------
    a : array_like, float, shape (M, K)
    b : array_like, float, shape (K, N)
        Any sizes >= 1, including 1 and primes.
    variant : str, optional
        Implementation (see ``gpuopt.variants("matmul")``); None picks the fastest
        available one, or "cpu" without a GPU.
    timing : bool
        Also return a :class:`gpuopt.Timing` of the call's phases (ms).
    **params
        Tunable parameters of the variant.

    Returns
    -------
    numpy.ndarray or DeviceArray, float32, shape (M, N)
        A DeviceArray when an input is a device array. With ``timing=True``: ``(c, Timing)``.

    Raises
    ------
    TypeError
        Non-float arrays.
    ValueError
        Not 2-D, empty, inner dimensions differ, unknown variant or parameter.
    RuntimeError
        A CUDA variant without a usable GPU, or a CUDA error.

    Notes
    -----
    Other float dtypes are converted to float32 and non-contiguous inputs are copied;
    device arrays must be float32 and C-contiguous and are used without a copy.
    """
    a = float_array(a, "a", 2, "(M, K)")
    b = float_array(b, "b", 2, "(K, N)")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {a.shape} (M, K) but b is {b.shape} (K, N)")
    return dispatch("matmul", variant, params, timing, (a, b), a, b)


@register("matmul", "cpu", description="CPU reference (C++, OpenMP): i-k-j loops, float64 accumulation",
          report="reference", needs_cuda=False)
def _matmul_cpu(ctx: ExecContext, a, b) -> np.ndarray:
    a, b = ctx.host(a), ctx.host(b)
    with ctx.kernel():
        c = _core.matmul(a, b)
    return ctx.finish(c)


def _gpu_matmul(kernel: str):
    def run(ctx: ExecContext, a, b):
        da, db = ctx.device(a), ctx.device(b)
        (m, k), n = da.shape, db.shape[1]
        dc = ctx.empty((m, n), np.float32)
        with ctx.kernel():
            getattr(cuda_module(), kernel)(da.ptr, db.ptr, dc.ptr, m, n, k)
        return ctx.finish(dc)

    return run


register("matmul", "naive", description="one thread per output, 2-D grid of 16x16 blocks (the report's fixed v0)",
         report="cmu18645", needs_cuda=True)(_gpu_matmul("matmul_naive"))
register("matmul", "cublas", description="cuBLAS SGEMM, strict FP32 (TF32 off): the baseline",
         report="library", needs_cuda=True, preferred=True)(_gpu_matmul("matmul_cublas"))
