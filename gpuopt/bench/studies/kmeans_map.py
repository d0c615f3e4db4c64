"""kmeans_map (opt-in, GPU only): where the k-means loop stands over k x D. At N = 1,000,000 points (uniform in
(0, 1], seeded, never zero), D in 2..1024 and k in 2..32768: the time per loop iteration of ``auto`` (what a user
gets, device-resident, threshold 0), the same loop in PyTorch (strict FP32, five lines: the distances by row blocks
of at most 2 GiB, baselines.torch_lloyd), and the floor, max(one pass's bytes / the HBM bandwidth measured in the
same run, 2 N k D FLOP / the FP32 peak); the ratios auto / floor and PyTorch / auto -> kmeans_map.csv/.json and two
heat maps, kmeans_map.png (auto over its floor) and kmeans_map_torch.png (auto's speedup over PyTorch). Then
flash-kmeans' published shape, 8M x 128, k = 1024, in float32 and float16 points (gpuopt widens float16 points to
float32 on the device once a call, so its float16 row times the float32 loop; PyTorch's loop runs in float16).

The time per iteration is the marginal loop, (a call of ``MAP_ITERS`` loops - a call of one) / (MAP_ITERS - 1): the
call's fixed costs (launch, the stop-flag copy, the initial centres, the float16 widening) taken out; one no longer
than nothing is not a time (the cell says "unresolved"). Cells are skipped, and say why,
where ``auto`` has no GPU loop for the shape (it would run on the CPU) or where the loop's buffers (the points, the
memberships, device_tiled's k*D float64 chunk sums a 1024 points) would pass 80% of the GPU's memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

import gpuopt

from ..baselines import strict_torch, torch_lloyd
from ..figures import empty_axes, finish_axes, pyplot
from ..floors import compute_floor_us, fp32_peak, memory_floor_us
from ..harness import Progress, measure
from ..study import Output, RunSettings, Study, StudyResult, error_text, per_level, release_gpu_cache, repeats
from ..tables import errors_note, fmt_cell, format_table

__all__ = ["STUDY"]

MAP_K: dict[Any, tuple[int, ...]] = per_level(gpu_full=(2, 8, 32, 128, 512, 2048, 8192, 32768),
                                              gpu_quick=(2, 32, 512, 8192), tiny=(2, 8))
MAP_D: dict[Any, tuple[int, ...]] = per_level(gpu_full=(2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
                                              gpu_quick=(2, 16, 128, 1024), tiny=(2, 4))
#: flash-kmeans' published shape (N, D, k), in float32 and float16 points (full runs only)
FLASH_SHAPE = (8_000_000, 128, 1024)
MAP_ITERS = 3
MAP_SEED = 0
MAP_N: dict[Any, int] = per_level(gpu_full=1_000_000, gpu_quick=200_000, tiny=2_000)
MAP_REPEATS: dict[Any, dict[str, Any]] = per_level(gpu_full=repeats(2, 7, 2.0), gpu_quick=repeats(1, 2, 0.5),
                                                   tiny=repeats(0, 1))
#: the device memory a cell may plan for (its buffers over the GPU's total)
MEMORY_SHARE = 0.8
#: bytes of the device-to-device copy that measures the HBM bandwidth (read + write counted)
BANDWIDTH_BYTES = 1 << 30
MAP_COLUMNS = ("N", "D", "k", "dtype", "auto_variant", "us_per_iter", "call_us_per_iter", "torch_us_per_iter",
               "floor_us", "memory_floor_us", "compute_floor_us", "bound", "x_floor", "x_pytorch", "skipped",
               "unresolved", "error")


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


def loop_bytes(n: int, d: int, k: int) -> int:
    """Device bytes a cell's loop holds: the points, the memberships, device_tiled's chunk sums (k*D float64 a
    chunk of 1024 points) and the PyTorch loop's distance block (2 GiB at most)."""
    return n * d * 4 + n * 4 + -(-n // 1024) * k * d * 8 + min(n * k * 4, 1 << 31)


def why_skipped(n: int, d: int, k: int, memory: int) -> str | None:
    """Why a cell is not run (None: it is): auto without a GPU loop, or buffers past MEMORY_SHARE of memory."""
    from ...kmeans.auto import auto_choice

    pick = auto_choice(n, d, k)
    if pick in ("cpu", "liao_vec"):
        return f"auto has no loop on the GPU for k = {k}, D = {d} (it would run {pick})"
    need = loop_bytes(n, d, k)
    if memory and need > MEMORY_SHARE * memory:
        return f"{need / 2**30:.0f} GiB of buffers, over {MEMORY_SHARE:.0%} of the GPU's {memory / 2**30:.0f} GiB"
    return None


def _marginal(call: Any, reps: Mapping[str, Any]) -> tuple[float | None, float]:
    """(marginal µs a loop, µs a loop of the whole call) of ``call(iters)``; the marginal is None where the
    longer call measured no slower than the one-loop call (noise larger than the loops: not a time)."""
    many = measure(lambda: call(MAP_ITERS), device="gpu", flush_l2=True, **reps)
    one = measure(lambda: call(1), device="gpu", flush_l2=True, **reps)
    marginal = (many.median_ms - one.median_ms) * 1e3 / (MAP_ITERS - 1)
    return (marginal if marginal > 0 else None), many.median_ms * 1e3 / MAP_ITERS


def _cell(x_dev: Any, x_np: np.ndarray, k: int, reps: Mapping[str, Any], torch_ok: bool, row: dict[str, Any]) -> None:
    """auto's and PyTorch's marginal loops of one cell into ``row``, with the ratios."""
    from ...kmeans.auto import auto_choice

    n, d = x_np.shape
    row["auto_variant"] = auto_choice(n, d, k)
    row["us_per_iter"], row["call_us_per_iter"] = _marginal(
        lambda iters: gpuopt.kmeans(x_dev, k, threshold=0.0, max_iter=iters).iterations, reps)
    if torch_ok:
        lloyd = {it: torch_lloyd(x_dev, k, it) for it in (1, MAP_ITERS)}
        row["torch_us_per_iter"], _ = _marginal(lambda iters: lloyd[iters](), reps)
    for who in ("us_per_iter", "torch_us_per_iter"):
        if who in row and row[who] is None:
            row["unresolved"] = (row.get("unresolved", "") + f" {who}: the {MAP_ITERS}-loop call measured no slower "
                                 "than the 1-loop call").strip()
    if row.get("floor_us") and row["us_per_iter"]:
        row["x_floor"] = row["us_per_iter"] / row["floor_us"]
    if row.get("torch_us_per_iter") and row["us_per_iter"]:
        row["x_pytorch"] = row["torch_us_per_iter"] / row["us_per_iter"]


def run_kmeans_map(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    n, ks, ds = plan.pick(MAP_N), plan.pick(MAP_K), plan.pick(MAP_D)
    reps = plan.pick(MAP_REPEATS)
    gpu = gpuopt.device_info() or {}
    memory = int(gpu.get("total_memory_bytes") or 0)
    gflops, formula = fp32_peak(gpu)
    bandwidth = measured_bandwidth(reps)
    torch_ok = strict_torch() is not None
    res.meta.update(N=n, iterations=MAP_ITERS, data_seed=MAP_SEED, repeats=reps, hbm_bandwidth_gbs=bandwidth / 1e9,
                    fp32_peak_gflops=gflops, torch=torch_ok,
                    inputs=f"1 - numpy default_rng({MAP_SEED}).random((N, D)) float32: uniform in (0, 1], never 0; "
                           "on the device (a torch tensor) before timing",
                    timing=f"marginal loop: (a {MAP_ITERS}-loop call - a 1-loop call) / {MAP_ITERS - 1}, CUDA "
                           "events, L2 flushed, median over the repeats; threshold 0, first-k centres; PyTorch: "
                           "baselines.torch_lloyd, strict FP32",
                    floors=f"max(N (D + 2) x 4 bytes / {bandwidth / 1e12:.2f} TB/s (a {BANDWIDTH_BYTES >> 20} MiB "
                           f"device-to-device copy in this run), 2 N k D FLOP / {formula})")
    if not torch_ok:
        res.notes.append("kmeans_map: no torch with a GPU here: the PyTorch columns are empty")
    flash = [FLASH_SHAPE] if plan.level == "full" else []
    with Progress(len(ks) * len(ds) + 2 * len(flash), "kmeans_map", enabled=plan.progress) as prog:
        for d in ds:
            x = 1.0 - np.random.default_rng(MAP_SEED).random((n, d), dtype=np.float32)
            x_dev = _device(x)
            for k in ks:
                res.rows.append(_measured(x_dev, x, k, "float32", reps, torch_ok, memory, bandwidth, gflops, res))
                prog.update(f"k={k} D={d}")
            del x_dev
            release_gpu_cache(plan)
        for fn, fd, fk in flash:
            x = 1.0 - np.random.default_rng(MAP_SEED).random((fn, fd), dtype=np.float32)
            for dtype in ("float32", "float16"):
                x_dev = _device(x, dtype)
                res.rows.append(_measured(x_dev, x, fk, dtype, reps, torch_ok, memory, bandwidth, gflops, res))
                prog.update(f"{fn} x {fd}, k={fk}, {dtype}")
                del x_dev
                release_gpu_cache(plan)
    return res


def _device(x: np.ndarray, dtype: str = "float32") -> Any:
    """x on the device: a torch tensor where torch is here (what a user clustering embeddings holds), else a
    gpuopt DeviceArray."""
    torch = strict_torch()
    if torch is None:
        return gpuopt.to_device(x)
    t = torch.as_tensor(x, device="cuda")
    return t.half() if dtype == "float16" else t


def _measured(x_dev: Any, x: np.ndarray, k: int, dtype: str, reps: Mapping[str, Any], torch_ok: bool, memory: int,
              bandwidth: float, gflops: float | None, res: StudyResult) -> dict[str, Any]:
    n, d = x.shape
    row: dict[str, Any] = dict(N=n, D=d, k=k, dtype=dtype, **map_floor(n, d, k, bandwidth, gflops))
    try:
        row["skipped"] = why_skipped(n, d, k, memory)
        if not row["skipped"]:
            _cell(x_dev, x, k, reps, torch_ok, row)
    except Exception as exc:  # noqa: BLE001
        row["error"] = error_text(exc)
        res.notes.append(f"kmeans_map {n} x {d}, k={k}, {dtype}: {row['error']}")
    return row


def table_kmeans_map(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """Per (k, D): auto's pick and µs per loop, PyTorch's, the floor and which bound it is, the ratios."""
    body = [[r["N"], r["k"], r["D"], r.get("dtype", "float32"), r.get("auto_variant") or "-",
             fmt_cell(r.get("us_per_iter"), ".4g"), fmt_cell(r.get("call_us_per_iter"), ".4g"),
             fmt_cell(r.get("torch_us_per_iter"), ".4g"),
             fmt_cell(r.get("floor_us"), ".3g"), r.get("bound") or "-", fmt_cell(r.get("x_floor"), ".3g"),
             fmt_cell(r.get("x_pytorch"), ".3g"), r.get("skipped") or r.get("unresolved") or ""] for r in rows]
    ratios = [r["x_pytorch"] for r in rows if r.get("x_pytorch") and r.get("dtype", "float32") == "float32"]
    summary = ""
    if ratios:
        summary = (f"auto over PyTorch on the float32 map: min {min(ratios):.3g}x, median "
                   f"{float(np.median(ratios)):.3g}x, {sum(v < 1 for v in ratios)} of {len(ratios)} cells below 1x\n")
    head = (f"N = {(meta or {}).get('N', rows[0]['N'] if rows else '?')}, marginal µs per loop of auto and of the "
            f"PyTorch Lloyd loop (strict FP32); beside auto's, what a {MAP_ITERS}-loop call pays per loop (its fixed "
            "costs in); floor = max(memory, compute)\n") + summary
    return head + format_table(["N", "k", "D", "points", "auto picks", "auto µs", "call µs/loop", "PyTorch µs", "floor µs", "bound",
                                "auto/floor", "PyTorch/auto", "not run / not timed"], body) + errors_note(rows)


_SHORT = {"device": "dev", "device_fused": "fused", "device_gemm": "gemm", "device_tiled": "tiled",
          "device_persistent": "persist"}


def _heat_map(meta, rows, path: Path, value: str, label: str, what: str, higher_is_better: bool) -> Path:
    """k (x) x D (y) at N of the map (float32 rows), colour = rows' ``value`` on a log scale, the value and auto's
    pick in each cell; skipped cells hatched and labelled."""
    plt = pyplot()
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    fig, ax = plt.subplots(figsize=(12, 6.4))
    device = (meta.get("gpu") or {}).get("name", "no GPU")
    n = meta.get("N")
    title = (f"k-means loop, N = {n:,}" if isinstance(n, int) else "k-means loop") + f", {device}: {what}"
    rows = [r for r in rows if r.get("N") == n and r.get("dtype", "float32") == "float32"]
    if not rows:
        empty_axes(ax, "no measurements (placeholder until the H200 run: python benchmarks/run_all.py kmeans_map)")
        return finish_axes(fig, ax, meta, title, path)
    ks = sorted({r["k"] for r in rows})
    ds = sorted({r["D"] for r in rows})
    grid = np.full((len(ds), len(ks)), np.nan)
    for r in rows:
        if r.get(value) and r[value] > 0:
            grid[ds.index(r["D"]), ks.index(r["k"])] = r[value]
    finite = grid[np.isfinite(grid)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (1.0, 10.0)
    cmap = "viridis" if higher_is_better else "viridis_r"
    im = ax.imshow(grid, cmap=cmap, norm=LogNorm(vmin=min(lo, 1.0), vmax=max(hi, lo * 1.01, 1.01)), origin="lower",
                   aspect="auto")
    for r in rows:
        i, j = ds.index(r["D"]), ks.index(r["k"])
        if np.isfinite(grid[i, j]):
            dark = (grid[i, j] < np.sqrt(lo * hi)) == higher_is_better
            ax.text(j, i, f"{grid[i, j]:.3g}x\n{_SHORT.get(r.get('auto_variant'), r.get('auto_variant'))}",
                    ha="center", va="center", fontsize=7, color="white" if dark else "black")
        else:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.6", lw=0))
            why = "skipped" if r.get("skipped") else ("error" if r.get("error") else "-")
            ax.text(j, i, why, ha="center", va="center", fontsize=7, color="0.3")
    ax.set_xticks(range(len(ks)), [str(k) for k in ks])
    ax.set_yticks(range(len(ds)), [str(d) for d in ds])
    ax.set_xlabel("k (clusters)")
    ax.set_ylabel("D (coordinates)")
    fig.colorbar(im, ax=ax, label=label)
    return finish_axes(fig, ax, meta, title, path)


def plot_kmeans_map(meta, rows, path: Path) -> list[Path]:
    """kmeans_map.png (auto's time per iteration over its floor) and kmeans_map_torch.png (PyTorch's over auto's)."""
    floor = _heat_map(meta, rows, path, "x_floor", "auto's time per iteration / floor (log)",
                      "auto's time per iteration / its floor\nfloor = max(one pass's bytes / HBM bandwidth measured "
                      "in the run, 2 N k D FLOP / FP32 peak)", higher_is_better=False)
    torch = _heat_map(meta, rows, path.with_name("kmeans_map_torch.png"), "x_pytorch",
                      "PyTorch's time per iteration / auto's (log)",
                      "auto's speedup over the PyTorch Lloyd loop (strict FP32), device-resident",
                      higher_is_better=True)
    return [floor, torch]


STUDY = Study("kmeans_map", "kmeans", "k-means: the k x D map at N = 1M",
              "auto's time per iteration against the PyTorch Lloyd loop and its floor (bytes / measured HBM "
              "bandwidth or FLOPs / FP32 peak) for k 2..32768 x D 2..1024 at N = 1,000,000, and flash-kmeans' "
              "8M x 128, k = 1024 in float32 and float16",
              ("auto",), MAP_COLUMNS, run_kmeans_map, table_kmeans_map, figures=plot_kmeans_map,
              outputs=(Output("kmeans_map.png"), Output("kmeans_map_torch.png")), opt_in=True, gpu_only=True)
