"""How an op runs: where its arrays live, and the optional phase timing.

Every variant receives an :class:`ExecContext` first; ``ctx.variant`` is the registry's
:class:`~gpuopt.registry.Variant` being run, so a variant's run function finds its launcher
(``gpuopt._ext.launcher(ctx.variant)``) without naming it. GPU variants call
``ctx.device(a)`` for each input (a NumPy array is copied in, a device array is used in
place), ``ctx.empty(...)`` for outputs, run their kernels inside ``with ctx.kernel():``
and return ``ctx.finish(out)``, which gives NumPy back when the caller passed NumPy and a
DeviceArray when the caller passed device arrays. CPU variants call ``ctx.host(a)``.
A GPU call runs on one stream, ``ctx.stream`` (gpuopt.cuda's rules: an explicit ``stream=``, else its first
device input's, else the legacy default stream): :meth:`ExecContext.run` makes it the current stream of the
compiled module for the run, so every copy, allocation and launcher call of the variant is queued on it.
With ``timing=True`` each phase is measured: with CUDA events on the GPU (the device
timeline, so the host's own overhead between launches is not counted as kernel time
unless the GPU sat idle waiting), with ``time.perf_counter`` on the CPU.
"""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from . import _ext, _plan, registry
from .cuda import DeviceArray, stream_handle, to_device
from .registry import resolve

__all__ = ["Timing", "ExecContext", "call_stream", "check_before_copy", "dispatch", "Op"]


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
                self.start.record()  # (on the current stream: the call's)
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

    def __init__(self, *, timing: bool, device_result: bool, gpu: bool, variant: Any = None, stream: int = 0) -> None:
        self.timing = timing
        self.stream = stream  # the call's stream (a handle; 0: the legacy default stream)
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

    def offer_launch(self, launch: Callable[..., Any], inputs: tuple, outputs: tuple, plan: tuple | None = None,
                     params: dict[str, Any] | None = None) -> None:
        """Called by a run function after its launch: where this call's plan will be cached, the result stays on the
        device and every input is a device array (``inputs``: the plan key's handles, in order; None where an
        optional array is absent), the plan replays ``launch(*handles, *outputs)`` on new handles, with new outputs
        of ``outputs``' shapes and dtypes allocated from the pool on the call's stream, skipping the run function
        (its checks, lookups and context). Returns ``outputs[0]``, or the tuple of them when there are several.

        ``plan`` (and ``params``): the arguments of the variant's compiled planner, ``plan.<op>_<variant>(*plan,
        **params)``, whose launcher takes the addresses of ``inputs`` then of the output. Where the variant has one
        and there is one output, a replay is one call into C++ (``LaunchPlan.run_new``: allocate, launch, return the
        DeviceArray); otherwise ``launch`` as above."""
        if not (self.planning and self.device_result) or not all(a is None or type(a) is DeviceArray for a in inputs):
            return
        if plan is not None and len(outputs) == 1 and 1 <= len(inputs) <= 3:
            cplan = _ext.planner(self.variant)
            if cplan is not None:
                self.offer_replay(_planned_replay(cplan(*plan, **(params or {})), len(inputs), outputs[0]))
                return
        cuda, alloc = _ext.cuda_module(), DeviceArray._alloc
        specs = [(o.shape, o.dtype, o.nbytes) for o in outputs]
        single = len(specs) == 1

        def replay(stream: int, *handles: Any) -> Any:
            previous = cuda.set_stream(stream)
            try:
                outs = [alloc(cuda, shape, dtype, nbytes) for shape, dtype, nbytes in specs]
                launch(*handles, *outs)
            finally:
                cuda.set_stream(previous)
            return outs[0] if single else tuple(outs)
        self.offer_replay(replay)

    def run(self, variant: Any, *args: Any, **params: Any) -> Any:
        """Run ``variant`` (a registry Variant, parameters resolved) in this call's context: how a variant
        that picks another (conv2d ``auto``) hands the call over."""
        outer, self.variant = self.variant, variant
        cuda = _ext._load_cuda()[0] if self.gpu and outer is None else None  # (the outermost run sets the stream)
        previous = cuda.set_stream(self.stream) if cuda is not None else None
        try:
            return variant.impl(self, *args, **params)
        finally:
            self.variant = outer
            if cuda is not None:
                cuda.set_stream(previous)

    def record(self) -> Timing | None:
        """The Timing of this call (waits for the last event), or None without timing."""
        if not self.timing:
            return None
        ms = {name: phase.ms() for name, phase in self._phases.items()}
        return Timing(ms["h2d"], ms["kernel"], ms["d2h"], "gpu" if self.gpu else "cpu", dict(self.details))


def _planned_replay(launch: Any, n: int, out: DeviceArray) -> Callable[..., Any]:
    """A replay of a compiled ``LaunchPlan`` whose launcher takes ``n`` input addresses (0 for None), then the
    output's: ``run_new`` allocates an output like ``out`` on the call's stream, launches and returns it."""
    launch.set_output(DeviceArray, out.shape, out.dtype, out.nbytes, n)
    run_new = launch.run_new
    if n == 1:  # (one per arity: no argument packing on the hot path)
        return lambda stream, x: run_new(0 if x is None else x._ptr, 0, 0, stream)
    if n == 2:
        return lambda stream, x, y: run_new(0 if x is None else x._ptr, 0 if y is None else y._ptr, 0, stream)
    return lambda stream, x, y, z: run_new(0 if x is None else x._ptr, 0 if y is None else y._ptr,
                                           0 if z is None else z._ptr, stream)


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


def note_uses(arrays: tuple, stream: int) -> None:
    """A call on ``stream`` has queued its work on ``arrays``: each of gpuopt's own device arrays among them made on
    (or completed on) another stream gets its buffer's free ordered after ``stream``'s work (``Buffer.used_on``, as
    PyTorch's ``record_stream``), so dropping an input right after the call cannot hand its bytes to a new array on
    its own stream while the call's kernels are still queued here. Foreign arrays are their owners' to keep."""
    for a in arrays:
        if type(a) is _DA and (a._stream is None or a._stream != stream):
            o = a._owner
            while type(o) is _DA:  # a view: its base's buffer
                o = o._owner
            if type(o) is _ext.cuda_module().Buffer:
                o.used_on(stream)


def call_stream(arrays: tuple, stream: int | None) -> int:
    """The stream a call runs on (a handle): ``stream`` when given (see gpuopt.cuda.stream_handle), else its first
    device array's; every device array made on another stream is waited for there (an event, no host wait)."""
    s = stream
    for a in arrays:
        if type(a) is _DA:
            on = a._stream
            if on is not None and on != s:  # (None: a complete array, read anywhere)
                if s is None:
                    s = on
                else:
                    _ext.cuda_module().stream_wait(s, on)
    return 0 if s is None else s


def _run_on(v: Any, resolved: dict[str, Any], timing: bool, arrays: tuple, args: tuple, stream: int) -> Any:
    """Run the resolved variant ``v`` on ``args`` in a new context on ``stream`` (a handle, already resolved by
    call_stream): the result (and its Timing)."""
    ctx = ExecContext(timing=timing, device_result=any(isinstance(a, DeviceArray) for a in arrays), gpu=v.needs_cuda,
                      stream=stream)
    out = ctx.run(v, *args, **resolved)
    return (out, ctx.record()) if timing else out


def _run(v: Any, resolved: dict[str, Any], timing: bool, arrays: tuple, args: tuple, stream: int | None = None) -> Any:
    """:func:`_run_on` on the call's stream, the inputs' frees then ordered after it (note_uses)."""
    s = call_stream(arrays, stream) if v.needs_cuda else 0
    out = _run_on(v, resolved, timing, arrays, args, s)
    if v.needs_cuda:
        note_uses(arrays, s)
    return out


def dispatch(op: str, variant: str | None, params: dict[str, Any], timing: bool, arrays: tuple, *args: Any,
             stream: Any = None) -> Any:
    """Resolve ``variant`` of ``op``, run it on ``args`` and return its result (and Timing): an op without an
    :class:`Op` (test stand-ins). ``arrays`` are the caller's array arguments: if any is a DeviceArray the result is
    returned on the device.
    """
    if not isinstance(timing, bool):
        raise TypeError(f"{op}: timing must be True or False, got {timing!r}")
    v, resolved = resolve(op, variant, params)
    return _run(v, resolved, timing, arrays, args, stream_handle(stream))


_PLANS = _plan._PLANS
_REGISTRY = registry._REGISTRY
_DA = DeviceArray
_NO_PLAN = (_plan.Uncacheable, TypeError)  # TypeError: an unhashable value, rejected the long way


class Op:
    """One public op: its checks, its variant resolution and its plan cache, in one place.

    ``op(variant, timing, params, *args, stream=None)`` runs a call of the public function (``args``: its own
    arguments, in the order ``validate`` takes them; ``stream``: the public ``stream=``, see gpuopt.cuda).
    The call's stream is resolved by :func:`call_stream` from its device arrays. The long way:
    ``validate(*args) -> (arrays, run_args)`` (every argument check; ``arrays`` are the caller's arrays, whose
    kinds decide where the result goes), the variant resolved once (``default(*run_args)`` names it for
    ``variant=None`` without parameters, where the op has a rule of its own), ``check(variant_name, *run_args)``
    (the size check, which needs the variant), the GPU requirement, then the variant's run function on
    ``run_args``. ``result(out, *args)`` turns the run function's value into
    the public result (kmeans' ``KMeansResult``).

    With ``key``, calls without timing use the plan cache (gpuopt._plan): ``key(*args) -> (key, handles)`` (or
    Uncacheable) keys the problem; a call seen before replays its plan on ``handles`` and skips everything
    above. After a long-way call the plan is the launch its run function offered (``ctx.offer_replay``), else
    the variant's run function on ``rebuild(*run_args)(*handles)`` (the run arguments rebuilt, unchecked).
    """

    __slots__ = ("name", "validate", "key", "default", "check", "rebuild", "result")

    def __init__(self, name: str, validate: Callable[..., tuple], *, key: Callable[..., tuple] | None = None,
                 rebuild: Callable[..., Callable[..., tuple]] | None = None,
                 default: Callable[..., str] | None = None, check: Callable[..., None] | None = None,
                 result: Callable[..., Any] | None = None) -> None:
        if (key is None) != (rebuild is None):
            raise ValueError(f"{name}: a plan key needs a rebuild, and a rebuild a key")
        self.name, self.validate, self.key, self.rebuild = name, validate, key, rebuild
        self.default, self.check, self.result = default, check, result

    def __call__(self, variant: str | None, timing: bool, params: dict[str, Any], *args: Any,
                 stream: Any = None) -> Any:
        key = None
        if stream is not None:
            stream = stream_handle(stream)
        if timing is False and self.key is not None:
            try:
                if not (variant is None or type(variant) is str):
                    raise _plan.Uncacheable
                fam, handles = self.key(*args)
                key = (self, fam, variant, tuple([(k, type(x), x) for k, x in params.items()]) if params else (),
                       _plan.device_key())
                plan = _PLANS.get(key)
            except _NO_PLAN:
                key = plan = None
            # A plan counts while the registry is as it was (its op's table, its variant, the registration count).
            if plan is not None and plan.generation == registry._GENERATION[0]:
                table = _REGISTRY.get(self.name)
                if table is plan.table and table.get(plan.variant.name) is plan.variant:
                    s, cross = stream, False
                    for h in handles:  # call_stream, inlined (the hot path)
                        if type(h) is _DA:
                            on = h._stream
                            if on is None:
                                cross = True
                            elif on != s:
                                if s is None:
                                    s = on
                                else:
                                    _ext.cuda_module().stream_wait(s, on)
                                    cross = True
                    s = 0 if s is None else s
                    out = plan.run(s, *handles)
                    if cross:
                        note_uses(handles, s)
                    return out if self.result is None else self.result(out, *args)
        elif not isinstance(timing, bool):
            raise TypeError(f"{self.name}: timing must be True or False, got {timing!r}")
        arrays, run_args = self.validate(*args)
        if variant is None and not params and self.default is not None:
            # (parameters name the registry default's: it stays the one that runs)
            variant = self.default(*run_args)
        v, resolved = resolve(self.name, variant, params, require_device=False)
        if self.check is not None:
            self.check(v.name, *run_args)
        if v.needs_cuda and _ext._load_cuda()[0] is None:  # (cached) the message and its CPU choices only on failure
            from ._ext import require_cuda

            require_cuda(f"{self.name}/{v.name}", registry.cpu_variants(self.name))
        s = call_stream(arrays, stream) if v.needs_cuda else 0
        if key is None:
            out = _run_on(v, resolved, timing, arrays, run_args, s)
        else:
            out = self._plan(key, v, resolved, arrays, run_args, s)
        if v.needs_cuda:
            note_uses(arrays, s)
        if self.result is None:
            return out
        return (self.result(out[0], *args), out[1]) if timing else self.result(out, *args)

    def _plan(self, key: tuple, v: Any, resolved: dict[str, Any], arrays: tuple, run_args: tuple, stream: int) -> Any:
        """Run a keyed call the long way on ``stream``, then store its plan under ``key``."""
        device_result = any(isinstance(a, DeviceArray) for a in arrays)
        ctx = ExecContext(timing=False, device_result=device_result, gpu=v.needs_cuda, stream=stream)
        ctx.planning = True
        out = ctx.run(v, *run_args, **resolved)
        if len(ctx.replays) == 1:
            run = ctx.replays[0]
        else:
            rebuild, gpu = self.rebuild(*run_args), v.needs_cuda

            def run(stream: int, *handles: Any) -> Any:
                c = ExecContext(timing=False, device_result=device_result, gpu=gpu, stream=stream)
                return c.run(v, *rebuild(*handles), **resolved)
        _plan.store(key, _plan.Plan(self.name, v, run))
        return out
