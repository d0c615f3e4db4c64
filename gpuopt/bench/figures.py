"""Figure helpers shared by the studies: matplotlib on the Agg backend (no display needed),
titles with the run line, saving, grouped bars, colours, markers, size ticks, log-if-wide.

Needs matplotlib (``pip install 'gpuopt[plot]'``) only when a figure is drawn.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .study import row_label

__all__ = ["matplotlib_available", "pyplot", "run_line", "drawable_rows", "drawable", "headroom", "save_figure",
           "readable_log", "finish_axes", "finish_figure", "finish_report_figure", "empty_axes", "log_if_wide",
           "short_number", "grouped_bars", "bar_series", "MARKERS", "label_colors", "size_ticks", "series_label",
           "X_LABELS"]


def matplotlib_available() -> bool:
    """Whether figures can be drawn here (the CSV/JSON are written either way)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def pyplot():
    """pyplot on the Agg backend: no display needed."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def run_line(meta: Mapping[str, Any]) -> str:
    """The run line under every title: device, gpuopt version and commit, time, level."""
    gpu = meta.get("gpu")
    plan = meta.get("plan") or {}
    device = gpu.get("name") if gpu else "CPU only (no GPU): CPU variants at small sizes"
    level = plan.get("level")
    bits = [device, f"gpuopt {meta.get('gpuopt_version')} @ {meta.get('commit')}", str(meta.get("timestamp_utc", ""))]
    if level and level != "full":
        bits.append(f"{level} run")
    return " | ".join(b for b in bits if b)


def drawable_rows(rows: Sequence[Mapping[str, Any]], key: str) -> list[Mapping[str, Any]]:
    """The rows whose ``key`` is a positive finite number (what can be drawn)."""
    return [r for r in rows if drawable(r.get(key))]


def headroom(ax, values: Sequence[float], factor: float = 1.3) -> None:
    """Room above the tallest bar for its label (multiplicative on a log axis)."""
    vals = [v for v in values if v and v > 0]
    if not vals:
        return
    top = max(vals)
    vertical = getattr(ax, "_gpuopt_vertical_labels", False)  # taller labels (see grouped_bars)
    if ax.get_yscale() == "log":
        ax.set_ylim(top=top * factor ** (8 if vertical else 4))
    else:
        ax.set_ylim(bottom=0, top=top * (factor + 0.3 if vertical else factor))


def save_figure(fig, path: Path, **savefig: Any) -> Path:
    """Write ``fig`` as a 120 dpi PNG (folders made) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, **savefig)
    pyplot().close(fig)
    return path


def readable_log(fig) -> None:
    """Log axes showing fewer than three powers of ten get 1-2-5 ticks with plain labels (0.02, 0.05, 0.1):
    the default labels only the powers of ten, which leaves such an axis one or two labels to read values from.
    Axes with ticks of their own (a colour bar's) are left alone."""
    from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation, LogLocator, NullFormatter

    for ax in fig.axes:
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log" or not isinstance(axis.get_major_locator(), LogLocator) \
                    or not isinstance(axis.get_major_formatter(), LogFormatterSciNotation):
                continue
            lo, hi = sorted(lim)
            if lo > 0 and math.floor(math.log10(hi) + 1e-9) - math.ceil(math.log10(lo) - 1e-9) + 1 < 3:
                axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                axis.set_minor_formatter(NullFormatter())


def finish_axes(fig, ax, meta: Mapping[str, Any], title: str, path: Path, grid: bool = True,
                legend: Mapping[str, Any] | None = None) -> Path:
    """One-axes figure: title with the run line, grid (none on a heat map), legend (``legend``: keywords
    over the defaults), saved."""
    where = "\n".join(textwrap.wrap(run_line(meta), 110))
    ax.set_title(f"{title}\n{where}", fontsize=9)
    if grid:
        ax.grid(True, which="major", axis="y", alpha=0.3)
    else:
        ax.grid(False)
    readable_log(fig)
    if ax.get_legend_handles_labels()[0]:
        if getattr(ax, "_gpuopt_vertical_labels", False):  # many bars a group: the legend beside, not over them
            kw = dict(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        else:
            kw = dict(fontsize=9)
        ax.legend(**{**kw, **(legend or {})})
    fig.tight_layout()
    return save_figure(fig, path, bbox_inches="tight")  # a legend beside or under the axes stays whole


def empty_axes(ax, text: str) -> None:
    """An axes that only says why it is empty."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def log_if_wide(ax, values: Sequence[float], ratio: float = 20.0) -> bool:
    """Log y when the values span more than ``ratio``; says whether it did."""
    vals = [v for v in values if v and v > 0]
    if vals and max(vals) / min(vals) > ratio:
        ax.set_yscale("log")
        return True
    return False


def short_number(v: float) -> str:
    """A bar label that stays short: 3 significant digits, k/M above a thousand (2.64k, 149k, 1.2M)."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.3g}"


def grouped_bars(ax, groups: list[str], series: list[str], value: Callable[[str, str], float | None],
                 label: Callable[[str, str], str] | None = None,
                 names: Mapping[str, str] | None = None, compact: bool = False) -> list[float]:
    """A bar per series in each group (``value(group, series)``, missing ones left out), labelled by ``label``
    (vertical, on one line, from 4 series a group on: side by side they would overlap; the legend then goes
    beside the axes), the legend naming each series ``names.get(s, s)``; returns the values drawn.
    ``compact``: each group's bars side by side around its tick, without the gaps of the series it lacks
    (groups of different series: conv2d's variants vs matmul's)."""
    present = {g: [s for s in series if (value(g, s) or 0) > 0] for g in groups}
    slots = max((len(p) for p in present.values()), default=1) if compact else len(series)
    width = 0.8 / max(slots, 1)
    vertical = slots >= 4
    ax._gpuopt_vertical_labels = vertical
    values = []
    # Default colours only past 10 series: tab10's would repeat (kmeans_loop's 11 series).
    colors = label_colors(series) if len(series) > 10 else {}
    for i, s in enumerate(series):
        xs, ys = [], []
        for j, g in enumerate(groups):
            v = value(g, s)
            if v is not None and v > 0:
                k, n = (present[g].index(s), len(present[g])) if compact else (i, len(series))
                xs.append(j - width * n / 2 + width * (k + 0.5))
                ys.append(v)
        values.extend(ys)
        bars = ax.bar(xs, ys, width=width * 0.95, label=(names or {}).get(s, s), color=colors.get(s))
        if label is not None:
            for x, y, g in zip(xs, ys, [g for g in groups if (value(g, s) or 0) > 0]):
                text = label(g, s)
                ax.annotate(text.replace("\n", ", ") if vertical else text, (x, y), xytext=(0, 2),
                            textcoords="offset points", ha="center", va="bottom", fontsize=7,
                            rotation=90 if vertical else 0)
        del bars
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    return values


#: Line markers, one per row label in order.
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p", "d")


def label_colors(labels: Sequence[str]) -> dict[str, Any]:
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


def size_ticks(ax, sizes: Sequence[int]) -> None:
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


def finish_figure(fig, meta: Mapping[str, Any], title: str, path: Path) -> Path:
    """Several-axes figure: a title with the run line over all of them, saved."""
    where = "\n".join(textwrap.wrap(run_line(meta), 140))
    fig.suptitle(f"{title}\n{where}", fontsize=9)
    readable_log(fig)
    fig.tight_layout(rect=(0, 0, 1, 0.99))  # a little air between the run line and the panels' titles
    return save_figure(fig, path, bbox_inches="tight")  # legends beside a panel stay whole


def finish_report_figure(fig, meta: Mapping[str, Any], title: str, note: str, path: Path, top: float = 0.99) -> Path:
    """Title and run line on top, the report's note under the axes; saved with a tight box. (tight_layout
    already keeps the panels under the suptitle: ``top`` only adds air.)"""
    where = "\n".join(textwrap.wrap(run_line(meta), 150))
    fig.suptitle(f"{title}\n{where}", fontsize=9.5)
    readable_log(fig)
    fig.tight_layout(rect=(0, 0, 1, top))
    if note:
        fig.text(0.01, -0.005, "\n".join(textwrap.wrap(note, 170)), fontsize=7.5, color="dimgrey", ha="left",
                 va="top")
    return save_figure(fig, path, bbox_inches="tight")


def series_label(row: Mapping[str, Any]) -> str:
    """A row's legend entry: its ``series``, else its label."""
    return str(row.get("series") or row_label(row))


#: Axis labels of the swept parameters (CS6235 lines, ECE408 TILE_WIDTH).
X_LABELS = {"block_size": "threads per block (block_size)", "unroll": "unroll factor",
            "tile_width": "TILE_WIDTH (block of TILE_WIDTH x TILE_WIDTH threads)"}


def drawable(v: Any) -> bool:
    """A positive finite number (a value that can be drawn, also on a log axis)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def bar_series(ax, groups: Sequence[str], series: Sequence[tuple[str, Callable[[str], float | None], dict]]
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
