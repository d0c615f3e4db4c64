"""kmeans_map (opt-in, GPU only): how close the k-means loop gets to its floor over k x D. At N = 1,000,000 points
(uniform in (0, 1], seeded, never zero), k in 3..1024 and D in 2..128: the time per loop iteration of the fastest
loop-on-the-GPU variant for the shape (``auto``'s pick and every other of ``device``, ``device_fused``,
``device_gemm``, ``device_tiled``, ``device_persistent`` that takes it, device-resident, threshold 0, a fixed number
of loops), over its floor, max(one pass's bytes / the HBM bandwidth measured in the same run, 2 N k D FLOP / the
FP32 peak) -> kmeans_map.csv/.json/.png (a heat map of time/floor).

The time per iteration is the marginal loop, (a call of ``MAP_ITERS`` loops - a call of one) / (MAP_ITERS - 1):
the call's fixed costs (launch, the stop-flag copy, the initial centres) taken out, as kmeans_loop's marginal
column. One pass's bytes: the points read once and the memberships read and written, N (D + 2) x 4. Shapes no
loop-on-the-GPU variant takes (before device_tiled streamed its centres: k*D > 4096) are rows with ``skipped`` set
and hatched cells in the figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

import gpuopt

from ..figures import empty_axes, finish_axes, pyplot
from ..floors import compute_floor_us, fp32_peak, memory_floor_us
from ..harness import Progress, measure
from ..study import Output, RunSettings, Study, StudyResult, error_text, per_level, release_gpu_cache, repeats
from ..tables import errors_note, fmt_cell, format_table

__all__ = ["STUDY"]

MAP_K = (3, 8, 16, 32, 64, 128, 256, 512, 1024)
MAP_D = (2, 4, 8, 16, 32, 64, 128)
#: the loop-on-the-GPU variants the map compares (auto picks among them by shape)
MAP_VARIANTS = ("device", "device_fused", "device_gemm", "device_tiled", "device_persistent")
MAP_ITERS = 6
MAP_SEED = 0
MAP_N: dict[Any, int] = per_level(gpu_full=1_000_000, gpu_quick=200_000, cpu_full=20_000, cpu_quick=5_000, tiny=2_000)
MAP_REPEATS: dict[Any, dict[str, Any]] = per_level(gpu_full=repeats(1, 3, 1.0), gpu_quick=repeats(1, 2, 0.5),
    cpu_full=repeats(0, 1), cpu_quick=repeats(0, 1), tiny=repeats(0, 1))
#: bytes of the device-to-device copy that measures the HBM bandwidth (read + write counted)
BANDWIDTH_BYTES = 1 << 30
MAP_COLUMNS = ("N", "D", "k", "best_variant", "auto_variant", "us_per_iter", "call_us_per_iter", "floor_us",
               "memory_floor_us", "compute_floor_us", "ratio", "bound", "details", "skipped", "error")


def map_floor(n: int, d: int, k: int, bandwidth: float | None, gflops: float | None) -> dict[str, float | None]:
    """One loop's floors in µs: memory (N (D + 2) x 4 bytes at ``bandwidth`` bytes/s), compute (2 N k D FLOP at
    ``gflops``), their max and which one it is."""
    memory = memory_floor_us(n * (d + 2) * 4, bandwidth)
    compute = compute_floor_us(2.0 * n * k * d, gflops)
    floors = {"memory": memory, "compute": compute}
    bound = max((b for b in floors if floors[b] is not None), key=lambda b: floors[b], default=None)
    return dict(memory_floor_us=memory, compute_floor_us=compute, floor_us=floors[bound] if bound else None,
                bound=bound)


def measured_bandwidth(reps: Mapping[str, Any]) -> float:
    """HBM bytes/s of this GPU: a device-to-device copy of ``BANDWIDTH_BYTES`` (read and written), median time."""
    src = gpuopt.DeviceArray.empty((BANDWIDTH_BYTES // 4,), np.float32)
    st = measure(src.copy, device="gpu", warmup=2, repeat=max(5, reps.get("repeat", 3)))
    del src
    return 2 * BANDWIDTH_BYTES / (st.median_ms * 1e-3)


def candidates(n: int, d: int, k: int) -> tuple[str | None, list[str]]:
    """(auto's pick, the loop-on-the-GPU variants that take N x D with k clusters)."""
    from ...kmeans.auto import auto_choice, fits

    return auto_choice(n, d, k), [v for v in MAP_VARIANTS if fits(v, n, d, k)]


def run_kmeans_map(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    n = plan.pick(MAP_N)
    reps = plan.pick(MAP_REPEATS)
    gpu = gpuopt.device_info() or {}
    gflops, formula = fp32_peak(gpu)
    bandwidth = measured_bandwidth(reps)
    res.meta.update(N=n, iterations=MAP_ITERS, data_seed=MAP_SEED, repeats=reps, hbm_bandwidth_gbs=bandwidth / 1e9,
                    fp32_peak_gflops=gflops,
                    inputs=f"1 - numpy default_rng({MAP_SEED}).random((N, D)) float32: uniform in (0, 1], never 0; "
                           "on the device before timing",
                    timing=f"marginal loop: (a {MAP_ITERS}-loop call - a 1-loop call) / {MAP_ITERS - 1}, CUDA "
                           "events, L2 flushed, median over the repeats; threshold 0, first-k centres",
                    floors=f"max(N (D + 2) x 4 bytes / {bandwidth / 1e12:.2f} TB/s (a {BANDWIDTH_BYTES >> 20} MiB "
                           f"device-to-device copy in this run), 2 N k D FLOP / {formula})")
    cells = [(k, d) for d in MAP_D for k in MAP_K]
    with Progress(len(cells), "kmeans_map", enabled=plan.progress) as prog:
        for d in MAP_D:
            x = 1.0 - np.random.default_rng(MAP_SEED).random((n, d), dtype=np.float32)
            x_dev = gpuopt.to_device(x)
            for k in MAP_K:
                row: dict[str, Any] = dict(N=n, D=d, k=k, details={}, **map_floor(n, d, k, bandwidth, gflops))
                try:
                    pick, names = candidates(n, d, k)
                    row["auto_variant"] = pick
                    if not names:
                        row["skipped"] = f"no loop-on-the-GPU variant takes k*D = {k * d}"
                    for name in names:
                        call = measure(lambda name=name: gpuopt.kmeans(x_dev, k, threshold=0.0, max_iter=MAP_ITERS,
                                                                       variant=name),
                                       device="gpu", flush_l2=True, **reps)
                        one = measure(lambda name=name: gpuopt.kmeans(x_dev, k, threshold=0.0, max_iter=1,
                                                                      variant=name),
                                      device="gpu", flush_l2=True, **reps)
                        marginal = (call.median_ms - one.median_ms) * 1e3 / (MAP_ITERS - 1)
                        row["details"][name] = dict(us_per_iter=marginal, call_us_per_iter=call.median_ms * 1e3 /
                                                    MAP_ITERS)
                    if names:
                        best = min(names, key=lambda v: row["details"][v]["us_per_iter"])
                        row.update(best_variant=best, **row["details"][best])
                        if row["floor_us"] and row["us_per_iter"] > 0:
                            row["ratio"] = row["us_per_iter"] / row["floor_us"]
                except Exception as exc:  # noqa: BLE001
                    row["error"] = error_text(exc)
                    res.notes.append(f"kmeans_map k={k} D={d}: {row['error']}")
                res.rows.append(row)
                prog.update(f"k={k} D={d}")
            del x_dev
            release_gpu_cache(plan)
    return res


def table_kmeans_map(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """Per (k, D): the fastest variant, its µs per loop, the floor and which bound it is, time/floor."""
    body = [[r["k"], r["D"], r.get("best_variant") or "-", r.get("auto_variant") or "-",
             fmt_cell(r.get("us_per_iter"), ".4g"), fmt_cell(r.get("floor_us"), ".3g"), r.get("bound") or "-",
             fmt_cell(r.get("ratio"), ".3g"),
             r.get("skipped") or ""] for r in rows]
    head = (f"N = {(meta or {}).get('N', rows[0]['N'] if rows else '?')}, marginal µs per loop of the fastest "
            "loop-on-the-GPU variant; floor = max(memory, compute)\n")
    return head + format_table(["k", "D", "fastest", "auto picks", "µs/iter", "floor µs", "bound", "time/floor",
                                "not run"], body) + errors_note(rows)


_SHORT = {"device": "dev", "device_fused": "fused", "device_gemm": "gemm", "device_tiled": "tiled",
          "device_persistent": "persist"}


def plot_kmeans_map(meta, rows, path: Path) -> Path:
    """Heat map: k (x) x D (y), colour = time / floor on a log scale, the ratio and the fastest variant in each cell;
    shapes no variant takes hatched and labelled."""
    plt = pyplot()
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    fig, ax = plt.subplots(figsize=(11, 5.8))
    device = (meta.get("gpu") or {}).get("name", "no GPU")
    n = meta.get("N")
    title = (f"k-means loop, N = {n:,}" if isinstance(n, int) else "k-means loop") + (
        f", {device}: fastest device-resident variant's time per iteration / its floor\n"
        "floor = max(one pass's bytes / HBM bandwidth measured in the run, 2 N k D FLOP / FP32 peak)")
    if not rows:
        empty_axes(ax, "no measurements (placeholder until the H200 run: python benchmarks/run_all.py kmeans_map)")
        return finish_axes(fig, ax, meta, title, path)
    ks = sorted({r["k"] for r in rows})
    ds = sorted({r["D"] for r in rows})
    grid = np.full((len(ds), len(ks)), np.nan)
    for r in rows:
        if r.get("ratio"):
            grid[ds.index(r["D"]), ks.index(r["k"])] = r["ratio"]
    finite = grid[np.isfinite(grid)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (1.0, 10.0)
    im = ax.imshow(grid, cmap="viridis", norm=LogNorm(vmin=min(lo, 1.0), vmax=max(hi, lo * 1.01)), origin="lower",
                   aspect="auto")
    for r in rows:
        i, j = ds.index(r["D"]), ks.index(r["k"])
        if np.isfinite(grid[i, j]):
            ax.text(j, i, f"{grid[i, j]:.3g}x\n{_SHORT.get(r.get('best_variant'), r.get('best_variant'))}",
                    ha="center", va="center", fontsize=7, color="white" if grid[i, j] < np.sqrt(lo * hi) else "black")
        else:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.6", lw=0))
            label = "no\nvariant" if r.get("skipped") else ("error" if r.get("error") else "-")
            ax.text(j, i, label, ha="center", va="center", fontsize=7, color="0.3")
    ax.set_xticks(range(len(ks)), [str(k) for k in ks])
    ax.set_yticks(range(len(ds)), [str(d) for d in ds])
    ax.set_xlabel("k (clusters)")
    ax.set_ylabel("D (coordinates)")
    fig.colorbar(im, ax=ax, label="time per iteration / floor (log)")
    return finish_axes(fig, ax, meta, title, path)


STUDY = Study("kmeans_map", "kmeans", "k-means: the k x D map at N = 1M",
              "fastest loop-on-the-GPU variant's time per iteration over its floor (bytes / measured HBM bandwidth "
              "or FLOPs / FP32 peak) for k 3..1024 x D 2..128 at N = 1,000,000",
              MAP_VARIANTS, MAP_COLUMNS, run_kmeans_map, table_kmeans_map, figures=plot_kmeans_map,
              outputs=(Output("kmeans_map.png"),), opt_in=True, gpu_only=True)
