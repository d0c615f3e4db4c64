"""The public ``gpuopt.matmul``: argument checks, then the variant's run function."""

from __future__ import annotations

from typing import Any

from .._exec import dispatch
from .._validate import float_array

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
