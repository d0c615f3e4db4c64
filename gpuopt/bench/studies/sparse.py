"""sparse: the NCTU lab's sparse convolution layer, ``dense`` vs ``coo`` vs ``fast`` vs the one-pass
``fast_fused`` / ``fast_sparse_input`` / ``fast_imma`` vs ``cpu`` on the lab's inNeu.txt (generated filters): kernel +
transfer time, exactness, and the kernel time on device-resident operands beside cuDNN's dense FP32 layer
(conv + ReLU + 2x2 max pool, the baseline to beat) -> sparse.csv/.json/.png, sparse_report.md. The zero-skipping
``fast_sparse_input`` is timed resident twice: dense neurons in (its compaction counted) and sparse neurons in
(``fast_sparse_input[sparse neurons]``: SparseNeurons' lists built once, the planes kernel alone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

import gpuopt
from gpuopt import datasets

from ..figures import drawable_rows, empty_axes, finish_axes, headroom, log_if_wide, pyplot
from ..harness import Progress, median_timing
from ..results import format_metadata
from ..sparse_resident import (CUDNN_ROWS, FUSED_KERNEL_ROWS, ONE_PASS, RESIDENT_REPEATS, SPARSE_MAPS,
                               SPARSE_NEURONS_ROW, time_resident)
from ..study import CALL_REPEATS, Output, RunSettings, Study, StudyResult, error_text, select_variants, timed_calls, to_host
from ..tables import device_short, errors_note, extras_file, fmt_cell, format_table, md_table

__all__ = ["STUDY"]


SPARSE_VARIANTS = ("dense", "coo", "fast", "fast_fused", "fast_sparse_input", "fast_imma", "auto", "cpu")
SPARSE_FORMATS = {"dense": "dense", "coo": "COOFilters", "fast": "FASTFilters", "fast_fused": "FASTFilters",
                  "fast_sparse_input": "FASTFilters", "fast_imma": "FASTFilters", "auto": "FASTFilters", "cpu": "dense"}
#: The lab's printed results (its Results blocks): CPU time, GPU time with transfers (TotalExecTime), speed-up.
SPARSE_LAB = {"coo": (17160.6, 123.628, 138.808), "fast": (16438.6, 105.128, 156.368)}
SPARSE_FILTER_SEED = 0
SPARSE_FILTER_NOTE = "generated filters, one non-zero per 3x3 slice; the lab's filters are not public"
SPARSE_COLUMNS = ("variant", "filter_format", "C", "H", "W", "M", "nnz", "kernel_ms", "h2d_ms", "d2h_ms",
                  "transfer_ms", "total_ms", "wall_ms", "repeats", "speedup_vs_cpu", "exact_vs_cpu", "resident_kernel_ms",
                  "speedup_vs_cudnn", "timing_device", "details", "error")
def _sparse_inputs(plan: RunSettings, notes: list[str], meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
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


def run_sparse(plan: RunSettings) -> StudyResult:
    from gpuopt.sparse import COOFilters, FASTFilters

    res = StudyResult()
    names = select_variants("sparse_conv2d", SPARSE_VARIANTS, plan, res.notes)
    reps = plan.pick(CALL_REPEATS)
    x, w = _sparse_inputs(plan, res.notes, res.meta)
    res.meta.update(layer="NCTU lab layer: 3x3 'same' conv over all input maps, int32 sums, ReLU, 2x2 max pool",
                    timing="Timing (timing=True) on NumPy input: kernels, h2d (neurons and filters in the variant's "
                           "format), d2h; total = kernels + transfers as the lab graded (TotalExecTime); median of "
                           "each over the runs after warm-up",
                    repeats=reps)
    filters = {"dense": w, "coo": COOFilters.from_dense(w), "fast": FASTFilters.from_dense(w), "cpu": w}
    # The one-pass variants take encoded filters kept on the device (sent once): the lab's measure is then the
    # NumPy neurons in and the pooled maps out.
    resident = FASTFilters.from_dense(w)
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")  # the exactness reference (untimed)
    with Progress(len(names), "sparse", enabled=plan.progress) as prog:
        for name in names:
            row: dict[str, Any] = dict(variant=name, filter_format=SPARSE_FORMATS.get(name, "dense"), C=x.shape[0],
                                       H=x.shape[1], W=x.shape[2], M=w.shape[0], nnz=int(np.count_nonzero(w)))
            try:
                f = filters[name] if name in filters else resident.to_device(("fast",))
                timings, walls, out = timed_calls(
                    lambda f=f, name=name: gpuopt.sparse_conv2d(x, f, variant=name, timing=True),
                    warmup=reps["warmup"], repeat=reps["repeat"], max_time_s=reps["max_time_s"])
                row.update(**median_timing(timings), wall_ms=float(np.median(walls)), repeats=len(timings))
                if name != "cpu":
                    row["exact_vs_cpu"] = bool(np.array_equal(to_host(out), ref))
                    if not row["exact_vs_cpu"]:
                        res.notes.append(f"sparse {name}: result differs from the cpu reference")
            except Exception as exc:  # noqa: BLE001
                row["error"] = error_text(exc)
                res.notes.append(f"sparse {name}: {row['error']}")
            res.rows.append(row)
            prog.update(name)
    if plan.gpu:
        _resident_rows(res, x, w, ref, [n for n in names if n in (*ONE_PASS, "auto")], plan.pick(RESIDENT_REPEATS))
    cpu_total = next((r["total_ms"] for r in res.rows if r["variant"] == "cpu" and r.get("total_ms")), None)
    for row in res.rows:
        if cpu_total and row.get("total_ms"):
            row["speedup_vs_cpu"] = cpu_total / row["total_ms"]
    return res


def _resident_rows(res: StudyResult, x, w, ref, one_pass: list[str], reps: Mapping[str, Any]) -> None:
    """Kernel time on device-resident operands: the one-pass variants' rows, then cuDNN's dense FP32 layer as
    rows of its own; speedup_vs_cudnn = the best cuDNN time over the variant's."""
    by = {r["variant"]: r for r in res.rows}
    kernels = list(FUSED_KERNEL_ROWS) if "fast_fused" in one_pass else []
    kernels += [SPARSE_NEURONS_ROW] if "fast_sparse_input" in one_pass else []
    for name in [*one_pass, *kernels, *CUDNN_ROWS]:
        row = by.get(name) or dict(variant=name, filter_format="FASTFilters" if name in
                                   (*FUSED_KERNEL_ROWS, SPARSE_NEURONS_ROW) else "dense float32", C=x.shape[0], H=x.shape[1], W=x.shape[2], M=w.shape[0],
                                   nnz=int(np.count_nonzero(w)))
        try:
            row["resident_kernel_ms"], out = time_resident(name, x, w, reps)
            row["exact_vs_cpu"] = bool(np.array_equal(out, ref))
        except Exception as exc:  # noqa: BLE001
            row["error"] = error_text(exc)
            res.notes.append(f"sparse {name} (device-resident): {row['error']}")
        if name not in by:
            res.rows.append(row)
    cudnn = [r["resident_kernel_ms"] for r in res.rows if r["variant"] in CUDNN_ROWS and r.get("resident_kernel_ms")]
    for row in res.rows:
        if cudnn and row.get("resident_kernel_ms") and row["variant"] not in CUDNN_ROWS:
            row["speedup_vs_cudnn"] = min(cudnn) / row["resident_kernel_ms"]


def table_sparse(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """Per variant: filter format, kernel / transfer / total ms, speed-up over cpu, exactness."""
    body = [[r["variant"], r["filter_format"], fmt_cell(r.get("kernel_ms"), ".4g"),
             fmt_cell(r.get("transfer_ms"), ".4g"), fmt_cell(r.get("total_ms"), ".4g"), fmt_cell(r.get("speedup_vs_cpu"), ".1f"),
             "reference" if r["variant"] == "cpu" else fmt_cell(r.get("exact_vs_cpu"))] for r in rows]
    head = (f"{rows[0]['C']} maps {rows[0]['H']}x{rows[0]['W']}, {rows[0]['M']} filters ({SPARSE_FILTER_NOTE})\n"
            if rows else "")
    return head + format_table(["variant", "filters", "kernel ms", "transfer ms", "total ms", "speedup vs cpu",
                                "exact"], body) + errors_note(rows)


def plot_sparse(meta, rows, path: Path) -> Path:
    """Stacked bars per variant: kernels, then transfers (log y when the CPU bar dwarfs the rest); beside the
    variants the lab printed, its own time hatched (its GPU with transfers, its serial CPU)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 5.8))
    good = drawable_rows(rows, "total_ms")
    title = (f"NCTU sparse conv layer: time per variant (kernels + transfers) beside the lab's printed times"
             f"\n({SPARSE_FILTER_NOTE})")
    if not good:
        empty_axes(ax, "no successful measurements")
        return finish_axes(fig, ax, meta, title, path)
    names = [r["variant"] + ("" if r.get("filter_format") in (None, "dense") else f"\n({r['filter_format']})")
             for r in good]
    # The lab's number per variant: its GPU total (transfers included) for coo / fast, its serial CPU for cpu.
    lab = {v: gpu for v, (_, gpu, _) in SPARSE_LAB.items()}
    lab["cpu"] = SPARSE_LAB["coo"][0]
    has_lab = [r["variant"] in lab for r in good]
    xs = [x - (0.2 if paired else 0.0) for x, paired in enumerate(has_lab)]
    width = [0.38 if paired else 0.6 for paired in has_lab]
    kernel = [max(r.get("kernel_ms") or 0.0, 0.0) for r in good]
    transfer = [max(r.get("transfer_ms") or 0.0, 0.0) for r in good]
    totals = [r["total_ms"] for r in good]
    labs = [lab[r["variant"]] for r in good if r["variant"] in lab]
    log = log_if_wide(ax, totals + labs, 20)
    floor = min(v for v in kernel + transfer + totals if v > 0) / 3 if log else 0.0
    dev = device_short(meta)
    ax.bar(xs, [max(k, floor) - floor for k in kernel], width=width, bottom=floor, label=f"{dev}: kernels",
           color="tab:blue")
    ax.bar(xs, transfer, width=width, bottom=[max(k, floor) for k in kernel], label=f"{dev}: transfers (h2d + d2h)",
           color="tab:orange")
    for x, r in zip(xs, good):
        text = f"{r['total_ms']:.3g} ms"
        if r.get("speedup_vs_cpu") and r["variant"] != "cpu":
            text += f"\n{r['speedup_vs_cpu']:.3g}x cpu"
        if r.get("exact_vs_cpu") is False:
            text += "\nNOT EXACT"
        ax.annotate(text, (x, r["total_ms"]), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                    fontsize=8)
    lab_x = [x + 0.4 for x, r in zip(xs, good) if r["variant"] in lab]
    lab_rows = [r for r in good if r["variant"] in lab]
    if lab_rows:
        ax.bar(lab_x, [lab[r["variant"]] - floor for r in lab_rows], width=0.38, bottom=floor, color="lightgrey",
               hatch="//", edgecolor="dimgrey", lw=0.6, label="the lab (its GPU unnamed): GPU time with transfers; "
                                                               "cpu: its serial CPU time")
        for x, r in zip(lab_x, lab_rows):
            v = r["variant"]
            text = (f"{lab[v]:.4g} ms\n{SPARSE_LAB[v][2]:.4g}x its cpu" if v != "cpu" else
                    f"{SPARSE_LAB['coo'][0] / 1e3:.3g} s (COO run)\n{SPARSE_LAB['fast'][0] / 1e3:.3g} s (FAST run)")
            ax.annotate(text, (x, lab[v]), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                        fontsize=8, color="dimgrey")
    # The baseline to beat: cuDNN's dense FP32 layer on device-resident operands (kernel time only).
    dense = min((r["resident_kernel_ms"] for r in rows if str(r.get("variant", "")).startswith("cudnn")
                 and r.get("resident_kernel_ms")), default=None)
    if dense:
        ax.axhline(dense, color="black", linestyle="--", linewidth=1,
                   label=f"cuDNN dense FP32 layer, device-resident kernels ({dense * 1e3:.0f} µs)")
    if log:
        ax.set_ylim(bottom=floor)
    headroom(ax, totals + labs, 1.6)  # two-line labels over the tallest bars
    ax.set_xlim(-0.6, max(len(good), 2) - 0.4)
    ax.set_xticks(range(len(good)))
    ax.set_xticklabels(names, fontsize=9)
    first = good[0]
    ax.set_xlabel(f"variant (filter format); {first.get('C')} input maps {first.get('H')}x{first.get('W')}, "
                  f"{first.get('M')} filters 3x3\nlabels: total, and speed-up over the cpu row (here gpuopt's OpenMP "
                  "CPU reference; the lab's: a serial loop)", fontsize=9)
    ax.set_ylabel("time (ms" + (", log scale" if log else "") + "): kernels + transfers")
    return finish_axes(fig, ax, meta, title, path,
                       legend=dict(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.27), ncol=2))


def lab_markdown(meta: Mapping[str, Any], rows: list[dict[str, Any]]) -> str:
    """The lab's table (CPU time, GPU time with transfers, speed-up; COO and FAST) beside this run's, with the
    filter arrays and bytes each format sends."""
    by = {r["variant"]: r for r in rows}
    cpu = by.get("cpu", {}).get("total_ms")
    body = []
    for name in [r["variant"] for r in rows if r["variant"] != "cpu"]:
        r = by[name]
        lab_cpu, lab_gpu, lab_speedup = SPARSE_LAB.get(name, (None, None, None))
        details = r.get("details") or {}
        body.append([name, r.get("filter_format", "-"), fmt_cell(lab_cpu, ".6g"), fmt_cell(lab_gpu, ".6g"),
                     fmt_cell(lab_speedup, ".4g"), fmt_cell(cpu, ".4g"), fmt_cell(r.get("kernel_ms"), ".4g"),
                     fmt_cell(r.get("total_ms"), ".4g"), fmt_cell(r.get("speedup_vs_cpu"), ".4g"),
                     fmt_cell(details.get("filter_arrays"), ".0f"),
                     fmt_cell(details.get("filter_bytes_sent", details.get("filter_bytes")), ".0f"),
                     fmt_cell(details.get("h2d_calls"), ".0f"), fmt_cell(details.get("h2d_bytes"), ".0f"),
                     fmt_cell(1e3 * r["resident_kernel_ms"] if r.get("resident_kernel_ms") else None, ".4g"),
                     fmt_cell(r.get("speedup_vs_cudnn"), ".3g"), fmt_cell(r.get("exact_vs_cpu"))])
    return "\n".join([
        "### The NCTU lab's table on the H200", "", f"Measured with {format_metadata(meta)}.", "",
        "The lab's columns as it printed them (its GPU unnamed; its CPU time a serial loop). H200: the same layer "
        "on the lab's real inNeu.txt with generated filters of one non-zero per 3x3 slice (the lab's filters are "
        "not public); CPU = gpuopt's C++ reference (OpenMP) on the H200 host; GPU total = kernels plus transfers "
        "of the neurons and the filters in the variant's format, as the lab graded (TotalExecTime); speed-up = "
        "CPU over GPU total; h2d calls and bytes: the copies host-to-device of one call (the one-pass variants "
        "keep their FAST filters on the device). Resident kernel µs: the layer's kernels alone on device-resident "
        "operands (CUDA events, L2 flushed, median), beside cuDNN's dense FP32 layer (conv + ReLU + 2x2 max pool "
        "on float32 copies, precise and any algorithms); vs cuDNN = the faster cuDNN time over the variant's.", "",
        md_table(["variant", "filters", "lab CPU ms", "lab GPU ms", "lab speed-up", "H200 CPU ms",
                  "H200 kernel ms", "H200 GPU total ms", "speed-up", "filter arrays", "filter bytes sent",
                  "h2d calls", "h2d bytes", "resident kernel µs", "vs cuDNN FP32", "exact"], body), ""])


STUDY = Study("sparse", "sparse_conv2d", "NCTU sparse convolution layer",
              "dense vs COO vs FAST vs one-pass vs cpu on the lab's inNeu: kernel + transfer time, exactness; "
              "device-resident kernel time vs cuDNN's dense FP32 layer",
              SPARSE_VARIANTS, SPARSE_COLUMNS, run_sparse, table_sparse,
              extras=extras_file("sparse_report.md", lab_markdown), figures=plot_sparse,
              outputs=(Output("sparse.png"), Output("sparse_report.md")))
