"""ece408: the ECE408 Fashion-MNIST report's "Op Time" table (every optimisation on its two
layers at 10/100/10000 images, next to the Op Times it printed), its TILE_WIDTH sweep, and the
ECE408 MNIST report's two layers -> ece408.csv/.json, ece408_op_time.md/.png,
ece408_tile_width.png.

How the reports' printed numbers were read (units, lines, their GPUs): notes/ece408-reports.md.
"""

from __future__ import annotations

import textwrap

from decimal import Decimal
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..conv_points import CONV_CHECK_ELEMS, REPORT_CONV_REPEATS, ConvEntry, ConvProblem, run_points, usable_entries
from ..figures import (X_LABELS, bar_series, drawable_rows, empty_axes, finish_report_figure, grouped_bars, headroom,
                       log_if_wide, pyplot)
from ..study import Output, RunSettings, Study, StudyResult, add_note, entry_label, finite_number, per_level, row_label
from ..tables import (Section, device_short, errors_note, extras_file, fmt_cell, gflops_cell, ms_cell,
                      sections_markdown, sections_text, skipped_note)

__all__ = ["STUDY", "ECE408_OP_TIMES", "ECE408_MNIST_TIMES", "ece408_report_ms", "ms_text"]


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
ECE408_BATCHES: dict[Any, tuple[int, ...]] = per_level(
    gpu_full=(10, 100, 10000), gpu_quick=(10, 100, 10000), cpu_full=(10, 100), cpu_quick=(10,), tiny=(10,))
#: Images of the TILE_WIDTH sweep and of the MNIST layers (the reports: 10,000).
ECE408_BIG_BATCH: dict[Any, int] = per_level(gpu_full=10000, gpu_quick=10000, cpu_full=100, cpu_quick=10, tiny=10)
#: Optimisation 9's TILE_WIDTH sweep: 4 to 32 in steps of 4 (l.716).
ECE408_TILE_WIDTHS: dict[Any, tuple[int, ...]] = per_level(
    gpu_full=(4, 8, 12, 16, 20, 24, 28, 32), gpu_quick=(8, 16, 32), cpu_full=(), cpu_quick=(), tiny=(8, 16))
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
    ("auto-fast", "auto", {"algorithms": "fast"}, "gpuopt: auto, fast algorithms (beside cuDNN any)"),
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
def _k80_ms(stage: str, step: str) -> float:
    """A time of the ECE408 MNIST report's Tables 2-5 (ms), as :data:`gpuopt.models.STAGES` holds it: the one copy
    of those numbers (the networks' stages print them beside their layers)."""
    from gpuopt.models.stages import STAGES

    st = STAGES["mnist"][stage]
    (ms,) = [x.report_ms for x in (*st.steps, *st.heads.values()) if x.name == step]
    return ms


#: The ECE408 MNIST report's convolution times at 10,000 images (Tesla K80), in ms:
#: (variant, layer, ms, table, where). Its Table 4/5 conv1 has the ReLU fused in; Table 3 and the
#: serial times are whole-function times. Table 5's conv2 ("Unrolled Convolution Reduction") is timed
#: here with ``unroll`` (the unrolled input materialised, then a GEMM); the network's hybrid stage runs it
#: as ``implicit_gemm`` (the same product reading the unrolled input by index).
ECE408_MNIST_TIMES: tuple[tuple[str, str, float, str, str], ...] = tuple(
    (variant, layer, _k80_ms(stage, step), tag, where) for variant, layer, stage, step, tag, where in (
        ("cpu", "mnist_conv1", "serial", "Convolution Forward Valid (1)", "T2",
         "Table 2 (serial), 'Convolution Forward Valid (1)' 382.006 s (l.59)"),
        ("cpu", "mnist_conv2", "serial", "Convolution Forward Valid (2)", "T2",
         "Table 2 (serial), 'Convolution Forward Valid (2)' 798.785 s (l.63)"),
        ("basic", "mnist_conv1", "basic", "Convolution Forward Valid (1)", "T3",
         "Table 3 (basic parallelization), 11.523 s (l.76)"),
        ("basic", "mnist_conv2", "basic", "Convolution Forward Valid (2)", "T3",
         "Table 3 (basic parallelization), 78.431 s (l.79)"),
        ("tiled", "mnist_conv1", "optimized", "Convolution Forward Valid (1)", "T4",
         "Table 4 (optimized parallel: tiled, ReLU fused), 374.624 ms (l.118)"),
        ("tiled", "mnist_conv2", "optimized", "Convolution Forward Valid (2)", "T4",
         "Table 4 (optimized parallel: tiled), 2.002 s (l.120)"),
        ("tiled", "mnist_conv1", "hybrid", "Tiled Convolution Forward Valid", "T5",
         "Table 5 (final), 'Tiled Convolution Forward Valid' 383.423 ms (l.150)"),
        ("unroll", "mnist_conv2", "hybrid", "Unrolled Convolution Reduction", "T5",
         "Table 5 (final), 'Unrolled Convolution Reduction' 1.057 s (l.154)")))
ECE408_COLUMNS = ("part", "layer", "B", "N", "C", "K", "H", "W", "R", "S", "u", "v", "P", "Q", "label", "step",
                  "x_name", "x", "variant", "params", "device", "median_ms", "min_ms", "max_ms", "mean_ms", "std_ms",
                  "repeats", "gflops", "speedup_vs_cudnn", "speedup_vs_cudnn_any", "rel_err", "reference", "algorithm",
                  "report_ms", "report_gpu", "report_source", "spin_us", "overhead_hidden", "flush_l2", "skipped", "error")
ECE408_PARTS = ("op_time", "tile_width", "mnist")


def ms_text(seconds: float) -> str:
    """Seconds as printed -> the same number in ms, exactly (0.203084 -> "203.084")."""
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


def ece408_work(plan: RunSettings, notes: list[str]) -> tuple[list[tuple[dict[str, Any], str, ConvEntry]],
                                                       dict[str, ConvProblem]]:
    """(work, problems) of the ece408 study: the Op Time table, the TILE_WIDTH sweep, the MNIST layers."""
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
        add_note(notes, "ece408: no GPU, so only the cpu variant runs (at "
                     f"{', '.join(map(str, batches))} images; the TILE_WIDTH part shows it as a reference line)")
    for layer, spec in ECE408_LAYERS.items():
        for b in batches:
            entries = (_ece408_step_entries(with_cpu=b <= ECE408_CPU_MAX_B) if plan.gpu else cpu_only)
            entries = usable_entries(entries, plan, notes, "ece408 op_time")
            key = problem(layer, spec, b)
            work += [({"part": "op_time", "layer": layer, "B": b}, key, e) for e in entries]
    if plan.gpu:
        ref = ConvEntry("cudnn", "cudnn", {}, {"step": "cuDNN, strict FP32"})
        tile_entries = [ConvEntry(entry_label(v, {"tile_width": t}), v, {"tile_width": t},
                                  {"x_name": "tile_width", "x": t, "step": "Opt 9: TILE_WIDTH sweep"})
                        for v in ECE408_TILE_VARIANTS for t in widths] + [ref]
        tile_entries = usable_entries(tile_entries, plan, notes, "ece408 tile_width")
    else:
        tile_entries = cpu_only
    for layer, spec in ECE408_LAYERS.items():
        key = problem(layer, spec, big)
        work += [({"part": "tile_width", "layer": layer, "B": big}, key, e) for e in tile_entries]
    mnist_entries = (usable_entries(_ece408_step_entries(with_cpu=big <= ECE408_CPU_MAX_B), plan, notes,
                                    "ece408 mnist") if plan.gpu else cpu_only)
    for layer, spec in MNIST_LAYERS.items():
        key = problem(layer, spec, big)
        work += [({"part": "mnist", "layer": layer, "B": big}, key, e) for e in mnist_entries]
    if big < 10000:
        add_note(notes, f"ece408: the TILE_WIDTH sweep and the MNIST layers run at {big} images in this mode "
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


def run_ece408(plan: RunSettings) -> StudyResult:
    res = StudyResult()
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
    res.rows = run_points(plan, res, reps, work, problems, "ece408")
    for row in res.rows:
        _attach_ece408_report(row)
    return res


def _ece408_sections(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None) -> list[Section]:
    dev = device_short(meta)
    sections = []
    op = [r for r in rows if r.get("part") == "op_time"]
    measured_b = sorted({r["B"] for r in op})
    batches = list(dict.fromkeys([*ECE408_REPORT_BATCHES, *measured_b]))
    big = max(measured_b) if measured_b else None
    by = {(r["layer"], r["B"], row_label(r)): r for r in op}
    labels = [lb for lb, *_ in ECE408_STEPS]
    labels += [lb for lb in dict.fromkeys(row_label(r) for r in op) if lb not in labels]
    steps = {lb: step for lb, _, _, step in ECE408_STEPS}
    # Results with cuDNN-any ratios (speedup_vs_cudnn_any) name which cuDNN each "x" divides by; older ones keep one
    # column.
    both = any(r.get("speedup_vs_cudnn_any") is not None for r in op)
    for layer, (c, h, w, k, r_, s) in ECE408_LAYERS.items():
        body = []
        for label in labels:
            line = [steps.get(label, ""), label]
            for b in batches:
                row = by.get((layer, b, label))
                line.append(ms_cell(row))
                if b in ECE408_REPORT_BATCHES:
                    sec, _ = ece408_report_seconds(label, layer, b)
                    line.append("-" if sec is None else ms_text(sec))
            rb = by.get((layer, big, label)) if big else None
            line += [gflops_cell(rb.get("gflops")) if rb else "-",
                     fmt_cell(finite_number(rb.get("speedup_vs_cudnn")), ".2f") if rb else "-"]
            if both:
                line.append(fmt_cell(finite_number(rb.get("speedup_vs_cudnn_any")), ".2f") if rb else "-")
            body.append(line)
        headers = ["the report's step", "variant"]
        for b in batches:
            headers.append(f"B={b}: {dev} ms")
            if b in ECE408_REPORT_BATCHES:
                headers.append(f"B={b}: report ms")
        headers += [f"{dev} GFLOP/s (B={big})"]
        headers += ([f"x cuDNN precise (B={big})", f"x cuDNN any (B={big})"] if both else [f"x cuDNN (B={big})"])
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
        body = [[str(t), *[ms_cell(by_t.get((layer, t, v))) for layer, v in series]] for t in widths]
        best = ["best"]
        for layer, v in series:
            cands = [(r["median_ms"], t) for (lay, t, vv), r in by_t.items() if lay == layer and vv == v
                     and finite_number(r.get("median_ms"))]
            best.append(f"{min(cands)[1]}" if cands else "-")
        body.append(best)
        refs = [r for r in tw if r.get("x") is None]
        for ref in refs:
            body.append([f"{row_label(ref)} ({ref['layer']})",
                         *[ms_cell(ref) if layer == ref["layer"] else "" for layer, _ in series]])
        caption = (f"ECE408 Optimisation 9, the TILE_WIDTH sweep at B={tb}: {dev} median time in ms per tile "
                   f"width (cuDNN for reference). The report ({ECE408_GPU}) printed no numbers (its Figure 27 is not "
                   "in the text); it read: "
                   + "; ".join(f"{k}: {v}" for k, v in ECE408_TILE_REPORT.items()))
        sections.append((caption, ["TILE_WIDTH", *[f"{layer} {v}" for layer, v in series]], body, "l"))

    mn = [r for r in rows if r.get("part") == "mnist"]
    if mn:
        mb = max(r["B"] for r in mn)
        by_m = {(r["layer"], row_label(r)): r for r in mn}
        mlabels = [lb for lb in labels if any(row_label(r) == lb for r in mn)
                   or any(v == lb for v, *_ in ECE408_MNIST_TIMES)]
        body = []
        for label in mlabels:
            line = [steps.get(label, ""), label]
            for layer in MNIST_LAYERS:
                row = by_m.get((layer, label))
                line.append(ms_cell(row))
                rep = ece408_mnist_report(label, layer)
                line.append(" / ".join(f"{ms:g} [{tag}]" for ms, tag, _ in rep) if rep else "-")
                line.append(fmt_cell(finite_number(row.get("speedup_vs_cudnn")), ".2f") if row else "-")
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
    """The Op Time tables (this run next to the report's numbers), TILE_WIDTH, the MNIST layers."""
    return sections_text(_ece408_sections(rows, meta)) + skipped_note(rows) + errors_note(rows)


def ece408_markdown(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """The Op Time tables (with the report's numbers), TILE_WIDTH, MNIST layers, as Markdown."""
    return sections_markdown("conv2d: the ECE408 reports' Op Time table, TILE_WIDTH sweep and MNIST layers", meta,
                             _ece408_sections(rows, meta))


def _step_bars(ax, labels, series, steps_table) -> None:
    """Grouped bars per ECE408 step, x labels with the report's step names, log y."""
    values = bar_series(ax, labels, series)
    steps = {lb: step for lb, _, _, step in steps_table}
    # Anchored at the tick and the long step names wrapped: neighbouring labels do not run into each other.
    ax.set_xticklabels([f"{lb}\n" + "\n".join(textwrap.wrap(steps.get(lb, ""), 30)) for lb in labels], fontsize=7.5,
                       rotation=35, ha="right", rotation_mode="anchor")
    if values:
        ax.set_yscale("log")
        ax.set_ylim(min(values) / 2, max(values) * 3)
    else:
        empty_axes(ax, "no measurements")


def _ece408_op_panel(ax, rows, layer: str, dev: str, colors: Mapping[int, Any]) -> None:
    op = [r for r in rows if r.get("part") == "op_time" and r.get("layer") == layer]
    good = {(r["B"], row_label(r)): r for r in drawable_rows(op, "median_ms")}
    measured = sorted({r["B"] for r in op})
    batches = sorted(set(ECE408_REPORT_BATCHES) | set(measured))
    labels = [lb for lb, *_ in ECE408_STEPS if lb in ECE408_OP_TIMES or any(row_label(r) == lb for r in op)]
    labels += [lb for lb in dict.fromkeys(row_label(r) for r in op) if lb not in labels]
    series = []
    for b in batches:
        if b in measured:
            series.append((f"{dev}, B={b}", lambda g, b=b: good[(b, g)]["median_ms"] if (b, g) in good else None,
                           dict(color=colors.get(b))))
        if b in ECE408_REPORT_BATCHES:
            def rep(g, b=b):
                s, _ = ece408_report_seconds(g, layer, b)
                return None if s is None else float(ms_text(s))

            series.append((f"report ({ECE408_GPU}), B={b}", rep,
                           dict(color=colors.get(b), alpha=0.35, hatch="//", edgecolor=colors.get(b), lw=0.6)))
    _step_bars(ax, labels, series, ECE408_STEPS)
    c, h, w, k, r, s = ECE408_LAYERS[layer]
    ax.set_title(f"{layer}: Bx{c}x{h}x{w} -> {k} maps {r}x{s} (the convolution alone). Solid: {dev} this run; "
                 f"hatched: the report's 'Op Time' on {ECE408_GPU}", fontsize=9)
    ax.set_ylabel("time (ms, log scale)")
    ax.grid(True, which="major", axis="y", alpha=0.3)
    ax.legend(fontsize=7.5, ncol=3, loc="upper right")


def _ece408_mnist_panel(ax, rows, dev: str) -> None:
    import matplotlib

    mn = [r for r in rows if r.get("part") == "mnist"]
    good = {(r["layer"], row_label(r)): r for r in drawable_rows(mn, "median_ms")}
    b = max((r["B"] for r in mn), default=10000)
    reported = {v for v, *_ in ECE408_MNIST_TIMES}
    labels = [lb for lb, *_ in ECE408_STEPS if lb in reported or any(row_label(r) == lb for r in mn)]
    palette = matplotlib.colormaps["Dark2"].colors
    series = []
    for i, layer in enumerate(MNIST_LAYERS):
        col = palette[i]
        series.append((f"{dev}, {layer}, B={b}",
                       lambda g, layer=layer: good[(layer, g)]["median_ms"] if (layer, g) in good else None,
                       dict(color=col)))
        series.append((f"report ({ECE408_MNIST_GPU}), {layer}, B=10000",
                       lambda g, layer=layer: (ece408_mnist_report(g, layer) or [(None,)])[0][0],
                       dict(color=col, alpha=0.35, hatch="//", edgecolor=col, lw=0.6)))
    _step_bars(ax, labels, series, ECE408_STEPS)
    ax.set_title(f"ECE408 MNIST layers: mnist_conv1 Bx1x28x28 -> 32 maps 5x5, mnist_conv2 Bx32x12x12 -> 64 maps 5x5. "
                 f"Hatched: the MNIST report's times at 10,000 images on a {ECE408_MNIST_GPU} (its first printed "
                 "value; see the table)", fontsize=9)
    ax.set_ylabel("time (ms, log scale)")
    ax.grid(True, which="major", axis="y", alpha=0.3)
    ax.legend(fontsize=7.5, ncol=2, loc="upper right")


def _ece408_tile_fig(plt, meta, rows, dev: str):
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.6))
    tw = [r for r in rows if r.get("part") == "tile_width"]
    good = drawable_rows(tw, "median_ms")
    for i, (ax, layer) in enumerate(zip(axes, ECE408_LAYERS)):
        lr = [r for r in good if r.get("layer") == layer]
        b = next((r["B"] for r in tw if r.get("layer") == layer), None)
        widths = sorted({r["x"] for r in lr if r.get("x") is not None})
        variants = list(dict.fromkeys(r["variant"] for r in lr if r.get("x") is not None))
        by = {(str(r["x"]), r["variant"]): r for r in lr if r.get("x") is not None}
        best = {v: min((r for r in lr if r["variant"] == v and r.get("x") is not None),
                       key=lambda r: r["median_ms"])["x"] for v in variants}  # the fastest tile width of each
        vals = grouped_bars(ax, [str(w) for w in widths], variants,
                            lambda g, v: by[(g, v)]["median_ms"] if (g, v) in by else None,
                            lambda g, v: f"{by[(g, v)]['median_ms']:.3g}" + ("\nbest" if best[v] == int(g) else ""))
        for ref in (r for r in lr if r.get("x") is None):
            ax.axhline(ref["median_ms"], ls="--", lw=1.2, color="black",
                       label=f"{row_label(ref)} ({ref['median_ms']:.3g} ms)")
            vals.append(ref["median_ms"])
        if not vals:
            empty_axes(ax, "no successful measurements")
            continue
        log = log_if_wide(ax, vals, 20)
        headroom(ax, vals, 1.2)
        if not widths:
            ax.set_xticks([])
        ax.set_xlabel(X_LABELS["tile_width"] + ("" if widths else " (not swept here)"))
        ax.set_ylabel("median kernel time (ms" + (", log scale" if log else "") + ")")
        ax.set_title(f"({'ab'[i]}) {layer}, B={b}\nthe report: {ECE408_TILE_REPORT[layer]}",
                     fontsize=9)
        ax.grid(True, which="major", axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    return fig


def plot_ece408(meta, rows, path: Path) -> list[Path]:
    """``ece408_op_time.png`` (the Op Time table as grouped bars, and the MNIST layers) and
    ``ece408_tile_width.png`` (the TILE_WIDTH sweep), beside ``path``."""
    import matplotlib

    plt = pyplot()
    dev = device_short(meta)
    rows = list(rows)
    batches = sorted(set(ECE408_REPORT_BATCHES) | {r["B"] for r in rows if r.get("B") is not None})
    palette = list(matplotlib.colormaps["tab10"].colors)
    colors = {b: palette[i % len(palette)] for i, b in enumerate(batches)}
    fig, axes = plt.subplots(3, 1, figsize=(15, 17))
    for ax, layer in zip(axes, ECE408_LAYERS):
        _ece408_op_panel(ax, rows, layer, dev, colors)
    _ece408_mnist_panel(axes[2], rows, dev)
    note = (f"The Fashion-MNIST report's GPU: {ECE408_GPU} ({ECE408_GPU_NOTE}). Its Op Times were printed in seconds "
            "and are drawn in ms. Each group is one of its optimisations (gpuopt variant, the report's step), then "
            "gpuopt's own variants and cuDNN; a missing bar: not measured in this run (or not printed by the report).")
    op_path = finish_report_figure(fig, meta, f"conv2d: the ECE408 reports' Op Time table, {dev} vs the reports' GPUs "
                                   "(lower is better)", note, path.with_name("ece408_op_time.png"), top=0.975)
    fig = _ece408_tile_fig(plt, meta, rows, dev)
    note = (f"The report ({ECE408_GPU}) swept TILE_WIDTH 4..32 in steps of 4 at 10,000 images (Optimisation 9) but "
            "printed no numbers: its table and chart (Figure 27) are not in the text; its reading is quoted above "
            "each panel.")
    tile_path = finish_report_figure(fig, meta, f"conv2d: the ECE408 TILE_WIDTH sweep (tiled, tiled_unrolled) vs cuDNN, "
                                     f"{dev}, median kernel time (lower is better)",
                                     note, path.with_name("ece408_tile_width.png"))
    return [op_path, tile_path]


#: Sweep -> plotter. Most draw one figure into the path given; ``cs6235`` and ``ece408`` draw
#: several beside it (``cs6235_fig1.png`` .. ``cs6235_fig8.png``; ``ece408_op_time.png`` and


extras_ece408 = extras_file("ece408_op_time.md", ece408_markdown)

_STEP_VARIANTS = tuple(dict.fromkeys(v for _, v, _, _ in ECE408_STEPS))
STUDY = Study("ece408", "conv2d", "conv2d: the ECE408 reports' Op Time table and TILE_WIDTH sweep",
              "every optimisation of the ECE408 Fashion-MNIST report on its two layers at 10/100/10000 images "
              "(next to the report's Op Times), TILE_WIDTH 4..32, the ECE408 MNIST layers at 10000: kernel ms, "
              "GFLOP/s -> ece408_op_time.md/.png, ece408_tile_width.png",
              _STEP_VARIANTS, ECE408_COLUMNS, run_ece408, table_ece408, extras_ece408, plot_ece408,
              outputs=(Output("ece408_op_time.png", _STEP_VARIANTS),  # the Op Time steps and the MNIST layers
                       Output("ece408_tile_width.png", (*ECE408_TILE_VARIANTS, "cudnn")),
                       Output("ece408_op_time.md")))
