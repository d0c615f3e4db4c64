"""kmeans: Liao's k-means, ``liao`` and the CMU 18-645 report's steps over it (CUDA), ``device`` and ``cpu``, on
Liao's 17695-object sets and Gaussian blobs of the report's four shapes: computation time, iterations,
transfer / loop breakdown -> kmeans.csv/.json/.png, and the report's Tables 1-3 (its GTX 480 seconds beside the
H200's) -> kmeans_report.md.

The data sets are the same in every run (the blobs use seed 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

import gpuopt
from gpuopt import datasets

from ..figures import bar_series, drawable_rows, empty_axes, finish_figure, grouped_bars, headroom, log_if_wide, pyplot
from ..harness import Progress, measure, median_timing
from ..results import format_metadata
from ..study import (CALL_REPEATS, Output, RunSettings, Study, StudyResult, error_text, per_level, select_variants,
                     timed_calls, to_host)
from ..tables import device_short, errors_note, extras_file, fmt_cell, format_table, md_table

__all__ = ["STUDY"]


#: Liao's port and the CMU report's steps over it (its Tables 1-3), then the reference.
KMEANS_VARIANTS = ("liao", "liao_occupancy", "liao_aos", "liao_vec", "device", "cpu")
#: Variants that sum as cpu(summation="chunked") (the others are Liao-exact).
KMEANS_CHUNKED = ("device",)
KMEANS_K = 3
KMEANS_THRESHOLD = 0.001
KMEANS_BLOB_SEED = 0
#: Liao's data sets: label -> file in data_dir()/kmeans_liao.
KMEANS_LIAO_FILES = {"color17695": "color17695.bin", "edge17695": "edge17695.bin", "texture17695": "texture17695.bin"}
#: The CMU 18-645 report's Tables 1-3: computation time (seconds, GTX 480) on kmeans01-04, one row per version,
#: each table a separate run of the versions it lists. Our variant for each of its versions:
KMEANS_REPORT_VERSIONS = {"liao": "Original Version", "liao_occupancy": "Scheduling Maximized Version",
                          "liao_aos": "AOS Optimized Version", "liao_vec": "Auto Vectorized Version"}
KMEANS_REPORT_SETS = ("kmeans01", "kmeans02", "kmeans03", "kmeans04")
KMEANS_REPORT_TABLES = {
    "Table 1": {"liao": (0.0496, 0.0447, 0.2292, 0.4144), "liao_occupancy": (0.0445, 0.0448, 0.2011, 0.1016)},
    "Table 2": {"liao": (0.0613, 0.0447, 0.2313, 0.4344), "liao_occupancy": (0.0435, 0.0445, 0.1999, 0.1008),
                "liao_aos": (0.0440, 0.0446, 0.1735, 0.0765)},
    "Table 3": {"liao": (0.0510, 0.0451, 0.2457, 0.4705), "liao_occupancy": (0.0474, 0.0461, 0.2172, 0.1095),
                "liao_aos": (0.0453, 0.0452, 0.1813, 0.0791), "liao_vec": (0.0448, 0.0450, 0.0810, 0.0550)},
}
# In GPU quick mode the cpu variant runs only on sets with N*D up to this.
KMEANS_SMALL = 1_000_000
# Most objects per data set (None: all).
KMEANS_MAX_N: dict[Any, int | None] = per_level(
    gpu_full=None, gpu_quick=None, cpu_full=None, cpu_quick=50_000, tiny=2_000)
KMEANS_COLUMNS = ("dataset", "source", "N", "D", "k", "threshold", "variant", "iterations", "converged",
                  "computation_ms", "computation_min_ms", "computation_max_ms", "repeats", "h2d_ms", "kernel_ms",
                  "d2h_ms", "transfer_ms", "total_ms", "timing_repeats", "timing_device", "details", "match_cpu",
                  "differ_liao", "error")


def _kmeans_sets(plan: RunSettings, notes: list[str]) -> list[tuple[str, str, np.ndarray, int]]:
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


def run_kmeans(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    names = select_variants("kmeans", KMEANS_VARIANTS, plan, res.notes)
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
                    timings, _, result = timed_calls(
                        lambda name=name: gpuopt.kmeans(x, KMEANS_K, threshold=KMEANS_THRESHOLD, variant=name,
                                                        timing=True),
                        warmup=0, repeat=reps["repeat"], max_time_s=reps["max_time_s"])
                    results[name] = result
                    row.update(iterations=result.iterations, converged=result.converged,
                               computation_ms=st.median_ms, computation_min_ms=st.min_ms,
                               computation_max_ms=st.max_ms, repeats=st.repeats, **median_timing(timings),
                               timing_repeats=len(timings))
                except Exception as exc:  # noqa: BLE001
                    row["error"] = error_text(exc)
                    res.notes.append(f"kmeans {label} {name}: {row['error']}")
                set_rows.append(row)
                prog.update(f"{label} {name}")
            ref = results.get("cpu")
            # Variants summing as summation='chunked' are held to cpu run that way; the Liao-exact ones to cpu.
            chunked = (gpuopt.kmeans(x, KMEANS_K, threshold=KMEANS_THRESHOLD, variant="cpu", summation="chunked")
                       if ref is not None and any(v in results for v in KMEANS_CHUNKED) else None)
            for row in set_rows:
                out = results.get(row["variant"])
                if ref is not None and out is not None and row["variant"] != "cpu":
                    same = chunked if row["variant"] in KMEANS_CHUNKED else ref
                    row["match_cpu"] = bool(out.iterations == same.iterations
                                            and np.array_equal(to_host(out.membership), to_host(same.membership))
                                            and np.array_equal(to_host(out.centroids), same.centroids))
                    row["differ_liao"] = int(np.count_nonzero(to_host(out.membership) != ref.membership))
            res.rows.extend(set_rows)
    return res


def table_kmeans(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """Per data set and variant: iterations, computation time, loop / transfer breakdown, = cpu."""
    body = [[r["dataset"], f"{r['N']}x{r['D']}", r["variant"], fmt_cell(r.get("iterations")),
             fmt_cell(r.get("computation_ms"), ".4g"), fmt_cell(r.get("kernel_ms"), ".4g"),
             fmt_cell(r.get("h2d_ms"), ".3g"), fmt_cell(r.get("d2h_ms"), ".3g"), fmt_cell(r.get("match_cpu")),
             fmt_cell(r.get("differ_liao"))] for r in rows]
    return (f"k={rows[0]['k'] if rows else KMEANS_K}, threshold {KMEANS_THRESHOLD}; computation = wall time of the "
            "call (median); '= cpu': memberships, iterations and centres equal to cpu's (cpu(summation='chunked') "
            f"for {', '.join(KMEANS_CHUNKED)}); 'differ from Liao': memberships not those of the Liao-exact cpu\n"
            + format_table(["data set", "N x D", "variant", "iters", "computation ms", "loop ms", "h2d ms", "d2h ms",
                            "= cpu", "differ from Liao"], body) + errors_note(rows))


def plot_kmeans(meta, rows, path: Path) -> Path:
    """Computation time per data set, a bar per variant (labels: ms and iterations); under it the CMU report's
    Table 3 (GTX 480, hatched) beside this run's same versions on the same shapes."""
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(12, 10.5), gridspec_kw={"height_ratios": [1.15, 1]})
    k, thr = meta.get("k", "?"), meta.get("threshold", "?")
    title = f"k-means (k={k}, threshold {thr}): computation time of Liao's versions, device and cpu per data set"
    good = drawable_rows(rows, "computation_ms")
    if not good:
        empty_axes(ax, "no successful measurements")
        bx.axis("off")
        return finish_figure(fig, meta, title, path)
    sets = list(dict.fromkeys(r["dataset"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in good))
    by = {(r["dataset"], r["variant"]): r for r in good}
    values = grouped_bars(ax, sets, variants,
                          lambda d, v: by[(d, v)]["computation_ms"] if (d, v) in by else None,
                          lambda d, v: f"{by[(d, v)]['computation_ms']:.3g}\n{by[(d, v)]['iterations']} it")
    first = {r["dataset"]: r for r in rows}
    ax.set_xticklabels([f"{d}\n{first[d]['N']}x{first[d]['D']}" for d in sets], fontsize=8)
    log = log_if_wide(ax, values, 20)
    headroom(ax, values)
    ax.set_xlabel("data set (objects x coordinates); labels: ms and loop iterations", fontsize=9)
    ax.set_ylabel("computation time (ms, wall time\nof the call" + (", log scale)" if log else ")"))
    ax.set_title(f"(a) every variant, {device_short(meta)} (this run)", fontsize=9)
    ax.grid(True, which="major", axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _report_panel(bx, by, {v: f"C{i}" for i, v in enumerate(variants)}, device_short(meta))
    return finish_figure(fig, meta, title, path)


def _report_panel(ax, by: Mapping[tuple[str, str], Mapping[str, Any]], colour: Mapping[str, str], dev: str) -> None:
    """The report's Table 3 (the one run of all four versions) in ms, hatched, beside this run's bars."""
    table = KMEANS_REPORT_TABLES["Table 3"]
    series = []
    for v in table:
        series.append((f"{dev}: {v}", lambda d, v=v: (by.get((d, v)) or {}).get("computation_ms"),
                       dict(color=colour.get(v, "grey"))))
        series.append((f"GTX 480, report: {KMEANS_REPORT_VERSIONS[v].replace(' Version', '')}",
                       lambda d, v=v: 1e3 * table[v][KMEANS_REPORT_SETS.index(d)],
                       dict(color=colour.get(v, "grey"), alpha=0.35, hatch="//", edgecolor=colour.get(v, "grey"),
                            lw=0.6)))
    values = bar_series(ax, list(KMEANS_REPORT_SETS), series)
    width = 0.84 / len(series)  # where bar_series puts each bar
    for i, (_, value, _) in enumerate(series):  # each bar's ms, vertical (eight bars a group)
        for j, d in enumerate(KMEANS_REPORT_SETS):
            y = value(d)
            if y:
                ax.annotate(f"{y:.3g}", (j - 0.42 + width * (i + 0.5), y), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=6.5, rotation=90)
    ax.set_xticklabels(list(KMEANS_REPORT_SETS), fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(min(values) / 2, max(values) * 12)
    ax.set_ylabel("computation time (ms, log scale)")
    ax.set_xlabel("the course's data sets (the report's files are not public: here Gaussian blobs of the same "
                  "shapes, so iterations differ)", fontsize=9)
    ax.set_title(f"(b) the CMU 18-645 report's Table 3 (GTX 480, hatched; printed in s, drawn in ms) beside {dev} "
                 "(solid)\nTable 3 is the report's one run of all four versions; Tables 1-2: kmeans_report.md",
                 fontsize=9)
    ax.grid(True, which="major", axis="y", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def report_markdown(meta: Mapping[str, Any], rows: list[dict[str, Any]]) -> str:
    """The CMU 18-645 report's Tables 1-3 (GTX 480, seconds) beside this run's computation time of the same
    versions on the same shapes (ms), totals and total speedups over the original version."""
    by = {(r["dataset"], r["variant"]): r.get("computation_ms") for r in rows}
    lines = ["### The CMU 18-645 report's Tables 1-3 on the H200", "",
             f"Measured with {format_metadata(meta)}.", "",
             "Computation time of the whole k-means call (Liao's 'Computation timing'), k = 3, threshold 0.001. "
             "The report's columns: its GTX 480 runs of the course's kmeans01-04.dat (seconds, as printed). Ours: "
             "Gaussian blobs of the same shapes (the course's files are not public; iteration counts differ), "
             "median ms on the H200 from one run for all three tables (the report re-ran every table). Total "
             "speedup = the original version's total over this version's, from the totals. On the H200 the "
             "ladder's time is the host loop's (memberships down and the centres updated on the CPU every "
             "loop), which the report's kernel-side steps do not touch; `device` keeps the loop on the GPU.", ""]

    def ours(variant: str) -> list[float | None]:
        return [by.get((name, variant)) for name in KMEANS_REPORT_SETS]

    def total(values) -> float | None:
        return sum(values) if values and all(v is not None for v in values) else None

    for title, table in KMEANS_REPORT_TABLES.items():
        base_report, base_ours = total(table["liao"]), total(ours("liao"))
        body = []
        for variant, secs in table.items():
            mine, t_report, t_ours = ours(variant), total(secs), total(ours(variant))
            body.append([KMEANS_REPORT_VERSIONS[variant], f"`{variant}`",
                         *[f"{s:.4f} / {fmt_cell(m, '.3g')}" for s, m in zip(secs, mine)],
                         f"{t_report:.4f} / {fmt_cell(t_ours, '.3g')}",
                         f"{base_report / t_report:.2f}x / "
                         + (f"{base_ours / t_ours:.2f}x" if base_ours and t_ours else "-")])
        if title == "Table 3":  # beyond the report: the whole loop on the GPU
            mine = ours("device")
            t_ours = total(mine)
            body.append(["(gpuopt, not in the report)", "`device`", *[f"- / {fmt_cell(m, '.3g')}" for m in mine],
                         f"- / {fmt_cell(t_ours, '.3g')}",
                         "- / " + (f"{base_ours / t_ours:.2f}x" if base_ours and t_ours else "-")])
        lines += [f"**{title}** (GTX 480 s / H200 ms)", "",
                  md_table(["version", "variant", *KMEANS_REPORT_SETS, "Total", "Total speedup"], body), ""]
    return "\n".join(lines)


STUDY = Study("kmeans", "kmeans", "k-means (Liao's algorithm)",
              "the liao ladder, device and cpu on Liao's 17695-object sets and the CMU report's four shapes: "
              "computation time, iterations, transfer/loop breakdown; the report's Tables 1-3 -> kmeans_report.md",
              KMEANS_VARIANTS, KMEANS_COLUMNS, run_kmeans, table_kmeans,
              extras=extras_file("kmeans_report.md", report_markdown), figures=plot_kmeans,
              outputs=(Output("kmeans.png"), Output("kmeans_report.md", variants=(*KMEANS_REPORT_VERSIONS, "device"))))
