"""One figure per sweep, drawn from its results (``{"meta": ..., "rows": [...]}``).

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
        if label == "cublas":
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
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.5))
    good = _ok(rows, "median_ms")
    if not good:
        _empty(ax, "no successful measurements")
        return _finish(fig, ax, meta, "conv2d: CS6235 configurations", path)
    confs = list(dict.fromkeys(r["conf"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in good))
    by = {(r["conf"], r["variant"]): r for r in good}

    def label(c, v):
        r = by[(c, v)]
        s = f"{r['median_ms']:.3g}"
        if r.get("speedup_vs_cudnn") and not v.startswith("cudnn"):
            s += f"\n{r['speedup_vs_cudnn']:.2f}x cuDNN"
        return s

    values = _grouped_bars(ax, confs, variants,
                           lambda c, v: by[(c, v)]["median_ms"] if (c, v) in by else None, label)
    ax.set_yscale("log")
    _headroom(ax, values)
    first = {r["conf"]: r for r in rows}
    ax.set_xticklabels([f"{c}\nN{first[c]['N']} C{first[c]['C']} K{first[c]['K']} {first[c]['H']}x{first[c]['W']}\n"
                        f"{first[c]['R']}x{first[c]['S']} stride {first[c]['u']}" for c in confs], fontsize=8)
    ax.set_xlabel("configuration (N C K H W, filter R x S, stride; no padding); "
                  "labels: ms, speed relative to cuDNN (>1: faster)")
    ax.set_ylabel("median kernel time (ms, log scale)")
    return _finish(fig, ax, meta, "conv2d: time per CS6235 configuration (lower is better)", path)


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


PLOTTERS: dict[str, Callable[..., Path]] = {
    "matmul": plot_matmul,
    "matmul_report": plot_matmul_report,
    "conv2d": plot_conv2d,
    "kmeans": plot_kmeans,
    "sparse": plot_sparse,
}


def plot(name: str, meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
         path: str | os.PathLike) -> Path:
    """Draw sweep ``name``'s figure from its results into ``path`` (PNG)."""
    if name not in PLOTTERS:
        raise ValueError(f"no figure for sweep {name!r}; known: {', '.join(PLOTTERS)}")
    return PLOTTERS[name](meta, list(rows), Path(path))


def plot_json(json_path: str | os.PathLike, png_path: str | os.PathLike | None = None) -> Path:
    """Redraw a figure from a results JSON file (the sweep name is its stem or meta["sweep"])."""
    from . import read_results

    json_path = Path(json_path)
    meta, rows = read_results(json_path)
    name = meta.get("sweep") or json_path.stem
    return plot(name, meta, rows, png_path if png_path is not None else json_path.with_suffix(".png"))
