"""matmul: the kernel ladder. Every GPU matmul variant of the build (some once per value
of one parameter) against cuBLAS, square n = 128..8192 and 1000: GFLOP/s, and the ladder
table at n = 4096 (% cuBLAS, % FP32 peak, registers / shared memory / spills) ->
matmul.csv/.json/.png, matmul_ladder.md. What the ladder found: notes/matmul.md.

Inputs are random (``numpy.random.default_rng(seed)`` with the run's seed, in the metadata).
"""

from __future__ import annotations

import importlib
import inspect
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

import gpuopt
from gpuopt.matmul import ladder_step

from ..figures import MARKERS, drawable_rows, empty_axes, finish_figure, label_colors, pyplot, size_ticks
from ..floors import fp32_peak
from ..harness import Progress, measure
from ..matmul_runs import (MATMUL_PARAM_ROWS, REFERENCES, call_matmul, matmul_entries, matmul_gpu_variants,
                           matmul_reference)
from ..results import format_metadata
from ..study import (Output, RunSettings, Study, StudyResult, error_text, finite_number, per_level, release_gpu_cache,
                     repeats, row_label, to_host)
from ..tables import errors_note, extras_file, format_table, gflops_cell, md_table, sections_text

__all__ = ["STUDY", "matmul_ladder", "ladder_markdown"]


#: Keys of ``gpuopt.matmul.matmul_kernel_info(variant, **params)`` recorded per kernel
#: (numbers), and the instantiation's name (``kernel``).
KERNEL_INFO_KEYS = ("registers", "static_shared_bytes", "dynamic_shared_bytes", "local_bytes", "threads",
                    "max_blocks_per_sm")
KERNEL_NAME_KEY = "kernel"


def matmul_kernel_info(variant: str, params: Mapping[str, Any] | None = None, n: int | None = None
                       ) -> tuple[dict[str, Any] | None, str | None]:
    """``(info, None)`` from ``gpuopt.matmul.matmul_kernel_info(variant, **params)``, else ``(None, why)``.

    ``info`` holds :data:`KERNEL_INFO_KEYS` (registers, static/dynamic shared bytes, local
    bytes = spills, threads per block, resident blocks per SM). Unavailable for builds
    without the function, without a GPU (RuntimeError) and for cublas/cpu (ValueError).
    When the function takes the problem's shape (a ``shape`` keyword, or ``m``/``n``/``k``:
    a kernel may pick its tile from the shape), the square size ``n`` is passed.
    """
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
        return None, error_text(exc)
    if not isinstance(info, Mapping):
        return None, f"matmul_kernel_info returned {type(info).__name__}, not a dict"
    out = {k: info.get(k) for k in KERNEL_INFO_KEYS}
    if info.get(KERNEL_NAME_KEY) is not None:
        out[KERNEL_NAME_KEY] = str(info[KERNEL_NAME_KEY])
    return out, None


def _peak_of(meta: Mapping[str, Any] | None) -> tuple[float | None, str]:
    meta = meta or {}
    if meta.get("fp32_peak_gflops"):
        return float(meta["fp32_peak_gflops"]), str(meta.get("fp32_peak_formula") or "")
    return fp32_peak(meta.get("gpu"))


def _rel_err_to(out: np.ndarray, ref64: np.ndarray, ref_norm: float) -> float:
    out64 = np.asarray(out, np.float64)
    if out64.shape != ref64.shape:
        return math.inf
    return float(np.linalg.norm(out64 - ref64) / (ref_norm if ref_norm > 0 else 1.0))


# --------------------------------------------------------------------------- matmul (the ladder)

MATMUL_SIZES: dict[Any, tuple[int, ...]] = per_level(
    gpu_full=(128, 256, 512, 1000, 1024, 2048, 4096, 8192), gpu_quick=(128, 256, 512, 1000, 1024, 2048),
    cpu_full=(128, 256, 512, 1000, 1024), cpu_quick=(128, 256, 512), tiny=(32, 64))
#: measure() keywords per plan. Long kernels are capped by the time budget (naive at 8192
#: takes ~0.22 s a run: ~5 warm-up + ~10 recorded), so the full GPU study of the whole
#: ladder (14 rows x 8 sizes) should take about 1-2 minutes on an H200 (estimated).
#: On the GPU the L2 is flushed before every run: up to n = 2048 the three matrices fit in
#: the H200's 60 MB L2, and back-to-back runs on one buffer would measure the cache (an
#: ncu check at 1000^3: cuBLAS's 4-warps-per-SM kernel gains ~10% from a warm L2, ours ~2%).
MATMUL_REPEATS: dict[Any, dict[str, Any]] = per_level(
    gpu_full=repeats(5, 50, 2.0, flush_l2=True), gpu_quick=repeats(3, 20, 0.5, flush_l2=True),
    cpu_full=repeats(2, 10, 3.0), cpu_quick=repeats(1, 5, 1.0), tiny=repeats(1, 3, 0.2))
#: The size of the ladder table (the largest measured size when it was not run).
LADDER_N = 4096
MATMUL_COLUMNS = ("n", "label", "variant", "params", "device", "median_ms", "min_ms", "max_ms", "mean_ms", "std_ms",
                  "repeats", "gflops", "gflops_best", "pct_cublas", "pct_peak", "rel_err", "reference",
                  *KERNEL_INFO_KEYS, KERNEL_NAME_KEY, "spin_us", "overhead_hidden", "flush_l2", "error")


def run_matmul(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    entries = matmul_entries(plan, res.notes)
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
                    ref64, ref_name = to_host(gpuopt.matmul(*dev_in, variant="cublas")).astype(np.float64), "cublas"
                except Exception as exc:  # noqa: BLE001 - its own row records the failure
                    res.notes.append(f"matmul n={n}: no cuBLAS reference ({error_text(exc)})")
            if ref64 is None and n <= 2048:
                ref64, ref_name = matmul_reference(a, b), "numpy-float64"
            ref_norm = float(np.linalg.norm(ref64)) if ref64 is not None else 0.0
            size_rows = []
            for label, name, params in entries:
                gpu = table[name].needs_cuda
                row: dict[str, Any] = {"n": n, "label": label, "variant": name, "params": dict(params),
                                       "device": "gpu" if gpu else "cpu",
                                       "flush_l2": bool(gpu and reps.get("flush_l2"))}
                try:
                    fn = call_matmul(dev_in if gpu else (a, b), name, params)
                    st = measure(fn, device=row["device"], **reps)
                    row.update(st.row(), gflops=2.0 * n**3 / (st.median_ms * 1e6),
                               gflops_best=2.0 * n**3 / (st.min_ms * 1e6), spin_us=st.spin_us,
                               overhead_hidden=st.overhead_hidden)
                    if ref64 is not None and name != ref_name:
                        row["rel_err"], row["reference"] = _rel_err_to(to_host(fn()), ref64, ref_norm), ref_name
                except Exception as exc:  # noqa: BLE001 - recorded, the study goes on
                    row["error"] = error_text(exc)
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
            release_gpu_cache(plan)
    return res


def matmul_ladder(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None = None,
                  n: int | None = None) -> tuple[int | None, list[dict[str, Any]]]:
    """The ladder table's rows at size ``n`` (default :data:`LADDER_N`, else the largest measured).

    Returns ``(n, steps)``; each step (a row, in the rows' order, cuBLAS last) has ``step``
    (the variant's ladder step, ``gpuopt.matmul.ladder_step``: rows of one variant with
    different parameters share it; "ref" for cuBLAS; None for a variant that is not on this
    build's ladder), ``label``, ``variant``, ``gflops``, ``pct_cublas`` (of cuBLAS at the same
    n in the same run), ``pct_peak`` (of the FP32 peak from ``meta``, see :func:`fp32_peak`),
    ``x_prev`` (speed-up over the previous row), the kernel info keys and ``error``.
    """
    sizes = sorted({r["n"] for r in rows if finite_number(r.get("gflops"))})
    if n is None:
        if not sizes:
            return None, []
        n = LADDER_N if LADDER_N in sizes else sizes[-1]
    peak, _ = _peak_of(meta)
    at = [r for r in rows if r.get("n") == n]
    at = [r for r in at if r.get("variant") not in REFERENCES] + [r for v in REFERENCES for r in at
                                                                    if r.get("variant") == v]
    cublas = next((finite_number(r.get("gflops")) for r in at
                   if r.get("variant") == "cublas" and finite_number(r.get("gflops"))), None)
    steps, prev = [], None
    for r in at:
        g = finite_number(r.get("gflops"))
        is_ref = r.get("variant") in REFERENCES
        step: dict[str, Any] = {
            "step": "ref" if is_ref else _ladder_step(r.get("variant")), "label": row_label(r),
            "variant": r.get("variant"), "gflops": g,
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


def _ladder_step(variant: Any) -> int | None:
    """The ladder step of ``variant``; None when it is not on this build's ladder (results of another build)."""
    try:
        return ladder_step(str(variant))
    except ValueError:
        return None


def _int_cell(value: Any) -> str:
    v = finite_number(value)
    return "-" if v is None else str(int(v))


def _smem_cell(step: Mapping[str, Any]) -> str:
    static, dyn = finite_number(step.get("static_shared_bytes")), finite_number(step.get("dynamic_shared_bytes"))
    if static is None and dyn is None:
        return "-"
    return str(int(static or 0)) + (f"+{int(dyn)}" if dyn else "")


def _pct(value: Any, spec: str = ".1f") -> str:
    v = finite_number(value)
    return "-" if v is None else f"{v:{spec}}%"


LADDER_HEADERS = ("step", "kernel", "GFLOP/s", "% cuBLAS", "% FP32 peak", "x prev.", "regs", "smem B (static+dyn)",
                  "local B (spills)", "threads", "blocks/SM", "instantiation")


def _ladder_body(steps: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    return [["-" if s["step"] is None else str(s["step"]), str(s["label"]),
             gflops_cell(s.get("gflops")) if s.get("gflops") else "failed",
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
    n, steps = matmul_ladder(rows, meta, n)
    lines = [f"### matmul ladder at n = {n}" if n else "### matmul ladder", "",
             f"Measured with {format_metadata(meta)}.", ""]
    if not steps:
        return "\n".join(lines + ["(no measurements)", ""])
    lines += [_ladder_caption(n, steps, meta) + ".", "", md_table(LADDER_HEADERS, _ladder_body(steps)), ""]
    return "\n".join(lines)


def table_matmul(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """GFLOP/s per kernel and size, then the ladder table."""
    labels = list(dict.fromkeys(row_label(r) for r in rows))
    by = {(r["n"], row_label(r)): r for r in rows}
    body = []
    for label in labels:
        line = [label]
        for n in dict.fromkeys(r["n"] for r in rows):
            r = by.get((n, label))
            line.append("-" if not r else gflops_cell(r.get("gflops")))
        body.append(line)
    sizes = [f"n={n}" for n in dict.fromkeys(r["n"] for r in rows)]
    text = ("GFLOP/s (2n^3 / median kernel time), one row per kernel\n"
            + format_table(["kernel", *sizes], body, align="l"))
    n, steps = matmul_ladder(rows, meta)
    if steps:
        text += "\n\n" + sections_text([(_ladder_caption(n, steps, meta), LADDER_HEADERS, _ladder_body(steps),
                                         "rl" + "r" * 9 + "l")])
    return text + errors_note(rows)


def plot_matmul(meta, rows, path: Path) -> Path:
    """GFLOP/s vs n, one line per kernel and cuBLAS (left); the ladder at 4096 as bars (right)."""
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(15, 6.8), gridspec_kw={"width_ratios": [1.45, 1]})
    good = drawable_rows(rows, "gflops")
    title = "matmul: the kernel ladder vs cuBLAS, float32 (GFLOP/s = 2n³ / median kernel time)"
    if not good:
        empty_axes(ax, "no successful measurements")
        bx.axis("off")
        return finish_figure(fig, meta, title, path)
    labels = list(dict.fromkeys(row_label(r) for r in good))
    colors = label_colors(labels)
    peak, _ = _peak_of(meta)
    for i, label in enumerate(labels):
        pts = sorted((r["n"], r["gflops"]) for r in good if row_label(r) == label)
        ref = label in REFERENCES
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=MARKERS[i % len(MARKERS)], ms=4,
                lw=2.6 if ref else 1.5, color=colors[label], label=label, zorder=3 if ref else 2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    size_ticks(ax, [r["n"] for r in good])
    values = [r["gflops"] for r in good]
    top = max([*values, peak or 0.0])
    ax.set_ylim(min(values) / 6, top * 1.6)  # room for the legend below the lines, the peak label above
    if peak:
        ax.axhline(peak, ls=":", color="grey", lw=1.2)
        ax.annotate(f"FP32 peak {peak / 1e3:.1f} TFLOP/s", (0.99, peak), xycoords=("axes fraction", "data"),
                    xytext=(0, 3), textcoords="offset points", ha="right", fontsize=8, color="dimgrey")
    ax.set_xlabel("matrix size n (n x n times n x n, float32, device-resident)")
    ax.set_ylabel("GFLOP/s (2n³ / median kernel time, log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right", ncol=2)
    ax.set_title("throughput vs size", fontsize=9)

    n, steps = matmul_ladder(good, meta)
    # cuBLAS's TF32 mode (8x the FP32 rate, TF32 accuracy) would flatten the linear bars: named in the title instead.
    tf32 = next((s for s in steps if s["variant"] == "cublas_tf32" and s.get("gflops")), None)
    steps = [s for s in steps if s.get("gflops") and s["variant"] != "cublas_tf32"]
    ys = list(range(len(steps)))
    vals = [s["gflops"] for s in steps]
    bx.barh(ys, vals, color=[colors.get(s["label"], "grey") for s in steps], height=0.7)
    for y, s in zip(ys, steps):
        text = f" {s['gflops']:.4g}" if s["gflops"] < 1e4 else f" {s['gflops']:.0f}"
        if s.get("pct_cublas") is not None:
            text += f"  {s['pct_cublas']:.0f}% cuBLAS"
        if s.get("pct_peak") is not None:
            text += f", {s['pct_peak']:.0f}% peak"
        bx.annotate(text, (s["gflops"], y), va="center", fontsize=7.5)
    bx.set_yticks(ys)
    # Each bar carries its variant's ladder step (the registry's order), as the ladder table does.
    bx.set_yticklabels([s["label"] if s["step"] in ("ref", None) else f"{s['step']}. {s['label']}" for s in steps],
                       fontsize=8)
    bx.set_ylim(max(len(steps), 6) - 0.5, -0.5)  # step 1 on top; thin bars even for few steps
    top = max([*vals, peak or 0.0])
    # Log x: the ladder spans over two decades (coalesced column to cuBLAS); the right third left for labels.
    bx.set_xscale("log")
    lo = min(vals) / 2
    bx.set_xlim(lo, lo * (top / lo) ** 1.5)
    if peak:
        bx.axvline(peak, ls=":", color="grey", lw=1.2)
    bx.set_xlabel(f"GFLOP/s at n = {n}, log scale\n(labels: % of cuBLAS in the same run, % of FP32 peak)")
    # The peak named here: a label at the line would sit on the bars' labels.
    bx.set_title(f"the ladder at n = {n}" + (f" (dotted: FP32 peak, {peak / 1e3:.1f} TFLOP/s)" if peak else "")
                 + (f"\ncuBLAS TF32 mode (TF32 accuracy, not shown): {tf32['gflops'] / 1e3:.0f} TFLOP/s" if tf32 else ""),
                 fontsize=9)
    bx.grid(True, which="major", axis="x", alpha=0.3)
    return finish_figure(fig, meta, title, path)


extras_matmul = extras_file("matmul_ladder.md", ladder_markdown)

STUDY = Study("matmul", "matmul", "Single-precision matrix multiply: the kernel ladder",
              "every GPU matmul variant (shared block=32/16, tile_buffer tile_sz=1/2/4, coalesced "
              "warp_layout=column/row) vs cuBLAS, square "
              "n = 128..8192 and 1000: GFLOP/s; ladder table at 4096 (% cuBLAS, % FP32 peak, regs/smem/"
              "spills) -> matmul_ladder.md",
              matmul_gpu_variants, MATMUL_COLUMNS, run_matmul, table_matmul, extras_matmul, plot_matmul,
              outputs=(Output("matmul.png"), Output("matmul_ladder.md")))
