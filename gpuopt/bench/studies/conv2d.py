"""conv2d: every GPU conv2d variant at its defaults against cuDNN (strict FP32 and free to
pick any algorithm) on the CS6235 report's four configurations -> conv2d.csv/.json/.png."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

import gpuopt

from ..baselines import cudnn_algorithm
from ..conv_points import CONV_CONFS, CONV_MAX_N
from ..figures import drawable, drawable_rows, empty_axes, finish_axes, finish_figure, label_colors, pyplot
from ..harness import Progress, measure
from ..study import (Output, RunSettings, Study, StudyResult, error_text, per_level, relative_error, release_gpu_cache,
                     repeats, select_variants, to_host)
from ..tables import errors_note, fmt_cell, format_table, skipped_note

__all__ = ["STUDY", "conv_gpu_variants"]


# Repeats of the kernel-timed conv2d study: measure() keywords (the L2 flushed on the GPU: the inputs fit it).
KERNEL_REPEATS: dict[Any, dict[str, Any]] = per_level(gpu_full=repeats(5, 50, 5.0, flush_l2=True),
    gpu_quick=repeats(3, 20, 1.0, flush_l2=True), cpu_full=repeats(2, 10, 3.0), cpu_quick=repeats(1, 5, 1.0),
    tiny=repeats(1, 3, 0.2))

#: The conv2d study's minimum (what every CUDA build has); the study runs every GPU conv2d
#: variant registered (:func:`conv_gpu_variants`), each at its defaults, cuDNN last.
CONV_VARIANTS = ("basic", "cudnn")
CONV_COLUMNS = ("conf", "N", "C", "K", "H", "W", "R", "S", "u", "v", "P", "Q", "variant", "device", "median_ms",
                "min_ms", "max_ms", "mean_ms", "std_ms", "repeats", "gflops", "speedup_vs_cudnn", "speedup_vs_cudnn_any",
                "algorithm", "rel_err", "reference", "spin_us", "overhead_hidden", "skipped", "error")


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


def run_conv2d(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    names = select_variants("conv2d", _conv_listed(), plan, res.notes)
    # (label, variant, params): cuDNN twice, restricted to the precise algorithms (the
    # baseline) and free to pick FFT/Winograd (what a framework's benchmark mode gets).
    # auto twice too: "auto" (FP32-level error: exact-order FP32 and 3xTF32 kernels) beside cuDNN precise,
    # "auto-fast" (may pick winograd, which rounds differently) beside cuDNN any.
    entries = [(name, name, {}) for name in names]
    if "auto" in names:
        entries.append(("auto-fast", "auto", {"algorithms": "fast"}))
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
                    row["algorithm"] = cudnn_algorithm(x.shape, wt.shape, (u, v), (0, 0),
                                                       params.get("algorithms", "precise"))
                try:
                    ins = dev_in if gpu else (x, wt)
                    fn = lambda ins=ins, variant=variant, params=params, u=u, v=v: gpuopt.conv2d(  # noqa: E731
                        *ins, stride=(u, v), padding=0, variant=variant, **params)
                    st = measure(fn, device=row["device"], **reps)
                    outputs[name] = to_host(fn())
                    row.update(st.row(), gflops=flops / (st.median_ms * 1e6), spin_us=st.spin_us,
                               overhead_hidden=st.overhead_hidden)
                except ValueError as exc:  # the variant rejects this shape up front (e.g. constant memory)
                    row["skipped"] = error_text(exc)
                    res.notes.append(f"conv2d {conf} {name}: not applicable: {row['skipped']}")
                except Exception as exc:  # noqa: BLE001
                    row["error"] = error_text(exc)
                    res.notes.append(f"conv2d {conf} {name}: {row['error']}")
                conf_rows.append(row)
                prog.update(f"{conf} {name}")
            ref = outputs.get("cudnn")
            t_ref = next((r_["median_ms"] for r_ in conf_rows if r_["variant"] == "cudnn" and r_.get("median_ms")), None)
            t_any = next((r_["median_ms"] for r_ in conf_rows if r_["variant"] == "cudnn-any" and r_.get("median_ms")),
                         None)
            for row in conf_rows:
                if t_ref and row.get("median_ms"):
                    row["speedup_vs_cudnn"] = t_ref / row["median_ms"]
                if t_any and row.get("median_ms"):
                    row["speedup_vs_cudnn_any"] = t_any / row["median_ms"]
                if ref is not None and row["variant"] in outputs and row["variant"] != "cudnn":
                    row["rel_err"], row["reference"] = relative_error(outputs[row["variant"]], ref), "cudnn"
            res.rows.extend(conf_rows)
            del dev_in, outputs, ref
            release_gpu_cache(plan)
    return res


def table_conv2d(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """Per configuration and variant: ms, GFLOP/s, x cuDNN, rel.err, cuDNN's algorithm."""
    # Results with cuDNN-any ratios (speedup_vs_cudnn_any) say which cuDNN each "vs" divides by; older results keep
    # one column.
    both = any(r.get("speedup_vs_cudnn_any") is not None for r in rows)
    body = [[r["conf"], f"{r['N']}x{r['C']}x{r['H']}x{r['W']} * {r['K']}x{r['R']}x{r['S']} /{r['u']}", r["variant"],
             "n/a" if r.get("skipped") else fmt_cell(r.get("median_ms"), ".4g"), fmt_cell(r.get("gflops"), ".1f"),
             fmt_cell(r.get("speedup_vs_cudnn"), ".2f")]
            + ([fmt_cell(r.get("speedup_vs_cudnn_any"), ".2f")] if both else [])
            + [fmt_cell(r.get("rel_err"), ".1e"), r.get("algorithm") or "-"]
            for r in rows]
    vs = ["vs cuDNN precise", "vs cuDNN any"] if both else ["vs cuDNN"]
    return format_table(["conf", "NxCxHxW * KxRxS /stride", "variant", "ms", "GFLOP/s", *vs, "rel.err",
                         "cuDNN algorithm"], body) + skipped_note(rows) + errors_note(rows)


def plot_conv2d(meta, rows, path: Path) -> Path:
    """One panel per configuration: a horizontal bar per variant (cuDNN black), ms and speed vs cuDNN."""
    plt = pyplot()
    good = drawable_rows(rows, "median_ms")
    title = "conv2d: every variant vs cuDNN on the CS6235 configurations (median kernel time, lower is better)"
    if not good:
        fig, ax = plt.subplots(figsize=(9, 5.5))
        empty_axes(ax, "no successful measurements")
        return finish_axes(fig, ax, meta, "conv2d: CS6235 configurations", path)
    confs = list(dict.fromkeys(r["conf"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    colors = label_colors(variants)
    by = {(r["conf"], r["variant"]): r for r in rows}
    ncols = 2 if len(confs) > 1 else 1
    nrows = math.ceil(len(confs) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(7.2 * ncols, 0.28 * len(variants) * nrows + 1.6 * nrows + 0.6),
                             squeeze=False)
    for ax, conf in zip(axes.flat, confs):
        ys = list(range(len(variants)))
        vals = [(drawable(by.get((conf, v), {}).get("median_ms")) and by[(conf, v)]["median_ms"]) or 0.0
                for v in variants]
        ax.barh(ys, vals, color=[colors[v] for v in variants], height=0.72)
        pos = [v for v in vals if v > 0]
        if pos and max(pos) / min(pos) > 20:
            ax.set_xscale("log")
        top = max(pos) if pos else 1.0
        for y, v in zip(ys, variants):
            r = by.get((conf, v), {})
            if r.get("skipped"):
                text = "n/a (rejects the shape)"
            elif r.get("error"):
                text = "failed"
            elif not drawable(r.get("median_ms")):
                text = "-"
            else:
                text = f" {r['median_ms']:.3g}"
                if drawable(r.get("speedup_vs_cudnn")) and not v.startswith("cudnn"):
                    text += f"  {r['speedup_vs_cudnn']:.2f}x"
            x = vals[y] if vals[y] > 0 else (min(pos) if pos and ax.get_xscale() == "log" else 0.0)
            ax.annotate(text, (x, y), xytext=(2, 0), textcoords="offset points", va="center", fontsize=7)
        ax.set_xlim(right=top * (8 if ax.get_xscale() == "log" else 1.35))
        ax.set_yticks(ys)
        ax.set_yticklabels(variants, fontsize=8)
        ax.set_ylim(len(variants) - 0.5, -0.5)
        r0 = next(r for r in rows if r["conf"] == conf)
        ax.set_title(f"{conf}: N{r0['N']} C{r0['C']} K{r0['K']} {r0['H']}x{r0['W']}, {r0['R']}x{r0['S']} stride "
                     f"{r0['u']}", fontsize=9)
        ax.set_xlabel("median kernel time (ms" + (", log scale" if ax.get_xscale() == "log" else "") +
                      "); labels: ms, speed vs cuDNN strict FP32 (> 1: faster)", fontsize=8)
        ax.grid(True, which="major", axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(confs):]:
        ax.axis("off")
    return finish_figure(fig, meta, title, path)


STUDY = Study("conv2d", "conv2d", "2-D convolution, CS6235 configurations",
              "every GPU conv2d variant at its defaults vs cuDNN (strict and any algorithm) on conf1-conf4: "
              "ms, GFLOP/s, speedup vs cuDNN (CS6235 report)",
              _conv_listed, CONV_COLUMNS, run_conv2d, table_conv2d, figures=plot_conv2d,
              outputs=(Output("conv2d.png"),))
