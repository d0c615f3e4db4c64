"""Benchmark harness: timing, run metadata, results files, progress.

The sweeps that regenerate the reports' figures live in :mod:`gpuopt.bench.sweeps`, the
figures in :mod:`gpuopt.bench.plot`, the command line in ``python -m gpuopt.bench``.

Timing protocol (:func:`measure`)
---------------------------------
* GPU (``device="gpu"``): ``fn`` must only *queue* device work on device-resident inputs
  (e.g. ``lambda: gpuopt.matmul(da, db, variant="naive")`` with ``da = gpuopt.to_device(a)``).
  Each repeat queues a spin kernel, then a start event, ``fn()``, an end event; the time
  is ``start.elapsed_ms(end)``. While the GPU spins, the host enqueues the events and
  ``fn``'s launches, so the events bracket the GPU work only, not Python's launch
  overhead. The host time of that enqueue is measured; if it exceeds the spin, the
  spin is lengthened and the repeat redone (``Stats.retries``). A ``fn`` that waits for
  the GPU itself cannot be hidden this way; such samples are kept and
  ``Stats.overhead_hidden`` is False. ``flush_l2=True`` clears the L2 cache before each
  repeat (a memset of twice its size, queued before the spin, outside the events).
* CPU (``device="cpu"``): ``time.perf_counter`` around ``fn()`` -- right for CPU code and
  for calls that return only when their GPU work is done (NumPy in, NumPy out).
* Warm-up calls run first and are not recorded.

>>> from gpuopt import bench
>>> s = bench.measure(lambda: sum(range(1000)), warmup=1, repeat=5, device="cpu")
>>> s.repeats, s.min_ms <= s.median_ms <= s.max_ms
(5, True)
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

import gpuopt
from gpuopt._ext import cuda_available, cuda_module

__all__ = [
    "Stats",
    "measure",
    "median_timing",
    "metadata",
    "format_metadata",
    "write_results",
    "read_results",
    "Progress",
    "SPIN_US",
    "MAX_SPIN_US",
]

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
        gpuopt._ext.require_cuda("measure(device='gpu')")
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


# --------------------------------------------------------------------------- metadata


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _commit() -> str:
    """GPUOPT_COMMIT, else the short hash (+ "-dirty") of the gpuopt checkout, else "unknown"."""
    env = os.environ.get("GPUOPT_COMMIT", "").strip()
    if env:
        return env
    package = Path(gpuopt.__file__).resolve().parent
    for start in (package, Path.cwd()):
        top = _git(["rev-parse", "--show-toplevel"], start)
        if not top:
            continue
        root = Path(top)
        # Only a gpuopt checkout counts (not some other repository the cwd happens to be in).
        if not ((root / "gpuopt" / "__init__.py").is_file() and (root / "pyproject.toml").is_file()):
            continue
        head = _git(["rev-parse", "--short", "HEAD"], root)
        if not head:
            continue
        status = _git(["status", "--porcelain"], root)
        return head + ("-dirty" if status else "")
    return "unknown"


def _version_str(v: Any) -> str | None:
    """CUDA-style integer version (12040 -> "12.4") as text."""
    if v is None:
        return None
    try:
        v = int(v)
    except (TypeError, ValueError):
        return str(v)
    if v <= 0:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def _lib_version_str(v: Any) -> str | None:
    """cuBLAS / cuDNN integer version as text: 130100 -> "13.1.0", 91900 -> "9.19.0", 8907 -> "8.9.7"."""
    try:
        v = int(v)
    except (TypeError, ValueError):
        return None if v is None else str(v)
    if v <= 0:
        return None
    if v >= 10000:
        return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"


def metadata() -> dict[str, Any]:
    """Where and how results were produced.

    Returns
    -------
    dict
        ``gpuopt_version``, ``commit`` (``$GPUOPT_COMMIT``, else ``git rev-parse --short
        HEAD`` of the gpuopt checkout, "-dirty" appended when ``git status --porcelain``
        is non-empty, else "unknown"), ``timestamp_utc``, ``host``, ``python``, ``numpy``,
        ``platform``, ``cpu_count``, ``build_info`` (:func:`gpuopt.build_info`), and
        ``gpu``: None without a usable GPU (``gpu_unavailable_reason`` says why), else a
        dict with ``name``, ``compute_capability`` ("9.0"), ``multiprocessors``,
        ``total_memory_bytes``, ``memory_gib``, ``l2_cache_bytes``, ``driver_version`` /
        ``runtime_version`` ("12.4"), ``cublas_version`` / ``cudnn_version`` ("13.1.0", with
        the raw ``cublas_runtime_version`` / ``cudnn_runtime_version``) and the rest of :func:`gpuopt.device_info`.
    """
    build = dict(gpuopt.build_info())
    meta: dict[str, Any] = {
        "gpuopt_version": gpuopt.__version__,
        "commit": _commit(),
        "timestamp_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "build_info": build,
        "gpu": None,
        "gpu_unavailable_reason": None,
    }
    if not cuda_available():
        meta["gpu_unavailable_reason"] = gpuopt.cuda_unavailable_reason()
        return meta
    dev = dict(gpuopt.device_info() or {})
    cc = dev.get("compute_capability")
    gpu = dict(dev)
    gpu.update({
        "name": dev.get("name"),
        "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
        "multiprocessors": dev.get("multiprocessors"),
        "total_memory_bytes": dev.get("total_memory_bytes"),
        "memory_gib": round(dev["total_memory_bytes"] / 2**30, 1) if dev.get("total_memory_bytes") else None,
        "l2_cache_bytes": dev.get("l2_cache_bytes"),
        "driver_version": _version_str(dev.get("driver_version")),
        "runtime_version": _version_str(dev.get("runtime_version")),
        "driver_version_raw": dev.get("driver_version"),
        "runtime_version_raw": dev.get("runtime_version"),
        "cublas_runtime_version": dev.get("cublas_runtime_version"),
        "cudnn_runtime_version": dev.get("cudnn_runtime_version"),
        "cublas_version": _lib_version_str(dev.get("cublas_runtime_version")),
        "cudnn_version": _lib_version_str(dev.get("cudnn_runtime_version")),
    })
    meta["gpu"] = gpu
    return meta


def format_metadata(meta: Mapping[str, Any]) -> str:
    """One line: gpuopt version and commit, device (or "no GPU"), host, time."""
    gpu = meta.get("gpu")
    if gpu:
        where = (f"{gpu.get('name')} (sm_{str(gpu.get('compute_capability', '')).replace('.', '')}, "
                 f"{gpu.get('multiprocessors')} SMs, {gpu.get('memory_gib')} GiB, driver {gpu.get('driver_version')}, "
                 f"runtime {gpu.get('runtime_version')}, cuBLAS {gpu.get('cublas_version')}, "
                 f"cuDNN {gpu.get('cudnn_version')})")
    else:
        where = "no GPU (CPU only)"
    return (f"gpuopt {meta.get('gpuopt_version')} @ {meta.get('commit')} | {where} | host {meta.get('host')}, "
            f"{meta.get('cpu_count')} CPUs | Python {meta.get('python')}, NumPy {meta.get('numpy')} | "
            f"{meta.get('timestamp_utc')}")


# --------------------------------------------------------------------------- results files


def _jsonable(value: Any) -> Any:
    """Plain JSON values: NumPy scalars/arrays unwrapped, tuples as lists, NaN/inf as None."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "__dataclass_fields__"):
        return _jsonable(asdict(value))
    return str(value)


def _csv_cell(value: Any) -> str:
    value = _jsonable(value)
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def write_results(name: str, rows: list[dict], meta: Mapping[str, Any], out_dir: str | os.PathLike,
                  *, columns: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Write ``<out_dir>/<name>.csv`` and ``<out_dir>/<name>.json``.

    The CSV has one row per measurement; its columns are ``columns`` (when given) then
    every other key in order of first appearance, so the order is stable for a sweep.
    Empty cells are None/NaN; dict and list cells are JSON text; booleans are
    ``true``/``false``. The JSON is ``{"meta": meta, "rows": rows}`` (NaN/inf as null).

    Returns
    -------
    (csv_path, json_path)
    """
    if not isinstance(name, str) or not name or any(c in name for c in "/\\"):
        raise ValueError(f"name must be a plain file stem, got {name!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cols = list(dict.fromkeys([*(columns or ()), *(k for row in rows for k in row)]))
    csv_path, json_path = out / f"{name}.csv", out / f"{name}.json"
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(cols)
        for row in rows:
            writer.writerow([_csv_cell(row.get(c)) for c in cols])
    payload = {"meta": _jsonable(dict(meta)), "rows": [_jsonable(dict(r)) for r in rows]}
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    tmp.replace(json_path)
    return csv_path, json_path


def read_results(json_path: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(meta, rows) of a JSON file written by :func:`write_results`."""
    data = json.loads(Path(json_path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "meta" not in data or "rows" not in data:
        raise ValueError(f"{json_path}: not a gpuopt.bench results file (expected 'meta' and 'rows')")
    return data["meta"], data["rows"]


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
