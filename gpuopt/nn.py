"""Building blocks of the reports' networks: activations, pooling, fully connected, argmax.

Each is an op with variants (``gpuopt.variants("max_pool2d")``), like conv2d.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core
from ._validate import _as_array, float_array, integer
from .registry import register, resolve

__all__ = ["relu", "tanh", "max_pool2d", "avg_pool2d", "fully_connected", "argmax"]


def _any_float(x, name: str) -> np.ndarray:
    arr = _as_array(x, name)
    if arr.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension, got a scalar")
    return float_array(arr, name, arr.ndim, "")


def _elementwise(op: str, x, variant, params) -> np.ndarray:
    x = _any_float(x, "x")
    impl, resolved = resolve(op, variant, params)
    return impl.impl(x, **resolved)


def relu(x, *, variant: str | None = None, **params: Any) -> np.ndarray:
    """``max(x, 0)`` elementwise (NaN stays NaN). x: float array of any shape -> float32, same shape."""
    return _elementwise("relu", x, variant, params)


def tanh(x, *, variant: str | None = None, **params: Any) -> np.ndarray:
    """``tanh(x)`` elementwise. x: float array of any shape -> float32, same shape."""
    return _elementwise("tanh", x, variant, params)


def _pool(op: str, x, size, variant, params) -> np.ndarray:
    arr = _as_array(x, "x")
    if arr.ndim not in (2, 3, 4):
        raise ValueError(f"x must be 2-D (H, W), 3-D (C, H, W) or 4-D (N, C, H, W); got shape {arr.shape}")
    x = float_array(arr, "x", arr.ndim, "(..., H, W)")
    size = integer(size, "size", 1)
    if x.shape[-2] < size or x.shape[-1] < size:
        raise ValueError(f"pooling window {size}x{size} is larger than the input {x.shape[-2]}x{x.shape[-1]}")
    impl, resolved = resolve(op, variant, params)
    return impl.impl(x, size, **resolved)


def max_pool2d(x, size: int = 2, *, variant: str | None = None, **params: Any) -> np.ndarray:
    """Max pooling over non-overlapping size x size windows (stride = size).

    x : float, shape (..., H, W) with 2 to 4 dimensions -> float32 (..., H // size, W // size).
    Trailing rows/columns that do not fill a window are dropped; NaN in a window gives NaN.
    """
    return _pool("max_pool2d", x, size, variant, params)


def avg_pool2d(x, size: int = 2, *, variant: str | None = None, **params: Any) -> np.ndarray:
    """Average pooling over non-overlapping size x size windows (stride = size).

    x : float, shape (..., H, W) with 2 to 4 dimensions -> float32 (..., H // size, W // size).
    """
    return _pool("avg_pool2d", x, size, variant, params)


def fully_connected(x, w, bias=None, *, variant: str | None = None, **params: Any) -> np.ndarray:
    """Fully connected layer ``y = x @ w + bias``.

    x : float (N, I); w : float (I, O) (the ECE408 model's [in, out] layout);
    bias : float (O,), optional -> float32 (N, O).
    """
    x = float_array(x, "x", 2, "(N, in_features)")
    w = float_array(w, "w", 2, "(in_features, out_features)")
    if w.shape[0] != x.shape[1]:
        raise ValueError(f"w must be (in_features, out_features) = ({x.shape[1]}, O), got {w.shape}")
    if bias is not None:
        bias = float_array(bias, "bias", 1, "(out_features,)")
        if bias.shape[0] != w.shape[1]:
            raise ValueError(f"bias must have shape ({w.shape[1]},), got {bias.shape}")
    impl, resolved = resolve("fully_connected", variant, params)
    return impl.impl(x, w, bias, **resolved)


def argmax(x, *, variant: str | None = None, **params: Any) -> np.ndarray:
    """Index of the largest entry of each row: x float (N, D) -> int64 (N,).

    Ties go to the first index; a NaN counts as the largest (as ``numpy.argmax``).
    """
    x = float_array(x, "x", 2, "(N, D)")
    impl, resolved = resolve("argmax", variant, params)
    return impl.impl(x, **resolved)


# ---------------------------------------------------------------- CPU references
_CPU = dict(report="reference", needs_cuda=False)


@register("relu", "cpu", description="CPU reference", **_CPU)
def _relu_cpu(x: np.ndarray) -> np.ndarray:
    return _core.activation(x, "relu")


@register("tanh", "cpu", description="CPU reference", **_CPU)
def _tanh_cpu(x: np.ndarray) -> np.ndarray:
    return _core.activation(x, "tanh")


@register("max_pool2d", "cpu", description="CPU reference", **_CPU)
def _max_pool_cpu(x: np.ndarray, size: int) -> np.ndarray:
    return _core.pool2d(x, size, "max")


@register("avg_pool2d", "cpu", description="CPU reference", **_CPU)
def _avg_pool_cpu(x: np.ndarray, size: int) -> np.ndarray:
    return _core.pool2d(x, size, "avg")


@register("fully_connected", "cpu", description="CPU reference, float64 accumulation", **_CPU)
def _fc_cpu(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    return _core.fully_connected(x, w, bias)


@register("argmax", "cpu", description="CPU reference", **_CPU)
def _argmax_cpu(x: np.ndarray) -> np.ndarray:
    return _core.argmax(x)
