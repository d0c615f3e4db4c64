"""Half-precision points for :func:`gpuopt.kmeans`: float16 (any device array) and bfloat16 (a torch tensor; on the
host, ml_dtypes' bfloat16) widened to float32 once, before the loop, on the device for device arrays. Every float16
and bfloat16 value is a float32, so the run is the float32 run on the same points, bit for bit, memberships and
centres: no near-tie caveat, no overflow (the sums are float32 and float64, as for float32 points). The cost is one
pass over x (read 2 bytes, write 4 a coordinate) and a float32 copy of x of the call's own."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._ext import cuda_module
from ..cuda import DeviceArray, as_device_array, is_device_array, torch_stream

__all__ = ["widened"]


def widened(x: Any) -> Any:
    """``x`` as float32 where it holds half-precision points (see the module docstring), else ``x`` unchanged (the
    caller's checks then name what is wrong with it)."""
    if type(x) is DeviceArray:
        return _widen(x.shape, x.ptr, x._stream or 0, False) if x.dtype == np.float16 else x
    if _is_torch_cuda(x):
        if str(x.dtype) not in ("torch.float16", "torch.bfloat16"):
            return x
        if not x.is_contiguous():
            raise ValueError("x: device arrays must be C-contiguous; make a contiguous copy on the device first "
                             "(x.contiguous())")
        return _widen(tuple(x.shape), x.data_ptr(), torch_stream(x), str(x.dtype) == "torch.bfloat16")
    if is_device_array(x):
        try:
            view = as_device_array(x, "x")
        except (TypeError, ValueError):  # (not a dtype gpuopt reads: the caller's checks say so)
            return x
        return _widen(view.shape, view.ptr, view._stream or 0, False) if view.dtype == np.float16 else x
    dt = getattr(x, "dtype", None)  # host: ml_dtypes' bfloat16 has no float kind; float16 converts as any float
    return np.asarray(x, np.float32) if getattr(dt, "name", "") == "bfloat16" else x


def _is_torch_cuda(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch" and bool(getattr(x, "is_cuda", False))


def _widen(shape: tuple, ptr: int, stream: int, bfloat16: bool) -> DeviceArray:
    """A float32 DeviceArray of ``shape`` made on ``stream`` from the half values at ``ptr``."""
    cuda = cuda_module()
    previous = cuda.set_stream(stream)
    try:
        out = DeviceArray.empty(shape, np.float32)
        n = int(np.prod(shape, dtype=np.int64))
        if n:
            cuda.widen_half(out.ptr, ptr, n, bfloat16)
    finally:
        cuda.set_stream(previous)
    return out
