"""The figures of each sweep, drawn from its results (``{"meta": ..., "rows": [...]}``): one
per sweep, eight for ``cs6235`` (the report's Figs 1-8) and two for ``ece408``.

Needs matplotlib (``pip install 'gpuopt[plot]'``); the Agg backend is used, so no
display is needed. :func:`plot_json` redraws a figure from a results JSON file, so
committed results regenerate their figures on any machine.
"""

from __future__ import annotations

import math
import os
import textwrap
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

__all__ = ["plot", "plot_json", "matplotlib_available", "PLOTTERS"]


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _where(meta: Mapping[str, Any]) -> str:
    gpu = meta.get("gpu")
    plan = meta.get("plan") or {}
    device = gpu.get("name") if gpu else "CPU only (no GPU): CPU variants at small sizes"
    level = plan.get("level")
    bits = [device, f"gpuopt {meta.get('gpuopt_version')} @ {meta.get('commit')}", str(meta.get("timestamp_utc", ""))]
    if level and level != "full":
        bits.append(f"{level} run")
    return " | ".join(b for b in bits if b)


def _ok(rows: Sequence[Mapping[str, Any]], key: str) -> list[Mapping[str, Any]]:
    return [r for r in rows if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)
            and math.isfinite(r[key]) and r[key] > 0]


def _headroom(ax, values: Sequence[float], factor: float = 1.3) -> None:
    """Room above the tallest bar for its label (multiplicative on a log axis)."""
    vals = [v for v in values if v and v > 0]
    if not vals:
        return
    top = max(vals)
    if ax.get_yscale() == "log":
        ax.set_ylim(top=top * factor**4)
    else:
        ax.set_ylim(bottom=0, top=top * factor)


def _finish(fig, ax, meta: Mapping[str, Any], title: str, path: Path) -> Path:
    where = "\n".join(textwrap.wrap(_where(meta), 110))
    ax.set_title(f"{title}\n{where}", fontsize=9)
    ax.grid(True, which="major", axis="y", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _log_if_wide(ax, values: Sequence[float], ratio: float = 20.0) -> bool:
    vals = [v for v in values if v and v > 0]
    if vals and max(vals) / min(vals) > ratio:
        ax.set_yscale("log")
        return True
    return False


def _grouped_bars(ax, groups: list[str], series: list[str], value: Callable[[str, str], float | None],
                  label: Callable[[str, str], str] | None = None) -> list[float]:
    width = 0.8 / max(len(series), 1)
    values = []
    for i, s in enumerate(series):
        xs, ys = [], []
        for j, g in enumerate(groups):
            v = value(g, s)
            if v is not None and v > 0:
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(v)
        values.extend(ys)
        bars = ax.bar(xs, ys, width=width * 0.95, label=s)
        if label is not None:
            for x, y, g in zip(xs, ys, [g for g in groups if (value(g, s) or 0) > 0]):
                ax.annotate(label(g, s), (x, y), xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=7)
        del bars
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    return values


# --------------------------------------------------------------------------- per sweep


_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p", "d")


def _label(row: Mapping[str, Any]) -> str:
    return str(row.get("label") or row.get("variant"))


def _colors(labels: Sequence[str]) -> dict[str, Any]:
    """A distinct colour per row label (cuBLAS black), the same order -> the same colours in both matmul figures."""
    import matplotlib

    base = list(matplotlib.colormaps["tab10"].colors)
    base.pop(7)  # tab10's grey: kept for annotations
    extra = list(matplotlib.colormaps["Dark2"].colors) + list(matplotlib.colormaps["Set1"].colors)
    palette = base + extra
    out, i = {}, 0
    for label in labels:
        if label in ("cublas", "cudnn"):
            out[label] = "black"
        else:
            out[label] = palette[i % len(palette)]
            i += 1
    return out


def _size_ticks(ax, sizes: Sequence[int]) -> None:
    """Ticks at every size on a log x axis; labels of close sizes (32/33, 1000/1024) on separate lines."""
    sizes = sorted(set(sizes))
    lo, hi = math.log2(sizes[0]), math.log2(sizes[-1])
    gap = max(hi - lo, 1.0) / 30.0  # the smallest spacing (in octaves) two labels on one line may have
    last: list[float] = []  # the last tick (log2) on each text line
    labels = []
    for n in sizes:
        x = math.log2(n)
        line = next((i for i, prev in enumerate(last) if x - prev >= gap), None)
        if line is None:
            line = len(last)
            last.append(x)
        else:
            last[line] = x
        labels.append("\n" * line + str(n))
    ax.set_xticks(sizes)
    ax.set_xticklabels(labels, fontsize=8)
    ax.minorticks_off()


def _finish_fig(fig, meta: Mapping[str, Any], title: str, path: Path) -> Path:
    where = "\n".join(textwrap.wrap(_where(meta), 140))
    fig.suptitle(f"{title}\n{where}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def plot_matmul(meta, rows, path: Path) -> Path:
    """GFLOP/s vs n, one line per kernel and cuBLAS (left); the ladder at 4096 as bars (right)."""
    from .sweeps import _peak_of, matmul_ladder

    plt = _pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(15, 6.8), gridspec_kw={"width_ratios": [1.45, 1]})
    good = _ok(rows, "gflops")
    title = "matmul: the kernel ladder vs cuBLAS, float32 (GFLOP/s = 2n³ / median kernel time)"
    if not good:
        _empty(ax, "no successful measurements")
        bx.axis("off")
        return _finish_fig(fig, meta, title, path)
    labels = list(dict.fromkeys(_label(r) for r in good))
    colors = _colors(labels)
    peak, _ = _peak_of(meta)
    for i, label in enumerate(labels):
        pts = sorted((r["n"], r["gflops"]) for r in good if _label(r) == label)
        ref = label == "cublas"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=_MARKERS[i % len(_MARKERS)], ms=4,
                lw=2.6 if ref else 1.5, color=colors[label], label=label, zorder=3 if ref else 2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _size_ticks(ax, [r["n"] for r in good])
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
    steps = [s for s in steps if s.get("gflops")]
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
    bx.set_yticklabels([f"{s['step']}. {s['label']}" if s["step"] != "ref" else s["label"] for s in steps],
                       fontsize=8)
    bx.set_ylim(max(len(steps), 6) - 0.5, -0.5)  # step 1 on top; thin bars even for few steps
    top = max([*vals, peak or 0.0])
    bx.set_xlim(0, top * 1.45)
    if peak:
        bx.axvline(peak, ls=":", color="grey", lw=1.2)
        bx.annotate("FP32 peak", (peak, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
                    textcoords="offset points", fontsize=8, color="dimgrey")
    bx.set_xlabel(f"GFLOP/s at n = {n} (labels: % of cuBLAS in the same run, % of FP32 peak)")
    bx.set_title(f"the ladder at n = {n}", fontsize=9)
    bx.grid(True, which="major", axis="x", alpha=0.3)
    return _finish_fig(fig, meta, title, path)


def plot_matmul_report(meta, rows, path: Path) -> Path:
    """The report's harness: this GPU's kernels (solid) and the report's GTX 480 numbers (dashed)."""
    from .sweeps import REPORT_CASES, REPORT_VERSIONS, _device_short, _report_primary

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 6.5))
    dev = _device_short(meta)
    good = _ok(rows, "gflops")
    labels = list(dict.fromkeys(_label(r) for r in good))
    mapped = [label for _, label, _ in REPORT_VERSIONS]
    colors = _colors(list(dict.fromkeys([*labels, *mapped])))
    for i, label in enumerate(labels):
        pts = sorted((r["n"], r["gflops"]) for r in good if _label(r) == label)
        ref = label == "cublas"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", marker=_MARKERS[i % len(_MARKERS)], ms=4,
                lw=2.4 if ref else 1.5, color=colors[label], label=f"{dev}: {label}", zorder=3)
    first = labels[0] if labels else None
    call = sorted((r["n"], r["call_gflops"]) for r in _ok(good, "call_gflops") if _label(r) == first)
    if call:
        ax.plot([p[0] for p in call], [p[1] for p in call], ":", color=colors[first], lw=1.5,
                label=f"{dev}: {first}, whole call (NumPy in/out)")
    primary = _report_primary()
    for version, label, _ in REPORT_VERSIONS:
        if version not in primary:
            continue
        tid, vals = primary[version]
        ax.plot(REPORT_CASES, vals, "--", marker="s", mfc="white", ms=6, lw=1.3, color=colors[label],
                label=f"GTX 480 (report {tid}): {version}", zorder=2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _size_ticks(ax, [*(r["n"] for r in good), *REPORT_CASES])
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
    title = "matmul: the CMU 18-645 report's harness, reproduced (its Table 4 cases, and more)"
    where = "\n".join(textwrap.wrap(_where(meta), 140))
    ax.set_title(f"{title}\n{where}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")  # the legend and note sit right of the axes
    plt.close(fig)
    return path


def plot_conv2d(meta, rows, path: Path) -> Path:
    """One panel per configuration: a horizontal bar per variant (cuDNN black), ms and speed vs cuDNN."""
    plt = _pyplot()
    good = _ok(rows, "median_ms")
    title = "conv2d: every variant vs cuDNN on the CS6235 configurations (median kernel time, lower is better)"
    if not good:
        fig, ax = plt.subplots(figsize=(9, 5.5))
        _empty(ax, "no successful measurements")
        return _finish(fig, ax, meta, "conv2d: CS6235 configurations", path)
    confs = list(dict.fromkeys(r["conf"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    colors = _colors(variants)
    by = {(r["conf"], r["variant"]): r for r in rows}
    ncols = 2 if len(confs) > 1 else 1
    nrows = math.ceil(len(confs) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(7.2 * ncols, 0.28 * len(variants) * nrows + 1.6 * nrows + 0.6),
                             squeeze=False)
    for ax, conf in zip(axes.flat, confs):
        ys = list(range(len(variants)))
        vals = [(_num_ok(by.get((conf, v), {}).get("median_ms")) and by[(conf, v)]["median_ms"]) or 0.0
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
            elif not _num_ok(r.get("median_ms")):
                text = "-"
            else:
                text = f" {r['median_ms']:.3g}"
                if _num_ok(r.get("speedup_vs_cudnn")) and not v.startswith("cudnn"):
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
    return _finish_fig(fig, meta, title, path)


def plot_kmeans(meta, rows, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5.5))
    good = _ok(rows, "computation_ms")
    if not good:
        _empty(ax, "no successful measurements")
        return _finish(fig, ax, meta, "k-means: computation time", path)
    sets = list(dict.fromkeys(r["dataset"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in good))
    by = {(r["dataset"], r["variant"]): r for r in good}
    values = _grouped_bars(ax, sets, variants,
                           lambda d, v: by[(d, v)]["computation_ms"] if (d, v) in by else None,
                           lambda d, v: f"{by[(d, v)]['computation_ms']:.3g}\n{by[(d, v)]['iterations']} it")
    first = {r["dataset"]: r for r in rows}
    ax.set_xticklabels([f"{d}\n{first[d]['N']}x{first[d]['D']}" for d in sets], fontsize=8)
    log = _log_if_wide(ax, values, 20)
    _headroom(ax, values)
    ax.set_xlabel("data set (objects x coordinates); labels: ms and loop iterations")
    ax.set_ylabel("computation time (ms, wall time of the call)" + (", log scale" if log else ""))
    k, thr = meta.get("k", "?"), meta.get("threshold", "?")
    return _finish(fig, ax, meta, f"k-means (k={k}, threshold {thr}): computation time per data set", path)


def plot_sparse(meta, rows, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    good = _ok(rows, "total_ms")
    note = "generated filters, one non-zero per 3x3 slice; the lab's filters are not public"
    title = f"NCTU sparse conv layer: kernel + transfer time\n({note})"
    if not good:
        _empty(ax, "no successful measurements")
        return _finish(fig, ax, meta, title, path)
    names = [r["variant"] + ("" if r.get("filter_format") in (None, "dense") else f"\n({r['filter_format']})")
             for r in good]
    xs = range(len(good))
    kernel = [max(r.get("kernel_ms") or 0.0, 0.0) for r in good]
    transfer = [max(r.get("transfer_ms") or 0.0, 0.0) for r in good]
    totals = [r["total_ms"] for r in good]
    log = _log_if_wide(ax, totals, 20)
    floor = min(v for v in kernel + transfer + totals if v > 0) / 3 if log else 0.0
    ax.bar(xs, [max(k, floor) - floor for k in kernel], width=0.6, bottom=floor, label="kernels", color="tab:blue")
    ax.bar(xs, transfer, width=0.6, bottom=[max(k, floor) for k in kernel], label="transfers (h2d + d2h)",
           color="tab:orange")
    for x, r in zip(xs, good):
        text = f"{r['total_ms']:.3g} ms"
        if r.get("speedup_vs_cpu") and r["variant"] != "cpu":
            text += f"\n{r['speedup_vs_cpu']:.3g}x cpu"
        if r.get("exact_vs_cpu") is False:
            text += "\nNOT EXACT"
        ax.annotate(text, (x, r["total_ms"]), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                    fontsize=8)
    if log:
        ax.set_ylim(bottom=floor)
    _headroom(ax, totals, 1.35)
    ax.set_xlim(-0.6, max(len(good), 2) - 0.4)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, fontsize=9)
    first = good[0]
    ax.set_xlabel(f"variant (filter format); {first.get('C')} input maps {first.get('H')}x{first.get('W')}, "
                  f"{first.get('M')} filters 3x3")
    ax.set_ylabel("time (ms" + (", log scale" if log else "") + "): kernels + transfers")
    return _finish(fig, ax, meta, title, path)


# --------------------------------------------------------------------------- conv2d report sweeps (several figures)


def _finish_report_fig(fig, meta: Mapping[str, Any], title: str, note: str, path: Path, top: float = 0.94) -> Path:
    """Title and run line on top, the report's note under the axes; saved with a tight box."""
    where = "\n".join(textwrap.wrap(_where(meta), 150))
    fig.suptitle(f"{title}\n{where}", fontsize=9.5)
    fig.tight_layout(rect=(0, 0, 1, top))
    if note:
        fig.text(0.01, -0.005, "\n".join(textwrap.wrap(note, 170)), fontsize=7.5, color="dimgrey", ha="left",
                 va="top")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def _series(row: Mapping[str, Any]) -> str:
    return str(row.get("series") or _label(row))


def _is_ref_row(row: Mapping[str, Any]) -> bool:
    return row.get("variant") == "cudnn" and (row.get("params") or {}).get("algorithms", "precise") == "precise"


def _conf_tick(conf: str, rows: Sequence[Mapping[str, Any]]) -> str:
    r = next((r for r in rows if r.get("conf") == conf and r.get("N") is not None), None)
    if r is None:
        return conf
    return (f"{conf}\nN{r['N']} C{r['C']} K{r['K']} {r['H']}x{r['W']}\n{r['R']}x{r['S']} stride {r['u']}")


_X_LABELS = {"block_size": "threads per block (block_size)", "unroll": "unroll factor",
             "tile_width": "TILE_WIDTH (block of TILE_WIDTH x TILE_WIDTH threads)"}


def _cs6235_bars(plt, f: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]):
    from .sweeps import cs6235_best_k

    fig, ax = plt.subplots(figsize=(10.5, 5.8))
    confs = [c for c in f["confs"] if any(r.get("conf") == c for r in rows)] or list(f["confs"])
    good = _ok(rows, "median_ms")
    if f["figure"] == "fig8":
        rank = {"unroll_nk": 0, "best": 1}
        derived = [dict(r) for r in good if r.get("variant") != "unroll_k"]
        for c in confs:
            best = cs6235_best_k(good, c)
            if best is not None:
                derived.append({**best, "series": "best unroll_k (rsc loops)",
                                "_note": f"unroll={(best.get('params') or {}).get('unroll')}", "_rank": 1})
        good = sorted(derived, key=lambda r: r.get("_rank", rank.get(r.get("variant"), 2)))
    if not good:
        _empty(ax, "no successful measurements")
        return fig
    series = list(dict.fromkeys(_series(r) for r in good))
    by = {(r["conf"], _series(r)): r for r in good}

    def label(c: str, s: str) -> str:
        r = by[(c, s)]
        text = f"{r['median_ms']:.3g}"
        if _num_ok(r.get("speedup_vs_cudnn")) and not _is_ref_row(r):
            text += f"\n{r['speedup_vs_cudnn']:.2f}x"
        if r.get("_note"):
            text += f"\n{r['_note']}"
        return text

    values = _grouped_bars(ax, confs, series, lambda c, s: by[(c, s)]["median_ms"] if (c, s) in by else None, label)
    log = _log_if_wide(ax, values, 10)  # N=1 and N=128 side by side differ by ~100x
    _headroom(ax, values, 1.35)
    ax.set_xticklabels([_conf_tick(c, rows) for c in confs], fontsize=8)
    ax.set_xlabel("configuration (no padding); bar labels: ms, and speed relative to cuDNN strict FP32 "
                  "(> 1: faster)", fontsize=8.5)
    ax.set_ylabel("median kernel time (ms" + (", log scale)" if log else ")"))
    ax.grid(True, which="major", axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def _num_ok(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _cs6235_lines(plt, f: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]):
    from .sweeps import CONV_CONFS

    import matplotlib

    fig, axes = plt.subplots(1, 2, figsize=(13.5, 5.6))
    good = _ok(rows, "median_ms")
    confs = [c for c in f["confs"] if any(r.get("conf") == c for r in rows)] or list(f["confs"])
    palette = list(matplotlib.colormaps["tab10"].colors)
    color = {c: palette[i % len(palette)] for i, c in enumerate(CONV_CONFS)}
    xs = sorted({r["x"] for r in good if r.get("x") is not None})
    pos = {x: i for i, x in enumerate(xs)}

    def panel_of(c: str) -> str:
        r = next((r for r in rows if r.get("conf") == c and r.get("panel")), None)
        return str(r["panel"]) if r else f"N={CONV_CONFS[c][0]}"

    panels = list(dict.fromkeys(panel_of(c) for c in confs))
    for i, ax in enumerate(axes):
        if i >= len(panels):
            ax.axis("off")
            continue
        panel = panels[i]
        pconfs = [c for c in confs if panel_of(c) == panel]
        vals: list[float] = []
        for n, c in enumerate(pconfs):
            pts = sorted((r["x"], r["median_ms"]) for r in good if r["conf"] == c and r.get("x") is not None)
            if pts:
                series = _series(next(r for r in good if r["conf"] == c and r.get("x") is not None))
                ax.plot([pos[x] for x, _ in pts], [y for _, y in pts], "-o", ms=5, lw=1.6, color=color[c],
                        label=f"{c}: {series}")
                best = min(pts, key=lambda p: p[1])
                ax.plot([pos[best[0]]], [best[1]], marker="*", ms=13, color=color[c], mec="black", mew=0.6,
                        zorder=4, ls="none")
                for x, y in pts:  # labels above the first configuration's points, below the second's
                    ax.annotate(f"{y:.3g}", (pos[x], y), xytext=(0, 6 if n % 2 == 0 else -12),
                                textcoords="offset points", ha="center", fontsize=7, color=color[c])
                vals += [y for _, y in pts]
            for ref in (r for r in good if r["conf"] == c and r.get("x") is None):
                ax.axhline(ref["median_ms"], ls="--", lw=1.1, color=color[c], alpha=0.75,
                           label=f"{c}: {_series(ref)} ({ref['median_ms']:.3g} ms)")
                vals.append(ref["median_ms"])
        if not vals:
            _empty(ax, f"no successful measurements at {panel}")
            continue
        log = _log_if_wide(ax, vals, 8)
        if xs:
            ax.set_xticks(range(len(xs)))
            ax.set_xticklabels([str(x) for x in xs])
            ax.set_xlim(-0.5, len(xs) - 0.5)
        else:
            ax.set_xticks([])
        ax.set_xlabel(_X_LABELS.get(str(f.get("x")), str(f.get("x"))) + ("" if xs else " (not swept here)"))
        ax.set_ylabel("median kernel time (ms" + (", log scale" if log else "") + ")")
        ax.set_title(f"({'ab'[i]}) {panel}: {', '.join(pconfs)}  (star: fastest)", fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7.5)
    return fig


def plot_cs6235(meta, rows, path: Path) -> list[Path]:
    """One PNG per figure of the CS6235 report: ``<stem>_fig1.png`` .. ``<stem>_fig8.png`` beside ``path``."""
    from .sweeps import CS6235_FIGURES, CS6235_GPU, CS6235_GPU_NOTE, _device_short

    plt = _pyplot()
    dev = _device_short(meta)
    out = []
    for f in CS6235_FIGURES:
        fr = [r for r in rows if r.get("figure") == f["figure"]]
        fig = _cs6235_lines(plt, f, fr) if f["kind"] == "lines" else _cs6235_bars(plt, f, fr)
        note = (f"Report: {CS6235_GPU} ({CS6235_GPU_NOTE}). It printed no numbers for this figure (its plots are "
                f"not in the text); what it found: {f['report']}")
        title = f"CS6235 {f['title']}: {dev}, median kernel time (lower is better)"
        out.append(_finish_report_fig(fig, meta, title, note, path.with_name(f"{path.stem}_{f['figure']}.png")))
    return out


def _bar_series(ax, groups: Sequence[str], series: Sequence[tuple[str, Callable[[str], float | None], dict]]
                ) -> list[float]:
    """Grouped bars with per-series style: ``series`` = (legend label, value per group, bar keywords)."""
    width = 0.84 / max(len(series), 1)
    values = []
    for i, (name, value, style) in enumerate(series):
        xs, ys = [], []
        for j, g in enumerate(groups):
            v = value(g)
            if v is not None and v > 0:
                xs.append(j - 0.42 + width * (i + 0.5))
                ys.append(v)
        values += ys
        ax.bar(xs, ys, width=width * 0.92, label=name, **style)
    ax.set_xticks(range(len(groups)))
    return values


def _step_bars(ax, labels, series, steps_table) -> None:
    """Grouped bars per ECE408 step, x labels with the report's step names, log y."""
    values = _bar_series(ax, labels, series)
    steps = {lb: step for lb, _, _, step in steps_table}
    ax.set_xticklabels([f"{lb}\n{steps.get(lb, '')}" for lb in labels], fontsize=7.5, rotation=20, ha="right")
    if values:
        ax.set_yscale("log")
        ax.set_ylim(min(values) / 2, max(values) * 3)
    else:
        _empty(ax, "no measurements")


def _ece408_op_panel(ax, rows, layer: str, dev: str, colors: Mapping[int, Any]) -> None:
    from .sweeps import ECE408_GPU, ECE408_LAYERS, ECE408_OP_TIMES, ECE408_REPORT_BATCHES, ECE408_STEPS, ms_text
    from .sweeps import ece408_report_seconds

    op = [r for r in rows if r.get("part") == "op_time" and r.get("layer") == layer]
    good = {(r["B"], _label(r)): r for r in _ok(op, "median_ms")}
    measured = sorted({r["B"] for r in op})
    batches = sorted(set(ECE408_REPORT_BATCHES) | set(measured))
    labels = [lb for lb, *_ in ECE408_STEPS if lb in ECE408_OP_TIMES or any(_label(r) == lb for r in op)]
    labels += [lb for lb in dict.fromkeys(_label(r) for r in op) if lb not in labels]
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
    from .sweeps import ECE408_MNIST_GPU, ECE408_MNIST_TIMES, ECE408_STEPS, MNIST_LAYERS, ece408_mnist_report

    import matplotlib

    mn = [r for r in rows if r.get("part") == "mnist"]
    good = {(r["layer"], _label(r)): r for r in _ok(mn, "median_ms")}
    b = max((r["B"] for r in mn), default=10000)
    reported = {v for v, *_ in ECE408_MNIST_TIMES}
    labels = [lb for lb, *_ in ECE408_STEPS if lb in reported or any(_label(r) == lb for r in mn)]
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
    from .sweeps import ECE408_LAYERS, ECE408_TILE_REPORT

    fig, axes = plt.subplots(1, 2, figsize=(14, 5.6))
    tw = [r for r in rows if r.get("part") == "tile_width"]
    good = _ok(tw, "median_ms")
    for i, (ax, layer) in enumerate(zip(axes, ECE408_LAYERS)):
        lr = [r for r in good if r.get("layer") == layer]
        b = next((r["B"] for r in tw if r.get("layer") == layer), None)
        widths = sorted({r["x"] for r in lr if r.get("x") is not None})
        variants = list(dict.fromkeys(r["variant"] for r in lr if r.get("x") is not None))
        by = {(str(r["x"]), r["variant"]): r for r in lr if r.get("x") is not None}
        best = {v: min((r for r in lr if r["variant"] == v and r.get("x") is not None),
                       key=lambda r: r["median_ms"])["x"] for v in variants}  # the fastest tile width of each
        vals = _grouped_bars(ax, [str(w) for w in widths], variants,
                             lambda g, v: by[(g, v)]["median_ms"] if (g, v) in by else None,
                             lambda g, v: f"{by[(g, v)]['median_ms']:.3g}" + ("\nbest" if best[v] == int(g) else ""))
        for ref in (r for r in lr if r.get("x") is None):
            ax.axhline(ref["median_ms"], ls="--", lw=1.2, color="black",
                       label=f"{_label(ref)} ({ref['median_ms']:.3g} ms)")
            vals.append(ref["median_ms"])
        if not vals:
            _empty(ax, "no successful measurements")
            continue
        log = _log_if_wide(ax, vals, 20)
        _headroom(ax, vals, 1.2)
        if not widths:
            ax.set_xticks([])
        ax.set_xlabel(_X_LABELS["tile_width"] + ("" if widths else " (not swept here)"))
        ax.set_ylabel("median kernel time (ms" + (", log scale" if log else "") + ")")
        ax.set_title(f"({'ab'[i]}) {layer}, B={b}\nthe report: {ECE408_TILE_REPORT[layer]}",
                     fontsize=9)
        ax.grid(True, which="major", axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    return fig


def plot_ece408(meta, rows, path: Path) -> list[Path]:
    """``ece408_op_time.png`` (the Op Time table as grouped bars, and the MNIST layers) and
    ``ece408_tile_width.png`` (the TILE_WIDTH sweep), beside ``path``."""
    from .sweeps import ECE408_GPU, ECE408_GPU_NOTE, ECE408_LAYERS, ECE408_REPORT_BATCHES, _device_short

    import matplotlib

    plt = _pyplot()
    dev = _device_short(meta)
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
    op_path = _finish_report_fig(fig, meta, f"conv2d: the ECE408 reports' Op Time table, {dev} vs the reports' GPUs "
                                 "(lower is better)", note, path.with_name("ece408_op_time.png"), top=0.975)
    fig = _ece408_tile_fig(plt, meta, rows, dev)
    note = (f"The report ({ECE408_GPU}) swept TILE_WIDTH 4..32 in steps of 4 at 10,000 images (Optimisation 9) but "
            "printed no numbers: its table and chart (Figure 27) are not in the text; its reading is quoted above "
            "each panel.")
    tile_path = _finish_report_fig(fig, meta, f"conv2d: the ECE408 TILE_WIDTH sweep (tiled, tiled_unrolled), {dev}",
                                   note, path.with_name("ece408_tile_width.png"))
    return [op_path, tile_path]


#: Sweep -> plotter. Most draw one figure into the path given; ``cs6235`` and ``ece408`` draw
#: several beside it (``cs6235_fig1.png`` .. ``cs6235_fig8.png``; ``ece408_op_time.png`` and
#: ``ece408_tile_width.png``) and return the list of their paths.
PLOTTERS: dict[str, Callable[..., Path | list[Path]]] = {
    "matmul": plot_matmul,
    "matmul_report": plot_matmul_report,
    "conv2d": plot_conv2d,
    "cs6235": plot_cs6235,
    "ece408": plot_ece408,
    "kmeans": plot_kmeans,
    "sparse": plot_sparse,
}


def plot(name: str, meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
         path: str | os.PathLike) -> Path | list[Path]:
    """Draw sweep ``name``'s figure(s) from its results: into ``path`` (PNG), or, for the sweeps
    with several figures, beside it (the list of their paths is returned)."""
    if name not in PLOTTERS:
        raise ValueError(f"no figure for sweep {name!r}; known: {', '.join(PLOTTERS)}")
    return PLOTTERS[name](meta, list(rows), Path(path))


def plot_json(json_path: str | os.PathLike, png_path: str | os.PathLike | None = None) -> Path | list[Path]:
    """Redraw a sweep's figure(s) from a results JSON file (the sweep name is meta["sweep"] or its stem)."""
    from . import read_results

    json_path = Path(json_path)
    meta, rows = read_results(json_path)
    name = meta.get("sweep") or json_path.stem
    return plot(name, meta, rows, png_path if png_path is not None else json_path.with_suffix(".png"))
