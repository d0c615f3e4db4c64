"""The sweeps that regenerate the reports' measurements.

Each sweep is a :class:`Sweep` in :data:`SWEEPS` (``matmul``, ``matmul_report``, ``conv2d``,
``cs6235``, ``ece408``, ``kmeans``, ``sparse``); ``SWEEPS[name].run(plan)`` returns a
:class:`SweepResult` (one dict per measurement, the column order, notes and extra
metadata), which the command line writes with :func:`gpuopt.bench.write_results` and
plots with :mod:`gpuopt.bench.plot` (``cs6235`` and ``ece408`` draw several figures each).

Variants are looked up by name; one that is not registered in this build (or not usable
here) is skipped with a note, so the sweeps run on any build. The matmul sweeps discover
theirs: every GPU variant registered (cuBLAS last), some once per parameter value
(:data:`MATMUL_PARAM_ROWS`). Without a GPU only the
``cpu`` variants run, at the small sizes of the plan's "cpu" rows. A measurement that
raises is recorded with its ``error`` and the sweep goes on.

Inputs are random (never zeros): matmul/conv draw from ``numpy.random.default_rng(seed)``
with the run's seed (in the metadata); the k-means blobs, the NCTU filters (and the
stand-in neurons when the real ones are absent) use seed 0 so the data sets are the same
in every run.
"""

from __future__ import annotations

import math
import textwrap
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

import gpuopt
from gpuopt import datasets

from . import Progress, measure, median_timing

__all__ = ["Plan", "Sweep", "SweepResult", "SWEEPS", "format_table", "fp32_peak", "matmul_ladder",
           "ladder_markdown", "report_markdown", "report_gflops", "REPORT_TABLES", "REPORT_CASES",
           "REPORT_VERSIONS"]


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class Plan:
    """How big and how long: GPU or CPU mode, quick, tiny (tests), seed, progress line."""

    gpu: bool
    quick: bool = False
    tiny: bool = False
    seed: int = 0
    progress: bool = True

    @property
    def mode(self) -> str:
        return "gpu" if self.gpu else "cpu"

    @property
    def level(self) -> str:
        return "tiny" if self.tiny else "quick" if self.quick else "full"

    def pick(self, table: Mapping[Any, Any]) -> Any:
        """``table["tiny"]`` in tiny mode, else ``table[(mode, "quick"|"full")]``."""
        if self.tiny:
            return table["tiny"]
        return table[(self.mode, self.level)]

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "level": self.level, "quick": self.quick, "tiny": self.tiny, "seed": self.seed}


@dataclass
class SweepResult:
    """What a sweep produced: rows (one per measurement), notes, extra metadata."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Sweep:
    """One sweep: its name, the op and variants it compares, its columns and its table.

    ``gpu_variants`` is a tuple or a function returning one (the matmul sweeps discover
    theirs in the registry). ``table(rows, meta)`` is the text printed after a run;
    ``extras(meta, rows, out_dir)``, when set, writes further files (e.g. Markdown tables)
    and returns their paths.
    """

    name: str
    op: str
    title: str
    description: str
    gpu_variants: tuple[str, ...] | Callable[[], tuple[str, ...]]
    columns: tuple[str, ...]
    run: Callable[[Plan], SweepResult] = field(repr=False)
    table: Callable[..., str] = field(repr=False)
    extras: Callable[..., list[Any]] | None = field(default=None, repr=False)

    def variant_names(self) -> tuple[str, ...]:
        """The GPU variants this sweep compares (for ``--list``)."""
        v = self.gpu_variants
        return tuple(v() if callable(v) else v)


# Repeats for the kernel-timed conv2d sweep: measure() keywords (matmul: MATMUL_REPEATS, REPORT_REPEATS).
KERNEL_REPEATS: dict[Any, dict[str, Any]] = {
    ("gpu", "full"): dict(warmup=5, repeat=50, max_time_s=5.0, flush_l2=True),  # inputs fit the L2
    ("gpu", "quick"): dict(warmup=3, repeat=20, max_time_s=1.0, flush_l2=True),
    ("cpu", "full"): dict(warmup=2, repeat=10, max_time_s=3.0),
    ("cpu", "quick"): dict(warmup=1, repeat=5, max_time_s=1.0),
    "tiny": dict(warmup=1, repeat=3, max_time_s=0.2),
}
# Repeats of whole calls on NumPy input (kmeans, sparse): warm-up, runs, time budget (s).
CALL_REPEATS: dict[Any, dict[str, Any]] = {
    ("gpu", "full"): dict(warmup=2, repeat=10, max_time_s=10.0),
    ("gpu", "quick"): dict(warmup=1, repeat=5, max_time_s=3.0),
    ("cpu", "full"): dict(warmup=1, repeat=5, max_time_s=5.0),
    ("cpu", "quick"): dict(warmup=1, repeat=3, max_time_s=2.0),
    "tiny": dict(warmup=1, repeat=2, max_time_s=0.5),
}


# --------------------------------------------------------------------------- helpers


def _select(op: str, gpu_names: Sequence[str], plan: Plan, notes: list[str]) -> list[str]:
    """The variants of ``op`` to run: ``gpu_names`` on a GPU, ``cpu`` without; missing ones noted."""
    table = gpuopt.variants(op)
    if plan.gpu:
        names = list(gpu_names)
    else:
        names = ["cpu"]
        skipped = [n for n in gpu_names if n != "cpu"]
        if skipped:
            notes.append(f"{op} GPU variants not run here: {', '.join(skipped)}")
    chosen = []
    for name in names:
        v = table.get(name)
        if v is None:
            notes.append(f"variant {op}/{name} is not registered in this build of gpuopt: skipped "
                         f"(registered: {', '.join(table)})")
        elif not v.available:
            notes.append(f"variant {op}/{name} is not usable here ({gpuopt.cuda_unavailable_reason()}): skipped")
        else:
            chosen.append(name)
    return chosen


def _error(exc: BaseException) -> str:
    msg = f"{type(exc).__name__}: {exc}".strip()
    return msg if len(msg) <= 500 else msg[:497] + "..."


def _rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    out64, ref64 = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    if out64.shape != ref64.shape:
        return math.inf
    denom = float(np.linalg.norm(ref64))
    return float(np.linalg.norm(out64 - ref64) / (denom if denom > 0 else 1.0))


def _host(out: Any) -> np.ndarray:
    return out.numpy() if isinstance(out, gpuopt.DeviceArray) else np.asarray(out)


def _release_gpu_cache(plan: Plan) -> None:
    if plan.gpu:
        try:
            gpuopt.cuda.synchronize()
            gpuopt.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - cleanup only; a real fault shows up in the next row
            pass


def _timed_calls(fn: Callable[[], tuple[Any, Any]], *, warmup: int, repeat: int,
                 max_time_s: float) -> tuple[list[Any], list[float], Any]:
    """Run ``fn`` (returning ``(result, Timing)``) ``warmup`` + up to ``repeat`` times.

    Returns the recorded Timings, the wall time of each recorded call (ms) and the
    last result. Stops early (after at least one recorded call) past ``max_time_s``.
    """
    for _ in range(warmup):
        fn()
    timings, walls, result = [], [], None
    started = time.perf_counter()
    for _ in range(repeat):
        t0 = time.perf_counter()
        result, timing = fn()
        walls.append((time.perf_counter() - t0) * 1e3)
        timings.append(timing)
        if time.perf_counter() - started >= max_time_s:
            break
    return timings, walls, result


def _fmt(value: Any, spec: str = ".3g") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return format(value, spec)
    return str(value)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _g(value: Any) -> str:
    """A GFLOP/s cell: 4 significant digits (small values keep theirs)."""
    v = _num(value)
    if v is None:
        return "-"
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"


def format_table(headers: Sequence[str], body: Sequence[Sequence[Any]], align: str = "") -> str:
    """A plain fixed-width text table (values already formatted or formatted with ``_fmt``).

    ``align``: one letter per leading column, ``l`` (left) or ``r`` (right); the rest right.
    """
    cells = [[str(h) for h in headers]] + [[c if isinstance(c, str) else _fmt(c) for c in row] for row in body]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    just = [(align[i] if i < len(align) else "r") for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) if j == "l" else c.rjust(w) for c, w, j in zip(r, widths, just)).rstrip()
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _errors(rows: list[dict[str, Any]]) -> str:
    def where(r: dict[str, Any]) -> str:
        key = next((k for k in ("n", "conf", "dataset") if k in r), None)
        return f" @ {key}={r[key]}" if key else ""

    bad = [f"  {r.get('label') or r.get('variant')}{where(r)}: {r['error']}" for r in rows if r.get("error")]
    return ("\nerrors:\n" + "\n".join(bad)) if bad else ""


# --------------------------------------------------------------------------- matmul: variants, peak, kernels

#: The matmul ladder of issue 4, in order: what a complete build registers. Variants are
#: discovered from the registry (every ``needs_cuda`` one, registration order, cuBLAS
#: last); the ones of this list that are missing are named in a note.
MATMUL_LADDER = ("naive", "shared", "tile_buffer", "coalesced", "blocktile_1d", "blocktile_2d", "vectorized",
                 "warptile", "async", "cublas")
#: Variants measured once per value of one parameter, each value a separate row, in this
#: order: ``coalesced`` with a warp down a column (strided, the uncoalesced counter-example)
#: then along a row; ``shared`` at the report's 32x32 blocks ("Memory Shared Version") then
#: its 16x16 occupancy fix ("Scheduling Throughput Maximized Version"); ``tile_buffer`` at
#: TILE_SZ 1, 2, 4. Every other variant runs at its registered defaults.
MATMUL_PARAM_ROWS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "coalesced": ("warp_layout", ("column", "row")),
    "shared": ("block", (32, 16)),
    "tile_buffer": ("tile_sz", (1, 2, 4)),
}
#: Keys of ``gpuopt.matmul.matmul_kernel_info(variant, **params)`` recorded per kernel
#: (numbers), and the instantiation's name (``kernel``).
KERNEL_INFO_KEYS = ("registers", "static_shared_bytes", "dynamic_shared_bytes", "local_bytes", "threads",
                    "max_blocks_per_sm")
KERNEL_NAME_KEY = "kernel"
#: FP32 lanes (CUDA cores) per SM where it is not 128 (Pascal GP100, Volta, Turing, A100).
FP32_LANES_PER_SM: dict[tuple[int, int], int] = {(6, 0): 64, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64}


def matmul_gpu_variants() -> tuple[str, ...]:
    """The GPU (``needs_cuda``) matmul variants of this build, registration order, ``cublas`` last."""
    table = gpuopt.variants("matmul")
    names = [n for n, v in table.items() if v.needs_cuda and n != "cublas"]
    if "cublas" in table:
        names.append("cublas")
    return tuple(names)


def _matmul_listed() -> tuple[str, ...]:
    """For ``--list``: the registered GPU variants, then the ladder's missing ones."""
    names = list(matmul_gpu_variants())
    return tuple(names + [n for n in MATMUL_LADDER if n not in names])


def matmul_label(name: str, params: Mapping[str, Any] | None = None) -> str:
    """Row label: the variant, then the parameters measured separately (``"shared block=32"``)."""
    return " ".join([name, *(f"{k}={v}" for k, v in (params or {}).items())])


def _row_label(row: Mapping[str, Any]) -> str:
    return str(row.get("label") or row.get("variant"))


def _matmul_entries(plan: Plan, notes: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(label, variant, params) of every row to measure at each size.

    GPU: every registered GPU variant (cuBLAS last), ``MATMUL_PARAM_ROWS`` expanded.
    No GPU: the ``cpu`` variant only.
    """
    table = gpuopt.variants("matmul")
    gpu_names = matmul_gpu_variants()
    if not plan.gpu:
        if gpu_names:
            notes.append(f"matmul GPU variants not run here: {', '.join(gpu_names)}")
        return [("cpu", "cpu", {})] if "cpu" in table else []
    missing = [n for n in MATMUL_LADDER if n not in table]
    if missing:
        notes.append(f"matmul variants of the ladder not registered in this build: {', '.join(missing)} "
                     f"(registered: {', '.join(table)})")
    entries: list[tuple[str, str, dict[str, Any]]] = []
    for name in gpu_names:
        v = table[name]
        if not v.available:
            notes.append(f"variant matmul/{name} is not usable here ({gpuopt.cuda_unavailable_reason()}): skipped")
            continue
        spec = MATMUL_PARAM_ROWS.get(name)
        if spec is None:
            entries.append((name, name, {}))
            continue
        key, values = spec
        if key not in v.params:
            notes.append(f"matmul/{name} has no parameter {key!r} (has: {', '.join(v.params) or 'none'}): "
                         "measured at its defaults only")
            entries.append((name, name, {}))
            continue
        for value in values:
            try:
                value = v.params[key].check(value, f"matmul/{name}")
            except ValueError as exc:
                notes.append(f"{exc}: that row is skipped")
                continue
            entries.append((matmul_label(name, {key: value}), name, {key: value}))
    return entries


def _call_matmul(ins: tuple[Any, Any], name: str, params: Mapping[str, Any]) -> Callable[[], Any]:
    return lambda: gpuopt.matmul(*ins, variant=name, **params)


def matmul_kernel_info(variant: str, params: Mapping[str, Any] | None = None, n: int | None = None
                       ) -> tuple[dict[str, Any] | None, str | None]:
    """``(info, None)`` from ``gpuopt.matmul.matmul_kernel_info(variant, **params)``, else ``(None, why)``.

    ``info`` holds :data:`KERNEL_INFO_KEYS` (registers, static/dynamic shared bytes, local
    bytes = spills, threads per block, resident blocks per SM). Unavailable for builds
    without the function, without a GPU (RuntimeError) and for cublas/cpu (ValueError).
    When the function takes the problem's shape (a ``shape`` keyword, or ``m``/``n``/``k``:
    a kernel may pick its tile from the shape), the square size ``n`` is passed.
    """
    import importlib
    import inspect

    fn = getattr(importlib.import_module("gpuopt.matmul"), "matmul_kernel_info", None) \
        or getattr(gpuopt, "matmul_kernel_info", None)
    if not callable(fn):
        return None, "gpuopt.matmul.matmul_kernel_info is not in this build"
    kwargs = dict(params or {})
    if n is not None:
        try:
            sig = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            sig = {}
        if "shape" in sig:
            kwargs["shape"] = (n, n, n)
        for key in ("m", "n", "k", "M", "N", "K"):
            if key in sig:
                kwargs[key] = n
    try:
        info = fn(variant, **kwargs)
    except Exception as exc:  # noqa: BLE001 - informational only
        return None, _error(exc)
    if not isinstance(info, Mapping):
        return None, f"matmul_kernel_info returned {type(info).__name__}, not a dict"
    out = {k: info.get(k) for k in KERNEL_INFO_KEYS}
    if info.get(KERNEL_NAME_KEY) is not None:
        out[KERNEL_NAME_KEY] = str(info[KERNEL_NAME_KEY])
    return out, None


def fp32_peak(gpu: Mapping[str, Any] | None) -> tuple[float | None, str]:
    """FP32 peak in GFLOP/s of a GPU (``gpuopt.device_info()`` or ``meta["gpu"]``) and how it was computed.

    peak = 2 (an FMA is two flops) x SMs x FP32 lanes per SM (128 from Ampere GA10x / Ada /
    Hopper on; 64 on GP100, Volta, Turing and A100) x ``clock_rate_khz`` (the boost clock
    the driver reports). An H200 SXM: 2 x 132 x 128 x 1.98 GHz = 66.9 TFLOP/s.
    """
    if not gpu:
        return None, "no GPU"
    sms, khz = gpu.get("multiprocessors"), gpu.get("clock_rate_khz")
    if not sms or not khz:
        return None, "unknown (device_info() has no multiprocessors / clock_rate_khz)"
    cc = gpu.get("compute_capability")
    try:
        major, minor = (int(x) for x in (str(cc).split(".") if isinstance(cc, str) else cc))
        lanes = FP32_LANES_PER_SM.get((major, minor), 128)
    except (TypeError, ValueError):
        lanes = 128
    peak = 2.0 * int(sms) * lanes * float(khz) * 1e3 / 1e9
    text = (f"2 x {int(sms)} SMs x {lanes} FP32 lanes x {float(khz) / 1e6:.3f} GHz (boost clock, "
            f"gpuopt.device_info() clock_rate_khz) = {peak / 1e3:.1f} TFLOP/s")
    return peak, text


def _peak_of(meta: Mapping[str, Any] | None) -> tuple[float | None, str]:
    meta = meta or {}
    if meta.get("fp32_peak_gflops"):
        return float(meta["fp32_peak_gflops"]), str(meta.get("fp32_peak_formula") or "")
    return fp32_peak(meta.get("gpu"))


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


def _rel_err_to(out: np.ndarray, ref64: np.ndarray, ref_norm: float) -> float:
    out64 = np.asarray(out, np.float64)
    if out64.shape != ref64.shape:
        return math.inf
    return float(np.linalg.norm(out64 - ref64) / (ref_norm if ref_norm > 0 else 1.0))


def max_rel_err(out: np.ndarray, ref64: np.ndarray) -> float:
    """Largest element-wise relative error ``max |out - ref| / |ref|`` (the report's check)."""
    out64 = np.asarray(out, np.float64)
    if out64.shape != ref64.shape:
        return math.inf
    err = np.abs(out64 - ref64) / np.maximum(np.abs(ref64), np.finfo(np.float64).tiny)
    return float(err.max()) if err.size else 0.0


# --------------------------------------------------------------------------- matmul (the ladder)

MATMUL_SIZES: dict[Any, tuple[int, ...]] = {
    ("gpu", "full"): (128, 256, 512, 1000, 1024, 2048, 4096, 8192),
    ("gpu", "quick"): (128, 256, 512, 1000, 1024, 2048),
    ("cpu", "full"): (128, 256, 512, 1000, 1024),
    ("cpu", "quick"): (128, 256, 512),
    "tiny": (32, 64),
}
#: measure() keywords per plan. Long kernels are capped by the time budget (naive at 8192
#: takes ~0.22 s a run: ~5 warm-up + ~10 recorded), so the full GPU sweep of the whole
#: ladder (14 rows x 8 sizes) should take about 1-2 minutes on an H200 (estimated).
#: On the GPU the L2 is flushed before every run: up to n = 2048 the three matrices fit in
#: the H200's 60 MB L2, and back-to-back runs on one buffer would measure the cache (an
#: ncu check at 1000^3: cuBLAS's 4-warps-per-SM kernel gains ~10% from a warm L2, ours ~2%).
MATMUL_REPEATS: dict[Any, dict[str, Any]] = {
    ("gpu", "full"): dict(warmup=5, repeat=50, max_time_s=2.0, flush_l2=True),
    ("gpu", "quick"): dict(warmup=3, repeat=20, max_time_s=0.5, flush_l2=True),
    ("cpu", "full"): dict(warmup=2, repeat=10, max_time_s=3.0),
    ("cpu", "quick"): dict(warmup=1, repeat=5, max_time_s=1.0),
    "tiny": dict(warmup=1, repeat=3, max_time_s=0.2),
}
#: The size of the ladder table (the largest measured size when it was not run).
LADDER_N = 4096
MATMUL_COLUMNS = ("n", "label", "variant", "params", "device", "median_ms", "min_ms", "max_ms", "mean_ms", "std_ms",
                  "repeats", "gflops", "gflops_best", "pct_cublas", "pct_peak", "rel_err", "reference",
                  *KERNEL_INFO_KEYS, KERNEL_NAME_KEY, "spin_us", "overhead_hidden", "flush_l2", "error")


def run_matmul(plan: Plan) -> SweepResult:
    res = SweepResult()
    entries = _matmul_entries(plan, res.notes)
    table = gpuopt.variants("matmul")
    sizes = plan.pick(MATMUL_SIZES)
    reps = plan.pick(MATMUL_REPEATS)
    rng = np.random.default_rng(plan.seed)
    peak, peak_text = fp32_peak(gpuopt.device_info()) if plan.gpu else (None, "no GPU")
    # Kernel resources, for the ladder table: per kernel at the ladder's size (a kernel may
    # pick its tile from the shape), recorded on that size's rows.
    info_n = LADDER_N if LADDER_N in sizes else max(sizes)
    infos: dict[str, dict[str, Any] | None] = {}
    why_not: dict[str, str] = {}
    if plan.gpu:
        for label, name, params in entries:
            infos[label], why = matmul_kernel_info(name, params, info_n)
            if why and name != "cublas":
                why_not[label] = why
        if why_not:
            reasons = sorted(set(why_not.values()))
            res.notes.append(f"kernel registers/shared memory/spills unavailable for {', '.join(why_not)}: "
                             + "; ".join(reasons))
    res.meta.update(inputs="uniform [0, 1) float32, square n x n, device-resident on the GPU",
                    flops="2 n^3", gflops="2 n^3 / median kernel time", timing=f"measure(): {reps}",
                    sizes=list(sizes), ladder_n=LADDER_N, fp32_peak_gflops=peak, fp32_peak_formula=peak_text,
                    param_rows={k: {"param": p, "values": list(v)} for k, (p, v) in MATMUL_PARAM_ROWS.items()},
                    entries=[{"label": lb, "variant": nm, "params": pr,
                              "defaults": table[nm].defaults() if nm in table else {},
                              "description": table[nm].description if nm in table else ""}
                             for lb, nm, pr in entries],
                    kernel_info=f"gpuopt.matmul.matmul_kernel_info(variant, **params) at n = {info_n}, on the rows "
                                f"of that size")
    with Progress(len(sizes) * len(entries), "matmul", enabled=plan.progress) as prog:
        for n in sizes:
            a = rng.random((n, n), dtype=np.float32)
            b = rng.random((n, n), dtype=np.float32)
            dev_in = (gpuopt.to_device(a), gpuopt.to_device(b)) if plan.gpu else None
            # Correctness alongside speed: every output against cuBLAS (or NumPy float64).
            ref64, ref_name = None, None
            if any(name == "cublas" for _, name, _ in entries):
                try:
                    ref64, ref_name = _host(gpuopt.matmul(*dev_in, variant="cublas")).astype(np.float64), "cublas"
                except Exception as exc:  # noqa: BLE001 - its own row records the failure
                    res.notes.append(f"matmul n={n}: no cuBLAS reference ({_error(exc)})")
            if ref64 is None and n <= 2048:
                ref64, ref_name = _reference(a, b), "numpy-float64"
            ref_norm = float(np.linalg.norm(ref64)) if ref64 is not None else 0.0
            size_rows = []
            for label, name, params in entries:
                gpu = table[name].needs_cuda
                row: dict[str, Any] = {"n": n, "label": label, "variant": name, "params": dict(params),
                                       "device": "gpu" if gpu else "cpu",
                                       "flush_l2": bool(gpu and reps.get("flush_l2"))}
                try:
                    fn = _call_matmul(dev_in if gpu else (a, b), name, params)
                    st = measure(fn, device=row["device"], **reps)
                    row.update(st.row(), gflops=2.0 * n**3 / (st.median_ms * 1e6),
                               gflops_best=2.0 * n**3 / (st.min_ms * 1e6), spin_us=st.spin_us,
                               overhead_hidden=st.overhead_hidden)
                    if ref64 is not None and name != ref_name:
                        row["rel_err"], row["reference"] = _rel_err_to(_host(fn()), ref64, ref_norm), ref_name
                except Exception as exc:  # noqa: BLE001 - recorded, the sweep goes on
                    row["error"] = _error(exc)
                    res.notes.append(f"matmul n={n} {label}: {row['error']}")
                if n == info_n:
                    row.update(infos.get(label) or {})
                size_rows.append(row)
                prog.update(f"n={n} {label}")
            t_cublas = next((r["gflops"] for r in size_rows if r["variant"] == "cublas" and r.get("gflops")), None)
            for row in size_rows:
                if row.get("gflops"):
                    if t_cublas:
                        row["pct_cublas"] = 100.0 * row["gflops"] / t_cublas
                    if peak:
                        row["pct_peak"] = 100.0 * row["gflops"] / peak
            res.rows.extend(size_rows)
            del dev_in, ref64
            _release_gpu_cache(plan)
    return res


def matmul_ladder(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None = None,
                  n: int | None = None) -> tuple[int | None, list[dict[str, Any]]]:
    """The ladder table's rows at size ``n`` (default :data:`LADDER_N`, else the largest measured).

    Returns ``(n, steps)``; each step (in the rows' order, cuBLAS last) has ``step`` (1, 2,
    ...; "ref" for cuBLAS), ``label``, ``variant``, ``gflops``, ``pct_cublas`` (of cuBLAS at
    the same n in the same run), ``pct_peak`` (of the FP32 peak from ``meta``, see
    :func:`fp32_peak`), ``x_prev`` (speed-up over the previous step), the kernel info keys
    and ``error``.
    """
    sizes = sorted({r["n"] for r in rows if _num(r.get("gflops"))})
    if n is None:
        if not sizes:
            return None, []
        n = LADDER_N if LADDER_N in sizes else sizes[-1]
    peak, _ = _peak_of(meta)
    at = [r for r in rows if r.get("n") == n]
    at = [r for r in at if r.get("variant") != "cublas"] + [r for r in at if r.get("variant") == "cublas"]
    cublas = next((_num(r.get("gflops")) for r in at if r.get("variant") == "cublas" and _num(r.get("gflops"))),
                  None)
    steps, prev, k = [], None, 0
    for r in at:
        g = _num(r.get("gflops"))
        is_ref = r.get("variant") == "cublas"
        if not is_ref:
            k += 1
        step: dict[str, Any] = {
            "step": "ref" if is_ref else k, "label": _row_label(r), "variant": r.get("variant"), "gflops": g,
            "pct_cublas": 100.0 * g / cublas if g and cublas else None,
            "pct_peak": 100.0 * g / peak if g and peak else None,
            "x_prev": g / prev if g and prev and not is_ref else None,
            "error": r.get("error"),
        }
        step.update({key: r.get(key) for key in (*KERNEL_INFO_KEYS, KERNEL_NAME_KEY)})
        steps.append(step)
        if g and not is_ref:
            prev = g
    return n, steps


def _int_cell(value: Any) -> str:
    v = _num(value)
    return "-" if v is None else str(int(v))


def _smem_cell(step: Mapping[str, Any]) -> str:
    static, dyn = _num(step.get("static_shared_bytes")), _num(step.get("dynamic_shared_bytes"))
    if static is None and dyn is None:
        return "-"
    return str(int(static or 0)) + (f"+{int(dyn)}" if dyn else "")


def _pct(value: Any, spec: str = ".1f") -> str:
    v = _num(value)
    return "-" if v is None else f"{v:{spec}}%"


LADDER_HEADERS = ("step", "kernel", "GFLOP/s", "% cuBLAS", "% FP32 peak", "x prev.", "regs", "smem B (static+dyn)",
                  "local B (spills)", "threads", "blocks/SM", "instantiation")


def _ladder_body(steps: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    return [[str(s["step"]), str(s["label"]), _g(s.get("gflops")) if s.get("gflops") else "failed",
             _pct(s.get("pct_cublas")), _pct(s.get("pct_peak")),
             "-" if s.get("x_prev") is None else f"{s['x_prev']:.2f}x",
             _int_cell(s.get("registers")), _smem_cell(s), _int_cell(s.get("local_bytes")),
             _int_cell(s.get("threads")), _int_cell(s.get("max_blocks_per_sm")),
             str(s.get(KERNEL_NAME_KEY) or "-")] for s in steps]


def _ladder_caption(n: int, steps: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None) -> str:
    _, peak_text = _peak_of(meta)
    cublas = next((s["gflops"] for s in steps if s["step"] == "ref" and s.get("gflops")), None)
    return (f"ladder at n = {n}: GFLOP/s = 2n^3 / median kernel time (L2 flushed before each run); % cuBLAS against cuBLAS in the same run"
            + (f" ({cublas:.0f} GFLOP/s)" if cublas else " (not measured)")
            + f"; FP32 peak = {peak_text}; regs / shared memory / local memory (spills) per kernel from "
              "gpuopt.matmul.matmul_kernel_info ('-': unavailable)")


def ladder_markdown(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], n: int | None = None) -> str:
    """The ladder table as Markdown (for notes/matmul.md and the issue), with where it was measured."""
    from . import format_metadata

    n, steps = matmul_ladder(rows, meta, n)
    lines = [f"### matmul ladder at n = {n}" if n else "### matmul ladder", "",
             f"Measured with {format_metadata(meta)}.", ""]
    if not steps:
        return "\n".join(lines + ["(no measurements)", ""])
    lines += [_ladder_caption(n, steps, meta) + ".", "", _md_table(LADDER_HEADERS, _ladder_body(steps)), ""]
    return "\n".join(lines)


def _md_table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    def cell(c: Any) -> str:
        return str(c).replace("|", "\\|")

    out = ["| " + " | ".join(cell(h) for h in headers) + " |",
           "| " + " | ".join("---" for _ in headers) + " |"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in body]
    return "\n".join(out)


def table_matmul(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    labels = list(dict.fromkeys(_row_label(r) for r in rows))
    by = {(r["n"], _row_label(r)): r for r in rows}
    body = []
    for label in labels:
        line = [label]
        for n in dict.fromkeys(r["n"] for r in rows):
            r = by.get((n, label))
            line.append("-" if not r else _g(r.get("gflops")))
        body.append(line)
    sizes = [f"n={n}" for n in dict.fromkeys(r["n"] for r in rows)]
    text = ("GFLOP/s (2n^3 / median kernel time), one row per kernel\n"
            + format_table(["kernel", *sizes], body, align="l"))
    n, steps = matmul_ladder(rows, meta)
    if steps:
        text += ("\n\n" + textwrap.fill(_ladder_caption(n, steps, meta), 120, break_on_hyphens=False) + "\n"
                 + format_table(LADDER_HEADERS, _ladder_body(steps), align="rl" + "r" * 9 + "l"))
    return text + _errors(rows)


def extras_matmul(meta: Mapping[str, Any], rows: list[dict[str, Any]], out_dir: Any) -> list[Any]:
    """``<out>/matmul_ladder.md``: the ladder table as Markdown."""
    from pathlib import Path

    path = Path(out_dir) / "matmul_ladder.md"
    path.write_text(ladder_markdown(meta, rows), encoding="utf-8")
    return [path]


# --------------------------------------------------------------------------- matmul_report (CMU 18-645)
#
# The report's matrix-multiply harness, reproduced, and every number it printed (GFLOP/s on
# its GPU, an NVIDIA GeForce GTX 480). Reading of its "case 1..5" columns: n = 8, 10, 32, 33,
# 1000. Its bug-fix section names six sizes (sq_dimension = 5, 8, 10, 32 fit in one block;
# 33 and 1000 do not) for five cases. The time each printed number implies, t = (2n-1) n^2 /
# GFLOP/s, settles it: with n = 8, 10, 32, 33 the four small cases of every version take
# 0.24-0.28 ms (one fixed launch + copy overhead, as expected at these sizes) and n = 1000
# takes 31 ms for the original kernel; with n = 5, 8, 10, 32 they would take 0.056, 0.12,
# 0.0073 and 0.23 ms, which nothing explains, and n = 5 (225 flops) at ~0.24 ms would print
# ~0.0009 GFLOP/s, which no table shows. So case 1 = 8, 2 = 10, 3 = 32, 4 = 33, 5 = 1000.
# The "total" column is the sum of the five GFLOP/s (checked on every printed row).
#
# Its versions (rows) and gpuopt's rows: "Original Version" = naive; "Memory Shared
# Version" = shared with 32x32 blocks (the report: "We set the cache block size now as 32
# ... 1024 threads", ptxas 8192 bytes smem); "Scheduling Throughput Maximized Version" =
# shared with 16x16 blocks (the occupancy fix: 256 threads, 2048 bytes smem); "TILE_SZ = 2"
# and "TILE_SZ = 4" = tile_buffer tile_sz 2 and 4 (on the 16x16 blocks).

REPORT_GPU = "NVIDIA GeForce GTX 480 (Fermi, sm_20, 2010)"
#: The report's "case 1" .. "case 5" (see above).
REPORT_CASES: tuple[int, ...] = (8, 10, 32, 33, 1000)
#: (the report's version, gpuopt's row label, what it is).
REPORT_VERSIONS: tuple[tuple[str, str, str], ...] = (
    ("Original Version", "naive", "one thread per output (the bug-fixed kernel, 2-D grid of blocks)"),
    ("Memory Shared Version", "shared block=32", "shared-memory tiles, BLK_SZ = 32: 1024 threads, 8192 B smem"),
    ("Scheduling Throughput Maximized Version", "shared block=16",
     "the occupancy fix: BLK_SZ = 16, 256 threads, 2048 B smem (67% -> 100% occupancy on the GTX 480)"),
    ("TILE_SZ = 2", "tile_buffer tile_sz=2", "tile buffering: a block computes 2 output tiles of a row stripe"),
    ("TILE_SZ = 4", "tile_buffer tile_sz=4", "tile buffering: a block computes 4 output tiles of a row stripe"),
)
#: Every matrix-multiply number the report printed (GFLOP/s at cases 1..5, and its total), as printed.
REPORT_TABLES: tuple[dict[str, Any], ...] = (
    {"id": "bug-fix", "title": "'Performance of original matrix_mul.cu after fixing bugs' (Test Case 1-5; no total)",
     "rows": [{"version": "Original Version",
               "gflops": [0.00399218, 0.00792774, 0.257604, 0.250275, 63.5233], "total": None}]},
    {"id": "T4a", "title": "Table 4, 'Shared Memory Optimization'",
     "rows": [{"version": "Original Version",
               "gflops": [0.00402569, 0.00791323, 0.261642, 0.278204, 63.6513], "total": 64.203},
              {"version": "Memory Shared Version",
               "gflops": [0.0039822, 0.00787188, 0.267649, 0.282983, 147.525], "total": 148.087}]},
    {"id": "T4b", "title": "Table 4, 'Scheduling Throughput Maximization' (its layout is garbled in the text; "
                           "the cells re-assembled by row, the totals agree)",
     "rows": [{"version": "Memory Shared Version",
               "gflops": [0.00384864, 0.00759086, 0.260088, 0.274292, 146.858], "total": 147.4},
              {"version": "Scheduling Throughput Maximized Version",
               "gflops": [0.00391403, 0.00768303, 0.264797, 0.279267, 157.802], "total": 158.4}]},
    {"id": "T4c", "title": "Table 4, 'Tile Buffering'",
     "rows": [{"version": "Scheduling Throughput Maximized Version",
               "gflops": [0.00386833, 0.00766035, 0.260165, 0.277008, 157.645], "total": 158.19},
              {"version": "TILE_SZ = 2",
               "gflops": [0.00389657, 0.00765181, 0.262239, 0.277627, 185.819], "total": 186.37},
              {"version": "TILE_SZ = 4",
               "gflops": [0.00385745, 0.00762532, 0.26353, 0.281782, 206.939], "total": 207.5}]},
)
REPORT_SIZES: dict[Any, tuple[int, ...]] = {
    ("gpu", "full"): (4, 5, 8, 10, 32, 33, 128, 1000, 1024),
    ("gpu", "quick"): (4, 5, 8, 10, 32, 33, 128, 1000, 1024),
    ("cpu", "full"): (4, 5, 8, 10, 32, 33, 128, 1000, 1024),
    ("cpu", "quick"): (4, 5, 8, 10, 32, 33, 128),
    "tiny": (4, 5, 8, 10, 32, 33),
}
#: The report's 30 repetitions per case (median reported); quick keeps 30 with a smaller budget.
REPORT_REPEATS: dict[Any, dict[str, Any]] = {
    ("gpu", "full"): dict(warmup=3, repeat=30, max_time_s=5.0),
    ("gpu", "quick"): dict(warmup=2, repeat=30, max_time_s=0.5),
    ("cpu", "full"): dict(warmup=1, repeat=30, max_time_s=3.0),
    ("cpu", "quick"): dict(warmup=1, repeat=10, max_time_s=0.5),
    "tiny": dict(warmup=1, repeat=3, max_time_s=0.2),
}
#: The report's correctness bound: every element within this relative error of the triple loop.
REPORT_TOLERANCE = 1e-3
REPORT_COLUMNS = ("n", "case", "label", "variant", "params", "report_version", "device", "flops", "median_ms",
                  "min_ms", "max_ms", "mean_ms", "std_ms", "repeats", "gflops", "gflops_best", "call_median_ms",
                  "call_min_ms", "call_repeats", "call_gflops", "max_rel_err", "check_ok", "reference", "spin_us",
                  "overhead_hidden", "error")


def report_flops(n: int) -> int:
    """The report's operation count of an n x n product: n^2 outputs of n multiplies and n-1 adds."""
    return (2 * n - 1) * n * n


def report_gflops(n: int, ms: float) -> float:
    """The report's GFLOP/s: (2n-1) n^2 / t, t in milliseconds here."""
    return report_flops(n) / (ms * 1e6)


def report_meta() -> dict[str, Any]:
    """The report's numbers and how they are read (stored in ``meta["report"]``)."""
    return {
        "source": "../shared/seeds/cmu18645-kmeans-matmul-report.txt (CMU 18-645, Spring 2014, Project 2)",
        "gpu": REPORT_GPU,
        "cases": {f"case {i + 1}": n for i, n in enumerate(REPORT_CASES)},
        "cases_reading": "case 1..5 = n 8, 10, 32, 33, 1000: the bug-fix section names 5, 8, 10, 32, 33, 1000; "
                         "the printed GFLOP/s imply 0.24-0.28 ms for each of n = 8, 10, 32, 33 (one fixed "
                         "overhead) and ~31 ms for the original kernel at 1000, while 5, 8, 10, 32 would imply "
                         "0.056, 0.12, 0.0073, 0.23 ms",
        "gflops": "(2n-1) n^2 / t",
        "total": "sum of the five cases' GFLOP/s (the report's 'total' column)",
        "versions": [{"version": v, "label": lb, "what": what} for v, lb, what in REPORT_VERSIONS],
        "tables": [dict(t) for t in REPORT_TABLES],
    }


def _report_primary() -> dict[str, tuple[str, list[float]]]:
    """Per version, the first Table 4 that printed it: (table id, GFLOP/s at cases 1..5)."""
    out: dict[str, tuple[str, list[float]]] = {}
    for t in REPORT_TABLES:
        if not t["id"].startswith("T4"):
            continue
        for r in t["rows"]:
            out.setdefault(r["version"], (t["id"], list(r["gflops"])))
    return out


def run_matmul_report(plan: Plan) -> SweepResult:
    res = SweepResult()
    entries = _matmul_entries(plan, res.notes)
    table = gpuopt.variants("matmul")
    sizes = plan.pick(REPORT_SIZES)
    reps = plan.pick(REPORT_REPEATS)
    rng = np.random.default_rng(plan.seed)
    version_of = {label: version for version, label, _ in REPORT_VERSIONS}
    case_of = {n: i + 1 for i, n in enumerate(REPORT_CASES)}
    if plan.gpu:
        labels = {label for label, _, _ in entries}
        for version, label, _ in REPORT_VERSIONS:
            if label not in labels:
                res.notes.append(f"the report's '{version}' ({label}) is not measured in this build")
    res.meta.update(report=report_meta(),
                    inputs="uniform [0, 1) float32 (the report's random floats in [0, 1]), square n x n",
                    flops="(2n-1) n^2 (the report's count)",
                    gflops="(2n-1) n^2 / median kernel time (event-timed, device-resident inputs)",
                    call_gflops="(2n-1) n^2 / median wall time of the whole call on NumPy input (upload, kernel, "
                                "download, as a host program times it; GPU rows only)",
                    check=f"max element-wise relative error against a float64 reference (NumPy; the report's "
                          f"triple loop) below {REPORT_TOLERANCE:g}",
                    timing=f"measure(): {reps}", sizes=list(sizes),
                    entries=[{"label": lb, "variant": nm, "params": pr, "report_version": version_of.get(lb)}
                             for lb, nm, pr in entries])
    with Progress(len(sizes) * len(entries), "matmul_report", enabled=plan.progress) as prog:
        for n in sizes:
            a = rng.random((n, n), dtype=np.float32)
            b = rng.random((n, n), dtype=np.float32)
            ref = _reference(a, b)
            dev_in = (gpuopt.to_device(a), gpuopt.to_device(b)) if plan.gpu else None
            for label, name, params in entries:
                gpu = table[name].needs_cuda
                row: dict[str, Any] = {"n": n, "case": case_of.get(n), "label": label, "variant": name,
                                       "params": dict(params), "report_version": version_of.get(label),
                                       "device": "gpu" if gpu else "cpu", "flops": report_flops(n)}
                try:
                    fn = _call_matmul(dev_in if gpu else (a, b), name, params)
                    st = measure(fn, device=row["device"], **reps)
                    err = max_rel_err(_host(fn()), ref)
                    row.update(st.row(), gflops=report_gflops(n, st.median_ms),
                               gflops_best=report_gflops(n, st.min_ms), max_rel_err=err,
                               check_ok=bool(err < REPORT_TOLERANCE), reference="numpy-float64",
                               spin_us=st.spin_us, overhead_hidden=st.overhead_hidden)
                    if gpu:
                        call = measure(_call_matmul((a, b), name, params), device="cpu", **reps)
                        row.update(call_median_ms=call.median_ms, call_min_ms=call.min_ms,
                                   call_repeats=call.repeats, call_gflops=report_gflops(n, call.median_ms))
                    if not row["check_ok"]:
                        row["error"] = (f"max relative error {err:.3g} >= {REPORT_TOLERANCE:g} against the "
                                        "float64 reference")
                        res.notes.append(f"matmul_report n={n} {label}: {row['error']}")
                except Exception as exc:  # noqa: BLE001 - recorded, the sweep goes on
                    row["error"] = _error(exc)
                    res.notes.append(f"matmul_report n={n} {label}: {row['error']}")
                res.rows.append(row)
                prog.update(f"n={n} {label}")
            del dev_in
            _release_gpu_cache(plan)
    return res


def _device_short(meta: Mapping[str, Any] | None) -> str:
    gpu = (meta or {}).get("gpu")
    if not gpu:
        return "CPU"
    return str(gpu.get("name") or "GPU").replace("NVIDIA ", "")


def _report_sections(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None
                     ) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(caption, headers, body, alignment) of the report-layout tables."""
    dev = _device_short(meta)
    labels = list(dict.fromkeys(_row_label(r) for r in rows))
    sizes = list(dict.fromkeys(r["n"] for r in rows))
    by = {(_row_label(r), r["n"]): r for r in rows}
    version_of = {label: version for version, label, _ in REPORT_VERSIONS}
    reps = sorted({r["repeats"] for r in rows if _num(r.get("repeats"))})
    errs = [_num(r.get("max_rel_err")) for r in rows if _num(r.get("max_rel_err")) is not None]
    checked = ("all below 1e-3" if errs and all(e < REPORT_TOLERANCE for e in errs) else
               "SOME AT OR ABOVE 1e-3" if errs else "not checked")
    sections = []
    body = []
    for label in labels:
        line = [label, version_of.get(label, "")]
        line += [_g(by[(label, n)].get("gflops")) if (label, n) in by else "-" for n in sizes]
        worst = [_num(by[(label, n)].get("max_rel_err")) for n in sizes if (label, n) in by]
        worst = [e for e in worst if e is not None]
        line.append(f"{max(worst):.1e}" if worst else "-")
        body.append(line)
    timed = "event-timed kernel, device-resident inputs" if dev != "CPU" else "wall time of the call"
    caption = (f"{dev}, this run: GFLOP/s = (2n-1)*n^2 / t (the report's formula), t = median of "
               f"{'/'.join(map(str, reps)) or '?'} runs ({timed}); max element-wise relative error vs float64: "
               f"{checked}")
    sections.append((caption, ["kernel", "the report's version", *[f"n={n}" for n in sizes], "max rel.err"], body,
                     "ll"))

    # The report's cases side by side: this run vs the GTX 480 numbers, as printed.
    printed: dict[str, list[tuple[str, list[float], float | None]]] = {}
    for t in REPORT_TABLES:
        for r in t["rows"]:
            printed.setdefault(r["version"], []).append((t["id"], r["gflops"], r["total"]))
    body = []

    def ours(label: str, key: str) -> list[str]:
        vals = [_num(by[(label, n)].get(key)) if (label, n) in by else None for n in REPORT_CASES]
        total = sum(vals) if all(v is not None for v in vals) else None
        return [_g(v) for v in vals] + [_g(total)]

    mapped = set()
    for version, label, _ in REPORT_VERSIONS:
        mapped.add(label)
        first = f"{version} ({label})"
        present = any((label, n) in by for n in REPORT_CASES)
        body.append([first, f"{dev} kernel", *ours(label, "gflops")] if present
                    else [first, f"{dev}: not measured", *["-"] * (len(REPORT_CASES) + 1)])
        if present and any(_num(by[(label, n)].get("call_gflops")) for n in REPORT_CASES if (label, n) in by):
            body.append(["", f"{dev} whole call", *ours(label, "call_gflops")])
        for tid, vals, total in printed.get(version, []):
            body.append(["", f"GTX 480 [{tid}]", *[repr(v) for v in vals], "-" if total is None else repr(total)])
    for label in labels:  # this run's other kernels at the report's cases (kernel time only)
        if label not in mapped and any((label, n) in by for n in REPORT_CASES):
            body.append([label, f"{dev} kernel", *ours(label, "gflops")])
    caption = (f"The report's Table 4 layout (GFLOP/s; case 1..5 = n {', '.join(map(str, REPORT_CASES))}): {dev} "
               f"from this run next to the numbers the report printed for ITS GPU, a GTX 480 ({REPORT_GPU}; "
               "[table]: bug-fix = the run after the bug fix, T4a/T4b/T4c = its three 'Table 4's). "
               "total = sum of the five, as the report's column. 'whole call' = NumPy in, NumPy out (upload + "
               "kernel + download); the report's small cases imply ~0.24 ms of such overhead per call")
    headers = ["version", "run", *[f"case {i + 1} (n={n})" for i, n in enumerate(REPORT_CASES)], "total"]
    sections.append((caption, headers, body, "ll"))
    return sections


def table_matmul_report(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    parts = [textwrap.fill(caption, 120, break_on_hyphens=False) + "\n" + format_table(headers, body, align=align)
             for caption, headers, body, align in _report_sections(rows, meta)]
    return "\n\n".join(parts) + _errors(rows)


def report_markdown(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """The report-layout tables as Markdown."""
    from . import format_metadata

    lines = ["### matmul: the CMU 18-645 report's harness, reproduced", "", f"Measured with {format_metadata(meta)}.",
             ""]
    for caption, headers, body, _ in _report_sections(rows, meta):
        lines += [caption + ".", "", _md_table(headers, body), ""]
    return "\n".join(lines)


def extras_matmul_report(meta: Mapping[str, Any], rows: list[dict[str, Any]], out_dir: Any) -> list[Any]:
    """``<out>/matmul_report.md``: the report-layout tables as Markdown."""
    from pathlib import Path

    path = Path(out_dir) / "matmul_report.md"
    path.write_text(report_markdown(meta, rows), encoding="utf-8")
    return [path]


# --------------------------------------------------------------------------- conv2d

#: The conv2d sweep's minimum (what every CUDA build has); the sweep runs every GPU conv2d
#: variant registered (:func:`conv_gpu_variants`), each at its defaults, cuDNN last.
CONV_VARIANTS = ("basic", "cudnn")
#: The CS6235 report's configurations: N C K H W R S u v (no padding).
CONV_CONFS: dict[str, tuple[int, ...]] = {
    "conf1": (1, 3, 64, 112, 112, 3, 3, 2, 2),
    "conf2": (1, 832, 128, 7, 7, 1, 1, 1, 1),
    "conf3": (128, 3, 64, 112, 112, 3, 3, 2, 2),
    "conf4": (128, 832, 128, 7, 7, 1, 1, 1, 1),
}
# Largest batch N run per plan (None: the report's N).
CONV_MAX_N: dict[Any, int | None] = {
    ("gpu", "full"): None, ("gpu", "quick"): None, ("cpu", "full"): 32, ("cpu", "quick"): 8, "tiny": 1,
}
CONV_COLUMNS = ("conf", "N", "C", "K", "H", "W", "R", "S", "u", "v", "P", "Q", "variant", "device", "median_ms",
                "min_ms", "max_ms", "mean_ms", "std_ms", "repeats", "gflops", "speedup_vs_cudnn", "algorithm",
                "rel_err", "reference", "spin_us", "overhead_hidden", "skipped", "error")


def _cudnn_algorithm(x_shape, w_shape, stride, padding, algorithms="precise") -> str | None:
    fn = getattr(gpuopt.conv, "cudnn_algorithm", None)
    if fn is None:
        return None
    try:
        return str(fn(tuple(x_shape), tuple(w_shape), stride, padding, algorithms))
    except Exception as exc:  # noqa: BLE001 - informational only
        return f"unknown ({_error(exc)})"


def conv_gpu_variants() -> tuple[str, ...]:
    """The GPU (``needs_cuda``) conv2d variants of this build, registration order, ``cudnn`` last."""
    table = gpuopt.variants("conv2d")
    names = [n for n, v in table.items() if v.needs_cuda and n != "cudnn"]
    if "cudnn" in table:
        names.append("cudnn")
    return tuple(names)


def _conv_listed() -> tuple[str, ...]:
    """For ``--list``: the registered GPU conv2d variants (the minimum ones too when missing)."""
    names = list(conv_gpu_variants())
    return tuple(names + [n for n in CONV_VARIANTS if n not in names])


def run_conv2d(plan: Plan) -> SweepResult:
    res = SweepResult()
    names = _select("conv2d", _conv_listed(), plan, res.notes)
    # (label, variant, params): cuDNN twice, restricted to the precise algorithms (the
    # baseline) and free to pick FFT/Winograd (what a framework's benchmark mode gets).
    entries = [(name, name, {}) for name in names]
    if "cudnn" in names:
        entries.append(("cudnn-any", "cudnn", {"algorithms": "any"}))
    table = gpuopt.variants("conv2d")
    reps = plan.pick(KERNEL_REPEATS)
    max_n = plan.pick(CONV_MAX_N)
    rng = np.random.default_rng(plan.seed)
    res.meta.update(inputs="uniform [-1, 1) float32, NCHW / KCRS, no padding, device-resident on the GPU",
                    flops="2 N K P Q C R S", timing=f"measure(): {reps}",
                    configurations={k: dict(zip("N C K H W R S u v".split(), v)) for k, v in CONV_CONFS.items()})
    if max_n is not None:
        res.notes.append(f"batch N capped at {max_n} in this mode (the report's conf3/conf4 use N=128)")
    with Progress(len(CONV_CONFS) * len(entries), "conv2d", enabled=plan.progress) as prog:
        for conf, (n, c, k, h, w, r, s, u, v) in CONV_CONFS.items():
            if max_n is not None:
                n = min(n, max_n)
            p, q = (h - r) // u + 1, (w - s) // v + 1
            flops = 2.0 * n * k * p * q * c * r * s
            x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
            wt = rng.uniform(-1, 1, (k, c, r, s)).astype(np.float32)
            dev_in = (gpuopt.to_device(x), gpuopt.to_device(wt)) if plan.gpu else None
            outputs: dict[str, np.ndarray] = {}
            conf_rows = []
            for name, variant, params in entries:
                gpu = table[variant].needs_cuda
                row: dict[str, Any] = dict(conf=conf, N=n, C=c, K=k, H=h, W=w, R=r, S=s, u=u, v=v, P=p, Q=q,
                                           variant=name, device="gpu" if gpu else "cpu")
                if variant == "cudnn":
                    row["algorithm"] = _cudnn_algorithm(x.shape, wt.shape, (u, v), (0, 0),
                                                        params.get("algorithms", "precise"))
                try:
                    ins = dev_in if gpu else (x, wt)
                    fn = lambda ins=ins, variant=variant, params=params, u=u, v=v: gpuopt.conv2d(  # noqa: E731
                        *ins, stride=(u, v), padding=0, variant=variant, **params)
                    st = measure(fn, device=row["device"], **reps)
                    outputs[name] = _host(fn())
                    row.update(st.row(), gflops=flops / (st.median_ms * 1e6), spin_us=st.spin_us,
                               overhead_hidden=st.overhead_hidden)
                except ValueError as exc:  # the variant rejects this shape up front (e.g. constant memory)
                    row["skipped"] = _error(exc)
                    res.notes.append(f"conv2d {conf} {name}: not applicable: {row['skipped']}")
                except Exception as exc:  # noqa: BLE001
                    row["error"] = _error(exc)
                    res.notes.append(f"conv2d {conf} {name}: {row['error']}")
                conf_rows.append(row)
                prog.update(f"{conf} {name}")
            ref = outputs.get("cudnn")
            t_ref = next((r_["median_ms"] for r_ in conf_rows if r_["variant"] == "cudnn" and r_.get("median_ms")), None)
            for row in conf_rows:
                if t_ref and row.get("median_ms"):
                    row["speedup_vs_cudnn"] = t_ref / row["median_ms"]
                if ref is not None and row["variant"] in outputs and row["variant"] != "cudnn":
                    row["rel_err"], row["reference"] = _rel_err(outputs[row["variant"]], ref), "cudnn"
            res.rows.extend(conf_rows)
            del dev_in, outputs, ref
            _release_gpu_cache(plan)
    return res


def _skipped(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows a variant rejected up front (shape limits), listed under a table."""
    def where(r: Mapping[str, Any]) -> str:
        bits = [f"{k}={r[k]}" for k in ("figure", "part", "conf", "layer", "B") if r.get(k) is not None]
        return f" @ {' '.join(bits)}" if bits else ""

    seen = list(dict.fromkeys(f"  {_row_label(r)}{where(r)}: {r['skipped']}" for r in rows if r.get("skipped")))
    return ("\nnot applicable (the variant rejects the shape up front):\n" + "\n".join(seen)) if seen else ""


def table_conv2d(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    body = [[r["conf"], f"{r['N']}x{r['C']}x{r['H']}x{r['W']} * {r['K']}x{r['R']}x{r['S']} /{r['u']}", r["variant"],
             "n/a" if r.get("skipped") else _fmt(r.get("median_ms"), ".4g"), _fmt(r.get("gflops"), ".1f"),
             _fmt(r.get("speedup_vs_cudnn"), ".2f"), _fmt(r.get("rel_err"), ".1e"), r.get("algorithm") or "-"]
            for r in rows]
    return format_table(["conf", "NxCxHxW * KxRxS /stride", "variant", "ms", "GFLOP/s", "vs cuDNN", "rel.err",
                         "cuDNN algorithm"], body) + _skipped(rows) + _errors(rows)


# --------------------------------------------------------------------------- conv2d report sweeps: shared machinery
#
# The cs6235 and ece408 sweeps measure many (problem, variant, parameters) points; a point
# two figures share is measured once (its row appears in both). Per problem the inputs are
# drawn and uploaded once, and the output of cuDNN in strict FP32 (variant "cudnn",
# precise algorithms) on its first images is the reference every other output is compared
# with (rel_err). Times are kernel times from measure() on device-resident inputs with the
# L2 flushed before every run; the convolution alone (no padding, no bias, no activation).

#: measure() keywords of the report sweeps. Each has ~100-130 points; the big ones (N=128,
#: B=10,000: ~1-20 ms a run) are capped by max_time_s, so on an H200 the two full sweeps
#: together should take about 2-3 minutes (estimated from the kernels' expected times).
REPORT_CONV_REPEATS: dict[Any, dict[str, Any]] = {
    ("gpu", "full"): dict(warmup=3, repeat=30, max_time_s=0.3, flush_l2=True),
    ("gpu", "quick"): dict(warmup=2, repeat=10, max_time_s=0.1, flush_l2=True),
    ("cpu", "full"): dict(warmup=1, repeat=5, max_time_s=1.0),
    ("cpu", "quick"): dict(warmup=1, repeat=3, max_time_s=0.3),
    "tiny": dict(warmup=0, repeat=2, max_time_s=0.05),
}
#: Outputs of more elements than this are compared with the reference on their first images only.
CONV_CHECK_ELEMS = 1 << 22


@dataclass(frozen=True)
class ConvProblem:
    """One convolution of a report sweep: N C H W, K R S, stride u v (no padding)."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    u: int = 1
    v: int = 1

    @property
    def p(self) -> int:
        return (self.h - self.r) // self.u + 1

    @property
    def q(self) -> int:
        return (self.w - self.s) // self.v + 1

    @property
    def flops(self) -> float:
        """2 N K P Q C R S (one multiply and one add per tap)."""
        return 2.0 * self.n * self.k * self.p * self.q * self.c * self.r * self.s

    def fields(self) -> dict[str, int]:
        return dict(N=self.n, C=self.c, K=self.k, H=self.h, W=self.w, R=self.r, S=self.s, u=self.u, v=self.v,
                    P=self.p, Q=self.q)


@dataclass(frozen=True)
class ConvEntry:
    """One row of a figure or table: its label, the variant and parameters, more row fields."""

    label: str
    variant: str
    params: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


def _note(notes: list[str], text: str) -> None:
    if text not in notes:
        notes.append(text)


def _host_rows(out: Any, n: int) -> np.ndarray:
    """The first ``n`` images of a result (device or host) as a NumPy array."""
    rows = getattr(out, "rows", None)
    if isinstance(out, gpuopt.DeviceArray) and callable(rows):
        return rows(n)
    return np.asarray(_host(out))[:n]


def _is_reference(variant: str, params: Mapping[str, Any]) -> bool:
    return variant == "cudnn" and params.get("algorithms", "precise") == "precise"


def _usable_entries(entries: Sequence[ConvEntry], plan: Plan, notes: list[str], where: str) -> list[ConvEntry]:
    """The entries this build can run here; the others named in a note (variant or parameter missing)."""
    table = gpuopt.variants("conv2d")
    out = []
    for e in entries:
        v = table.get(e.variant)
        if v is None:
            _note(notes, f"{where}: variant conv2d/{e.variant} is not registered in this build: skipped "
                         f"(registered: {', '.join(table)})")
            continue
        if not v.available:
            _note(notes, f"{where}: variant conv2d/{e.variant} is not usable here "
                         f"({gpuopt.cuda_unavailable_reason()}): skipped")
            continue
        bad = None
        for key, value in e.params.items():
            if key not in v.params:
                bad = f"conv2d/{e.variant} has no parameter {key!r} (has: {', '.join(v.params) or 'none'})"
                break
            try:
                v.params[key].check(value, f"conv2d/{e.variant}")
            except ValueError as exc:
                bad = str(exc)
                break
        if bad:
            _note(notes, f"{where}: {bad}: '{e.label}' skipped")
            continue
        out.append(e)
    return out


class _ConvPoints:
    """Measures conv2d points of one problem at a time, each (problem, variant, parameters) once."""

    def __init__(self, plan: Plan, reps: Mapping[str, Any], notes: list[str], desc: str) -> None:
        self.plan, self.reps, self.notes, self.desc = plan, dict(reps), notes, desc
        self.table = gpuopt.variants("conv2d")
        self.rng = np.random.default_rng(plan.seed)
        self.cache: dict[tuple, dict[str, Any]] = {}
        ref = self.table.get("cudnn")
        self.with_reference = bool(plan.gpu and ref is not None and ref.available)
        self.key: str | None = None
        self.problem: ConvProblem | None = None
        self.x = self.w = self.dev = self.ref = None
        self.ref_name: str | None = None
        self.n_check = 0

    def _random(self, shape: tuple[int, ...]) -> np.ndarray:
        a = self.rng.random(shape, dtype=np.float32)
        a *= 2.0
        a -= 1.0  # uniform [-1, 1)
        return a

    def full_params(self, e: ConvEntry) -> dict[str, Any]:
        v = self.table.get(e.variant)
        return {**(v.defaults() if v is not None else {}), **e.params}

    def cache_key(self, key: str, e: ConvEntry) -> tuple:
        return (key, e.variant, tuple(sorted(self.full_params(e).items())))

    def load(self, key: str, prob: ConvProblem) -> None:
        self.key, self.problem = key, prob
        self.x = self._random((prob.n, prob.c, prob.h, prob.w))
        self.w = self._random((prob.k, prob.c, prob.r, prob.s))
        self.dev = (gpuopt.to_device(self.x), gpuopt.to_device(self.w)) if self.plan.gpu else None
        per_image = max(prob.k * prob.p * prob.q, 1)
        self.n_check = max(1, min(prob.n, CONV_CHECK_ELEMS // per_image))
        self.ref, self.ref_name = None, None
        if self.with_reference:
            try:
                out = gpuopt.conv2d(*self.dev, stride=(prob.u, prob.v), padding=0, variant="cudnn")
                self.ref = _host_rows(out, self.n_check)
                del out
                self.ref_name = "cudnn" + (f" (first {self.n_check} of {prob.n} images)" if self.n_check < prob.n
                                           else "")
            except Exception as exc:  # noqa: BLE001 - the cudnn row records the failure itself
                _note(self.notes, f"{self.desc} {key}: no cuDNN reference ({_error(exc)})")

    def release(self) -> None:
        self.x = self.w = self.dev = self.ref = None
        _release_gpu_cache(self.plan)

    def measure(self, e: ConvEntry) -> dict[str, Any]:
        """The measurement fields of entry ``e`` on the loaded problem (from the cache when done before)."""
        ck = self.cache_key(self.key, e)
        if ck in self.cache:
            return dict(self.cache[ck])
        prob = self.problem
        params = self.full_params(e)
        gpu = self.table[e.variant].needs_cuda
        out: dict[str, Any] = {"params": params, "device": "gpu" if gpu else "cpu",
                               "flush_l2": bool(gpu and self.reps.get("flush_l2"))}
        reps = dict(self.reps) if gpu else {k: v for k, v in self.reps.items() if k != "flush_l2"}
        if e.variant == "cudnn" and gpu and self.plan.gpu:
            out["algorithm"] = _cudnn_algorithm((prob.n, prob.c, prob.h, prob.w), (prob.k, prob.c, prob.r, prob.s),
                                                (prob.u, prob.v), (0, 0), params.get("algorithms", "precise"))
        ins = self.dev if gpu else (self.x, self.w)

        def fn(ins=ins, variant=e.variant, kw=dict(e.params), stride=(prob.u, prob.v)):
            return gpuopt.conv2d(*ins, stride=stride, padding=0, variant=variant, **kw)

        try:
            st = measure(fn, device=out["device"], **reps)
            out.update(st.row(), gflops=prob.flops / (st.median_ms * 1e6), spin_us=st.spin_us,
                       overhead_hidden=st.overhead_hidden)
            if self.ref is not None and not _is_reference(e.variant, params):
                got = _host_rows(fn(), self.n_check)
                out["rel_err"], out["reference"] = _rel_err(got, self.ref), self.ref_name
        except ValueError as exc:  # the variant rejects this shape up front (e.g. 64 KB of constant memory)
            out["skipped"] = _error(exc)
            _note(self.notes, f"{self.desc} {self.key} {e.label}: not applicable: {out['skipped']}")
        except Exception as exc:  # noqa: BLE001 - recorded, the sweep goes on
            out["error"] = _error(exc)
            _note(self.notes, f"{self.desc} {self.key} {e.label}: {out['error']}")
        self.cache[ck] = out
        return dict(out)


def _run_points(plan: Plan, res: SweepResult, reps: Mapping[str, Any],
                work: Sequence[tuple[dict[str, Any], str, ConvEntry]], problems: Mapping[str, ConvProblem],
                desc: str) -> list[dict[str, Any]]:
    """Measure every ``(row fields, problem key, entry)`` of ``work``; one row each, in ``work``'s order.

    Problems are loaded in order of first appearance; ``speedup_vs_cudnn`` = the strict
    cuDNN time of the same problem in this run / the row's time (> 1: faster than cuDNN).
    """
    points = _ConvPoints(plan, reps, res.notes, desc)
    unique = {points.cache_key(pk, e) for _, pk, e in work}
    rows: list[dict[str, Any] | None] = [None] * len(work)
    cudnn_ms: dict[str, float] = {}
    with Progress(len(unique), desc, enabled=plan.progress) as prog:
        for pk in dict.fromkeys(pk for _, pk, _ in work):
            prob = problems[pk]
            points.load(pk, prob)
            try:
                for i, (base, key, e) in enumerate(work):
                    if key != pk:
                        continue
                    fresh = points.cache_key(pk, e) not in points.cache
                    m = points.measure(e)
                    if fresh:
                        prog.update(f"{pk} {e.label}")
                    rows[i] = {**base, **prob.fields(), "label": e.label, "variant": e.variant, **e.extra, **m}
                    if _is_reference(e.variant, m["params"]) and _num(m.get("median_ms")):
                        cudnn_ms[pk] = m["median_ms"]
            finally:
                points.release()
    for (_, pk, _), row in zip(work, rows):
        t_ref = cudnn_ms.get(pk)
        if t_ref and _num(row.get("median_ms")):
            row["speedup_vs_cudnn"] = t_ref / row["median_ms"]
    return [r for r in rows if r is not None]


def _ms_cell(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return "-"
    if row.get("skipped"):
        return "n/a"
    if row.get("error"):
        return "failed"
    return _fmt(_num(row.get("median_ms")), ".4g")


def _sections_text(sections: Sequence[tuple[str, Sequence[str], Sequence[Sequence[str]], str]]) -> str:
    return "\n\n".join(textwrap.fill(caption, 120, break_on_hyphens=False) + "\n" + format_table(headers, body, align)
                       for caption, headers, body, align in sections)


def _sections_markdown(title: str, meta: Mapping[str, Any],
                       sections: Sequence[tuple[str, Sequence[str], Sequence[Sequence[str]], str]]) -> str:
    from . import format_metadata

    lines = [f"### {title}", "", f"Measured with {format_metadata(meta)}.", ""]
    for caption, headers, body, _ in sections:
        lines += [caption.rstrip(".") + ".", "", _md_table(headers, body), ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- cs6235: the report's eight figures
#
# The CS6235 report (../shared/seeds/cs6235-cnn-gpu-conv-report.txt) shows its results only as
# plots, which are not in the text: it printed NO numbers for any of its eight figures (the
# text says only "All performance data ... is reported in milliseconds", l.30). What each
# figure found is transcribed below (CS6235_FIGURES, "report") and shown under each figure.
# Its GPU: node kp359 of Utah's CHPC cluster (l.30, l.584); the report does not name the card.
#
# gpuopt's variants for the report's kernels (its benchmark script, l.128-597, names the
# folders): general = "the general kernel"; unroll_k loop_order=crs = unroll_k2..16 (Fig 3) and
# unroll_k8 (Fig 5 "crs"); loop_order=rsc = unroll_k8_rsc; unroll_c = unroll_c0..16; plain =
# "Plain" (q,p,k,n), reorder = "Reorder" (q,p,n,k); shared = "SM"; unroll_nk = "unroll_nk".
# Fig 7's "Plain" bars come from the Reorder folder (SM_vs_Plain, l.533: "To ensure a fair
# comparison, the plain kernel also kept the q, p, n, k thread index mapping", l.110), so Fig 7
# shows reorder as the report's "plain", and plain (q,p,k,n) too.

CS6235_GPU = "a K80-class card"
CS6235_GPU_NOTE = ("the report's numbers came from node kp359 of Utah's CHPC cluster (l.30); the text does not "
                   "name the GPU (K80-class per the issue)")
CS6235_SOURCE = "../shared/seeds/cs6235-cnn-gpu-conv-report.txt"
CS6235_CONFS = tuple(CONV_CONFS)
#: Block sizes of Fig 2 (the report: 32 .. 1024).
CS6235_BLOCK_SIZES: dict[Any, tuple[int, ...]] = {
    ("gpu", "full"): (32, 64, 128, 256, 512, 1024), ("gpu", "quick"): (32, 128, 1024),
    ("cpu", "full"): (), ("cpu", "quick"): (), "tiny": (64, 128),
}
#: k unroll factors of Figs 3 and 8 (the report: 2, 4, 8, 16).
CS6235_K_UNROLLS: dict[Any, tuple[int, ...]] = {
    ("gpu", "full"): (2, 4, 8, 16), ("gpu", "quick"): (2, 8, 16), ("cpu", "full"): (), ("cpu", "quick"): (),
    "tiny": (2, 8),
}
#: c unroll factors of Fig 4 (the report: 0, 2, 4, 8, 16; 0 = no unrolling).
CS6235_C_UNROLLS: dict[Any, tuple[int, ...]] = {
    ("gpu", "full"): (0, 2, 4, 8, 16), ("gpu", "quick"): (0, 4, 16), ("cpu", "full"): (), ("cpu", "quick"): (),
    "tiny": (0, 4),
}
#: Fig 3's block size: "These results were obtained at Blocksize = 512" (Sec. 3.1, l.58).
CS6235_FIG3_BLOCK = 512
#: Fig 5's unroll factor: the report's unroll_k8 (crs) vs unroll_k8_rsc folders (l.364).
CS6235_FIG5_UNROLL = 8

#: The report's eight figures: id, title, kind ("bars": one bar per series at each
#: configuration; "lines": a line per configuration over the swept parameter ``x``, panels
#: N=1 and N=128, cuDNN as dashed lines), configurations, and what the report says.
CS6235_FIGURES: tuple[dict[str, Any], ...] = (
    {"figure": "fig1", "kind": "bars", "confs": CS6235_CONFS,
     "title": "Fig 1: the general kernel (and auto) vs cuDNN",
     "report": "Fig 1 (Sec. 1, l.26-30): the general kernel beats cuDNN on conf1 and conf2 and approaches it on "
               "conf3."},
    {"figure": "fig2", "kind": "lines", "x": "block_size", "confs": CS6235_CONFS,
     "title": "Fig 2: the general kernel at block sizes 32..1024",
     "report": "Fig 2 (Sec. 2, l.44-48): at N=1 best around block 64 or 128, then worse or flat; at N=128 steep "
               "gains up to 128, then worse; 128 best over all four configurations."},
    {"figure": "fig3", "kind": "lines", "x": "unroll", "confs": CS6235_CONFS,
     "title": f"Fig 3: k unroll factors (unroll_k, crs loops, block {CS6235_FIG3_BLOCK})",
     "report": f"Fig 3 (Sec. 3.1, l.56-60, l.76): at block {CS6235_FIG3_BLOCK}, unrolling k helps at N=128 and "
               "degrades or stagnates at N=1."},
    {"figure": "fig4", "kind": "lines", "x": "unroll", "confs": CS6235_CONFS,
     "title": "Fig 4: c unroll factors (unroll_c; 0 = none)",
     "report": "Fig 4 (Sec. 3.2, l.62-64, l.86): no unrolling is fastest except on conf2 (C=832), where unrolling "
               "c first helps; at C=3 it cannot help."},
    {"figure": "fig5", "kind": "bars", "confs": CS6235_CONFS,
     "title": f"Fig 5: crs vs rsc loop order (unroll_k, unroll {CS6235_FIG5_UNROLL})",
     "report": "Fig 5 (Sec. 4.1, l.89-95): rsc beats crs on most configurations; its rsc kernels could not unroll "
               "beyond 8 (registers), yet rsc with 8 beat every crs factor on conf3 and conf4."},
    {"figure": "fig6", "kind": "bars", "confs": CS6235_CONFS,
     "title": "Fig 6: thread mapping q,p,k,n (plain) vs q,p,n,k (reorder)",
     "report": "Fig 6 (Sec. 4.2, l.97-104): no specific trend, so the general kernel keeps q,p,k,n."},
    {"figure": "fig7", "kind": "bars", "confs": ("conf3", "conf4"),
     "title": "Fig 7: shared memory vs plain at N=128",
     "report": "Fig 7 (Sec. 4.2.1, l.106-115): shared memory (c tiled, q,p,n,k) vs the plain kernel with the same "
               "q,p,n,k mapping: faster at C=832 (conf4), slower at C=3 (conf3); impossible at N=1 under its "
               "divisibility conditions (gpuopt's shared runs any shape)."},
    {"figure": "fig8", "kind": "bars", "confs": ("conf3", "conf4"),
     "title": "Fig 8: n,k unroll-and-jam (4x4) vs the best k unroll at N=128",
     "report": "Fig 8 (Sec. 5, l.117-122): unrolling n and k by 4 each gives steep gains over the best k unroll, "
               "up to about double the improvement on conf4; used by the general kernel whenever N=128."},
)
CS6235_COLUMNS = ("figure", "panel", "conf", "N", "C", "K", "H", "W", "R", "S", "u", "v", "P", "Q", "label", "series",
                  "x_name", "x", "variant", "params", "device", "median_ms", "min_ms", "max_ms", "mean_ms", "std_ms",
                  "repeats", "gflops", "speedup_vs_cudnn", "rel_err", "reference", "algorithm", "spin_us",
                  "overhead_hidden", "flush_l2", "skipped", "error")
#: The variants the cs6235 figures use (``auto`` when registered).
CS6235_VARIANTS = ("general", "auto", "unroll_k", "unroll_c", "plain", "reorder", "shared", "unroll_nk", "cudnn")


def _cs6235_panel(conf: str) -> str:
    return f"N={CONV_CONFS[conf][0]}"


def cs6235_entries(plan: Plan, notes: list[str]) -> dict[str, list[ConvEntry]]:
    """The entries (rows per configuration) of each figure; CPU mode: the ``cpu`` variant only."""
    if not plan.gpu:
        _note(notes, "cs6235: no GPU, so every figure shows the cpu variant only (GPU variants not run here: "
                     + ", ".join(CS6235_VARIANTS) + ")")
        return {f["figure"]: [ConvEntry("cpu", "cpu", {}, {"series": "cpu"})] for f in CS6235_FIGURES}
    table = gpuopt.variants("conv2d")
    ref = ConvEntry("cudnn", "cudnn", {}, {"series": "cuDNN (strict FP32)"})

    def swept(variant: str, x_name: str, values: Sequence[Any], **fixed: Any) -> list[ConvEntry]:
        return [ConvEntry(matmul_label(variant, {x_name: val, **fixed}), variant, {x_name: val, **fixed},
                          {"x_name": x_name, "x": val, "series": matmul_label(variant, fixed)}) for val in values]

    def k_unroll(order: str, unroll: int, **fixed: Any) -> ConvEntry:
        params = {**fixed, "unroll": unroll, "loop_order": order}
        return ConvEntry(matmul_label("unroll_k", params), "unroll_k", params, {"series": order})

    fig1 = [ConvEntry("general", "general", {}, {"series": "general"})]
    if "auto" in table:
        fig1.append(ConvEntry("auto", "auto", {}, {"series": "auto"}))
    else:
        _note(notes, "cs6235 fig1: variant conv2d/auto is not registered in this build: Fig 1 shows general only")
    fig1 += [ref, ConvEntry("cudnn-any", "cudnn", {"algorithms": "any"}, {"series": "cuDNN (any algorithm)"})]
    fig5 = [k_unroll(order, CS6235_FIG5_UNROLL) for order in ("crs", "rsc")]
    plain = table.get("plain")
    if plain is not None and "loop_order" in plain.params:
        fig5 += [ConvEntry(matmul_label("plain", {"loop_order": o}), "plain", {"loop_order": o},
                           {"series": f"plain {o}"}) for o in ("crs", "rsc")]
    else:
        _note(notes, "cs6235 fig5: plain has no loop_order parameter (its loops are c,r,s), so Fig 5 compares the "
                     f"loop orders on unroll_k (unroll {CS6235_FIG5_UNROLL}) only, as the report did")
    k_factors = plan.pick(CS6235_K_UNROLLS)
    entries = {
        "fig1": fig1,
        "fig2": swept("general", "block_size", plan.pick(CS6235_BLOCK_SIZES)) + [ref],
        "fig3": swept("unroll_k", "unroll", k_factors, block_size=CS6235_FIG3_BLOCK, loop_order="crs") + [ref],
        "fig4": swept("unroll_c", "unroll", plan.pick(CS6235_C_UNROLLS)) + [ref],
        "fig5": fig5,
        "fig6": [ConvEntry("plain", "plain", {}, {"series": "plain: q,p,k,n"}),
                 ConvEntry("reorder", "reorder", {}, {"series": "reorder: q,p,n,k"})],
        "fig7": [ConvEntry("reorder", "reorder", {}, {"series": "the report's 'Plain' here: reorder (q,p,n,k)"}),
                 ConvEntry("plain", "plain", {}, {"series": "plain (q,p,k,n)"}),
                 ConvEntry("shared", "shared", {}, {"series": "shared (q,p,n,k, c tiled in shared memory)"})],
        "fig8": [ConvEntry("unroll_nk", "unroll_nk", {}, {"series": "unroll_nk (n, k unrolled 4 x 4)"})]
                + [k_unroll("rsc", f) for f in k_factors] + [ref],
    }
    return {fig: _usable_entries(es, plan, notes, f"cs6235 {fig}") for fig, es in entries.items()}


def cs6235_report_meta() -> dict[str, Any]:
    return {"source": CS6235_SOURCE, "gpu": CS6235_GPU, "gpu_note": CS6235_GPU_NOTE,
            "numbers": "none: the report shows its results only as plots, which are not in the text; it printed no "
                       "number for any figure",
            "figures": [{k: f[k] for k in ("figure", "title", "kind", "confs", "report")} for f in CS6235_FIGURES]}


def run_cs6235(plan: Plan) -> SweepResult:
    res = SweepResult()
    reps = plan.pick(REPORT_CONV_REPEATS)
    max_n = plan.pick(CONV_MAX_N)
    entries = cs6235_entries(plan, res.notes)
    problems = {conf: ConvProblem(min(n, max_n) if max_n is not None else n, c, h, w, k, r, s, u, v)
                for conf, (n, c, k, h, w, r, s, u, v) in CONV_CONFS.items()}
    if max_n is not None:
        res.notes.append(f"batch N capped at {max_n} in this mode (the report's conf3/conf4 use N=128)")
    work = [({"figure": f["figure"], "panel": _cs6235_panel(conf), "conf": conf}, conf, e)
            for f in CS6235_FIGURES for conf in f["confs"] for e in entries[f["figure"]]]
    res.meta.update(report=cs6235_report_meta(),
                    inputs="uniform [-1, 1) float32, NCHW / KCRS, no padding, no bias, no activation, "
                           "device-resident on the GPU",
                    configurations={k: dict(zip("N C K H W R S u v".split(), v)) for k, v in CONV_CONFS.items()},
                    flops="2 N K P Q C R S", gflops="2 N K P Q C R S / median kernel time",
                    timing=f"measure(): {reps} (kernel time, ms; a point two figures share is measured once)",
                    reference=f"cuDNN strict FP32 (variant cudnn, precise algorithms) in the same run; rel_err = "
                              f"||y - y_cudnn|| / ||y_cudnn|| over the first images (at most {CONV_CHECK_ELEMS} "
                              "outputs)",
                    figures={f["figure"]: [e.label for e in entries[f["figure"]]] for f in CS6235_FIGURES})
    res.rows = _run_points(plan, res, reps, work, problems, "cs6235")
    return res


def cs6235_best_k(rows: Sequence[Mapping[str, Any]], conf: str) -> Mapping[str, Any] | None:
    """Fig 8's "best k unroll" at ``conf``: the fastest unroll_k row of fig8."""
    cands = [r for r in rows if r.get("figure") == "fig8" and r.get("conf") == conf and r.get("variant") == "unroll_k"
             and _num(r.get("median_ms"))]
    return min(cands, key=lambda r: r["median_ms"]) if cands else None


def _cs6235_sections(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None
                     ) -> list[tuple[str, list[str], list[list[str]], str]]:
    dev = _device_short(meta)
    sections = []
    for f in CS6235_FIGURES:
        fr = [r for r in rows if r.get("figure") == f["figure"]]
        confs = [c for c in f["confs"] if any(r["conf"] == c for r in fr)] or list(f["confs"])
        by = {(_row_label(r), r["conf"]): r for r in fr}
        body = []
        for label in dict.fromkeys(_row_label(r) for r in fr):
            line = [label]
            for c in confs:
                r = by.get((label, c))
                cell = _ms_cell(r)
                if r is not None and _num(r.get("speedup_vs_cudnn")) and not _is_reference(r["variant"], r.get(
                        "params") or {}):
                    cell += f" ({r['speedup_vs_cudnn']:.2f}x)"
                line.append(cell)
            body.append(line)
        if f["figure"] == "fig8":
            line = ["best unroll_k (rsc)"]
            for c in confs:
                b = cs6235_best_k(fr, c)
                unroll = (b.get("params") or {}).get("unroll") if b is not None else None
                line.append("-" if b is None else f"{b['median_ms']:.4g} (unroll={unroll})")
            body.append(line)
        what = ("median kernel time in ms (x cuDNN strict FP32 in the same run; > 1: faster)" if dev != "CPU"
                else "median wall time in ms of the cpu variant's call (no GPU here)")
        caption = (f"CS6235 {f['title']}: {dev} {what}. The report ({CS6235_GPU}) printed no numbers for this "
                   f"figure; it found: {f['report']}")
        n_of = {r["conf"]: r.get("N") for r in fr}
        sections.append((caption, ["row", *[f"{c} (N={n_of.get(c, CONV_CONFS[c][0])})" for c in confs]], body, "l"))
    return sections


def table_cs6235(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    return _sections_text(_cs6235_sections(rows, meta)) + _skipped(rows) + _errors(rows)


def cs6235_markdown(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    return _sections_markdown("conv2d: the CS6235 report's figures, reproduced", meta,
                              _cs6235_sections(rows, meta))


def extras_cs6235(meta: Mapping[str, Any], rows: list[dict[str, Any]], out_dir: Any) -> list[Any]:
    """``<out>/cs6235.md``: one table per figure, as Markdown."""
    from pathlib import Path

    path = Path(out_dir) / "cs6235.md"
    path.write_text(cs6235_markdown(meta, rows), encoding="utf-8")
    return [path]


# --------------------------------------------------------------------------- ece408: the "Op Time" table
#
# The ECE408 Fashion-MNIST report (../shared/seeds/ece408-fashion-mnist-conv-report.txt) printed
# MXNet's "Op Time" of its two convolutions ("Op Time: <layer 1> Op Time: <layer 2>", in
# SECONDS; l.212 confirms the first is the first layer) for 10, 100 and 10,000 images after
# each optimisation. Every such pair is transcribed below, as printed, with its line in the
# text; the tables show them in ms (x 1000). Its layers (shared/data/README.md): conv1
# Bx1x64x64 -> 6 maps 5x5 (valid, no bias; tanh after it, not timed here), conv2 Bx6x30x30 ->
# 16 maps 5x5. Its GPU is not named in the text (the course's RAI servers; the issue says
# P100-class; its Milestone 1 profile lists cuBLAS's sgemm_sm35 kernel, l.11).
#
# The ECE408 MNIST report (../shared/seeds/ece408-mnist-cnn-report.txt, a Tesla K80, l.28)
# printed its two convolutions at 10,000 images (1x28x28 -> 32 maps 5x5; 32x12x12 -> 64 maps
# 5x5) in Tables 2-5: transcribed in ECE408_MNIST_TIMES.

ECE408_GPU = "a P100-class card"
ECE408_GPU_NOTE = ("the report does not name its GPU (the course's RAI servers; P100-class per the issue); its "
                   "Milestone 1 profile lists cuBLAS's sgemm_sm35 kernel (l.11), so take the class as approximate")
ECE408_SOURCE = "../shared/seeds/ece408-fashion-mnist-conv-report.txt"
ECE408_MNIST_GPU = "Tesla K80"
ECE408_MNIST_SOURCE = "../shared/seeds/ece408-mnist-cnn-report.txt"
#: name -> (C, H, W, K, R, S): valid 5x5 convolutions, no bias.
ECE408_LAYERS: dict[str, tuple[int, ...]] = {"conv1": (1, 64, 64, 6, 5, 5), "conv2": (6, 30, 30, 16, 5, 5)}
MNIST_LAYERS: dict[str, tuple[int, ...]] = {"mnist_conv1": (1, 28, 28, 32, 5, 5),
                                             "mnist_conv2": (32, 12, 12, 64, 5, 5)}
#: The report's image counts.
ECE408_REPORT_BATCHES = (10, 100, 10000)
ECE408_BATCHES: dict[Any, tuple[int, ...]] = {
    ("gpu", "full"): (10, 100, 10000), ("gpu", "quick"): (10, 100, 10000), ("cpu", "full"): (10, 100),
    ("cpu", "quick"): (10,), "tiny": (10,),
}
#: Images of the TILE_WIDTH sweep and of the MNIST layers (the reports: 10,000).
ECE408_BIG_BATCH: dict[Any, int] = {
    ("gpu", "full"): 10000, ("gpu", "quick"): 10000, ("cpu", "full"): 100, ("cpu", "quick"): 10, "tiny": 10,
}
#: Optimisation 9's TILE_WIDTH sweep: 4 to 32 in steps of 4 (l.716).
ECE408_TILE_WIDTHS: dict[Any, tuple[int, ...]] = {
    ("gpu", "full"): (4, 8, 12, 16, 20, 24, 28, 32), ("gpu", "quick"): (8, 16, 32), ("cpu", "full"): (),
    ("cpu", "quick"): (), "tiny": (8, 16),
}
ECE408_TILE_VARIANTS = ("tiled", "tiled_unrolled")
#: On the GPU the cpu variant (the report's Milestone 2 sequential code) runs up to this many images.
ECE408_CPU_MAX_B = 100

#: The rows of the Op Time table, in the report's order: (label, variant, params, the report's step).
ECE408_STEPS: tuple[tuple[str, str, dict[str, Any], str], ...] = (
    ("cpu", "cpu", {}, "M2: sequential CPU"),
    ("basic", "basic", {}, "M3: basic kernel"),
    ("unroll", "unroll", {}, "Opt 1: unrolling"),
    ("unroll_constmem", "unroll_constmem", {}, "Opt 2: constant memory"),
    ("tiled", "tiled", {}, "Opt 3: shared memory"),
    ("tiled_unrolled", "tiled_unrolled", {}, "Opt 4&5: restrict, unroll"),
    ("tiled_channels", "tiled_channels", {}, "Opt 6&7: channels, atomics"),
    ("tiled_corner_turn", "tiled_corner_turn", {}, "Opt 8: corner turning"),
    ("implicit_gemm", "implicit_gemm", {}, "MNIST report: implicit GEMM"),
    ("implicit_gemm_fast", "implicit_gemm_fast", {}, "gpuopt: fast implicit GEMM"),
    ("direct_regblock", "direct_regblock", {}, "gpuopt: register-blocked direct"),
    ("auto", "auto", {}, "gpuopt: auto"),
    ("cudnn", "cudnn", {}, "cuDNN, strict FP32"),
    ("cudnn-any", "cudnn", {"algorithms": "any"}, "cuDNN, any algorithm"),
)
#: Every "Op Time" pair the report printed, seconds as printed: B -> (layer 1, layer 2, line of the text).
ECE408_OP_TIMES: dict[str, dict[str, Any]] = {
    "cpu": {"step": "Milestone 2 (m2.1.py): sequential CPU forward",
            "times": {10000: (7.463296, 25.670930, 92), 100: (0.074735, 0.255830, 112), 10: (0.007455, 0.025613, 132)}},
    "basic": {"step": "Milestone 3 (m3.1.py): basic forward kernel",
              "times": {10000: (0.203084, 0.508383, 158), 100: (0.001499, 0.004704, 178),
                        10: (0.000259, 0.000765, 196)},
              "also": "the text (l.212) quotes 0.002174 and 0.004704 for 100 images; the printed output (l.178) "
                      "says 0.001499 and 0.004704"},
    "unroll": {"step": "Optimization 1: matrix unrolling (m4.1.py)",
               "times": {10000: (0.490018, 0.742920, 260), 100: (0.005656, 0.009813, 278),
                         10: (0.000926, 0.001081, 296)}},
    "unroll_constmem": {"step": "Optimization 2: unrolled masks in constant memory (m4.1.py)",
                        "times": {10000: (0.490576, 0.716588, 338), 100: (0.005859, 0.009528, 356),
                                  10: (0.000989, 0.001117, 376)}},
    "tiled": {"step": "Optimization 3: shared-memory convolution, TILE_WIDTH 16 (m4.1.py)",
              "times": {10000: (0.124374, 0.387863, 414), 100: (0.001269, 0.004807, 434),
                        10: (0.000163, 0.000521, 454)},
              "also": "a second 10-image run printed 0.000204 and 0.000487 (l.470-472)"},
    "tiled_unrolled": {"step": "Optimization 4&5: __restrict__ and loop unrolling (final.py)",
                       "times": {10000: (0.108973, 0.320080, 518), 100: (0.001077, 0.003857, 536),
                                 10: (0.000142, 0.000422, 554)}},
    "tiled_channels": {"step": "Optimization 6&7: input-channel parallelism and atomics (final.py)",
                       "times": {10000: (0.115499, 0.322260, 590), 100: (0.001215, 0.003804, 606),
                                 10: (0.000148, 0.000402, 624)}},
    "tiled_corner_turn": {"step": "Optimization 8: corner turning (final.py)",
                          "times": {10000: (0.107390, 0.315025, 660), 100: (0.001053, 0.003804, 676),
                                    10: (0.000143, 0.000414, 694)}},
}
#: Optimisation 9 (TILE_WIDTH 4..32 at 10,000 images): its table and chart (Figure 27) are not in
#: the text; only its reading is (l.724).
ECE408_TILE_REPORT = {
    "conv1": "best at TILE_WIDTH 16, 32 a close second",
    "conv2": "best at TILE_WIDTH 28, 16 a close second, 32 a close third",
}
#: The ECE408 MNIST report's convolution times at 10,000 images (Tesla K80), in ms:
#: (variant, layer, ms, where). Its Table 4/5 conv1 has the ReLU fused in; Table 3 and the
#: serial times are whole-function times.
ECE408_MNIST_TIMES: tuple[tuple[str, str, float, str, str], ...] = (
    ("cpu", "mnist_conv1", 382006.0, "T2", "Table 2 (serial), 'Convolution Forward Valid (1)' 382.006 s (l.59)"),
    ("cpu", "mnist_conv2", 798785.0, "T2", "Table 2 (serial), 'Convolution Forward Valid (2)' 798.785 s (l.63)"),
    ("basic", "mnist_conv1", 11523.0, "T3", "Table 3 (basic parallelization), 11.523 s (l.76)"),
    ("basic", "mnist_conv2", 78431.0, "T3", "Table 3 (basic parallelization), 78.431 s (l.79)"),
    ("tiled", "mnist_conv1", 374.624, "T4", "Table 4 (optimized parallel: tiled, ReLU fused), 374.624 ms (l.118)"),
    ("tiled", "mnist_conv2", 2002.0, "T4", "Table 4 (optimized parallel: tiled), 2.002 s (l.120)"),
    ("tiled", "mnist_conv1", 383.423, "T5", "Table 5 (final), 'Tiled Convolution Forward Valid' 383.423 ms (l.150)"),
    ("unroll", "mnist_conv2", 1057.0, "T5", "Table 5 (final), 'Unrolled Convolution Reduction' 1.057 s (l.154)"),
)
ECE408_COLUMNS = ("part", "layer", "B", "N", "C", "K", "H", "W", "R", "S", "u", "v", "P", "Q", "label", "step",
                  "x_name", "x", "variant", "params", "device", "median_ms", "min_ms", "max_ms", "mean_ms", "std_ms",
                  "repeats", "gflops", "speedup_vs_cudnn", "rel_err", "reference", "algorithm", "report_ms",
                  "report_gpu", "report_source", "spin_us", "overhead_hidden", "flush_l2", "skipped", "error")
ECE408_PARTS = ("op_time", "tile_width", "mnist")


def ms_text(seconds: float) -> str:
    """Seconds as printed -> the same number in ms, exactly (0.203084 -> "203.084")."""
    from decimal import Decimal

    d = (Decimal(repr(seconds)) * 1000).normalize()
    text = format(d, "f")
    return text


def ece408_report_seconds(label: str, layer: str, batch: int) -> tuple[float | None, str | None]:
    """The report's Op Time (seconds, as printed) of the row ``label`` (a variant name of
    :data:`ECE408_STEPS`) on ``layer`` ("conv1"/"conv2") at ``batch`` images, and where it
    was printed; (None, None) when it printed none."""
    entry = ECE408_OP_TIMES.get(label)
    if entry is None or batch not in entry["times"] or layer not in ECE408_LAYERS:
        return None, None
    t1, t2, line = entry["times"][batch]
    s = t1 if layer == "conv1" else t2
    return s, f"{entry['step']}, {batch} images, 'Op Time' {s!r} s (l.{line})"


def ece408_report_ms(label: str, layer: str, batch: int) -> tuple[float | None, str | None]:
    """:func:`ece408_report_seconds` in ms (exactly: 0.203084 s -> 203.084)."""
    s, where = ece408_report_seconds(label, layer, batch)
    return (None, None) if s is None else (float(ms_text(s)), where)


def ece408_mnist_report(variant: str, layer: str) -> list[tuple[float, str, str]]:
    """The ECE408 MNIST report's times (ms, table tag, where) of ``variant`` on ``layer``."""
    return [(ms, tag, where) for v, lay, ms, tag, where in ECE408_MNIST_TIMES if v == variant and lay == layer]


def ece408_report_meta() -> dict[str, Any]:
    return {
        "source": ECE408_SOURCE, "gpu": ECE408_GPU, "gpu_note": ECE408_GPU_NOTE,
        "op_time_unit": "seconds as printed (MXNet's Op Time); first = layer 1 (conv1), second = layer 2 (conv2)",
        "layers": {k: dict(zip("C H W K R S".split(), v)) for k, v in ECE408_LAYERS.items()},
        "op_times": {v: {"step": e["step"], "also": e.get("also"),
                         "times": {str(b): {"conv1_s": t1, "conv2_s": t2, "line": line}
                                   for b, (t1, t2, line) in e["times"].items()}}
                     for v, e in ECE408_OP_TIMES.items()},
        "tile_width": {"numbers": "none printed (Figure 27 is not in the text)", "reading": ECE408_TILE_REPORT},
        "mnist": {"source": ECE408_MNIST_SOURCE, "gpu": ECE408_MNIST_GPU,
                  "layers": {k: dict(zip("C H W K R S".split(), v)) for k, v in MNIST_LAYERS.items()},
                  "times_ms": [{"variant": v, "layer": lay, "ms": ms, "table": tag, "where": where}
                               for v, lay, ms, tag, where in ECE408_MNIST_TIMES]},
    }


def _ece408_step_entries(*, with_cpu: bool) -> list[ConvEntry]:
    out = []
    for label, variant, params, step in ECE408_STEPS:
        if variant == "cpu" and not with_cpu:
            continue
        out.append(ConvEntry(label, variant, params, {"step": step}))
    return out


def ece408_work(plan: Plan, notes: list[str]) -> tuple[list[tuple[dict[str, Any], str, ConvEntry]],
                                                       dict[str, ConvProblem]]:
    """(work, problems) of the ece408 sweep: the Op Time table, the TILE_WIDTH sweep, the MNIST layers."""
    batches = plan.pick(ECE408_BATCHES)
    big = plan.pick(ECE408_BIG_BATCH)
    widths = plan.pick(ECE408_TILE_WIDTHS)
    problems: dict[str, ConvProblem] = {}
    work: list[tuple[dict[str, Any], str, ConvEntry]] = []

    def problem(layer: str, spec: tuple[int, ...], b: int) -> str:
        c, h, w, k, r, s = spec
        key = f"{layer} B={b}"
        problems.setdefault(key, ConvProblem(b, c, h, w, k, r, s))
        return key

    cpu_only = [ConvEntry("cpu", "cpu", {}, {"step": "gpuopt's CPU reference (no GPU here)"})]
    if not plan.gpu:
        _note(notes, "ece408: no GPU, so only the cpu variant runs (at "
                     f"{', '.join(map(str, batches))} images; the TILE_WIDTH part shows it as a reference line)")
    for layer, spec in ECE408_LAYERS.items():
        for b in batches:
            entries = (_ece408_step_entries(with_cpu=b <= ECE408_CPU_MAX_B) if plan.gpu else cpu_only)
            entries = _usable_entries(entries, plan, notes, "ece408 op_time")
            key = problem(layer, spec, b)
            work += [({"part": "op_time", "layer": layer, "B": b}, key, e) for e in entries]
    if plan.gpu:
        ref = ConvEntry("cudnn", "cudnn", {}, {"step": "cuDNN, strict FP32"})
        tile_entries = [ConvEntry(matmul_label(v, {"tile_width": t}), v, {"tile_width": t},
                                  {"x_name": "tile_width", "x": t, "step": "Opt 9: TILE_WIDTH sweep"})
                        for v in ECE408_TILE_VARIANTS for t in widths] + [ref]
        tile_entries = _usable_entries(tile_entries, plan, notes, "ece408 tile_width")
    else:
        tile_entries = cpu_only
    for layer, spec in ECE408_LAYERS.items():
        key = problem(layer, spec, big)
        work += [({"part": "tile_width", "layer": layer, "B": big}, key, e) for e in tile_entries]
    mnist_entries = (_usable_entries(_ece408_step_entries(with_cpu=big <= ECE408_CPU_MAX_B), plan, notes,
                                     "ece408 mnist") if plan.gpu else cpu_only)
    for layer, spec in MNIST_LAYERS.items():
        key = problem(layer, spec, big)
        work += [({"part": "mnist", "layer": layer, "B": big}, key, e) for e in mnist_entries]
    if big < 10000:
        _note(notes, f"ece408: the TILE_WIDTH sweep and the MNIST layers run at {big} images in this mode "
                     "(the reports: 10,000)")
    return work, problems


def _attach_ece408_report(row: dict[str, Any]) -> None:
    if row.get("part") == "op_time":
        ms, where = ece408_report_ms(row["label"], row["layer"], row["B"])
        if ms is not None:
            row.update(report_ms=ms, report_gpu=ECE408_GPU, report_source=where)
    elif row.get("part") == "mnist" and row.get("B") == 10000:
        found = ece408_mnist_report(row["label"], row["layer"])
        if found:
            row.update(report_ms=found[-1][0], report_gpu=ECE408_MNIST_GPU,
                       report_source="; ".join(w for _, _, w in found))


def run_ece408(plan: Plan) -> SweepResult:
    res = SweepResult()
    reps = plan.pick(REPORT_CONV_REPEATS)
    work, problems = ece408_work(plan, res.notes)
    res.meta.update(report=ece408_report_meta(),
                    inputs="uniform [-1, 1) float32, NCHW / KCRS, valid (no padding), stride 1, no bias, no "
                           "activation (the report's Op Time is the convolution; conv1's tanh is not timed), "
                           "device-resident on the GPU",
                    layers={k: dict(zip("C H W K R S".split(), v)) for k, v in {**ECE408_LAYERS,
                                                                                 **MNIST_LAYERS}.items()},
                    batches=list(plan.pick(ECE408_BATCHES)), big_batch=plan.pick(ECE408_BIG_BATCH),
                    tile_widths=list(plan.pick(ECE408_TILE_WIDTHS)),
                    flops="2 B K P Q C R S", gflops="2 B K P Q C R S / median kernel time",
                    timing=f"measure(): {reps} (kernel time, ms, L2 flushed before every run; the cpu rows: wall "
                           "time of the call on NumPy input)",
                    reference=f"cuDNN strict FP32 (variant cudnn) in the same run; rel_err over the first images "
                              f"(at most {CONV_CHECK_ELEMS} outputs)")
    res.rows = _run_points(plan, res, reps, work, problems, "ece408")
    for row in res.rows:
        _attach_ece408_report(row)
    return res


def _ece408_sections(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None
                     ) -> list[tuple[str, list[str], list[list[str]], str]]:
    dev = _device_short(meta)
    sections = []
    op = [r for r in rows if r.get("part") == "op_time"]
    measured_b = sorted({r["B"] for r in op})
    batches = list(dict.fromkeys([*ECE408_REPORT_BATCHES, *measured_b]))
    big = max(measured_b) if measured_b else None
    by = {(r["layer"], r["B"], _row_label(r)): r for r in op}
    labels = [lb for lb, *_ in ECE408_STEPS]
    labels += [lb for lb in dict.fromkeys(_row_label(r) for r in op) if lb not in labels]
    steps = {lb: step for lb, _, _, step in ECE408_STEPS}
    for layer, (c, h, w, k, r_, s) in ECE408_LAYERS.items():
        body = []
        for label in labels:
            line = [steps.get(label, ""), label]
            for b in batches:
                row = by.get((layer, b, label))
                line.append(_ms_cell(row))
                if b in ECE408_REPORT_BATCHES:
                    sec, _ = ece408_report_seconds(label, layer, b)
                    line.append("-" if sec is None else ms_text(sec))
            rb = by.get((layer, big, label)) if big else None
            line += [_g(rb.get("gflops")) if rb else "-",
                     _fmt(_num(rb.get("speedup_vs_cudnn")), ".2f") if rb else "-"]
            body.append(line)
        headers = ["the report's step", "variant"]
        for b in batches:
            headers.append(f"B={b}: {dev} ms")
            if b in ECE408_REPORT_BATCHES:
                headers.append(f"B={b}: report ms")
        headers += [f"{dev} GFLOP/s (B={big})", f"x cuDNN (B={big})"]
        what = ("median kernel time in ms (L2 flushed; the cpu row: this machine's CPU, wall time of the call)"
                if dev != "CPU" else "median wall time in ms of the cpu variant's call (no GPU here)")
        caption = (f"ECE408 Fashion-MNIST 'Op Time', {layer}: Bx{c}x{h}x{w} -> {k} maps {r_}x{s} (valid, no bias; the "
                   f"convolution alone). {dev}: {what}. report: the Op Time the report printed on its GPU, "
                   f"{ECE408_GPU}, in seconds, shown here x 1000 (ms). '-': not measured / not printed, 'n/a': the "
                   "variant rejects the shape")
        sections.append((caption, headers, body, "ll"))
    notes = [f"{v}: {e['also']}" for v, e in ECE408_OP_TIMES.items() if e.get("also")]
    if notes:
        sections[-1] = (sections[-1][0] + ". Also printed: " + "; ".join(notes), *sections[-1][1:])

    tw = [r for r in rows if r.get("part") == "tile_width"]
    if tw:
        tb = max(r["B"] for r in tw)
        by_t = {(r["layer"], r.get("x"), r["variant"]): r for r in tw if r.get("x") is not None}
        widths = sorted({r["x"] for r in tw if r.get("x") is not None})
        series = [(layer, v) for layer in ECE408_LAYERS for v in dict.fromkeys(
            r["variant"] for r in tw if r.get("x") is not None)]
        body = [[str(t), *[_ms_cell(by_t.get((layer, t, v))) for layer, v in series]] for t in widths]
        best = ["best"]
        for layer, v in series:
            cands = [(r["median_ms"], t) for (lay, t, vv), r in by_t.items() if lay == layer and vv == v
                     and _num(r.get("median_ms"))]
            best.append(f"{min(cands)[1]}" if cands else "-")
        body.append(best)
        refs = [r for r in tw if r.get("x") is None]
        for ref in refs:
            body.append([f"{_row_label(ref)} ({ref['layer']})",
                         *[_ms_cell(ref) if layer == ref["layer"] else "" for layer, _ in series]])
        caption = (f"ECE408 Optimisation 9, the TILE_WIDTH sweep at B={tb}: {dev} median time in ms per tile "
                   f"width (cuDNN for reference). The report ({ECE408_GPU}) printed no numbers (its Figure 27 is not "
                   "in the text); it read: "
                   + "; ".join(f"{k}: {v}" for k, v in ECE408_TILE_REPORT.items()))
        sections.append((caption, ["TILE_WIDTH", *[f"{layer} {v}" for layer, v in series]], body, "l"))

    mn = [r for r in rows if r.get("part") == "mnist"]
    if mn:
        mb = max(r["B"] for r in mn)
        by_m = {(r["layer"], _row_label(r)): r for r in mn}
        mlabels = [lb for lb in labels if any(_row_label(r) == lb for r in mn)
                   or any(v == lb for v, *_ in ECE408_MNIST_TIMES)]
        body = []
        for label in mlabels:
            line = [steps.get(label, ""), label]
            for layer in MNIST_LAYERS:
                row = by_m.get((layer, label))
                line.append(_ms_cell(row))
                rep = ece408_mnist_report(label, layer)
                line.append(" / ".join(f"{ms:g} [{tag}]" for ms, tag, _ in rep) if rep else "-")
                line.append(_fmt(_num(row.get("speedup_vs_cudnn")), ".2f") if row else "-")
            body.append(line)
        headers = ["step", "variant"]
        for layer in MNIST_LAYERS:
            headers += [f"{layer}: {dev} ms", f"{layer}: report ms", f"{layer}: x cuDNN"]
        caption = (f"ECE408 MNIST layers at B={mb}: mnist_conv1 Bx1x28x28 -> 32 maps 5x5, mnist_conv2 Bx32x12x12 -> "
                   f"64 maps 5x5 (valid, no bias, no activation). report: the ECE408 MNIST report's times at 10,000 "
                   f"images on a {ECE408_MNIST_GPU}, in ms, [T2] serial CPU (Table 2), [T3] basic parallelization, "
                   "[T4] optimized parallel (tiled; conv1 with the ReLU fused in), [T5] final (conv1 tiled with "
                   "ReLU, conv2 unrolled into a matrix multiply)")
        sections.append((caption, headers, body, "ll"))
    return sections


def table_ece408(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    return _sections_text(_ece408_sections(rows, meta)) + _skipped(rows) + _errors(rows)


def ece408_markdown(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    return _sections_markdown("conv2d: the ECE408 reports' Op Time table, TILE_WIDTH sweep and MNIST layers", meta,
                              _ece408_sections(rows, meta))


def extras_ece408(meta: Mapping[str, Any], rows: list[dict[str, Any]], out_dir: Any) -> list[Any]:
    """``<out>/ece408_op_time.md``: the Op Time tables (with the report's numbers), TILE_WIDTH, MNIST layers."""
    from pathlib import Path

    path = Path(out_dir) / "ece408_op_time.md"
    path.write_text(ece408_markdown(meta, rows), encoding="utf-8")
    return [path]


# --------------------------------------------------------------------------- kmeans

KMEANS_VARIANTS = ("liao", "cpu")
KMEANS_K = 3
KMEANS_THRESHOLD = 0.001
KMEANS_BLOB_SEED = 0
#: Liao's data sets: label -> file in data_dir()/kmeans_liao.
KMEANS_LIAO_FILES = {"color17695": "color17695.bin", "edge17695": "edge17695.bin", "texture17695": "texture17695.bin"}
# In GPU quick mode the cpu variant runs only on sets with N*D up to this.
KMEANS_SMALL = 1_000_000
# Most objects per data set (None: all).
KMEANS_MAX_N: dict[Any, int | None] = {
    ("gpu", "full"): None, ("gpu", "quick"): None, ("cpu", "full"): None, ("cpu", "quick"): 50_000, "tiny": 2_000,
}
KMEANS_COLUMNS = ("dataset", "source", "N", "D", "k", "threshold", "variant", "iterations", "converged",
                  "computation_ms", "computation_min_ms", "computation_max_ms", "repeats", "h2d_ms", "kernel_ms",
                  "d2h_ms", "transfer_ms", "total_ms", "timing_repeats", "timing_device", "details", "match_cpu",
                  "error")


def _kmeans_sets(plan: Plan, notes: list[str]) -> list[tuple[str, str, np.ndarray, int]]:
    """(label, source, x, full N) for Liao's sets (when present) and the synthetic blobs."""
    max_n = plan.pick(KMEANS_MAX_N)
    sets = []
    root = datasets.data_dir(required=False)
    folder = root / "kmeans_liao" if root is not None else None
    missing = [f for f in KMEANS_LIAO_FILES.values() if folder is None or not (folder / f).is_file()]
    if missing:
        where = folder if folder is not None else f"no data folder (set {datasets.DATA_DIR_ENV})"
        notes.append(f"Liao's data sets not found ({', '.join(missing)} in {where}): skipped")
    for label, fname in KMEANS_LIAO_FILES.items():
        if fname in missing:
            continue
        x = datasets.read_liao(folder / fname)
        n_full = x.shape[0]
        if max_n is not None and n_full > max_n:
            x = np.ascontiguousarray(x[:max_n])
        sets.append((label, "liao", x, n_full))
    for label, (n, d) in datasets.KMEANS_SHAPES.items():
        n_run = n if max_n is None else min(n, max_n)
        x, _ = datasets.make_kmeans_blobs(n_run, d, k=KMEANS_K, seed=KMEANS_BLOB_SEED)
        sets.append((label, "synthetic", x, n))
    if any(x.shape[0] < n_full for _, _, x, n_full in sets):
        notes.append(f"data sets cut to at most {max_n} objects in this mode (see the N column)")
    return sets


def run_kmeans(plan: Plan) -> SweepResult:
    res = SweepResult()
    names = _select("kmeans", KMEANS_VARIANTS, plan, res.notes)
    sets = _kmeans_sets(plan, res.notes)
    reps = plan.pick(CALL_REPEATS)
    res.meta.update(k=KMEANS_K, threshold=KMEANS_THRESHOLD, blob_seed=KMEANS_BLOB_SEED,
                    inputs="Liao's color/edge/texture17695.bin (real) and Gaussian blobs of the CMU report's "
                           f"shapes (make_kmeans_blobs(name, k={KMEANS_K}, seed={KMEANS_BLOB_SEED}))",
                    computation_ms="wall time of the whole gpuopt.kmeans call on NumPy input (Liao's "
                                   "'Computation timing'), median of the runs after warm-up",
                    timing="Timing of timing=True calls: h2d, kernel (the whole loop), d2h, details; "
                           "median of each over the runs",
                    repeats=reps)

    def runs_on(name: str, x: np.ndarray) -> bool:
        return not (plan.gpu and plan.quick and name == "cpu" and x.size > KMEANS_SMALL)

    if plan.gpu and plan.quick and "cpu" in names:
        res.notes.append(f"quick mode: the cpu variant runs only on the small sets (N*D <= {KMEANS_SMALL})")
    total = sum(runs_on(nm, x) for _, _, x, _ in sets for nm in names)
    with Progress(total, "kmeans", enabled=plan.progress) as prog:
        for label, source, x, _ in sets:
            results: dict[str, Any] = {}
            set_rows = []
            for name in names:
                if not runs_on(name, x):
                    continue
                row: dict[str, Any] = dict(dataset=label, source=source, N=x.shape[0], D=x.shape[1], k=KMEANS_K,
                                           threshold=KMEANS_THRESHOLD, variant=name)
                try:
                    st = measure(lambda name=name: gpuopt.kmeans(x, KMEANS_K, threshold=KMEANS_THRESHOLD,
                                                                 variant=name), device="cpu", **reps)
                    timings, _, result = _timed_calls(
                        lambda name=name: gpuopt.kmeans(x, KMEANS_K, threshold=KMEANS_THRESHOLD, variant=name,
                                                        timing=True),
                        warmup=0, repeat=reps["repeat"], max_time_s=reps["max_time_s"])
                    results[name] = result
                    row.update(iterations=result.iterations, converged=result.converged,
                               computation_ms=st.median_ms, computation_min_ms=st.min_ms,
                               computation_max_ms=st.max_ms, repeats=st.repeats, **median_timing(timings),
                               timing_repeats=len(timings))
                except Exception as exc:  # noqa: BLE001
                    row["error"] = _error(exc)
                    res.notes.append(f"kmeans {label} {name}: {row['error']}")
                set_rows.append(row)
                prog.update(f"{label} {name}")
            ref = results.get("cpu")
            for row in set_rows:
                out = results.get(row["variant"])
                if ref is not None and out is not None and row["variant"] != "cpu":
                    row["match_cpu"] = bool(out.iterations == ref.iterations
                                            and np.array_equal(_host(out.membership), _host(ref.membership)))
            res.rows.extend(set_rows)
    return res


def table_kmeans(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    body = [[r["dataset"], f"{r['N']}x{r['D']}", r["variant"], _fmt(r.get("iterations")),
             _fmt(r.get("computation_ms"), ".4g"), _fmt(r.get("kernel_ms"), ".4g"), _fmt(r.get("h2d_ms"), ".3g"),
             _fmt(r.get("d2h_ms"), ".3g"), _fmt(r.get("match_cpu"))] for r in rows]
    return (f"k={rows[0]['k'] if rows else KMEANS_K}, threshold {KMEANS_THRESHOLD}; computation = wall time of the "
            "call (median)\n" + format_table(["data set", "N x D", "variant", "iters", "computation ms",
                                              "loop ms", "h2d ms", "d2h ms", "= cpu"], body) + _errors(rows))


# --------------------------------------------------------------------------- sparse

SPARSE_VARIANTS = ("dense", "coo", "fast", "cpu")
SPARSE_FORMATS = {"dense": "dense", "coo": "COOFilters", "fast": "FASTFilters", "cpu": "dense"}
SPARSE_FILTER_SEED = 0
SPARSE_FILTER_NOTE = "generated filters, one non-zero per 3x3 slice; the lab's filters are not public"
# Input maps C = filters M per plan (the lab: 512).
SPARSE_MAPS: dict[Any, int] = {
    ("gpu", "full"): 512, ("gpu", "quick"): 512, ("cpu", "full"): 512, ("cpu", "quick"): 512, "tiny": 32,
}
SPARSE_COLUMNS = ("variant", "filter_format", "C", "H", "W", "M", "nnz", "kernel_ms", "h2d_ms", "d2h_ms",
                  "transfer_ms", "total_ms", "wall_ms", "repeats", "speedup_vs_cpu", "exact_vs_cpu", "timing_device",
                  "details", "error")


def _sparse_inputs(plan: Plan, notes: list[str], meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    maps = plan.pick(SPARSE_MAPS)
    try:
        neurons = datasets.read_nctu_neurons_txt()
        meta["input"] = "the lab's real inNeu.txt (read_nctu_neurons_txt)"
    except FileNotFoundError as exc:
        neurons = datasets.make_nctu_neurons(512, 32, 32, seed=0)
        meta["input"] = "synthetic neurons make_nctu_neurons(512, 32, 32, seed=0): inNeu.txt not found"
        notes.append(f"inNeu.txt not found ({str(exc).split('. ')[0]}): synthetic neurons of its shape and sparsity "
                     "used instead")
    x = np.ascontiguousarray(neurons[:maps])
    if maps < neurons.shape[0]:
        notes.append(f"layer cut to {maps} input maps and {maps} filters in this mode (the lab: 512 and 512)")
    w = datasets.make_nctu_filters(maps, x.shape[0], seed=SPARSE_FILTER_SEED)
    meta["filters"] = f"{SPARSE_FILTER_NOTE} (make_nctu_filters({maps}, {x.shape[0]}, seed={SPARSE_FILTER_SEED}))"
    return x, w


def run_sparse(plan: Plan) -> SweepResult:
    from gpuopt.sparse import COOFilters, FASTFilters

    res = SweepResult()
    names = _select("sparse_conv2d", SPARSE_VARIANTS, plan, res.notes)
    reps = plan.pick(CALL_REPEATS)
    x, w = _sparse_inputs(plan, res.notes, res.meta)
    res.meta.update(layer="NCTU lab layer: 3x3 'same' conv over all input maps, int32 sums, ReLU, 2x2 max pool",
                    timing="Timing (timing=True) on NumPy input: kernels, h2d (neurons and filters in the variant's "
                           "format), d2h; total = kernels + transfers as the lab graded (TotalExecTime); median of "
                           "each over the runs after warm-up",
                    repeats=reps)
    filters = {"dense": w, "coo": COOFilters.from_dense(w), "fast": FASTFilters.from_dense(w), "cpu": w}
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")  # the exactness reference (untimed)
    with Progress(len(names), "sparse", enabled=plan.progress) as prog:
        for name in names:
            row: dict[str, Any] = dict(variant=name, filter_format=SPARSE_FORMATS.get(name, "dense"), C=x.shape[0],
                                       H=x.shape[1], W=x.shape[2], M=w.shape[0], nnz=int(np.count_nonzero(w)))
            try:
                f = filters.get(name, w)
                timings, walls, out = _timed_calls(
                    lambda f=f, name=name: gpuopt.sparse_conv2d(x, f, variant=name, timing=True),
                    warmup=reps["warmup"], repeat=reps["repeat"], max_time_s=reps["max_time_s"])
                row.update(**median_timing(timings), wall_ms=float(np.median(walls)), repeats=len(timings))
                if name != "cpu":
                    row["exact_vs_cpu"] = bool(np.array_equal(_host(out), ref))
                    if not row["exact_vs_cpu"]:
                        res.notes.append(f"sparse {name}: result differs from the cpu reference")
            except Exception as exc:  # noqa: BLE001
                row["error"] = _error(exc)
                res.notes.append(f"sparse {name}: {row['error']}")
            res.rows.append(row)
            prog.update(name)
    cpu_total = next((r["total_ms"] for r in res.rows if r["variant"] == "cpu" and r.get("total_ms")), None)
    for row in res.rows:
        if cpu_total and row.get("total_ms"):
            row["speedup_vs_cpu"] = cpu_total / row["total_ms"]
    return res


def table_sparse(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    body = [[r["variant"], r["filter_format"], _fmt(r.get("kernel_ms"), ".4g"), _fmt(r.get("transfer_ms"), ".4g"),
             _fmt(r.get("total_ms"), ".4g"), _fmt(r.get("speedup_vs_cpu"), ".1f"),
             "reference" if r["variant"] == "cpu" else _fmt(r.get("exact_vs_cpu"))] for r in rows]
    head = (f"{rows[0]['C']} maps {rows[0]['H']}x{rows[0]['W']}, {rows[0]['M']} filters ({SPARSE_FILTER_NOTE})\n"
            if rows else "")
    return head + format_table(["variant", "filters", "kernel ms", "transfer ms", "total ms", "speedup vs cpu",
                                "exact"], body) + _errors(rows)


# --------------------------------------------------------------------------- registry

SWEEPS: dict[str, Sweep] = {
    "matmul": Sweep("matmul", "matmul", "Single-precision matrix multiply: the kernel ladder",
                    "every GPU matmul variant (shared block=32/16, tile_buffer tile_sz=1/2/4, coalesced "
                    "warp_layout=column/row) vs cuBLAS, square "
                    "n = 128..8192 and 1000: GFLOP/s; ladder table at 4096 (% cuBLAS, % FP32 peak, regs/smem/"
                    "spills) -> matmul_ladder.md",
                    _matmul_listed, MATMUL_COLUMNS, run_matmul, table_matmul, extras_matmul),
    "matmul_report": Sweep("matmul_report", "matmul", "The CMU 18-645 report's matmul harness, reproduced",
                           "n = 4, 5, 8, 10, 32, 33, 128, 1000, 1024, 30 runs, (2n-1)n^2/t GFLOP/s, error < 1e-3: "
                           "the report's Table 4 layout, this GPU next to the report's GTX 480 -> "
                           "matmul_report.md",
                           _matmul_listed, REPORT_COLUMNS, run_matmul_report, table_matmul_report,
                           extras_matmul_report),
    "conv2d": Sweep("conv2d", "conv2d", "2-D convolution, CS6235 configurations",
                    "every GPU conv2d variant at its defaults vs cuDNN (strict and any algorithm) on conf1-conf4: "
                    "ms, GFLOP/s, speedup vs cuDNN (CS6235 report)",
                    _conv_listed, CONV_COLUMNS, run_conv2d, table_conv2d),
    "cs6235": Sweep("cs6235", "conv2d", "conv2d: the CS6235 report's eight figures",
                    "Figs 1-8 of the CS6235 report on conf1-conf4 (general/auto vs cuDNN, block size, k and c "
                    "unrolling, crs vs rsc, thread mapping, shared memory, n,k unroll-and-jam): kernel ms -> "
                    "cs6235_fig1..8.png, cs6235.md",
                    CS6235_VARIANTS, CS6235_COLUMNS, run_cs6235, table_cs6235, extras_cs6235),
    "ece408": Sweep("ece408", "conv2d", "conv2d: the ECE408 reports' Op Time table and TILE_WIDTH sweep",
                    "every optimisation of the ECE408 Fashion-MNIST report on its two layers at 10/100/10000 images "
                    "(next to the report's Op Times), TILE_WIDTH 4..32, the ECE408 MNIST layers at 10000: kernel ms, "
                    "GFLOP/s -> ece408_op_time.md/.png, ece408_tile_width.png",
                    tuple(dict.fromkeys(v for _, v, _, _ in ECE408_STEPS)), ECE408_COLUMNS, run_ece408, table_ece408,
                    extras_ece408),
    "kmeans": Sweep("kmeans", "kmeans", "k-means (Liao's algorithm)",
                    "liao vs cpu on Liao's 17695-object sets and the CMU report's four shapes: computation time, "
                    "iterations, transfer/loop breakdown",
                    KMEANS_VARIANTS, KMEANS_COLUMNS, run_kmeans, table_kmeans),
    "sparse": Sweep("sparse", "sparse_conv2d", "NCTU sparse convolution layer",
                    "dense vs COO vs FAST vs cpu on the lab's inNeu: kernel + transfer time, exactness",
                    SPARSE_VARIANTS, SPARSE_COLUMNS, run_sparse, table_sparse),
}
