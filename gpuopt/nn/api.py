"""The public layer ops of ``gpuopt.nn``: argument checks, then the variant's run function.

Every op also takes ``stream=`` (the stream to run on; default the first device input's stream, see
:mod:`gpuopt.cuda`).
"""

from __future__ import annotations

from typing import Any

from .. import _plan
from .._exec import Op
from .._validate import (Buffer, _as_array, activation_name, bias_vector, check_memory, float_array, integer,
                         runs_on_gpu)
from ..cuda import DeviceArray, as_device_array, is_cuda_dlpack, is_device_array

__all__ = ["relu", "tanh", "max_pool2d", "avg_pool2d", "fully_connected", "argmax", "softmax"]


def _ndim(x) -> int:
    if hasattr(x, "__cuda_array_interface__"):
        return len(x.__cuda_array_interface__["shape"])
    if is_cuda_dlpack(x):
        return as_device_array(x, "x").ndim
    return _as_array(x, "x").ndim


def _elementwise(x):
    nd = _ndim(x)
    if nd == 0:
        raise ValueError("x must have at least one dimension, got a scalar")
    x = float_array(x if is_device_array(x) else _as_array(x, "x"), "x", nd, "")
    return (x,), (x,)


def _one_array_key(x):
    k, h = _plan.arg_key(x)
    return (k,), (h,)


def _same(*run_args):  # (the run arguments of a one-array op are its array: rebuilt as they are)
    return lambda x: (x,)


_RELU = Op("relu", _elementwise, key=_one_array_key, rebuild=_same)
_TANH = Op("tanh", _elementwise, key=_one_array_key, rebuild=_same)


def relu(x, *, variant: str | None = None, timing: bool = False, stream: Any = None, **params: Any):
    """``max(x, 0)`` elementwise (NaN stays NaN). x: float array of any shape -> float32, same shape."""
    return _RELU(variant, timing, params, x, stream=stream)


def tanh(x, *, variant: str | None = None, timing: bool = False, stream: Any = None, **params: Any):
    """``tanh(x)`` elementwise. x: float array of any shape -> float32, same shape."""
    return _TANH(variant, timing, params, x, stream=stream)


def _pool(x, size):
    nd = _ndim(x)
    if nd not in (2, 3, 4):
        raise ValueError(f"x must be 2-D (H, W), 3-D (C, H, W) or 4-D (N, C, H, W); got {nd}-D")
    x = float_array(x, "x", nd, "(..., H, W)")
    size = integer(size, "size", 1)
    if x.shape[-2] < size or x.shape[-1] < size:
        raise ValueError(f"pooling window {size}x{size} is larger than the input {x.shape[-2]}x{x.shape[-1]}")
    return (x,), (x, size)


def _pool_key(x, size):
    k, h = _plan.arg_key(x)
    return (k, _plan.scalar_key(size)), (h,)


def _pool_rebuild(x, size):
    return lambda hx: (hx, size)


_MAX_POOL2D = Op("max_pool2d", _pool, key=_pool_key, rebuild=_pool_rebuild)
_AVG_POOL2D = Op("avg_pool2d", _pool, key=_pool_key, rebuild=_pool_rebuild)


def max_pool2d(x, size: int = 2, *, variant: str | None = None, timing: bool = False, stream: Any = None,
               **params: Any):
    """Max pooling over non-overlapping size x size windows (stride = size).

    x : float, shape (..., H, W) with 2 to 4 dimensions -> float32 (..., H // size, W // size).
    Trailing rows/columns that do not fill a window are dropped; NaN in a window gives NaN.
    """
    return _MAX_POOL2D(variant, timing, params, x, size, stream=stream)


def avg_pool2d(x, size: int = 2, *, variant: str | None = None, timing: bool = False, stream: Any = None,
               **params: Any):
    """Average pooling over non-overlapping size x size windows (stride = size).

    x : float, shape (..., H, W) with 2 to 4 dimensions -> float32 (..., H // size, W // size).
    """
    return _AVG_POOL2D(variant, timing, params, x, size, stream=stream)


def fully_connected(x, w, bias=None, *, activation: str | None = None, variant: str | None = None,
                    timing: bool = False, stream: Any = None, **params: Any):
    """Fully connected layer ``y = act(x @ w + bias)``.

    x : float (N, I); w : float (I, O) (the ECE408 model's [in, out] layout);
    bias : float (O,), optional; activation : None (or "none"), "relu" or "tanh", applied after
    the bias (the networks fuse fc1 + ReLU) -> float32 (N, O).
    """
    return _FULLY_CONNECTED(variant, timing, params, x, w, bias, activation, stream=stream)


def _fully_connected(x, w, bias, activation):
    x = float_array(x, "x", 2, "(N, in_features)")
    w = float_array(w, "w", 2, "(in_features, out_features)")
    if w.shape[0] != x.shape[1]:
        raise ValueError(f"w must be (in_features, out_features) = ({x.shape[1]}, O), got {w.shape}")
    bias = bias_vector(bias, w.shape[1], "(out_features,)")
    return (x, w, bias), (x, w, bias, activation_name(activation))


def _fully_connected_sizes(variant: str, x, w, bias, activation) -> None:
    (n, _), o = x.shape, w.shape[1]
    check_memory("fully_connected", lambda: f"x (N, in_features) = {tuple(x.shape)} and w (in_features, "
                 f"out_features) = {tuple(w.shape)}",
                 [Buffer(lambda: f"the output (N, out_features) = ({n}, {o}) float32", 4 * n * o)],
                 gpu=lambda: runs_on_gpu("fully_connected", variant),
                 device_result=any(isinstance(a, DeviceArray) for a in (x, w, bias)))


def _fully_connected_key(x, w, bias, activation):
    if not (activation is None or type(activation) is str):
        raise _plan.Uncacheable
    (kx, hx), (kw, hw), (kb, hb) = _plan.arg_key(x), _plan.arg_key(w), _plan.arg_key(bias)
    return (kx, kw, kb, activation), (hx, hw, hb)


def _fully_connected_rebuild(x, w, bias, activation):
    return lambda hx, hw, hb: (hx, hw, hb, activation)


_FULLY_CONNECTED = Op("fully_connected", _fully_connected, check=_fully_connected_sizes, key=_fully_connected_key,
                      rebuild=_fully_connected_rebuild)


def argmax(x, *, variant: str | None = None, timing: bool = False, stream: Any = None, **params: Any):
    """Index of the largest entry of each row: x float (N, D) -> int64 (N,).

    Ties go to the first index; a NaN counts as the largest (as ``numpy.argmax``).
    """
    return _ARGMAX(variant, timing, params, x, stream=stream)


def softmax(x, *, variant: str | None = None, timing: bool = False, stream: Any = None, **params: Any):
    """Softmax of each row: x float (N, D) -> float32 (N, D), ``exp(x - max) / sum(exp(x - max))``.

    The row's max is subtracted first (no overflow). A NaN or +inf in a row, or a row of -inf,
    gives a row of NaN.
    """
    return _SOFTMAX(variant, timing, params, x, stream=stream)


def _rows(x):
    x = float_array(x, "x", 2, "(N, D)")
    return (x,), (x,)


_ARGMAX = Op("argmax", _rows, key=_one_array_key, rebuild=_same)
_SOFTMAX = Op("softmax", _rows, key=_one_array_key, rebuild=_same)
