"""kmeans_loop: the k-means loop per iteration on device-resident points, beside a five-line PyTorch Lloyd loop
and the floor -> kmeans_loop.csv/.json/.png (time per iteration against the memory and compute floors).

The points are uniform in [0, 1)^D (no cluster structure: memberships keep changing, so threshold 0 runs all
``LOOP_ITERS`` loops, max_iter = LOOP_ITERS, Liao's first-k initialisation); the time of
one call (CUDA events around it after warm-up, median; points already on the device, results left there) over the
loops it ran. The liao ladder keeps its loop on the host (its design); ``device`` keeps it on the GPU (two kernels
a loop), ``device_fused`` in one kernel a loop, ``device_gemm`` with the dot-form assignment (k*D <= 4096),
``device_tiled`` the same form register-tiled with sorted sums (its screen's products on the tensor cores in
3xTF32 where ``products="auto"`` picks them, 4 < D <= 16), ``device_persistent`` device's loop with the whole
run in one cooperative launch (k*D <= 1024);
``auto`` is what ``variant=None`` picks for the shape; ``stream`` runs device's (or device_gemm's) loop on the
points left in host memory (NumPy, page-locked in place for the call), streamed through device slabs every loop:
its floor is the host link (``host_floor_us``: the points once at the pinned host-to-device bandwidth measured in
the run) and ``x_in_memory`` its marginal loop over the fastest device-resident one's; ``predict``
is one assignment pass alone (``kmeans_predict``'s device variant, the first k points as centres). PyTorch:
distances by matrix product (||c||^2 - 2 x.c, FP32 with TF32 off), argmin, index_add_ of the sums, bincount of
the counts, the same first-k start. Floors: the points read once (and the memberships read and written) at the
DRAM bandwidth; the Liao-exact assignment's sub, mul and add per object, centre and coordinate (no fused
multiply-add: three FP32 instructions) at the FP32 instruction rate; the dot form's one FMA per object, centre
and coordinate at the FP32 peak (``dot_floor_us``, device_gemm's floor).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

import gpuopt

from ..baselines import strict_torch, torch_lloyd
from ..figures import empty_axes, finish_axes, grouped_bars, headroom, log_if_wide, pyplot, short_number
from ..floors import compute_floor_us, dram_bandwidth, fp32_peak, memory_floor_us
from ..harness import Progress, measure
from ..study import Output, RunSettings, Study, StudyResult, error_text, per_level, release_gpu_cache, repeats, to_host
from ..tables import errors_note, fmt_cell, format_table, skipped_note

__all__ = ["STUDY"]

#: (label, N, D, k): the CMU report's largest set (kmeans04) and two large synthetic sets (1M x 16, 10M x 16).
LOOP_SHAPES = (("kmeans04", 488_565, 8, 3), ("1M x 16", 1_000_000, 16, 64), ("10M x 16", 10_000_000, 16, 256))
LOOP_ITERS = 10
LOOP_VARIANTS = ("liao", "liao_occupancy", "liao_aos", "liao_vec", "device", "device_fused", "device_gemm",
                 "device_tiled", "device_persistent", "stream", "auto")
LOOP_SEED = 0
# Most objects per set, and the timing repeats, per plan.
LOOP_MAX_N: dict[Any, int | None] = per_level(
    gpu_full=None, gpu_quick=1_000_000, cpu_full=100_000, cpu_quick=20_000, tiny=2_000)
LOOP_REPEATS: dict[Any, dict[str, Any]] = per_level(gpu_full=repeats(2, 10, 10.0), gpu_quick=repeats(1, 3, 3.0),
    cpu_full=repeats(1, 3, 10.0), cpu_quick=repeats(0, 1), tiny=repeats(0, 1))
LOOP_COLUMNS = ("dataset", "N", "D", "k", "variant", "iterations", "us_per_iter", "call_ms", "call_min_ms",
                "call_max_ms", "repeats", "marginal_us_per_iter", "memory_floor_us", "compute_floor_us",
                "dot_floor_us", "host_floor_us", "x_floor", "x_pytorch", "x_in_memory", "differ_liao", "skipped",
                "error")


def _floors(n: int, d: int, k: int) -> tuple[float | None, float | None, float | None]:
    """(memory floor, Liao-exact compute floor, dot-form compute floor) of one loop in µs, from this GPU's
    properties."""
    gpu = gpuopt.device_info()
    if not gpu:
        return None, None, None
    bw = dram_bandwidth(gpu)
    gflops, _ = fp32_peak(gpu)
    memory = memory_floor_us(n * d * 4 + n * 4 * 2, bw)
    # Liao's unfused sub, mul, add: 3 N k D instructions at half the FLOP rate (an FMA is one instruction, 2 FLOP).
    compute = compute_floor_us(3.0 * n * k * d, gflops / 2 if gflops else None)
    dot = compute_floor_us(2.0 * n * k * d, gflops)  # one FMA (2 FLOP) per object, centre, coord
    return memory, compute, dot


def host_to_device_bandwidth() -> float | None:
    """Pinned host-to-device bytes/s of this machine (256 MiB through PyTorch's pinned memory, median of 5), or None
    without PyTorch: the stream variant's floor."""
    torch = strict_torch()
    if torch is None:
        return None
    src = torch.empty(256 << 20, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    st = measure(lambda: dst.copy_(src, non_blocking=True), device="gpu", warmup=2, repeat=5)
    return (256 << 20) / (st.median_ms * 1e-3)


#: loop-on-the-GPU variants also timed at max_iter=1: their marginal loop, the call's fixed costs taken out
MARGINAL_VARIANTS = ("device", "device_fused", "device_gemm", "device_tiled", "device_persistent", "stream", "auto")
#: the in-memory loop variants stream's marginal loop is compared with
IN_MEMORY_VARIANTS = ("device", "device_fused", "device_gemm", "device_tiled", "device_persistent")
#: variants whose assignment is the dot form (their floor: the FMAs, not Liao's three instructions)
DOT_VARIANTS = ("device_gemm", "device_tiled", "auto")


def run_kmeans_loop(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    max_n = plan.pick(LOOP_MAX_N)
    reps = plan.pick(LOOP_REPEATS)
    names = [v for v in LOOP_VARIANTS if v in gpuopt.variants("kmeans")] if plan.gpu else ["cpu"]
    gpu = gpuopt.device_info() or {}
    gflops, formula = fp32_peak(gpu)
    res.meta.update(iterations=LOOP_ITERS, data_seed=LOOP_SEED, repeats=reps,
                    inputs=f"uniform [0, 1) float32 (numpy default_rng({LOOP_SEED}).random((N, D))), on the device "
                           "before timing",
                    timing="one call's CUDA-event time (points on the device, results left there), median over "
                           "the repeats after warm-up, over the loops it ran: µs per iteration",
                    floors=f"memory: (N D + 2 N) x 4 bytes / {dram_bandwidth(gpu) / 1e12:.2f} TB/s (2 x DRAM clock x "
                           f"bus width); compute: 3 N k D FP32 instructions (Liao's unfused sub, mul, add) at "
                           f"{formula} / 2 instructions per second; dot: 2 N k D FLOP (one FMA each) at {formula} "
                           "(device_gemm's, device_tiled's and auto's x floor)" if gpu else "no GPU",
                    pytorch="distances by x @ c.T (FP32, TF32 off), argmin, bincount, index_add_; same first-k start")
    if max_n is not None and any(n > max_n for _, n, _, _ in LOOP_SHAPES):
        res.notes.append(f"data sets cut to at most {max_n} objects in this mode (see the N column)")
    torch_ok = plan.gpu and strict_torch() is not None
    host_bw = host_to_device_bandwidth() if torch_ok and "stream" in names else None
    res.meta["host_to_device_gbs"] = host_bw / 1e9 if host_bw else None
    if plan.gpu and not torch_ok:
        res.notes.append("PyTorch with CUDA not importable: no PyTorch rows")
    total = len(LOOP_SHAPES) * (len(names) + (2 if torch_ok else 1) if plan.gpu else len(names))
    with Progress(total, "kmeans_loop", enabled=plan.progress) as prog:
        for label, n_full, d, k in LOOP_SHAPES:
            n = n_full if max_n is None else min(n_full, max_n)
            x = np.random.default_rng(LOOP_SEED).random((n, d), dtype=np.float32)
            x_in = gpuopt.to_device(x) if plan.gpu else x
            memory, compute, dot = _floors(n, d, k)
            liao_floor = max(f for f in (memory, compute, 0.0) if f is not None)
            dot_floor = max(f for f in (memory, dot, 0.0) if f is not None)
            rows, memberships = [], {}
            extra = (["predict"] if plan.gpu else []) + (["pytorch"] if torch_ok else [])
            for name in names + extra:
                row: dict[str, Any] = dict(dataset=label, N=n, D=d, k=k, variant=name, memory_floor_us=memory,
                                           compute_floor_us=compute, dot_floor_us=dot)
                floor = dot_floor if name in DOT_VARIANTS else liao_floor
                if name == "stream":
                    row["host_floor_us"] = n * d * 4 / host_bw * 1e6 if host_bw else None
                    floor = max(row["host_floor_us"] or 0.0, dot_floor if k * d > 1024 else liao_floor)
                try:
                    if name == "pytorch":
                        fn, iters = torch_lloyd(x, k, LOOP_ITERS), LOOP_ITERS
                    elif name == "predict":  # one assignment pass (kmeans_predict's device variant)
                        centres = gpuopt.to_device(np.ascontiguousarray(x[:k]))
                        fn, iters = (lambda centres=centres: gpuopt.kmeans_predict(x_in, centres, variant="device")), 1
                    else:
                        # stream: the points stay in host memory (NumPy in, NumPy out).
                        src = x if name == "stream" else x_in
                        fn = (lambda name=name, src=src: gpuopt.kmeans(src, k, threshold=0.0, max_iter=LOOP_ITERS,
                                                                       variant=name))
                        out = fn()
                        iters, memberships[name] = out.iterations, to_host(out.membership)
                    st = measure(fn, device="gpu" if plan.gpu else "cpu", flush_l2=plan.gpu, **reps)
                    row.update(iterations=iters, us_per_iter=st.median_ms * 1e3 / iters, call_ms=st.median_ms,
                               call_min_ms=st.min_ms, call_max_ms=st.max_ms, repeats=st.repeats,
                               x_floor=st.median_ms * 1e3 / iters / floor if floor else None)
                    if plan.gpu and name in MARGINAL_VARIANTS and iters > 1:
                        # A loop without the call's fixed costs: (the call of `iters` loops - a call of one) / the rest.
                        one = measure(lambda name=name, src=src: gpuopt.kmeans(src, k, threshold=0.0, max_iter=1,
                                                                               variant=name),
                                      device="gpu", flush_l2=True, **reps)
                        row["marginal_us_per_iter"] = (st.median_ms - one.median_ms) * 1e3 / (iters - 1)
                except ValueError as exc:  # the variant rejects the shape up front (device: k*D > 1024)
                    row["skipped"] = error_text(exc)
                    res.notes.append(f"kmeans_loop {label} {name}: not applicable: {row['skipped']}")
                except Exception as exc:  # noqa: BLE001
                    row["error"] = error_text(exc)
                    res.notes.append(f"kmeans_loop {label} {name}: {row['error']}")
                rows.append(row)
                prog.update(f"{label} {name}")
            torch_us = next((r.get("us_per_iter") for r in rows if r["variant"] == "pytorch"), None)
            liao = memberships.get("liao")
            in_memory = [r["marginal_us_per_iter"] for r in rows
                         if r["variant"] in IN_MEMORY_VARIANTS and r.get("marginal_us_per_iter")]
            for row in rows:
                if row["variant"] == "stream" and row.get("marginal_us_per_iter") and in_memory:
                    row["x_in_memory"] = row["marginal_us_per_iter"] / min(in_memory)
            for row in rows:
                if torch_us and row.get("us_per_iter") and row["variant"] != "pytorch":
                    row["x_pytorch"] = torch_us / row["us_per_iter"]
                if liao is not None and row["variant"] in memberships:
                    row["differ_liao"] = int(np.count_nonzero(memberships[row["variant"]] != liao))
            res.rows.extend(rows)
            del x_in
            release_gpu_cache(plan)
    return res


def table_kmeans_loop(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """Per data set and variant: µs per iteration, over its floor, x PyTorch, memberships differing from liao."""
    body = [[r["dataset"], f"{r['N']}x{r['D']}", r["k"], r["variant"], fmt_cell(r.get("us_per_iter"), ".4g"),
             fmt_cell(r.get("marginal_us_per_iter"), ".4g"),
             fmt_cell(r.get("memory_floor_us"), ".3g"), fmt_cell(r.get("compute_floor_us"), ".3g"),
             fmt_cell(r.get("dot_floor_us"), ".3g"), fmt_cell(r.get("host_floor_us"), ".3g"),
             fmt_cell(r.get("x_floor"), ".3g"),
             fmt_cell(r.get("x_pytorch"), ".3g"), fmt_cell(r.get("x_in_memory"), ".3g"), fmt_cell(r.get("differ_liao"))]
            for r in rows]
    return (f"{(meta or {}).get('iterations', LOOP_ITERS)} loops a call, device-resident points; 'x PyTorch' = the "
            "PyTorch loop's time over this one (same run); 'marginal' = (a call's time - a one-loop call's) / (loops - "
            "1), the loop without the call's fixed costs; floors per loop; stream: points in host memory, "
            "'x in-memory' = its marginal loop over the fastest device-resident one's\n"
            + format_table(["data set", "N x D", "k", "variant", "µs/iter", "marginal µs/iter", "mem floor µs",
                            "Liao compute floor µs", "dot floor µs", "host link floor µs", "x floor", "x PyTorch",
                            "x in-memory", "differ from liao"], body)
            + errors_note(rows) + skipped_note(rows))


def plot_kmeans_loop(meta, rows, path: Path) -> Path:
    """µs per iteration per data set, a bar per variant (log scale when wide), the floor in the labels."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 5.5))
    good = [r for r in rows if r.get("us_per_iter")]
    if not good:
        empty_axes(ax, "no successful measurements")
        return finish_axes(fig, ax, meta, "k-means loop: time per iteration", path)
    sets = list(dict.fromkeys(r["dataset"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in good))
    by = {(r["dataset"], r["variant"]): r for r in good}
    values = grouped_bars(ax, sets, variants,
                          lambda s, v: by[(s, v)]["us_per_iter"] if (s, v) in by else None,
                          lambda s, v: short_number(by[(s, v)]["us_per_iter"]),
                          names={"predict": "predict (one pass)", "pytorch": "PyTorch Lloyd loop"})
    first = {r["dataset"]: r for r in rows}

    def floor_text(r):
        f = [x for x in (r.get("memory_floor_us"), r.get("compute_floor_us")) if x is not None]  # Liao's
        return f"\nfloor {short_number(max(f))} µs" if f else ""
    def missing_text(s):  # variants measured elsewhere but not on this data set (k*D past their limit, say)
        gone = [r for r in rows if r["dataset"] == s and r["variant"] in variants and (s, r["variant"]) not in by]
        why = " (k*D over their limit)" if gone and all("k*D" in str(r.get("skipped")) for r in gone) else ""
        return f"\nnot run: {', '.join(r['variant'] for r in gone)}{why}" if gone else ""
    ax.set_xticklabels([f"{s}\n{first[s]['N']}x{first[s]['D']}, k={first[s]['k']}{floor_text(first[s])}"
                        f"{missing_text(s)}" for s in sets], fontsize=8)
    log = log_if_wide(ax, values, 20)
    headroom(ax, values)
    ax.set_xlabel("data set (objects x coordinates, clusters)")
    ax.set_ylabel("time per loop iteration (µs)" + (", log scale" if log else ""))
    return finish_axes(fig, ax, meta, f"k-means loop on device-resident points ({LOOP_ITERS} loops a call): "
                                  "time per iteration", path)


STUDY = Study("kmeans_loop", "kmeans", "k-means: the loop per iteration",
              "time per loop iteration on device-resident points of every GPU k-means variant beside a PyTorch "
              "Lloyd loop and the memory and compute floors (kmeans04, 1M x 16 k=64, 10M x 16 k=256)",
              LOOP_VARIANTS, LOOP_COLUMNS, run_kmeans_loop, table_kmeans_loop, figures=plot_kmeans_loop,
              outputs=(Output("kmeans_loop.png", ops=(("kmeans_predict", ("device",)),)),))
