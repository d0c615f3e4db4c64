"""Argument checking shared by every op.

Rules (the same for every public function):

* Arrays: NumPy arrays or anything ``np.asarray`` accepts. Float inputs of another
  precision (float16, float64, ...) are converted to float32, and non-contiguous arrays
  are copied to C order; float32 C-contiguous arrays are used without a copy.
* Integer, boolean, complex, string and object arrays where floats are expected raise
  TypeError; a wrong number of dimensions, an empty dimension or a shape mismatch
  raises ValueError. Messages name the argument and say what was expected.
* Device arrays (anything with ``__cuda_array_interface__``) are used in place, never
  copied or converted: they must already have the kernel's dtype (float32, or int16 for
  the sparse layer) and be C-contiguous. Their values are not scanned on the host.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .cuda import DeviceArray, as_device_array

_FLOAT32 = np.dtype(np.float32)

__all__ = ["float_array", "int_array", "integer", "real", "pair", "choice"]


def _describe(a: Any) -> str:
    if isinstance(a, np.ndarray):
        return f"array of dtype {a.dtype} and shape {a.shape}"
    return type(a).__name__


def _as_array(a: Any, name: str) -> np.ndarray:
    if a is None:
        raise TypeError(f"{name} must be an array, got None")
    if isinstance(a, (str, bytes)):
        raise TypeError(f"{name} must be a numeric array, got {type(a).__name__}")
    try:
        arr = np.asarray(a)
    except (ValueError, TypeError) as exc:  # ragged nested lists, odd objects
        raise TypeError(f"{name} must be a numeric array; could not convert {type(a).__name__}: {exc}") from None
    return arr


def _check_shape(arr: np.ndarray, name: str, ndim: int, layout: str) -> None:
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D {layout}; got shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"{name} must not have an empty dimension {layout}; got shape {arr.shape}")


def _convert_hint(a: Any, name: str, dtype: Any) -> str:
    """How to convert ``a`` to ``dtype``, in the words of its own library (gpuopt's DeviceArray has no astype:
    through the host; a PyTorch tensor has ``.to``; CuPy, NumPy and other array types ``astype``; anything else
    ``np.asarray``)."""
    dt = np.dtype(dtype).name
    if type(a) is DeviceArray:
        return f"gpuopt.to_device({name}.numpy().astype(np.{dt}))"
    if type(a).__module__.split(".")[0] == "torch":
        return f"{name}.to(torch.{dt})"
    if hasattr(a, "astype"):
        return f"{name}.astype(np.{dt})"
    return f"np.asarray({name}, dtype=np.{dt})"


def _device_array(a: Any, name: str, ndim: int, layout: str, dtype: Any):
    arr = a if type(a) is DeviceArray else as_device_array(a, name)
    if arr.dtype != dtype:
        raise TypeError(f"{name} is a device array of dtype {arr.dtype}; gpuopt's kernels take {np.dtype(dtype).name} "
                        f"device arrays (convert it first, e.g. {_convert_hint(a, name, dtype)})")
    _check_shape(arr, name, ndim, layout)  # type: ignore[arg-type]
    return arr


def float_array(a: Any, name: str, ndim: int, layout: str = ""):
    """``a`` as a C-contiguous float32 array of ``ndim`` dimensions (see module rules).

    Returns a NumPy array, or a :class:`gpuopt.cuda.DeviceArray` for device inputs.
    """
    if type(a) is DeviceArray or hasattr(a, "__cuda_array_interface__"):  # (gpuopt's own first: no hasattr)
        return _device_array(a, name, ndim, layout, _FLOAT32)
    arr = _as_array(a, name)
    if arr.dtype.kind != "f":
        hint = f" (convert explicitly, e.g. {_convert_hint(a, name, _FLOAT32)})" if arr.dtype.kind in "iub" else ""
        raise TypeError(f"{name} must be a floating-point array; got {_describe(arr)}{hint}")
    _check_shape(arr, name, ndim, layout)
    return np.ascontiguousarray(arr, dtype=np.float32)


def int_array(a: Any, name: str, ndim: int, layout: str = "", dtype: Any = np.int16):
    """``a`` as a C-contiguous integer array of ``dtype``; values must fit (ValueError).

    Device inputs must already have ``dtype`` and are returned as DeviceArray views.
    """
    if hasattr(a, "__cuda_array_interface__"):
        return _device_array(a, name, ndim, layout, dtype)
    arr = _as_array(a, name)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array ({np.dtype(dtype).name} values); got {_describe(arr)}")
    _check_shape(arr, name, ndim, layout)
    info = np.iinfo(dtype)
    if arr.dtype != np.dtype(dtype):
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            raise ValueError(f"{name} values must fit in {np.dtype(dtype).name} [{info.min}, {info.max}]; "
                             f"got range [{lo}, {hi}]")
    return np.ascontiguousarray(arr, dtype=dtype)


def integer(v: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """``v`` as a Python int (bools and floats rejected) within [minimum, maximum]."""
    if type(v) is not int:  # (plain ints skip the ABC check: it is on every call's path)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {v!r} ({type(v).__name__})")
        v = int(v)
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {v}")
    return v


def real(v: Any, name: str, minimum: float | None = None) -> float:
    """``v`` as a finite Python float >= minimum."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {v!r} ({type(v).__name__})")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    return v


def pair(v: Any, name: str, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints (height, width), each >= minimum."""
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{name} must be an int or a pair (height, width), got {v!r}")
        return integer(v[0], f"{name}[0]", minimum), integer(v[1], f"{name}[1]", minimum)
    x = integer(v, name, minimum)
    return x, x


def choice(v: Any, name: str, options: tuple[Any, ...]) -> Any:
    """``v`` if it is one of ``options`` (compared by equality), else ValueError."""
    if not isinstance(v, (str, type(None))) or v not in options:
        raise ValueError(f"{name} must be one of {list(options)}, got {v!r}")
    return v


#: The activations every fused epilogue knows (csrc/common/activation.hpp).
ACTIVATIONS = ("none", "relu", "tanh")


def activation_name(v: Any) -> str:
    """An activation argument as the kernels' name: None or "none", "relu", "tanh" (else ValueError)."""
    return choice(v, "activation", (None, *ACTIVATIONS)) or "none"


def bias_vector(bias: Any, size: int, layout: str):
    """An optional bias: None, or a float32 vector of ``size`` entries (NumPy or device array), ``layout``
    naming them in messages (e.g. "(K,)")."""
    if bias is None:
        return None
    bias = float_array(bias, "bias", 1, layout)
    if bias.shape[0] != size:
        raise ValueError(f"bias must have shape ({size},) {layout}, got {tuple(bias.shape)}")
    return bias
