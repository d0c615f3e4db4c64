"""Matrix multiply (``gpuopt.matmul``) and its variants."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core
from ._validate import float_array
from .registry import register, resolve

__all__ = ["matmul"]


def matmul(a, b, *, variant: str | None = None, **params: Any):
    """Single-precision matrix product ``c = a @ b``.

    Parameters
    ----------
    a : array_like, float, shape (M, K)
    b : array_like, float, shape (K, N)
        Any sizes >= 1, including 1 and primes.
    variant : str, optional
        Implementation (see ``gpuopt.variants("matmul")``); None picks the fastest
        available one, or "cpu" without a GPU.
    **params
        Tunable parameters of the variant.

    Returns
    -------
    numpy.ndarray, float32, shape (M, N)

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
    Other float dtypes are converted to float32 and non-contiguous inputs are copied.
    """
    a = float_array(a, "a", 2, "(M, K)")
    b = float_array(b, "b", 2, "(K, N)")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {a.shape} (M, K) but b is {b.shape} (K, N)")
    impl, resolved = resolve("matmul", variant, params)
    return impl.impl(a, b, **resolved)


@register("matmul", "cpu", description="CPU reference (C++, OpenMP): i-k-j loops, float64 accumulation",
          report="reference", needs_cuda=False)
def _matmul_cpu(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _core.matmul(a, b)
