"""A fake GPU for the network tests on a machine without one.

:func:`install` puts in place of gpuopt's CUDA module a host-memory imitation (allocations from a pool of
NumPy buffers at fake addresses, poisoned with 0xFF bytes like the real pool in tests; copies check that
every access stays inside one allocation; events read the host clock) and registers every GPU variant the
stages use as a "kernel" that copies its
inputs in through the call's ExecContext, computes with the CPU references and copies its result out.
So the networks' GPU paths -- device-resident chunks, row and flatten views, results assembled on the
device, per-layer timing, the weight cache -- run here, and a wiring mistake shows as a wrong result.
"""

from __future__ import annotations

import bisect
import dataclasses
import time
import weakref

import numpy as np

import gpuopt
from gpuopt import _ext, nn, registry
from gpuopt._exec import dispatch
from gpuopt.cuda import DeviceArray
from gpuopt.models import STAGES
from gpuopt.registry import Param, Variant


class _Buffer:
    def __init__(self, mem: "FakeCuda", nbytes: int) -> None:
        self.data = np.full(max(nbytes, 1), 0xFF, np.uint8)  # poisoned: NaN as float32, -1 as ints
        self.stream = mem._stream  # allocated on the current stream, as the real pool
        self.ptr = mem._next
        mem._next += (max(nbytes, 1) + 511) // 256 * 256 + 256  # a gap between allocations
        mem._bases.append(self.ptr)
        mem._live[self.ptr] = self


class FakeCuda:
    """The parts of gpuopt._cuda that gpuopt.cuda, gpuopt._exec and gpuopt.models use."""

    def __init__(self) -> None:
        self._next = 1 << 20
        self._bases: list[int] = []
        self._live: weakref.WeakValueDictionary[int, _Buffer] = weakref.WeakValueDictionary()
        self.h2d = self.d2h = self.d2d = 0
        self._stream = 0
        self.waits: list[tuple[int, int]] = []

    def set_stream(self, stream: int) -> int:  # one host timeline: streams only label the arrays
        previous, self._stream = self._stream, int(stream)
        return previous

    def stream_wait(self, waiter: int, producer: int) -> None:
        self.waits.append((waiter, producer))

    def stream_synchronize(self, stream: int) -> None:
        pass

    def Buffer(self, nbytes: int) -> _Buffer:  # noqa: N802 (the real module's name)
        return _Buffer(self, int(nbytes))

    def _view(self, ptr: int, nbytes: int) -> np.ndarray:
        i = bisect.bisect_right(self._bases, ptr) - 1
        buf = self._live.get(self._bases[i]) if i >= 0 else None
        if buf is None or ptr + nbytes > buf.ptr + buf.data.size:
            raise RuntimeError(f"fake GPU: access of {nbytes} bytes at 0x{ptr:x} outside any live allocation")
        return buf.data[ptr - buf.ptr: ptr - buf.ptr + nbytes]

    def copy_h2d(self, dst: int, host: np.ndarray, nbytes: int, check_finite: bool = False) -> bool:
        self.h2d += 1
        self._view(dst, nbytes)[:] = np.ascontiguousarray(host).view(np.uint8).reshape(-1)[:nbytes]
        return not check_finite or bool(np.isfinite(host).all())

    def copy_d2h(self, out: np.ndarray, src: int, nbytes: int, stream: int = 0) -> None:
        self.d2h += 1
        out.view(np.uint8).reshape(-1)[:nbytes] = self._view(src, nbytes)

    def copy_d2d(self, dst: int, src: int, nbytes: int, stream: int = 0) -> None:
        self.d2d += 1
        self._view(dst, nbytes)[:] = self._view(src, nbytes)

    class Event:
        def record(self, stream: int = -1) -> None:
            self.t = time.perf_counter()

        def elapsed_ms(self, end: "FakeCuda.Event") -> float:
            return (end.t - self.t) * 1e3

    def synchronize(self) -> None:
        pass

    def device_count(self) -> int:
        return 1

    def device_info(self, index: int) -> dict:
        return {"name": "fake GPU (host memory)", "compute_capability": (0, 0), "multiprocessors": 0,
                "total_memory_bytes": 2**30}


def _to_host(a):
    return a.numpy() if isinstance(a, DeviceArray) else a


def _kernel(compute):
    """A fake GPU variant: inputs to the device (timed as h2d), the CPU computation as the kernel, result
    written to a new device array and returned in the caller's form."""

    def run(ctx, *args, **params):
        if args and isinstance(args[0], gpuopt.conv.Conv2dProblem):
            p = args[0]
            dx, dw = ctx.device(p.x), ctx.device(p.w)
            db = None if p.bias is None else ctx.device(p.bias)
            with ctx.kernel():
                out = gpuopt.conv2d(_to_host(dx), _to_host(dw), bias=_to_host(db), stride=p.stride,
                                    padding=p.padding, activation=p.activation, variant="cpu")
                return _store(ctx, out)
        dev = [ctx.device(a) if isinstance(a, (np.ndarray, DeviceArray)) else a for a in args]
        with ctx.kernel():
            out = np.asarray(compute(*[_to_host(a) for a in dev], **params))
            return _store(ctx, out)

    return run


def _store(ctx, out):
    d = ctx.empty(out.shape, out.dtype)
    if out.nbytes:
        _ext.cuda_module().copy_h2d(d.ptr, np.ascontiguousarray(out), out.nbytes)
    return ctx.finish(d)


def _act(y, activation):
    if activation == "relu":
        return np.maximum(y, np.float32(0))
    if activation == "tanh":
        return np.tanh(y).astype(np.float32)
    return y


def _conv2d_pool(x, w, bias, activation, pool, pool_size, input_divisor, **launch):  # launch: fused's tuning
    x = x.astype(np.float32) / np.float32(input_divisor) if x.dtype == np.uint8 else x / np.float32(input_divisor)
    y = gpuopt.conv2d(x, w, bias=bias, activation=activation, variant="cpu")
    return (nn.max_pool2d if pool == "max" else nn.avg_pool2d)(y, pool_size, variant="cpu")


def _softmax(x):
    z = x.astype(np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


_COMPUTE = {
    "relu": lambda x: nn.relu(x, variant="cpu"),
    "tanh": lambda x: nn.tanh(x, variant="cpu"),
    "max_pool2d": lambda x, size: nn.max_pool2d(x, size, variant="cpu"),
    "avg_pool2d": lambda x, size: nn.avg_pool2d(x, size, variant="cpu"),
    "fully_connected": lambda x, w, b, activation=None: _act(nn.fully_connected(x, w, b, variant="cpu"), activation),
    "argmax": lambda x: nn.argmax(x, variant="cpu"),
    "softmax": _softmax,
    "conv2d_pool": _conv2d_pool,
    "conv2d": None,
}


def fake_softmax(x, *, variant=None, timing=False):
    return dispatch("softmax", variant, {}, timing, (x,), x)


def fake_conv2d_pool(x, w, bias=None, *, activation="none", pool="max", pool_size=2, input_divisor=1.0,
                     variant=None, timing=False):
    """gpuopt.nn.conv2d_pool's API, on the fake GPU."""
    assert getattr(x, "dtype", None) in (np.float32, np.uint8), x
    assert activation in ("none", "relu", "tanh") and pool in ("max", "avg"), (activation, pool)
    return dispatch("conv2d_pool", variant, {}, timing, (x, w, bias), x, w, bias, activation, pool, pool_size,
                    input_divisor)


#: One fake device for the process, as a real GPU: device arrays made in one test (a network's cached weights)
#: stay valid in the next.
FAKE = FakeCuda()


def install(monkeypatch) -> FakeCuda:
    """The fake GPU, for one test (monkeypatch undoes it)."""
    fake = FAKE
    monkeypatch.setattr(_ext, "_load_cuda", lambda: (fake, ""))
    needed = {(s.op, s.variant) for table in STAGES.values() for st in table.values()
              for s in (*st.steps, *st.heads.values()) if s.gpu}
    tables = {op: dict(t) for op, t in registry._REGISTRY.items()}
    for op, name in sorted(needed):
        table = tables.setdefault(op, {})
        compute = _COMPUTE[op]
        if name == "cpu":
            if name not in table:  # a CPU reference this build lacks
                table[name] = Variant(op, name, "fake CPU reference", "reference", False, {}, "x", "y", None,
                                      lambda ctx, *a, c=compute: ctx.finish(np.asarray(c(*[_to_host(x) for x in a]))))
            continue
        params = {"activation": Param("activation", None, (None, "relu", "tanh"))} if op == "fully_connected" else {}
        if name in table:
            table[name] = dataclasses.replace(table[name], impl=_kernel(compute), binding=None)
        else:
            table[name] = Variant(op, name, "fake GPU variant", "gpuopt", True, params, "x", "y", None,
                                  _kernel(compute))
    for op, table in tables.items():
        monkeypatch.setitem(registry._REGISTRY, op, table)
    monkeypatch.setattr(nn, "softmax", fake_softmax, raising=False)
    monkeypatch.setattr(nn, "conv2d_pool", fake_conv2d_pool, raising=False)
    return fake
