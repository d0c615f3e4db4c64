"""How an op runs: where its arrays live, and the optional phase timing.

Every variant receives an :class:`ExecContext` first; ``ctx.variant`` is the registry's
:class:`~gpuopt.registry.Variant` being run, so a variant's run function finds its launcher
(``gpuopt._ext.launcher(ctx.variant)``) without naming it. GPU variants call
``ctx.device(a)`` for each input (a NumPy array is copied in, a device array is used in
place), ``ctx.empty(...)`` for outputs, run their kernels inside ``with ctx.kernel():``
and return ``ctx.finish(out)``, which gives NumPy back when the caller passed NumPy and a
DeviceArray when the caller passed device arrays. CPU variants call ``ctx.host(a)``.
With ``timing=True`` each phase is measured: with CUDA events on the GPU (the device
timeline, so the host's own overhead between launches is not counted as kernel time
unless the GPU sat idle waiting), with ``time.perf_counter`` on the CPU.
"""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from . import _plan
from .cuda import DeviceArray, to_device
from .registry import resolve

__all__ = ["Timing", "ExecContext", "check_before_copy", "dispatch", "dispatch_planned"]


@dataclass(frozen=True)
class Timing:
    """Phases of one op call, in milliseconds.

    Attributes
    ----------
    h2d_ms : float
        Host-to-device copies of the inputs (0 for device-array inputs).
    kernel_ms : float
        The kernel(s); for variants with a host loop (k-means ``liao``) the whole loop.
    d2h_ms : float
        Device-to-host copy of the result (0 when a device array is returned).
    device : str
        "gpu" or "cpu": which clock measured it (CUDA events or perf_counter).
    details : dict
        Variant-specific extra phases (e.g. transfers inside a loop).
    """

    h2d_ms: float
    kernel_ms: float
    d2h_ms: float
    device: str
    details: dict[str, float] = field(default_factory=dict)

    @property
    def transfer_ms(self) -> float:
        return self.h2d_ms + self.d2h_ms

    @property
    def total_ms(self) -> float:
        return self.h2d_ms + self.kernel_ms + self.d2h_ms


class _Phase:
    """One timed phase: a pair of CUDA events, or host clock readings."""

    def __init__(self, gpu: bool) -> None:
        self.gpu = gpu
        self.start: Any = None
        self.end: Any = None
        self.host_ms = 0.0

    def begin(self) -> None:
        if self.gpu:
            from ._ext import cuda_module

            if self.start is None:  # first begin of this phase: later ones extend it
                self.start = cuda_module().Event()
                self.start.record()
        else:
            self._t0 = time.perf_counter()

    def finish(self) -> None:
        if self.gpu:
            from ._ext import cuda_module

            self.end = self.end or cuda_module().Event()
            self.end.record()
        else:
            self.host_ms += (time.perf_counter() - self._t0) * 1e3

    def ms(self) -> float:
        if self.gpu:
            return float(self.start.elapsed_ms(self.end)) if self.start is not None else 0.0
        return self.host_ms


_UNTIMED = nullcontext()


class ExecContext:
    """Placement and timing of one op call (see the module docstring)."""

    def __init__(self, *, timing: bool, device_result: bool, gpu: bool, variant: Any = None) -> None:
        self.timing = timing
        self.device_result = device_result
        self.gpu = gpu
        self.variant = variant
        self.details: dict[str, float] = {}
        self._phases = {name: _Phase(gpu) for name in ("h2d", "kernel", "d2h")} if timing else {}
        self.planning = False  # a call whose plan will be cached: a launching run function offers a replay
        self.replays: list = []

    def _phase(self, name: str):
        # Untimed calls (the usual ones) share one no-op context manager: no generator per phase.
        return self._timed(name) if self.timing else _UNTIMED

    @contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        self._phases[name].begin()
        try:
            yield
        finally:
            self._phases[name].finish()

    def kernel(self):
        """Context manager around the compute (the 'kernel' phase)."""
        return self._phase("kernel")

    def h2d(self):
        """Context manager around a host-to-device copy (the 'h2d' phase)."""
        return self._phase("h2d")

    def device(self, a: Any) -> DeviceArray:
        """``a`` on the device: device arrays as they are, NumPy copied in (timed as h2d)."""
        if isinstance(a, DeviceArray):
            return a
        with self.h2d():
            return to_device(a)

    def host(self, a: Any) -> np.ndarray:
        """``a`` on the host: NumPy as it is, device arrays copied out (timed as d2h)."""
        if isinstance(a, DeviceArray):
            with self._phase("d2h"):
                return a.numpy()
        return a

    @staticmethod
    def empty(shape, dtype=np.float32) -> DeviceArray:
        return DeviceArray.empty(shape, dtype)

    def finish(self, out: Any) -> Any:
        """The result in the caller's form: a DeviceArray for device callers, else NumPy."""
        if isinstance(out, DeviceArray) and not self.device_result:
            with self._phase("d2h"):
                return out.numpy()
        if isinstance(out, np.ndarray) and self.device_result:
            with self._phase("h2d"):
                return to_device(out)
        return out

    def offer_replay(self, replay: Any) -> None:
        """Called by a run function after its launch, when ``planning``: ``replay(*handles)`` repeats this call's
        launch on new inputs of the same problem (gpuopt._plan), skipping everything else."""
        self.replays.append(replay)

    def run(self, variant: Any, *args: Any, **params: Any) -> Any:
        """Run ``variant`` (a registry Variant, parameters resolved) in this call's context: how a variant
        that picks another (conv2d ``auto``) hands the call over."""
        outer, self.variant = self.variant, variant
        try:
            return variant.impl(self, *args, **params)
        finally:
            self.variant = outer

    def record(self) -> Timing | None:
        """The Timing of this call (waits for the last event), or None without timing."""
        if not self.timing:
            return None
        ms = {name: phase.ms() for name, phase in self._phases.items()}
        return Timing(ms["h2d"], ms["kernel"], ms["d2h"], "gpu" if self.gpu else "cpu", dict(self.details))


def check_before_copy(variant: Any, arrays: tuple, *args: Any, **params: Any) -> None:
    """The host-side checks of ``variant``'s launcher (``check.<op>_<variant>(*args, **params)``, where it has
    some) when any of ``arrays`` is not yet on the device, so that nothing is copied for a call the launcher
    would reject. With every input already on the device the launcher runs the same checks first itself."""
    if all(isinstance(a, DeviceArray) for a in arrays if a is not None):
        return
    from ._ext import host_check

    check = host_check(variant)
    if check is not None:
        check(*args, **params)


def dispatch(op: str, variant: str | None, params: dict[str, Any], timing: bool, arrays: tuple, *args: Any) -> Any:
    """Resolve ``variant`` of ``op``, run it on ``args`` and return its result (and Timing).

    ``arrays`` are the caller's array arguments: if any is a DeviceArray the result is
    returned on the device.
    """
    if not isinstance(timing, bool):
        raise TypeError(f"{op}: timing must be True or False, got {timing!r}")
    v, resolved = resolve(op, variant, params)
    ctx = ExecContext(timing=timing, device_result=any(isinstance(a, DeviceArray) for a in arrays), gpu=v.needs_cuda)
    out = ctx.run(v, *args, **resolved)
    return (out, ctx.record()) if timing else out


def dispatch_planned(key: tuple, op: str, variant: str | None, params: dict[str, Any], arrays: tuple, args: tuple,
                     rebuild: Any) -> Any:
    """:func:`dispatch` without timing, for a call whose arguments passed the checks: runs it, then stores its
    plan under ``key`` (gpuopt._plan). The plan is the launch the run function offered (one launch, shape and
    parameters packed in C++), else the resolved variant's run function on ``rebuild(*handles)`` (the variant's
    arguments, rebuilt from the plan's inputs without checks)."""
    v, resolved = resolve(op, variant, params)
    device_result = any(isinstance(a, DeviceArray) for a in arrays)
    ctx = ExecContext(timing=False, device_result=device_result, gpu=v.needs_cuda)
    ctx.planning = True
    out = ctx.run(v, *args, **resolved)
    if len(ctx.replays) == 1:
        run = ctx.replays[0]
    else:
        gpu = v.needs_cuda

        def run(*handles: Any) -> Any:
            c = ExecContext(timing=False, device_result=device_result, gpu=gpu)
            return c.run(v, *rebuild(*handles), **resolved)
    _plan.store(key, _plan.Plan(op, v, run))
    return out
