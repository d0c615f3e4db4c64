"""The measuring harness: :func:`measure` and its :class:`Stats`, the GPU timer,
:func:`median_timing` and the :class:`Progress` line (the protocol is described in
:mod:`gpuopt.bench`)."""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

import gpuopt
from gpuopt._ext import cuda_available, cuda_module

__all__ = ["Stats", "measure", "median_timing", "Progress", "SPIN_US", "MAX_SPIN_US"]

#: Initial length of the spin kernel queued before each GPU repeat (microseconds).
SPIN_US = 200.0
#: Longest spin measure() will queue (microseconds); beyond it the overhead is not hidden.
MAX_SPIN_US = 200_000.0
# The host must finish enqueuing within this fraction of the spin (safety margin).
_SPIN_MARGIN = 0.8
# Attempts per repeat before a sample is accepted with the overhead not hidden.
_MAX_RETRIES = 4


# --------------------------------------------------------------------------- Stats


@dataclass(frozen=True)
class Stats:
    """Statistics of the recorded repeats of one :func:`measure` call, in milliseconds.

    Attributes
    ----------
    median_ms, min_ms, max_ms, mean_ms, std_ms : float
        Over the recorded samples (``std_ms`` is the sample standard deviation, 0 for
        one sample).
    repeats : int
        Number of recorded samples.
    samples : tuple of float
        Every recorded sample (ms), in order.
    device : str
        "gpu" (CUDA events) or "cpu" (perf_counter).
    spin_us : float or None
        GPU: length of the spin kernel at the end of the run (None on the CPU).
    retries : int
        GPU: repeats redone with a longer spin because the host was slower than the spin.
    overhead_hidden : bool
        GPU: False when some samples could not hide the host's enqueue time (``fn``
        waits for the GPU, or needs more than ``MAX_SPIN_US`` to enqueue); those samples
        then include host overhead. Always True on the CPU.
    """

    median_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    std_ms: float
    repeats: int
    samples: tuple[float, ...] = field(repr=False)
    device: str = "cpu"
    spin_us: float | None = None
    retries: int = 0
    overhead_hidden: bool = True

    @classmethod
    def from_samples(cls, samples: Sequence[float], **extra: Any) -> "Stats":
        s = tuple(float(v) for v in samples)
        if not s:
            raise ValueError("Stats need at least one sample")
        return cls(
            median_ms=float(statistics.median(s)),
            min_ms=min(s),
            max_ms=max(s),
            mean_ms=float(statistics.fmean(s)),
            std_ms=float(statistics.stdev(s)) if len(s) > 1 else 0.0,
            repeats=len(s),
            samples=s,
            **extra,
        )

    def row(self, prefix: str = "") -> dict[str, Any]:
        """The statistics as flat result-row fields (samples left out)."""
        return {f"{prefix}median_ms": self.median_ms, f"{prefix}min_ms": self.min_ms,
                f"{prefix}max_ms": self.max_ms, f"{prefix}mean_ms": self.mean_ms,
                f"{prefix}std_ms": self.std_ms, f"{prefix}repeats": self.repeats}


# --------------------------------------------------------------------------- measure


_flush_buffers: dict[int, Any] = {}


def _flush_buffer(cuda: Any) -> tuple[Any, int]:
    """A device buffer of twice the L2 size, allocated once per size (outside any timing)."""
    info = gpuopt.device_info() or {}
    nbytes = max(2 * int(info.get("l2_cache_bytes") or 0), 8 << 20)
    if nbytes not in _flush_buffers:
        _flush_buffers[nbytes] = cuda.Buffer(nbytes)
    return _flush_buffers[nbytes], nbytes


def _resolve_device(device: str | None) -> str:
    if device is None:
        return "gpu" if cuda_available() else "cpu"
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'gpu', 'cpu' or None, got {device!r}")
    if device == "gpu":
        gpuopt._ext.require_cuda("measure(device='gpu')", ("cpu",), "device")
    return device


def _check_counts(warmup: int, repeat: int) -> None:
    for name, value, low in (("warmup", warmup, 0), ("repeat", repeat, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def measure(
    fn: Callable[[], Any],
    *,
    warmup: int = 5,
    repeat: int = 50,
    min_time_s: float | None = None,
    max_time_s: float | None = None,
    flush_l2: bool = False,
    device: str | None = None,
) -> Stats:
    """Time ``fn()`` (see the module docstring for the protocol).

    Parameters
    ----------
    fn : callable
        No arguments. On the GPU it must only queue work (device-resident inputs); its
        return value is kept until the repeat's end event has completed.
    warmup : int
        Calls before the recorded ones (not recorded; on the GPU they also settle the
        spin length and fill gpuopt's memory pool).
    repeat : int
        Recorded calls (at least; see ``min_time_s``; at most, see ``max_time_s``).
    min_time_s : float, optional
        Keep repeating beyond ``repeat`` until the recorded samples add up to this many
        seconds (for very short kernels; at most ``100 * repeat`` samples).
    max_time_s : float, optional
        Time budget: stop after the first sample that brings the wall time of the
        recorded repeats past it (at least one sample; warm-up stops early once it has
        used half of it). For long kernels in sweeps.
    flush_l2 : bool
        GPU only: clear the L2 cache before every call (outside the timed region).
    device : "gpu", "cpu" or None
        None: "gpu" when a usable GPU is present, else "cpu". Pass "cpu" to time host
        code (or synchronous NumPy-in/NumPy-out calls) on a machine with a GPU.

    Returns
    -------
    Stats
    """
    _check_counts(warmup, repeat)
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    device = _resolve_device(device)
    if device == "gpu":
        return _measure_gpu(fn, warmup, repeat, min_time_s, max_time_s, flush_l2)
    return _measure_cpu(fn, warmup, repeat, min_time_s, max_time_s)


def _keep_going(n: int, total_ms: float, started: float, repeat: int, min_time_s: float | None,
                max_time_s: float | None) -> bool:
    if max_time_s is not None and n >= 1 and time.perf_counter() - started >= max_time_s:
        return False
    if n < repeat:
        return True
    return min_time_s is not None and total_ms < min_time_s * 1e3 and n < 100 * repeat


def _measure_cpu(fn, warmup, repeat, min_time_s, max_time_s) -> Stats:
    t_warm = time.perf_counter()
    for _ in range(warmup):
        fn()
        if max_time_s is not None and time.perf_counter() - t_warm >= max_time_s / 2:
            break
    samples: list[float] = []
    started = time.perf_counter()
    while _keep_going(len(samples), sum(samples), started, repeat, min_time_s, max_time_s):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return Stats.from_samples(samples, device="cpu")


class _GpuTimer:
    """One GPU sample per call: [flush] -> spin -> start -> fn() -> end, spin adapted."""

    def __init__(self, fn: Callable[[], Any], flush_l2: bool) -> None:
        self.cuda = cuda_module()
        self.fn = fn
        self.start, self.end = self.cuda.Event(), self.cuda.Event()
        self.flush = _flush_buffer(self.cuda) if flush_l2 else None
        self.spin_us = SPIN_US
        self.retries = 0
        self.hidden = True
        self.give_up = False  # fn evidently waits for the GPU: stop lengthening the spin
        self.cuda.synchronize()  # start from an idle GPU (e.g. after input copies)

    def sample(self) -> float:
        cuda = self.cuda
        attempt = 0
        while True:
            if self.flush is not None:
                buf, nbytes = self.flush
                cuda.memset(buf.ptr, attempt & 0xFF, nbytes)
            t0 = time.perf_counter()
            cuda.spin(self.spin_us)
            self.start.record()
            out = self.fn()  # held until the events are read: its memory stays out of the pool
            self.end.record()
            host_us = (time.perf_counter() - t0) * 1e6
            ms = float(self.start.elapsed_ms(self.end))  # waits for the end event
            del out
            if host_us <= _SPIN_MARGIN * self.spin_us:
                # Hidden. Shrink a spin that a one-off slow call (first cuBLAS call, a GC
                # pause) made far longer than needed, keeping a 3x margin.
                target = max(SPIN_US, 3.0 * host_us)
                if self.spin_us > 2.0 * target:
                    self.spin_us = target
                return ms
            if self.give_up:
                self.hidden = False
                return ms
            if attempt >= _MAX_RETRIES or self.spin_us >= MAX_SPIN_US:
                # A longer spin does not help: fn waits for the GPU (or is too slow to
                # enqueue). Keep the sample, flag it, and stop trying for this fn.
                self.hidden, self.give_up, self.spin_us = False, True, SPIN_US
                return ms
            attempt += 1
            self.retries += 1
            self.spin_us = min(MAX_SPIN_US, max(2.0 * self.spin_us, 2.0 * host_us))


def _measure_gpu(fn, warmup, repeat, min_time_s, max_time_s, flush_l2) -> Stats:
    timer = _GpuTimer(fn, flush_l2)
    t_warm = time.perf_counter()
    for _ in range(warmup):
        timer.sample()
        if max_time_s is not None and time.perf_counter() - t_warm >= max_time_s / 2:
            break
    timer.retries, timer.hidden = 0, True  # warm-up settles the spin; count from here
    samples: list[float] = []
    started = time.perf_counter()
    while _keep_going(len(samples), sum(samples), started, repeat, min_time_s, max_time_s):
        samples.append(timer.sample())
    return Stats.from_samples(samples, device="gpu", spin_us=timer.spin_us, retries=timer.retries,
                              overhead_hidden=timer.hidden)


def median_timing(timings: Iterable[Any]) -> dict[str, Any]:
    """Median of each phase of several :class:`gpuopt.Timing` records.

    Returns ``h2d_ms``, ``kernel_ms``, ``d2h_ms``, ``transfer_ms``, ``total_ms`` (each the
    median of that quantity over the runs, so ``total_ms`` is the median of the per-run
    totals, not the sum of the medians), ``timing_device`` and ``details`` (median per
    key of ``Timing.details``).
    """
    ts = list(timings)
    if not ts:
        raise ValueError("median_timing needs at least one Timing")
    med = lambda vals: float(statistics.median(vals))  # noqa: E731
    details: dict[str, float] = {}
    for key in dict.fromkeys(k for t in ts for k in t.details):
        vals = [float(t.details[key]) for t in ts if key in t.details]
        details[key] = med(vals)
    return {
        "h2d_ms": med([t.h2d_ms for t in ts]),
        "kernel_ms": med([t.kernel_ms for t in ts]),
        "d2h_ms": med([t.d2h_ms for t in ts]),
        "transfer_ms": med([t.h2d_ms + t.d2h_ms for t in ts]),
        "total_ms": med([t.total_ms for t in ts]),
        "timing_device": ts[0].device,
        "details": details,
    }


# --------------------------------------------------------------------------- progress


def _fmt_s(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"{seconds}s"


class Progress:
    """A progress line on stderr: tqdm when importable (on a terminal), else a counter with ETA.

    >>> with Progress(3, "demo", enabled=False) as p:
    ...     for i in range(3):
    ...         p.update(f"step {i}")
    """

    def __init__(self, total: int, desc: str, *, enabled: bool = True, stream: Any = None) -> None:
        self.total = max(int(total), 0)
        self.desc = desc
        self.enabled = enabled and self.total > 0
        self.stream = stream if stream is not None else sys.stderr
        self.n = 0
        self.t0 = time.perf_counter()
        self._bar = None
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        if self.enabled and self._tty:
            try:
                from tqdm import tqdm  # type: ignore[import-not-found]

                self._bar = tqdm(total=self.total, desc=desc, file=self.stream, leave=False, mininterval=0.5)
            except ImportError:
                self._bar = None

    def update(self, what: str = "") -> None:
        """One step done (``what`` names it)."""
        self.n += 1
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(what, refresh=False)
            self._bar.update(1)
            return
        elapsed = time.perf_counter() - self.t0
        eta = elapsed / self.n * (self.total - self.n) if self.n else 0.0
        line = f"[{self.desc}] {self.n}/{self.total} {what} (elapsed {_fmt_s(elapsed)}, ETA {_fmt_s(eta)})"
        if self._tty:
            self.stream.write("\r\x1b[2K" + line + ("\n" if self.n >= self.total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.enabled and self._tty and self.n < self.total:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
