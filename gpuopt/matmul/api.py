"""The public ``gpuopt.matmul``: argument checks, then the variant's run function."""

from __future__ import annotations

from typing import Any

from .. import _plan
from .._exec import Op
from .._validate import Buffer, check_memory, float_array, runs_on_gpu
from ..cuda import DeviceArray
from ..registry import default_variant, variants

__all__ = ["matmul"]


def matmul(a, b, *, variant: str | None = None, timing: bool = False, stream: Any = None, **params: Any):
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
    stream : optional
        The stream to run on: a ``cudaStream_t`` handle (int), ``torch.cuda.Stream``, CuPy stream, or anything
        with ``cuda_stream``/``ptr``/``__cuda_stream__``. Default: the first device input's stream (PyTorch's
        or CuPy's current stream for their arrays), else the legacy default stream (:mod:`gpuopt.cuda`).
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
        Not 2-D, empty, inner dimensions differ, an output (M, N) larger than the memory that would hold it,
        unknown variant or parameter.
    RuntimeError
        A CUDA variant without a usable GPU, or a CUDA error.

    Notes
    -----
    Other float dtypes are converted to float32 and non-contiguous inputs are copied;
    device arrays must be float32 and C-contiguous and are used without a copy.
    """
    return _OP(variant, timing, params, a, b, stream=stream)


def _key(a, b):
    ka, ha = _plan.arg_key(a)
    kb, hb = _plan.arg_key(b)
    return (ka, kb), (ha, hb)


def _validate(a, b):
    a = float_array(a, "a", 2, "(M, K)")
    b = float_array(b, "b", 2, "(K, N)")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {a.shape} (M, K) but b is {b.shape} (K, N)")
    return (a, b), (a, b)


def _check_sizes(variant: str, a, b) -> None:
    (m, _), n = a.shape, b.shape[1]
    check_memory("matmul", lambda: f"a (M, K) = {tuple(a.shape)} and b (K, N) = {tuple(b.shape)}",
                 [Buffer(lambda: f"the output c (M, N) = ({m}, {n}) float32", 4 * m * n)],
                 gpu=lambda: runs_on_gpu("matmul", variant),
                 device_result=isinstance(a, DeviceArray) or isinstance(b, DeviceArray))


def _rebuild(a, b):
    return lambda a, b: (a, b)


#: Up to this many multiply-adds (64^3) a product is a few microseconds of GPU work and cuBLAS's host time per
#: call is most of what the caller waits for: ``variant=None`` then runs the ladder's ``async`` kernel.
TINY_MACS = 1 << 18
_TINY_VARIANT = "async"


def default_for(a_shape, b_shape) -> str:
    """The variant ``matmul(..., variant=None)`` runs for a (M, K) @ (K, N) product: the registry's default
    (:func:`gpuopt.registry.default_variant`), except cuBLAS on tiny products (:data:`TINY_MACS`)."""
    name = default_variant("matmul")
    if name != "cublas" or _TINY_VARIANT not in variants("matmul"):
        return name
    (m, k), n = a_shape, b_shape[1]
    return _TINY_VARIANT if m * n * k <= TINY_MACS else name


_OP = Op("matmul", _validate, key=_key, rebuild=_rebuild, default=lambda a, b: default_for(a.shape, b.shape),
         check=_check_sizes)
