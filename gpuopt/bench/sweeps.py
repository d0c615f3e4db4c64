"""The sweeps that regenerate the reports' measurements.

Each sweep is a :class:`Sweep` in :data:`SWEEPS` (``matmul``, ``matmul_report``, ``conv2d``,
``kmeans``, ``sparse``); ``SWEEPS[name].run(plan)`` returns a :class:`SweepResult` (one dict per
measurement, the column order, notes and extra metadata), which the command line
writes with :func:`gpuopt.bench.write_results` and plots with :mod:`gpuopt.bench.plot`.

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
                "rel_err", "reference", "spin_us", "overhead_hidden", "error")


def _cudnn_algorithm(x_shape, w_shape, stride, padding, algorithms="precise") -> str | None:
    fn = getattr(gpuopt.conv, "cudnn_algorithm", None)
    if fn is None:
        return None
    try:
        return str(fn(tuple(x_shape), tuple(w_shape), stride, padding, algorithms))
    except Exception as exc:  # noqa: BLE001 - informational only
        return f"unknown ({_error(exc)})"


def run_conv2d(plan: Plan) -> SweepResult:
    res = SweepResult()
    names = _select("conv2d", CONV_VARIANTS, plan, res.notes)
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


def table_conv2d(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    body = [[r["conf"], f"{r['N']}x{r['C']}x{r['H']}x{r['W']} * {r['K']}x{r['R']}x{r['S']} /{r['u']}", r["variant"],
             _fmt(r.get("median_ms"), ".4g"), _fmt(r.get("gflops"), ".1f"), _fmt(r.get("speedup_vs_cudnn"), ".2f"),
             _fmt(r.get("rel_err"), ".1e"), r.get("algorithm") or "-"] for r in rows]
    return format_table(["conf", "NxCxHxW * KxRxS /stride", "variant", "ms", "GFLOP/s", "vs cuDNN", "rel.err",
                         "cuDNN algorithm"], body) + _errors(rows)


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
                    "basic vs cuDNN on conf1-conf4: ms, GFLOP/s, speedup vs cuDNN (CS6235 report)",
                    CONV_VARIANTS, CONV_COLUMNS, run_conv2d, table_conv2d),
    "kmeans": Sweep("kmeans", "kmeans", "k-means (Liao's algorithm)",
                    "liao vs cpu on Liao's 17695-object sets and the CMU report's four shapes: computation time, "
                    "iterations, transfer/loop breakdown",
                    KMEANS_VARIANTS, KMEANS_COLUMNS, run_kmeans, table_kmeans),
    "sparse": Sweep("sparse", "sparse_conv2d", "NCTU sparse convolution layer",
                    "dense vs COO vs FAST vs cpu on the lab's inNeu: kernel + transfer time, exactness",
                    SPARSE_VARIANTS, SPARSE_COLUMNS, run_sparse, table_sparse),
}
