"""The figures' readability rules, checked on the drawn matplotlib figures rather than by eye: no two
point or bar labels overlap, no legend sits on a label, no linear axis spans over 1.5 decades, narrow log axes get
labels to read from, and the reports' printed numbers are drawn beside the H200's."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from gpuopt.bench import figures
from gpuopt.bench.results import read_results
from gpuopt.bench.studies import STUDIES

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


@pytest.fixture
def drawn(monkeypatch):
    """The figures studies draw, kept (file name -> figure) instead of written."""
    pytest.importorskip("matplotlib")
    from gpuopt.bench.studies import matmul_report

    figs: dict[str, object] = {}

    def keep(fig, path, **_):
        fig.canvas.draw()
        figs[Path(path).name] = fig
        return path

    monkeypatch.setattr(figures, "save_figure", keep)
    monkeypatch.setattr(matmul_report, "save_figure", keep)  # saves its own figure (legend beside the axes)
    yield figs
    plt = figures.pyplot()
    for fig in figs.values():
        plt.close(fig)


def _draw(name: str) -> None:
    meta, rows = read_results(RESULTS / f"{name}.json")
    STUDIES[name].figures(meta, rows, RESULTS / f"{name}.png")  # save_figure is patched: nothing is written


def _committed() -> list[str]:
    return [name for name, s in STUDIES.items() if s.figures and (RESULTS / f"{name}.json").is_file()]


def _positive(values) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]


def _linear_span(ax) -> float:
    """Decades spanned by the positive data of a linear axis (lines and bars along it), 0 for a log axis."""
    from matplotlib.patches import Rectangle

    out = 0.0
    for axis in ("x", "y"):
        if getattr(ax, f"get_{axis}scale")() != "linear":
            continue
        vals = [] if axis == "x" else _positive(v for ln in ax.lines for v in ln.get_ydata())
        bars = [p for p in ax.patches if isinstance(p, Rectangle)]
        vals += _positive(p.get_height() if axis == "y" else p.get_width() for p in bars)
        if axis == "x" and bars and len({round(p.get_height(), 6) for p in bars}) == 1:  # horizontal bars only
            vals = _positive(p.get_width() for p in bars)
        elif axis == "x":
            vals = []
        if vals:
            out = max(out, math.log10(max(vals) / min(vals)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", _committed())
def test_committed_figures_are_readable(drawn, name):
    _draw(name)
    assert drawn, name
    for file, fig in drawn.items():
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            labels = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts
                      if t.get_visible() and t.get_text().strip()]
            for (a, box_a), (b, box_b) in itertools.combinations(labels, 2):
                assert not box_a.shrunk(0.95, 0.9).overlaps(box_b.shrunk(0.95, 0.9)), (file, a, b)
            legend = ax.get_legend()
            if legend is not None:
                box = legend.get_window_extent(renderer)
                assert not any(box.overlaps(b) for _, b in labels), (file, "legend over a label")
            assert _linear_span(ax) <= 1.5, (file, ax.get_title(), "linear axis over 1.5 decades")


def test_narrow_log_axes_get_plain_1_2_5_labels(drawn):
    plt = figures.pyplot()
    fig, (narrow, wide, fixed) = plt.subplots(1, 3)
    narrow.set_yscale("log")
    narrow.set_ylim(0.011, 2.0)  # one power of ten inside: the default would label 0.1 and 1 only
    wide.set_yscale("log")
    wide.set_ylim(1e-3, 1e3)
    fixed.set_yscale("log")
    fixed.set_ylim(0.3, 3)
    fixed.set_yticks([0.5, 1, 2])
    figures.readable_log(fig)
    fig.canvas.draw()
    shown = [t.get_text() for t in narrow.get_yticklabels() if 0.011 <= t.get_position()[1] <= 2.0]
    assert {"0.02", "0.05", "0.1", "0.2", "0.5", "1", "2"} <= set(shown), shown
    assert "0.02" not in [t.get_text() for t in wide.get_yticklabels()]
    assert list(fixed.get_yticks()) == [0.5, 1, 2]
    plt.close(fig)


def test_compact_groups_centre_their_own_bars():
    plt = figures.pyplot()
    fig, ax = plt.subplots()
    value = {("conv", "a"): 1.0, ("conv", "torch"): 2.0, ("mm", "torch"): 3.0, ("mm", "b"): 4.0}
    figures.grouped_bars(ax, ["conv", "mm"], ["a", "torch", "b"], lambda g, s: value.get((g, s)), compact=True)
    centres = sorted(round(p.get_x() + p.get_width() / 2, 6) for p in ax.patches)
    assert centres == [-0.2, 0.2, 0.8, 1.2]  # two bars around each tick, no gap for the series a group lacks
    plt.close(fig)


def _bar_heights(fig) -> list[float]:
    return [p.get_y() + p.get_height() for ax in fig.axes for p in ax.patches]


def _has(values, target: float) -> bool:
    return any(math.isclose(v, target, rel_tol=1e-6) for v in values)


@pytest.mark.parametrize("name", ["kmeans", "sparse", "networks"])
def test_the_reports_numbers_are_drawn(drawn, name):
    if not (RESULTS / f"{name}.json").is_file():
        pytest.skip(f"no committed {name} results")
    _draw(name)
    fig = drawn[f"{name}.png"]
    if name == "kmeans":
        from gpuopt.bench.studies.kmeans import KMEANS_REPORT_TABLES

        for version, secs in KMEANS_REPORT_TABLES["Table 3"].items():
            for s in secs:
                assert _has(_bar_heights(fig), 1e3 * s), (version, s)
    elif name == "sparse":
        from gpuopt.bench.studies.sparse import SPARSE_LAB

        for v in ("coo", "fast"):
            assert _has(_bar_heights(fig), SPARSE_LAB[v][1]), v
        assert _has(_bar_heights(fig), SPARSE_LAB["coo"][0])  # its serial CPU
    else:
        from gpuopt.models import STAGES

        points = [y for ax in fig.axes for ln in ax.lines for y in ln.get_ydata()]
        for stage in ("serial", "hybrid"):
            assert _has(points, STAGES["mnist"][stage].report_total_ms), stage
