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
* Sizes: an output (or a padded, unrolled or expanded copy of an input the chosen variant
  makes) larger than the memory that would hold it raises ValueError naming the arguments
  that set its size, before anything is allocated or copied (:func:`check_memory`).
"""

from __future__ import annotations

import functools
import math
import numbers
import os
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from .cuda import DeviceArray, as_device_array, is_cuda_dlpack

_FLOAT32 = np.dtype(np.float32)

__all__ = ["float_array", "int_array", "integer", "real", "pair", "choice", "Buffer", "check_memory",
           "host_memory_bytes", "device_memory_bytes", "runs_on_gpu", "format_bytes"]


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


def _check_shape(arr: np.ndarray, name: str, ndim: int, layout: str, empty_rows: bool = False) -> None:
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D {layout}; got shape {arr.shape}")
    if 0 in (arr.shape[1:] if empty_rows else arr.shape):
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


def _device_array(a: Any, name: str, ndim: int, layout: str, dtype: Any, empty_rows: bool = False):
    arr = a if type(a) is DeviceArray else as_device_array(a, name)
    if arr.dtype != dtype:
        raise TypeError(f"{name} is a device array of dtype {arr.dtype}; gpuopt's kernels take {np.dtype(dtype).name} "
                        f"device arrays (convert it first, e.g. {_convert_hint(a, name, dtype)})")
    _check_shape(arr, name, ndim, layout, empty_rows)  # type: ignore[arg-type]
    return arr


def float_array(a: Any, name: str, ndim: int, layout: str = "", empty_rows: bool = False):
    """``a`` as a C-contiguous float32 array of ``ndim`` dimensions (see module rules); ``empty_rows``: its first
    dimension may be 0 (a distributed rank that owns no rows), the others may not.

    Returns a NumPy array, or a :class:`gpuopt.cuda.DeviceArray` for device inputs.
    """
    if type(a) is DeviceArray or hasattr(a, "__cuda_array_interface__") or is_cuda_dlpack(a):  # (gpuopt's first)
        return _device_array(a, name, ndim, layout, _FLOAT32, empty_rows)
    arr = _as_array(a, name)
    if arr.dtype.kind != "f":
        hint = f" (convert explicitly, e.g. {_convert_hint(a, name, _FLOAT32)})" if arr.dtype.kind in "iub" else ""
        raise TypeError(f"{name} must be a floating-point array; got {_describe(arr)}{hint}")
    _check_shape(arr, name, ndim, layout, empty_rows)
    return np.ascontiguousarray(arr, dtype=np.float32)


def int_array(a: Any, name: str, ndim: int, layout: str = "", dtype: Any = np.int16):
    """``a`` as a C-contiguous integer array of ``dtype``; values must fit (ValueError).

    Device inputs must already have ``dtype`` and are returned as DeviceArray views.
    """
    if hasattr(a, "__cuda_array_interface__") or is_cuda_dlpack(a):
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


# ------------------------------------------------------------------------------------------ sizes

#: Buffers up to this many bytes in all are not checked against the machine (every machine gpuopt runs on has far
#: more): on the common path the check is a few multiplications.
UNCHECKED_BYTES = 64 << 20


class Buffer(NamedTuple):
    """A buffer an op call would allocate, for :func:`check_memory`.

    ``what`` names it with its shape and dtype ("the output y (N, K, P, Q) = (1, 1, 9, 9) float32"), or is a
    function giving that text (called for a message only: on the common path nothing is formatted); ``nbytes``
    is its size. ``where``: ``"output"`` (the result: allocated on the device by a GPU variant and on the host by
    a CPU one; a NumPy caller gets it on the host, a device-array caller on the device), ``"host"`` or
    ``"device"`` (scratch of the chosen variant).
    """

    what: str | Callable[[], str]
    nbytes: int
    where: str = "output"


def _text(v: str | Callable[[], str]) -> str:
    return v() if callable(v) else v


def format_bytes(n: int) -> str:
    """``n`` bytes in binary units: "14.6 TiB"."""
    value, unit = float(n), "bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            break
        value /= 1024
    return f"{int(value)} bytes" if unit == "bytes" else f"{value:.3g} {unit}"


@functools.lru_cache(maxsize=None)
def host_memory_bytes() -> int | None:
    """This machine's physical memory in bytes (``SC_PAGE_SIZE * SC_PHYS_PAGES``), None where unknown."""
    try:
        n = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows) or no such name
        return None
    return n if n > 0 else None


_DEVICE_MEMORY: dict[tuple, int | None] = {}


def device_memory_bytes() -> int | None:
    """Total memory in bytes of the current CUDA device (``device_info()["total_memory_bytes"]``), None without
    a usable GPU; read once per device."""
    from ._ext import _load_cuda

    mod = _load_cuda()[0]
    if mod is None:
        return None
    try:
        index = int(mod.current_device())
    except Exception:  # a module without devices to choose from
        index = 0
    key = (id(mod), index)
    if key not in _DEVICE_MEMORY:
        try:
            _DEVICE_MEMORY[key] = int(mod.device_info(index)["total_memory_bytes"]) or None
        except Exception:  # no answer: no device bound (the allocation then says what failed)
            _DEVICE_MEMORY[key] = None
    return _DEVICE_MEMORY[key]


def runs_on_gpu(op: str, variant: str | None) -> bool:
    """Whether ``op`` called with ``variant`` (None: the op's default here) runs on the GPU; False for a name the
    registry does not know (rejected later, by the variant lookup)."""
    from .registry import default_variant, variants

    try:
        v = variants(op).get(default_variant(op) if variant is None else variant)
    except (ValueError, TypeError):
        return False
    return v is not None and v.needs_cuda


def check_memory(op: str, arguments: str | Callable[[], str], buffers: Sequence[Buffer], *,
                 gpu: bool | Callable[[], bool], device_result: bool) -> None:
    """ValueError when ``buffers`` cannot be allocated: more bytes than this machine's physical memory on the
    host side, or than the GPU's total memory on the device side. Nothing is allocated.

    Parameters
    ----------
    op : str
        The call, for the message ("conv2d").
    arguments : str, or a function giving it (called for a message only)
        The arguments that set the sizes, with their values ("padding=(1000000, 1000000) with x (N, C, H, W) =
        (1, 1, 8, 8), ..."): what the message tells the caller to change.
    buffers : sequence of :class:`Buffer`
    gpu : bool, or a function giving it
        Whether the variant runs on the GPU (called only when the buffers exceed :data:`UNCHECKED_BYTES`).
    device_result : bool
        Whether the result stays on the device (device-array inputs).
    """
    if sum(b.nbytes for b in buffers) <= UNCHECKED_BYTES:
        return
    on_gpu = gpu() if callable(gpu) else bool(gpu)
    host = [b for b in buffers if b.where == "host" or (b.where == "output" and not (on_gpu and device_result))]
    device = [b for b in buffers if b.where == "device" or (b.where == "output" and (on_gpu or device_result))]
    for side, needed, limit, of in (("host", host, host_memory_bytes(), "this machine's physical memory"),
                                    ("device", device, device_memory_bytes() if device else None,
                                     "the GPU's total memory")):
        total = sum(b.nbytes for b in needed)
        if limit is not None and total > limit:
            parts = "; ".join(f"{_text(b.what)}: {format_bytes(b.nbytes)}" for b in needed)
            raise ValueError(f"{op}: {_text(arguments)} would need {format_bytes(total)} of {side} memory ({parts}), "
                             f"more than the {format_bytes(limit)} of {of}; nothing was allocated")
