"""The plan cache: a repeated op call with the same problem skips the checks, the variant resolution and the
argument packing (the per-call cost measured in notes/overhead.md).

An op (gpuopt._exec.Op) first builds a key from what decides how a call is checked and run -- per array its
kind (gpuopt device array, foreign ``__cuda_array_interface__`` array, NumPy), shape, dtype and strides; every
scalar argument with its type; the variant and its parameters with their types; the CUDA module and the current
device (not the stream: a plan runs on the call's stream, ``run(stream, *handles)``) -- and looks it up. A miss
takes the long way (every check, with its messages, exactly as before) and, when that call succeeded, stores a
plan: a hit then does the dict lookup, the output allocation and one launcher call. Arguments that cannot be
keyed cheaply and exactly (lists, float64 or strided NumPy, bools where ints go, unhashable values) always take
the long way. A plan is used only while the registry is as it was when it was made (the op's table, its variant,
the registration count).

Two kinds of plan: a *launch* plan, where the variant's run function handed over a compiled
``LaunchPlan`` (shape, activation and parameters converted once in C++; called with the device addresses),
and a *generic* plan, which calls the resolved variant's run function on a problem rebuilt without checks.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import _ext, registry
from . import cuda as cuda_py
from .cuda import DeviceArray, cai_stream, to_device_checked, torch_tensor_type, torch_view

__all__ = ["Uncacheable", "Plan", "arg_key", "scalar_key", "params_key", "device_key", "store", "clear", "size",
           "device_ptrs", "MAX_PLANS"]

_FLOAT32 = np.dtype(np.float32)
_ND = np.ndarray
_DA = DeviceArray

#: At most this many plans are kept (a process sweeping shapes clears the cache rather than growing it).
MAX_PLANS = 4096

_PLANS: dict[tuple, "Plan"] = {}


class Uncacheable(Exception):
    """This call's arguments cannot be keyed exactly: it takes the long way."""


def arg_key(a: Any) -> tuple[Any, Any]:
    """(key, handle) of an array argument: the handle is what a plan runs on (the array, a DeviceArray view of a
    foreign device array, or None). Raises Uncacheable for anything else."""
    t = type(a)
    if t is _DA:
        return (a._shape, a._dtype), a
    if a is None:
        return None, None
    if t is _ND:
        # Only what the checks pass through unchanged: float32 C-contiguous (others are converted or rejected).
        if a.dtype is not _FLOAT32 or not a.flags.c_contiguous:
            raise Uncacheable
        return (_ND, a.shape), a
    if t is cuda_py._TORCH_TENSOR or (cuda_py._TORCH_TENSOR is None and t is torch_tensor_type()):
        view = torch_view(a)  # (its attributes, not its slow __cuda_array_interface__)
        if view is None:
            raise Uncacheable
        return (t, view._shape, view._dtype), view
    iface = getattr(a, "__cuda_array_interface__", None)
    if type(iface) is not dict:
        raise Uncacheable
    shape, typestr, strides = iface["shape"], iface["typestr"], iface.get("strides")
    if iface.get("mask") is not None:
        raise Uncacheable
    key = (t, tuple(shape), typestr, None if strides is None else tuple(strides))
    view = object.__new__(_DA)  # what as_device_array makes, without its checks (the key stands for them)
    view._shape, view._dtype, view._ptr, view._owner = key[1], np.dtype(typestr), iface["data"][0], a
    view._stream = cai_stream(a, iface)  # the producer's (the op runs on it or waits for it)
    return key, view


def scalar_key(v: Any) -> Any:
    """A stride/padding-like argument as a key: a plain int, or a tuple of two plain ints (bools, floats, lists and
    NumPy integers take the long way, whose checks treat them differently)."""
    t = type(v)
    if t is int or v is None:
        return v
    if t is tuple and len(v) == 2 and type(v[0]) is int and type(v[1]) is int:
        return v
    raise Uncacheable


def params_key(params: dict[str, Any]) -> tuple:
    """A variant's keyword parameters with their types (1, 1.0 and True are equal in Python)."""
    return tuple([(k, type(v), v) for k, v in params.items()]) if params else ()


def device_key() -> tuple:
    """The CUDA module in use and its current device: a plan is only valid on the device it was made for."""
    mod = _ext._load_cuda()[0]
    if mod is None:
        return (None, -1)
    try:
        return (mod, mod.current_device())
    except AttributeError:  # a stand-in module without devices to choose from
        return (mod, 0)


class Plan:
    """A resolved, checked call; ``run(stream, *handles)`` runs it on ``stream`` (a handle)."""

    __slots__ = ("op", "table", "variant", "generation", "run")

    def __init__(self, op: str, variant: Any, run: Callable[..., Any]) -> None:
        self.op, self.variant, self.run = op, variant, run
        self.table = registry._REGISTRY.get(op)
        self.generation = registry.generation()
    # (gpuopt._exec.Op checks, inline on its hot path, that op's table, variant and the registration count are
    # still the plan's.)


def store(key: tuple, plan: Plan) -> None:
    if len(_PLANS) >= MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = plan


def clear() -> None:
    """Forget every plan (the next call of each problem takes the long way again)."""
    _PLANS.clear()


def size() -> int:
    return len(_PLANS)


def device_ptrs(handles: tuple, keep: list, stream: int = 0) -> list[int]:
    """The device addresses of a plan's inputs (0 for None); NumPy inputs are copied in on ``stream``, their device
    copies appended to ``keep`` (alive until the launch is queued)."""
    cuda = _ext.cuda_module()
    previous = cuda.set_stream(stream)
    try:
        out = []
        for h in handles:
            t = type(h)
            if t is _DA:
                out.append(h._ptr)
            elif h is None:
                out.append(0)
            else:
                d = to_device_checked(h)[0]
                keep.append(d)
                out.append(d._ptr)
        return out
    finally:
        cuda.set_stream(previous)
