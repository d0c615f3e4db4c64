"""The sweeps that regenerate the reports' measurements.

Each sweep is a :class:`Sweep` in :data:`SWEEPS` (``matmul``, ``conv2d``, ``kmeans``,
``sparse``); ``SWEEPS[name].run(plan)`` returns a :class:`SweepResult` (one dict per
measurement, the column order, notes and extra metadata), which the command line
writes with :func:`gpuopt.bench.write_results` and plots with :mod:`gpuopt.bench.plot`.

Variants are looked up by name; one that is not registered in this build (or not usable
here) is skipped with a note, so the sweeps run on any build. Without a GPU only the
``cpu`` variants run, at the small sizes of the plan's "cpu" rows. A measurement that
raises is recorded with its ``error`` and the sweep goes on.

Inputs are random (never zeros): matmul/conv draw from ``numpy.random.default_rng(seed)``
with the run's seed (in the metadata); the k-means blobs, the NCTU filters (and the
stand-in neurons when the real ones are absent) use seed 0 so the data sets are the same
in every run.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

import gpuopt
from gpuopt import datasets

from . import Progress, measure, median_timing

__all__ = ["Plan", "Sweep", "SweepResult", "SWEEPS", "format_table"]


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
    """One sweep: its name, the op and variants it compares, its columns and its table."""

    name: str
    op: str
    title: str
    description: str
    gpu_variants: tuple[str, ...]
    columns: tuple[str, ...]
    run: Callable[[Plan], SweepResult] = field(repr=False)
    table: Callable[[list[dict[str, Any]]], str] = field(repr=False)


# Repeats for the kernel-timed sweeps (matmul, conv2d): measure() keywords.
KERNEL_REPEATS: dict[Any, dict[str, Any]] = {
    ("gpu", "full"): dict(warmup=5, repeat=50, max_time_s=5.0),
    ("gpu", "quick"): dict(warmup=3, repeat=20, max_time_s=1.0),
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


def format_table(headers: Sequence[str], body: Sequence[Sequence[Any]]) -> str:
    """A plain fixed-width text table (values already formatted or formatted with ``_fmt``)."""
    cells = [[str(h) for h in headers]] + [[c if isinstance(c, str) else _fmt(c) for c in row] for row in body]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _errors(rows: list[dict[str, Any]]) -> str:
    def where(r: dict[str, Any]) -> str:
        key = next((k for k in ("n", "conf", "dataset") if k in r), None)
        return f" @ {key}={r[key]}" if key else ""

    bad = [f"  {r.get('variant')}{where(r)}: {r['error']}" for r in rows if r.get("error")]
    return ("\nerrors:\n" + "\n".join(bad)) if bad else ""


# --------------------------------------------------------------------------- matmul

MATMUL_VARIANTS = ("naive", "cublas")
MATMUL_SIZES: dict[Any, tuple[int, ...]] = {
    ("gpu", "full"): (128, 256, 512, 1024, 2048, 4096, 8192),
    ("gpu", "quick"): (128, 256, 512, 1024, 2048),
    ("cpu", "full"): (128, 256, 512, 1024),
    ("cpu", "quick"): (128, 256, 512),
    "tiny": (32, 64),
}
MATMUL_COLUMNS = ("n", "variant", "device", "median_ms", "min_ms", "max_ms", "mean_ms", "std_ms", "repeats",
                  "gflops", "gflops_best", "rel_err", "reference", "spin_us", "overhead_hidden", "flush_l2", "error")


def run_matmul(plan: Plan) -> SweepResult:
    res = SweepResult()
    names = _select("matmul", MATMUL_VARIANTS, plan, res.notes)
    table = gpuopt.variants("matmul")
    sizes = plan.pick(MATMUL_SIZES)
    reps = plan.pick(KERNEL_REPEATS)
    rng = np.random.default_rng(plan.seed)
    res.meta.update(inputs="uniform [0, 1) float32, square n x n, device-resident on the GPU",
                    flops="2 n^3", timing=f"measure(): {reps}", sizes=list(sizes))
    with Progress(len(sizes) * len(names), "matmul", enabled=plan.progress) as prog:
        for n in sizes:
            a = rng.random((n, n), dtype=np.float32)
            b = rng.random((n, n), dtype=np.float32)
            dev_in = (gpuopt.to_device(a), gpuopt.to_device(b)) if plan.gpu else None
            outputs: dict[str, np.ndarray] = {}
            size_rows = []
            for name in names:
                gpu = table[name].needs_cuda
                row: dict[str, Any] = {"n": n, "variant": name, "device": "gpu" if gpu else "cpu", "flush_l2": False}
                try:
                    ins = dev_in if gpu else (a, b)
                    fn = lambda ins=ins, name=name: gpuopt.matmul(*ins, variant=name)  # noqa: E731
                    st = measure(fn, device=row["device"], **reps)
                    outputs[name] = _host(fn())
                    row.update(st.row(), gflops=2.0 * n**3 / (st.median_ms * 1e6),
                               gflops_best=2.0 * n**3 / (st.min_ms * 1e6), spin_us=st.spin_us,
                               overhead_hidden=st.overhead_hidden)
                except Exception as exc:  # noqa: BLE001 - recorded, the sweep goes on
                    row["error"] = _error(exc)
                    res.notes.append(f"matmul n={n} {name}: {row['error']}")
                size_rows.append(row)
                prog.update(f"n={n} {name}")
            # Correctness alongside speed: every output against cuBLAS (or NumPy float64).
            ref, ref_name = outputs.get("cublas"), "cublas"
            if ref is None and n <= 2048:
                ref, ref_name = a.astype(np.float64) @ b, "numpy-float64"
            for row in size_rows:
                if ref is not None and row["variant"] in outputs and row["variant"] != ref_name:
                    row["rel_err"], row["reference"] = _rel_err(outputs[row["variant"]], ref), ref_name
            res.rows.extend(size_rows)
            del dev_in, outputs, ref
            _release_gpu_cache(plan)
    return res


def table_matmul(rows: list[dict[str, Any]]) -> str:
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    by = {(r["n"], r["variant"]): r for r in rows}
    body = []
    for n in dict.fromkeys(r["n"] for r in rows):
        line = [str(n)]
        for v in variants:
            r = by.get((n, v))
            line.append("-" if not r or r.get("gflops") is None else f"{r['gflops']:.1f} ({r['median_ms']:.3g} ms)")
        body.append(line)
    return "GFLOP/s (median kernel time)\n" + format_table(["n", *variants], body) + _errors(rows)


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


def table_conv2d(rows: list[dict[str, Any]]) -> str:
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


def table_kmeans(rows: list[dict[str, Any]]) -> str:
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


def table_sparse(rows: list[dict[str, Any]]) -> str:
    body = [[r["variant"], r["filter_format"], _fmt(r.get("kernel_ms"), ".4g"), _fmt(r.get("transfer_ms"), ".4g"),
             _fmt(r.get("total_ms"), ".4g"), _fmt(r.get("speedup_vs_cpu"), ".1f"),
             "reference" if r["variant"] == "cpu" else _fmt(r.get("exact_vs_cpu"))] for r in rows]
    head = (f"{rows[0]['C']} maps {rows[0]['H']}x{rows[0]['W']}, {rows[0]['M']} filters ({SPARSE_FILTER_NOTE})\n"
            if rows else "")
    return head + format_table(["variant", "filters", "kernel ms", "transfer ms", "total ms", "speedup vs cpu",
                                "exact"], body) + _errors(rows)


# --------------------------------------------------------------------------- registry

SWEEPS: dict[str, Sweep] = {
    "matmul": Sweep("matmul", "matmul", "Single-precision matrix multiply",
                    "naive vs cuBLAS, square n = 128..8192: GFLOP/s (CMU 18-645 report)",
                    MATMUL_VARIANTS, MATMUL_COLUMNS, run_matmul, table_matmul),
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
