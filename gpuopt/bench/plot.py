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


def plot_matmul(meta, rows, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    good = _ok(rows, "gflops")
    if not good:
        _empty(ax, "no successful measurements")
    for variant in dict.fromkeys(r["variant"] for r in good):
        pts = sorted((r["n"], r["gflops"]) for r in good if r["variant"] == variant)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=variant)
    if good:
        ax.set_xscale("log", base=2)
        sizes = sorted({r["n"] for r in good})
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(n) for n in sizes])
        log = _log_if_wide(ax, [r["gflops"] for r in good], 30)
        ax.set_xlabel("matrix size n (n x n times n x n, float32)")
        ax.set_ylabel("GFLOP/s (2n³ / median kernel time)" + (", log scale" if log else ""))
    return _finish(fig, ax, meta, "matmul: throughput vs size", path)


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
