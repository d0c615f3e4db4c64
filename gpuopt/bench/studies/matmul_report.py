"""matmul_report: the CMU 18-645 report's matrix-multiply harness, reproduced (n = 4 .. 1024,
30 runs, (2n-1) n^2 / t GFLOP/s, error < 1e-3), in its Table 4 layout next to every number
the report printed for its GTX 480 -> matmul_report.csv/.json/.png/.md.

How the report's cases, versions and garbled table were read: notes/cmu18645-matmul-report.md.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

import gpuopt

from ..figures import MARKERS, drawable_rows, label_colors, pyplot, run_line, save_figure, size_ticks
from ..harness import Progress, measure
from ..matmul_runs import call_matmul, matmul_entries, matmul_gpu_variants, matmul_reference
from ..study import (Output, RunSettings, Study, StudyResult, error_text, finite_number, per_level, release_gpu_cache,
                     repeats, row_label, to_host)
from ..tables import Section, device_short, errors_note, extras_file, gflops_cell, sections_markdown, sections_text

__all__ = ["STUDY", "REPORT_CASES", "REPORT_VERSIONS", "REPORT_TABLES", "report_gflops", "report_markdown",
           "report_primary"]


REPORT_GPU = "NVIDIA GeForce GTX 480 (Fermi, sm_20, 2010)"
#: The report's "case 1" .. "case 5" (how they were read: notes/cmu18645-matmul-report.md).
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
REPORT_SIZES: dict[Any, tuple[int, ...]] = per_level(
    gpu_full=(4, 5, 8, 10, 32, 33, 128, 1000, 1024), gpu_quick=(4, 5, 8, 10, 32, 33, 128, 1000, 1024),
    cpu_full=(4, 5, 8, 10, 32, 33, 128, 1000, 1024), cpu_quick=(4, 5, 8, 10, 32, 33, 128), tiny=(4, 5, 8, 10, 32, 33))
#: The report's 30 repetitions per case (median reported); quick keeps 30 with a smaller budget.
REPORT_REPEATS: dict[Any, dict[str, Any]] = per_level(gpu_full=repeats(3, 30, 5.0), gpu_quick=repeats(2, 30, 0.5),
    cpu_full=repeats(1, 30, 3.0), cpu_quick=repeats(1, 10, 0.5), tiny=repeats(1, 3, 0.2))
#: The report's correctness bound: every element within this relative error of the triple loop.
REPORT_TOLERANCE = 1e-3
REPORT_COLUMNS = ("n", "case", "label", "variant", "params", "report_version", "device", "flops", "median_ms",
                  "min_ms", "max_ms", "mean_ms", "std_ms", "repeats", "gflops", "gflops_best", "call_median_ms",
                  "call_min_ms", "call_repeats", "call_gflops", "max_rel_err", "check_ok", "reference", "spin_us",
                  "overhead_hidden", "error")


def max_rel_err(out: np.ndarray, ref64: np.ndarray) -> float:
    """Largest element-wise relative error ``max |out - ref| / |ref|`` (the report's check)."""
    out64 = np.asarray(out, np.float64)
    if out64.shape != ref64.shape:
        return math.inf
    err = np.abs(out64 - ref64) / np.maximum(np.abs(ref64), np.finfo(np.float64).tiny)
    return float(err.max()) if err.size else 0.0


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


def report_primary() -> dict[str, tuple[str, list[float]]]:
    """Per version, the first Table 4 that printed it: (table id, GFLOP/s at cases 1..5)."""
    out: dict[str, tuple[str, list[float]]] = {}
    for t in REPORT_TABLES:
        if not t["id"].startswith("T4"):
            continue
        for r in t["rows"]:
            out.setdefault(r["version"], (t["id"], list(r["gflops"])))
    return out


def run_matmul_report(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    entries = matmul_entries(plan, res.notes)
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
            ref = matmul_reference(a, b)
            dev_in = (gpuopt.to_device(a), gpuopt.to_device(b)) if plan.gpu else None
            for label, name, params in entries:
                gpu = table[name].needs_cuda
                row: dict[str, Any] = {"n": n, "case": case_of.get(n), "label": label, "variant": name,
                                       "params": dict(params), "report_version": version_of.get(label),
                                       "device": "gpu" if gpu else "cpu", "flops": report_flops(n)}
                try:
                    fn = call_matmul(dev_in if gpu else (a, b), name, params)
                    st = measure(fn, device=row["device"], **reps)
                    err = max_rel_err(to_host(fn()), ref)
                    row.update(st.row(), gflops=report_gflops(n, st.median_ms),
                               gflops_best=report_gflops(n, st.min_ms), max_rel_err=err,
                               check_ok=bool(err < REPORT_TOLERANCE), reference="numpy-float64",
                               spin_us=st.spin_us, overhead_hidden=st.overhead_hidden)
                    if gpu:
                        call = measure(call_matmul((a, b), name, params), device="cpu", **reps)
                        row.update(call_median_ms=call.median_ms, call_min_ms=call.min_ms,
                                   call_repeats=call.repeats, call_gflops=report_gflops(n, call.median_ms))
                    if not row["check_ok"]:
                        row["error"] = (f"max relative error {err:.3g} >= {REPORT_TOLERANCE:g} against the "
                                        "float64 reference")
                        res.notes.append(f"matmul_report n={n} {label}: {row['error']}")
                except Exception as exc:  # noqa: BLE001 - recorded, the study goes on
                    row["error"] = error_text(exc)
                    res.notes.append(f"matmul_report n={n} {label}: {row['error']}")
                res.rows.append(row)
                prog.update(f"n={n} {label}")
            del dev_in
            release_gpu_cache(plan)
    return res


def _report_sections(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None) -> list[Section]:
    """(caption, headers, body, alignment) of the report-layout tables."""
    dev = device_short(meta)
    labels = list(dict.fromkeys(row_label(r) for r in rows))
    sizes = list(dict.fromkeys(r["n"] for r in rows))
    by = {(row_label(r), r["n"]): r for r in rows}
    version_of = {label: version for version, label, _ in REPORT_VERSIONS}
    reps = sorted({r["repeats"] for r in rows if finite_number(r.get("repeats"))})
    errs = [finite_number(r.get("max_rel_err")) for r in rows if finite_number(r.get("max_rel_err")) is not None]
    checked = ("all below 1e-3" if errs and all(e < REPORT_TOLERANCE for e in errs) else
               "SOME AT OR ABOVE 1e-3" if errs else "not checked")
    sections = []
    body = []
    for label in labels:
        line = [label, version_of.get(label, "")]
        line += [gflops_cell(by[(label, n)].get("gflops")) if (label, n) in by else "-" for n in sizes]
        worst = [finite_number(by[(label, n)].get("max_rel_err")) for n in sizes if (label, n) in by]
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
        vals = [finite_number(by[(label, n)].get(key)) if (label, n) in by else None for n in REPORT_CASES]
        total = sum(vals) if all(v is not None for v in vals) else None
        return [gflops_cell(v) for v in vals] + [gflops_cell(total)]

    mapped = set()
    for version, label, _ in REPORT_VERSIONS:
        mapped.add(label)
        first = f"{version} ({label})"
        present = any((label, n) in by for n in REPORT_CASES)
        body.append([first, f"{dev} kernel", *ours(label, "gflops")] if present
                    else [first, f"{dev}: not measured", *["-"] * (len(REPORT_CASES) + 1)])
        if present and any(finite_number(by[(label, n)].get("call_gflops")) for n in REPORT_CASES if (label, n) in by):
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
    """This run in the report's Table 4 layout, next to every number the report printed."""
    return sections_text(_report_sections(rows, meta)) + errors_note(rows)


def report_markdown(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """The report-layout tables as Markdown."""
    return sections_markdown("matmul: the CMU 18-645 report's harness, reproduced", meta,
                             _report_sections(rows, meta))


def plot_matmul_report(meta, rows, path: Path) -> Path:
    """The report's harness: this GPU's kernels (solid) and the report's GTX 480 numbers (dashed)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 6.5))
    dev = device_short(meta)
    good = drawable_rows(rows, "gflops")
    labels = list(dict.fromkeys(row_label(r) for r in good))
    mapped = [label for _, label, _ in REPORT_VERSIONS]
    colors = label_colors(list(dict.fromkeys([*labels, *mapped])))
    for i, label in enumerate(labels):
        pts = sorted((r["n"], r["gflops"]) for r in good if row_label(r) == label)
        ref = label == "cublas"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", marker=MARKERS[i % len(MARKERS)], ms=4,
                lw=2.4 if ref else 1.5, color=colors[label], label=f"{dev}: {label}", zorder=3)
    first = labels[0] if labels else None
    call = sorted((r["n"], r["call_gflops"]) for r in drawable_rows(good, "call_gflops") if row_label(r) == first)
    if call:
        ax.plot([p[0] for p in call], [p[1] for p in call], ":", color=colors[first], lw=1.5,
                label=f"{dev}: {first}, whole call (NumPy in/out)")
    primary = report_primary()
    for version, label, _ in REPORT_VERSIONS:
        if version not in primary:
            continue
        tid, vals = primary[version]
        ax.plot(REPORT_CASES, vals, "--", marker="s", mfc="white", ms=6, lw=1.3, color=colors[label],
                label=f"GTX 480 (report {tid}): {version}", zorder=2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    size_ticks(ax, [*(r["n"] for r in good), *REPORT_CASES])
    ax.set_xlabel("matrix size n (square, float32; the report's cases 1-5 are n = "
                  + ", ".join(map(str, REPORT_CASES)) + ")")
    ax.set_ylabel("GFLOP/s = (2n-1)·n² / t (log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    timed = "median event-timed kernel, device-resident inputs" if dev != "CPU" else "the CPU variant, wall time"
    note = (f"Solid: {dev}, this run ({timed}). Dashed, open squares: the report's own GPU, an NVIDIA GTX 480 "
            "(2014), GFLOP/s as printed (the first Table 4 of each version). The report's small cases imply "
            "~0.24 ms of per-call overhead (launch and copies), hence their low GFLOP/s.")
    ax.text(1.02, 0.0, "\n".join(textwrap.wrap(note, 62)), transform=ax.transAxes, fontsize=7.5, color="dimgrey",
            va="bottom", ha="left")
    title = (f"matmul: the CMU 18-645 report's Table 4 cases and more\n{dev} (solid) vs the report's GTX 480 "
             "(dashed), GFLOP/s against size")
    where = "\n".join(textwrap.wrap(run_line(meta), 140))
    ax.set_title(f"{title}\n{where}", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, bbox_inches="tight")  # the legend and note sit right of the axes


extras_matmul_report = extras_file("matmul_report.md", report_markdown)

STUDY = Study("matmul_report", "matmul", "The CMU 18-645 report's matmul harness, reproduced",
              "n = 4, 5, 8, 10, 32, 33, 128, 1000, 1024, 30 runs, (2n-1)n^2/t GFLOP/s, error < 1e-3: "
              "the report's Table 4 layout, this GPU next to the report's GTX 480 -> "
              "matmul_report.md",
              matmul_gpu_variants, REPORT_COLUMNS, run_matmul_report, table_matmul_report, extras_matmul_report,
              plot_matmul_report, outputs=(Output("matmul_report.png"), Output("matmul_report.md")))
