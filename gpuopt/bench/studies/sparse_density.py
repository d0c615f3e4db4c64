"""sparse_density (opt-in, GPU only): where sparse stops paying. The NCTU layer's shape (512 maps 32x32, 512
3x3 filters) with 1..9 filter non-zeros per slice x input density (5%, the real inNeu's ~20%, 50%, 100%):
kernel time of the best one-pass sparse variant on device-resident operands over cuDNN's dense FP32 layer
(conv + ReLU + 2x2 max pool) measured in the same run, and the zero-skipping fast_sparse_input's time with dense
and with sparse neurons in (SparseNeurons' lists) -> sparse_density.csv/.json/.png (a heat map).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

import gpuopt
from gpuopt import datasets

from ..figures import empty_axes, finish_figure, pyplot
from ..harness import Progress
from ..sparse_resident import CUDNN_ROWS, ONE_PASS, RESIDENT_REPEATS, SPARSE_MAPS, SPARSE_NEURONS_ROW, time_resident
from ..study import Output, RunSettings, Study, StudyResult, error_text
from ..tables import errors_note, fmt_cell, format_table

__all__ = ["STUDY"]

NNZ_PER_SLICE = tuple(range(1, 10))
#: Input densities (fraction of non-zero neurons); None = the real inNeu.txt as it is (~20%).
INPUT_DENSITIES: tuple[float | None, ...] = (0.05, None, 0.5, 1.0)
DENSITY_COLUMNS = ("nnz_per_slice", "input_density", "C", "H", "W", "M", "best_variant", "sparse_ms", "cudnn_ms",
                   "ratio", "zero_skip_ms", "zero_skip_lists_ms", "exact_vs_cpu", "details", "error")
#: The zero-skipping variant (work follows the non-zeros of both operands) with dense neurons in (its compaction
#: counted) and with sparse neurons in (their lists built once: the planes kernel alone), beside the best.
ZERO_SKIP = {"zero_skip_ms": "fast_sparse_input", "zero_skip_lists_ms": SPARSE_NEURONS_ROW}


def _filters(rng, m: int, c: int, k: int) -> np.ndarray:
    """k non-zeros at distinct random positions of every 3x3 slice, values in +-1..9 (as make_nctu_filters)."""
    pos = np.argsort(rng.uniform(size=(m * c, 9)), axis=1)[:, :k]
    w = np.zeros((m * c, 9), np.int16)
    np.put_along_axis(w, pos, (rng.integers(1, 10, pos.shape) * rng.choice([-1, 1], pos.shape)).astype(np.int16), 1)
    return w.reshape(m, c, 3, 3)


def _inputs(rng, real: np.ndarray, density: float | None) -> np.ndarray:
    """The real neurons, or their non-zero values redrawn at ``density``."""
    if density is None:
        return real
    values = real[real != 0] if (real != 0).any() else np.array([1], np.int16)
    x = rng.choice(values, real.shape).astype(np.int16)
    x[rng.uniform(size=real.shape) >= density] = 0
    return x


def run_density(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    maps = plan.pick(SPARSE_MAPS)
    reps = plan.pick(RESIDENT_REPEATS)
    rng = np.random.default_rng(plan.seed)
    try:
        real = datasets.read_nctu_neurons_txt()
    except FileNotFoundError:
        real = datasets.make_nctu_neurons(512, 32, 32, seed=0)
        res.notes.append("inNeu.txt not found: synthetic neurons of its shape and sparsity used instead")
    real = np.ascontiguousarray(real[:maps])
    res.meta.update(layer="NCTU layer shape, 3x3 'same' conv, ReLU, 2x2 max pool; generated filters",
                    timing="kernel time on device-resident operands (CUDA events, L2 flushed, median); sparse = the "
                           "faster of " + ", ".join(ONE_PASS) + "; cudnn = the faster of cuDNN precise / any on "
                           "float32 copies; ratio = sparse / cudnn (< 1: sparse wins)")
    cells = [(k, d) for d in INPUT_DENSITIES for k in NNZ_PER_SLICE]
    with Progress(len(cells), "sparse_density", enabled=plan.progress) as prog:
        for k, density in cells:
            x = _inputs(rng, real, density)
            w = _filters(rng, maps, x.shape[0], k)
            row: dict[str, Any] = dict(nnz_per_slice=k, input_density=float(np.count_nonzero(x)) / x.size,
                                       C=x.shape[0], H=x.shape[1], W=x.shape[2], M=maps, details={})
            try:
                ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
                exact = True
                for name in (*ONE_PASS, SPARSE_NEURONS_ROW, *CUDNN_ROWS):
                    ms, out = time_resident(name, x, w, reps)
                    row["details"][name] = ms
                    if name not in CUDNN_ROWS:
                        exact = exact and bool(np.array_equal(out, ref))
                best = min(ONE_PASS, key=lambda n: row["details"][n])
                row.update(best_variant=best, sparse_ms=row["details"][best], exact_vs_cpu=exact,
                           cudnn_ms=min(row["details"][n] for n in CUDNN_ROWS))
                row["ratio"] = row["sparse_ms"] / row["cudnn_ms"]
                row.update({col: row["details"][name] for col, name in ZERO_SKIP.items()})
            except Exception as exc:  # noqa: BLE001
                row["error"] = error_text(exc)
                res.notes.append(f"sparse_density k={k} density={density}: {row['error']}")
            res.rows.append(row)
            prog.update(f"k={k} d={row['input_density']:.2f}")
    return res


def table_density(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    body = [[r["nnz_per_slice"], fmt_cell(r.get("input_density"), ".3f"), r.get("best_variant", "-"),
             fmt_cell(r.get("sparse_ms"), ".4g"), fmt_cell(r.get("cudnn_ms"), ".4g"), fmt_cell(r.get("ratio"), ".3g"),
             fmt_cell(r.get("zero_skip_ms"), ".4g"), fmt_cell(r.get("zero_skip_lists_ms"), ".4g"),
             fmt_cell(r.get("exact_vs_cpu"))] for r in rows]
    return format_table(["nnz/slice", "input density", "best sparse", "sparse ms", "cuDNN ms", "sparse/cuDNN",
                         "zero-skip ms (dense in)", "zero-skip ms (sparse in)", "exact"], body) + errors_note(rows)


def _row_of(density: float) -> int:
    """The grid row of a measured input density: the nearest nominal one (5%, the real ~20%, 50%, 100%); a drawn
    density lands within a fraction of a percent of its target, so rows never split."""
    return int(np.argmin([abs(density - d) for d in _NOMINAL]))


#: The grid rows' nominal densities (the real neurons' is about 20%) and their labels.
_NOMINAL = (0.05, 0.2, 0.5, 1.0)
_NOMINAL_LABELS = ("5%", "real (~20%)", "50%", "100%")


def _density_grid(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[int], np.ndarray]:
    """(filter non-zeros per slice, grid rows, time over cuDNN's) of the rows where ``key`` was measured."""
    good = [r for r in rows if r.get(key) and r.get("cudnn_ms")]
    ks = sorted({r["nnz_per_slice"] for r in good})
    ds = sorted({_row_of(r["input_density"]) for r in good})
    grid = np.full((len(ds), len(ks)), np.nan)
    for r in good:
        grid[ds.index(_row_of(r["input_density"])), ks.index(r["nnz_per_slice"])] = r[key] / r["cudnn_ms"]
    return ks, ds, grid


def _density_panel(ax, ks: list[int], ds: list[int], grid: np.ndarray, norm, span: float, title: str):
    """One heat map of the figure: the ratio printed in each cell, the lab's own layer boxed."""
    im = ax.imshow(grid, cmap="RdBu_r", norm=norm, origin="lower", aspect="auto")
    for i in range(len(ds)):
        for j in range(len(ks)):
            if np.isfinite(grid[i, j]):
                dark = abs(np.log10(grid[i, j])) > 0.55 * span
                ax.text(j, i, f"{grid[i, j]:.2g}", ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")
    if 1 in ks and _NOMINAL.index(0.2) in ds:  # the lab's own layer: its real neurons, one non-zero per slice
        from matplotlib.patches import Rectangle

        ax.add_patch(Rectangle((ks.index(1) - 0.5, ds.index(_NOMINAL.index(0.2)) - 0.5), 1, 1, fill=False,
                               edgecolor="black", lw=2.2))
    ax.set_xticks(range(len(ks)), [str(k) for k in ks])
    ax.set_yticks(range(len(ds)), [_NOMINAL_LABELS[d] for d in ds])
    ax.set_xlabel("filter non-zeros per 3x3 slice")
    ax.set_ylabel("input density (non-zero neurons)")
    ax.set_title(title, fontsize=9)
    ax.grid(False)
    return im


def plot_density(meta, rows, path: Path) -> Path:
    """Two heat maps, filter non-zeros per slice (x) x input density (y), colour = time over cuDNN's dense FP32
    layer on a log scale centred on 1 (blue: faster than dense), the ratio printed in each cell: the best sparse
    variant (the int8 tensor cores where they apply: every tap of the 3x3 frame multiplied, zeros included) and
    the zero-skipping path (``fast_sparse_input``, dense neurons in: work follows the non-zeros of both operands)."""
    plt = pyplot()
    from matplotlib.colors import LogNorm

    title = ("NCTU layer: time over cuDNN's dense FP32 layer (< 1: faster than dense); "
             "boxed: the lab's own layer (real inNeu.txt, one non-zero per 3x3 slice)")
    panels = [("ratio", "best sparse variant (fast_imma where it applies: dense int8, zeros not skipped)"),
              ("zero_skip_ms", "zero-skipping path (fast_sparse_input, dense neurons in)")]
    grids = [(_density_grid(rows, "sparse_ms" if key == "ratio" else key), label) for key, label in panels]
    grids = [(g, label) for g, label in grids if np.isfinite(g[2]).any()]
    if not grids:
        fig, ax = plt.subplots(figsize=(9, 4.8))
        empty_axes(ax, "no successful measurements")
        return finish_figure(fig, meta, title, path)
    # the colour bar in an axes of its own, so that tight_layout keeps it clear of the panels
    fig, axes = plt.subplots(1, len(grids) + 1, figsize=(8 * len(grids) + 1, 4.8),
                             gridspec_kw={"width_ratios": [1] * len(grids) + [0.035]})
    span = max(max(float(np.nanmax(np.abs(np.log10(g[2])))) for g, _ in grids), 0.1)
    norm = LogNorm(vmin=10 ** -span, vmax=10 ** span)
    for ax, ((ks, ds, grid), label) in zip(axes, grids):
        im = _density_panel(ax, ks, ds, grid, norm, span, label)
    bar = fig.colorbar(im, cax=axes[-1], label="time / cuDNN dense FP32 time (log)")
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ticks = [t for t in (0.1, 0.15, 0.25, 0.33, 0.5, 0.7, 1, 1.5, 2, 3, 4, 7, 10) if 10 ** -span <= t <= 10 ** span]
    bar.ax.yaxis.set_major_locator(FixedLocator(ticks))
    bar.ax.yaxis.set_minor_locator(NullLocator())
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    return finish_figure(fig, meta, title, path)


STUDY = Study("sparse_density", "sparse_conv2d", "NCTU sparse layer: where sparse stops paying",
              "filter non-zeros per slice 1..9 x input density: best one-pass sparse variant over cuDNN dense FP32",
              ONE_PASS, DENSITY_COLUMNS, run_density, table_density, figures=plot_density,
              outputs=(Output("sparse_density.png"),), opt_in=True, gpu_only=True)
