"""kmeans_multi (opt-in, GPU only, torch needed): k-means past one GPU. ``gpuopt.distributed.kmeans`` on 1, 2, 3
and 4 GPUs of this host (as many as it has), one process each launched by ``torchrun``, the group sums all-gathered
over NCCL -> kmeans_multi.csv/.json/.png.

Per shape (40M x 16, k=256; the same with a ragged N, 40,000,001; 8M x 128, k=1024; and a weak-scaling point, as
many points of 16 coordinates as ``MULTI_WEAK_PER_GPU`` a GPU): the marginal time a loop, (a call of
``MULTI_ITERS`` loops - a call of one) / (MULTI_ITERS - 1), the slowest rank's wall clock around the calls (what
the run waits for), median over the repeats; the exchange apart (CUDA events around each loop's all-gather as the
loop's stream sees it, the median loop after the first, which also waits out the ranks' different start times; and
the all-gather alone, the same bytes in a loop of its own); speedup over one GPU's distributed run, over
``gpuopt.kmeans`` on one GPU (``auto``, the same loop, measured in the one-GPU process) and over the PyTorch Lloyd
loop on one GPU (``baselines.torch_lloyd``, strict FP32, timed the same way: the whole-system alternative),
efficiency = speedup / GPUs; and whether the centres, delta history, loop count and every membership are those bits
on every rank count (SHA-256 compared: the memberships joined from every rank's shard).

On the most GPUs only, two memory points (16 coordinates, k=256, each rank its own rows): the largest N whose
points, memberships and chunk sums fit the GPUs' free memory (``x_memory="device"``), and a shard of each rank
streamed from page-locked host memory (``x_memory="stream"``) with more points than that, as many as the host's
memory allows (said where it is fewer); a loop of each timed (``MULTI_LIMIT_ITERS`` loops - one).
The points are uniform in [0, 1) from torch's CUDA generator (seeded), made on each GPU, which keeps its rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..figures import empty_axes, finish_axes, pyplot
from ..study import Output, RunSettings, Study, StudyResult, error_text, per_level
from ..tables import errors_note, fmt_cell, format_table

__all__ = ["STUDY", "worker"]

#: (name, N, D, k[, overlap]) a shape; "weak" is sized per GPU count (MULTI_WEAK_PER_GPU points a GPU); "largest"
#: and "streamed" by the GPUs' and the host's memory, on the most GPUs only (MULTI_LIMITS). overlap: the call's
#: (default None: the exchange in two all-gathers over NCCL, the first under the loop's kernels).
MULTI_SHAPES = per_level(
    gpu_full=(("40M x 16, k=256", 40_000_000, 16, 256), ("40M x 16, k=256, one all-gather", 40_000_000, 16, 256, False),
              ("40,000,001 x 16, k=256", 40_000_001, 16, 256),
              ("8M x 128, k=1024", 8_000_000, 128, 1024), ("weak: 16, k=256", None, 16, 256)),
    gpu_quick=(("4M x 16, k=256", 4_000_000, 16, 256), ("1M x 128, k=1024", 1_000_000, 128, 1024)),
    tiny=(("200k x 16, k=64", 200_000, 16, 64),))
MULTI_LIMITS = per_level(gpu_full=(("largest resident: 16, k=256", "largest", 16, 256),
                                   ("streamed from host: 16, k=256", "streamed", 16, 256)), gpu_quick=(), tiny=())
MULTI_WEAK_PER_GPU = 800_000_000  # 51 GB of points a GPU, 25 GB of chunk sums, and one GPU's run beside them
MULTI_ITERS = 11
MULTI_LIMIT_ITERS = 3
MULTI_REPEATS = per_level(gpu_full=3, gpu_quick=2, tiny=1)
MULTI_GPUS = (1, 2, 3, 4)
#: Device memory a rank leaves free beside the largest resident shard (NCCL, the CUDA context, torch's cache).
MULTI_DEVICE_SPARE = 6 << 30
#: The share of the host's available memory the streamed shards may take together.
MULTI_HOST_SHARE = 0.75
MULTI_SEED = 0
MULTI_COLUMNS = ("shape", "N", "D", "k", "gpus", "overlap", "loop", "ms_per_loop", "call_ms", "exchange_ms_per_loop",
                 "exchange_ms_first", "allgather_ms", "exchange_share", "slot_mb", "single_gpu_ms_per_loop",
                 "event_ms_per_loop", "speedup_vs_1", "speedup_vs_single", "torch_ms_per_loop",
                 "speedup_vs_torch", "efficiency", "identical", "iterations",
                 "x_memory", "shard_gb", "error")
#: NCCL here: NVLink multicast (NVLS) off, as the device machines' README asks.
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _digest(*arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def worker(spec: Mapping[str, Any], out_path: str) -> None:
    """One rank of a ``torchrun`` launch: every shape of ``spec``, timed; rank 0 writes the rows to ``out_path``,
    every rank its memberships of the strong shapes to ``spec["labels_dir"]`` (joined by the launching process)."""
    import datetime

    import torch
    import torch.distributed as dist

    from gpuopt.distributed import TorchCommunicator

    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=900))
    comm = TorchCommunicator(timeout=900)
    rows = []
    for i, (name, n, d, k, *overlap) in enumerate(spec["shapes"]):
        row: dict[str, Any] = dict(shape=name, D=d, k=k, gpus=size, overlap=(overlap or [None])[0])
        try:
            row.update(_shape(spec, comm, torch, dist, rank, size, i, n, d, k, row["overlap"]))
        except Exception as exc:  # noqa: BLE001
            row["error"] = error_text(exc)
        torch.cuda.empty_cache()
        import gpuopt
        gpuopt.cuda.empty_cache()
        rows.append(row)
    if rank == 0:
        Path(out_path).write_text(json.dumps(rows))
    dist.destroy_process_group()


def _shape(spec: Mapping[str, Any], comm: Any, torch: Any, dist: Any, rank: int, size: int, index: int,
           n: int | str | None, d: int, k: int, overlap: bool | None) -> dict[str, Any]:
    """One shape's row on this rank (the timings are the slowest rank's)."""
    import gpuopt
    from gpuopt.distributed import shard_bounds
    from gpuopt.distributed.kmeans_device import loop_for

    row: dict[str, Any] = {}
    x, iters, x_memory = None, MULTI_ITERS, "device"
    if n is None or isinstance(n, str):  # every rank its own rows: no run on fewer GPUs holds them to compare
        total = MULTI_WEAK_PER_GPU * size if n is None else _limit_rows(comm, torch, size, d, k, n, row) * size
        a, b = shard_bounds(total, size)[rank]
        if n == "streamed":
            shard, x_memory = _host_rows(torch, spec["seed"], rank, b - a, d), "stream"
        else:
            shard = _rows(spec["seed"], rank, b - a, d)
        iters = MULTI_ITERS if n is None else MULTI_LIMIT_ITERS
        row["memory_point"], row["own_rows"] = n is not None, True
        n = total
    else:
        # The whole data on every GPU (the same points on every rank count), each rank calling with its rows.
        x = torch.rand((n, d), generator=torch.Generator(device="cuda").manual_seed(spec["seed"]), device="cuda")
        a, b = shard_bounds(n, size)[rank]
        shard = x[a:b]
    row.update(N=n, loop=loop_for(n, d, k), x_memory=x_memory, shard_gb=(b - a) * d * 4 / 1e9)
    repeats = spec["repeats"] if iters == MULTI_ITERS else 1

    def call(loops: int, timing: bool = False) -> Any:
        return gpuopt.distributed.kmeans(shard, k, threshold=0.0, max_iter=loops, comm=comm, timing=timing,
                                         loops_per_sync=loops, x_memory=x_memory, overlap=overlap)

    many, one = [], []
    for _ in range(repeats + 1):  # the first of each: warm-up
        for loops, into in ((iters, many), (1, one)):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            call(loops)
            into.append(time.perf_counter() - t0)
    slowest = np.max(comm.all_gather(np.array([[np.median(many[1:]), np.median(one[1:])]])), axis=0)[0]
    row["call_ms"] = slowest[0] * 1e3
    row["ms_per_loop"] = (slowest[0] - slowest[1]) * 1e3 / (iters - 1)
    result, t = call(iters, timing=True)
    row["event_ms_per_loop"] = t.details["loop_ms"] / iters
    row["exchange_ms_per_loop"] = t.details["exchange_ms_steady"]
    row["exchange_ms_first"] = t.details["exchange_ms"] - t.details["exchange_ms_steady"] * (iters - 1)
    row["iterations"] = result.iterations
    digest = _digest(_host(result.centroids), result.delta, np.int64(result.iterations))
    digests = comm.all_gather(np.frombuffer(digest.encode(), np.uint8)[None])
    row["rank_digests_agree"] = all(bytes(g[0]).decode() == digest for g in digests)
    row["digest"] = digest
    if x_memory == "stream":
        torch.cuda.cudart().cudaHostUnregister(shard.ctypes.data)
    if x is not None:  # joined and hashed by the launching process, in rank order
        np.save(Path(spec["labels_dir"]) / f"{index}_{rank}.npy", _host(result.membership))
    row.update(_allgather(comm, torch, dist, n, d, k, size))
    if size == 1 and x is not None:
        row["single_gpu_ms_per_loop"] = _marginal_ms(
            torch, lambda loops: gpuopt.kmeans(x, k, threshold=0.0, max_iter=loops).centroids.numpy(), spec["repeats"])
        ref = gpuopt.kmeans(x, k, threshold=0.0, max_iter=MULTI_ITERS)
        row["single_digest"] = _digest(_host(ref.centroids), ref.delta, np.int64(ref.iterations))
        row["single_labels_digest"] = _digest(_host(ref.membership))
        row["torch_ms_per_loop"] = _torch_loop_ms(torch, x, k, spec["repeats"])
    return row


def _torch_loop_ms(torch: Any, x: Any, k: int, repeats: int) -> float | None:
    """The PyTorch Lloyd loop (baselines.torch_lloyd, strict FP32) on one GPU, marginal ms a loop as above: the
    whole-system alternative a user has without gpuopt."""
    from ..baselines import torch_lloyd

    calls = {it: torch_lloyd(x, k, it) for it in (MULTI_ITERS, 1)}
    return None if calls[1] is None else _marginal_ms(torch, lambda loops: calls[loops](), repeats)


def _marginal_ms(torch: Any, call: Any, repeats: int) -> float:
    """One GPU's marginal ms a loop of ``call(loops)``: (MULTI_ITERS loops - one) / (MULTI_ITERS - 1), wall clock from
    an idle GPU until the call's work is done, median of ``repeats`` after a warm-up each."""
    def timed(loops: int) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        call(loops)
        torch.cuda.synchronize()
        return time.perf_counter() - t0
    many = [timed(MULTI_ITERS) for _ in range(repeats + 1)][1:]
    one = [timed(1) for _ in range(repeats + 1)][1:]
    return (np.median(many) - np.median(one)) * 1e3 / (MULTI_ITERS - 1)


def _host(a: Any) -> np.ndarray:
    return a if isinstance(a, np.ndarray) else a.numpy()


def _limit_rows(comm: Any, torch: Any, size: int, d: int, k: int, kind: str, row: dict[str, Any]) -> int:
    """Rows a rank for the memory points, whole groups, the same on every rank. ``largest``: the most whose points
    (4 D bytes), membership (4) and chunk sums (k D doubles a chunk of 1,024 rows), the slot and every rank's
    slot in the gathered buffer (k D doubles a group of 32,768 rows, 1 + ranks of them) fit the rank's free device
    memory less MULTI_DEVICE_SPARE. ``streamed``: 10% more than that, or as many as MULTI_HOST_SHARE of the host's
    available memory holds (``row["host_limited"]`` says when that is fewer)."""
    import gpuopt
    from gpuopt._ext import kernel_limits

    torch.cuda.empty_cache()
    gpuopt.cuda.empty_cache()
    group = int(kernel_limits()["kmeans_sum_group"])
    per_row = 4 * d + 4 + 8 * k * d / (group // 32) + 8 * k * d * (1 + size) / group
    free = torch.cuda.mem_get_info()[0]
    rows = int((free - MULTI_DEVICE_SPARE) / per_row) // group * group
    if kind == "streamed":
        local = int(os.environ.get("LOCAL_WORLD_SIZE", size))
        host = int(_available_host_bytes() * MULTI_HOST_SHARE / local / (4 * d)) // group * group
        row["host_limited"] = host < rows * 1.1
        rows = min(int(rows * 1.1) // group * group, host)
    return int(np.min(comm.all_gather(np.array([[rows]], np.int64))))


def _available_host_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def _rows(seed: int, rank: int, n: int, d: int) -> Any:
    """n uniform rows of this rank's own, on its GPU."""
    import torch

    return torch.rand((n, d), generator=torch.Generator(device="cuda").manual_seed(seed + 1 + rank), device="cuda")


def _host_rows(torch: Any, seed: int, rank: int, n: int, d: int) -> np.ndarray:
    """n uniform rows of this rank's own in host memory page-locked once here (made on the GPU a slab at a time).
    Not torch's pinned allocator, which rounds a block up to a power of two (128 GiB for 100 GB)."""
    out = np.empty((n, d), np.float32)
    err = torch.cuda.cudart().cudaHostRegister(out.ctypes.data, out.nbytes, 0)
    if int(err) != 0:
        raise RuntimeError(f"cudaHostRegister of {out.nbytes / 1e9:.1f} GB failed ({err})")
    host = torch.from_numpy(out)
    gen = torch.Generator(device="cuda").manual_seed(seed + 1 + rank)
    step = max(1, (1 << 28) // d)
    for i in range(0, n, step):
        host[i:i + step].copy_(torch.rand((min(step, n - i), d), generator=gen, device="cuda"))
    torch.cuda.synchronize()
    return out


def _allgather(comm: Any, torch: Any, dist: Any, n: int, d: int, k: int, size: int) -> dict[str, float]:
    """The all-gather alone: this run's slot size, NCCL, CUDA events, median of 20 after 3."""
    from gpuopt.distributed import shard_bounds
    from gpuopt.distributed.kmeans import slot_layout

    _, slot = slot_layout([b - a for a, b in shard_bounds(n, size)], k, d)
    send = torch.ones(slot, dtype=torch.float64, device="cuda")
    recv = torch.empty(slot * size, dtype=torch.float64, device="cuda")
    times = []
    for i in range(23):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dist.all_gather_into_tensor(recv, send)
        end.record()
        end.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end))
    return dict(allgather_ms=float(np.median(times)), slot_mb=slot * 8 / 1e6)


def run_kmeans_multi(plan: RunSettings) -> StudyResult:
    import torch

    res = StudyResult()
    shapes, repeats = plan.pick(MULTI_SHAPES), plan.pick(MULTI_REPEATS)
    gpus = [g for g in MULTI_GPUS if g <= torch.cuda.device_count()]
    res.meta.update(iterations=MULTI_ITERS, limit_iterations=MULTI_LIMIT_ITERS, repeats=repeats, seed=MULTI_SEED,
                    gpus=gpus, nccl_env=NCCL_ENV, weak_points_per_gpu=MULTI_WEAK_PER_GPU,
                    device_spare_bytes=MULTI_DEVICE_SPARE, host_share=MULTI_HOST_SHARE,
                    host_memory_available_bytes=_available_host_bytes(),
                    inputs=f"torch.rand((N, D), generator=cuda manual_seed({MULTI_SEED})) on each GPU",
                    timing=f"marginal loop: (a {MULTI_ITERS}-loop call - a 1-loop call) / {MULTI_ITERS - 1} "
                           f"({MULTI_LIMIT_ITERS} loops for the memory points, one repeat), wall clock of the "
                           "slowest rank, median of the repeats after a warm-up; threshold 0")
    for g in [g for g in MULTI_GPUS if g not in gpus]:
        res.notes.append(f"{g} GPUs: this machine has {torch.cuda.device_count()}")
    for g in gpus:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "rows.json"
            launch = list(shapes) + (list(plan.pick(MULTI_LIMITS)) if g == gpus[-1] else [])
            spec = dict(shapes=launch, repeats=repeats, seed=MULTI_SEED, labels_dir=tmp)
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={g}", "-m",
                   "gpuopt.bench.studies.kmeans_multi", json.dumps(spec), str(out)]
            done = subprocess.run(cmd, env={**os.environ, **NCCL_ENV}, capture_output=True, text=True)
            if done.returncode or not out.exists():
                res.notes.append(f"{g} GPUs: the torchrun launch failed ({done.returncode}): "
                                 f"{done.stderr.strip()[-600:]}")
                continue
            rows = json.loads(out.read_text())
            for i, row in enumerate(rows):  # the memberships joined in rank order, hashed
                parts = [Path(tmp) / f"{i}_{r}.npy" for r in range(g)]
                if all(part.exists() for part in parts):
                    row["labels_digest"] = _digest(*(np.load(part) for part in parts))
            res.rows.extend(rows)
    _relate(res.rows)
    return res


def _relate(rows: list[dict[str, Any]]) -> None:
    """Speedups, efficiency, the exchange's share and whether the bits agree, from the rows of every launch."""
    base = {(r["shape"]): r for r in rows if r["gpus"] == 1 and not r.get("error")}
    for r in rows:
        if r.get("error"):
            continue
        one = base.get(r["shape"])
        r["exchange_share"] = r["exchange_ms_per_loop"] / r["ms_per_loop"] if r.get("ms_per_loop") else None
        if one is None:
            continue
        weak = r["N"] != one["N"]
        single = one.get("single_gpu_ms_per_loop")
        # Strong scaling: time over time; weak (N grows with the GPUs): points a second over points a second.
        scale = (r["N"] / one["N"]) if weak else 1.0
        r["speedup_vs_1"] = scale * one["ms_per_loop"] / r["ms_per_loop"]
        r["speedup_vs_single"] = scale * single / r["ms_per_loop"] if single else None
        r["single_gpu_ms_per_loop"] = single
        r["torch_ms_per_loop"] = one.get("torch_ms_per_loop")
        r["speedup_vs_torch"] = scale * r["torch_ms_per_loop"] / r["ms_per_loop"] if r["torch_ms_per_loop"] else None
        r["efficiency"] = r["speedup_vs_1"] / r["gpus"]
        r["identical"] = bool(r.get("rank_digests_agree")) and (bool(r.get("own_rows")) or (
            r.get("digest") == one.get("digest") == one.get("single_digest") and r.get("labels_digest") is not None
            and r.get("labels_digest") == one.get("labels_digest") == one.get("single_labels_digest")))


def table_kmeans_multi(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    body = [[r["shape"], r.get("N", "-"), r["gpus"], r.get("loop") or "-", fmt_cell(r.get("ms_per_loop"), ".4g"),
             fmt_cell(r.get("event_ms_per_loop"), ".4g"), fmt_cell(r.get("exchange_ms_per_loop"), ".3g"),
             fmt_cell(r.get("allgather_ms"), ".3g"),
             fmt_cell(r.get("exchange_share"), ".1%"), fmt_cell(r.get("slot_mb"), ".3g"),
             fmt_cell(r.get("speedup_vs_1"), ".3g"), fmt_cell(r.get("speedup_vs_single"), ".3g"),
             fmt_cell(r.get("speedup_vs_torch"), ".3g"),
             fmt_cell(r.get("efficiency"), ".1%"), _same_bits(r), fmt_cell(r.get("shard_gb"), ".3g"),
             r.get("x_memory") or "-"]
            for r in rows]
    head = ("gpuopt.distributed.kmeans, ms a loop (marginal, slowest rank; events: rank 0's CUDA events around a "
            "call's loops, over the loops); exchange: the loop's wait for the all-gather (median loop after the "
            "first) / the all-gather alone; speedup over the 1-GPU distributed run, over gpuopt.kmeans on one "
            "GPU and over a PyTorch Lloyd loop on one GPU (baselines.torch_lloyd, strict FP32; weak rows: points a "
            "second)\n")
    return head + format_table(["shape", "N", "GPUs", "loop", "ms/loop", "events ms/loop", "exchange ms",
                                "all-gather ms", "exchange/loop", "slot MB", "x 1 GPU", "x gpuopt.kmeans", "x PyTorch",
                                "efficiency",
                                "same bits", "shard GB", "x_memory"], body) + errors_note(
                                    [{**r, "variant": f"{r['shape']} on {r['gpus']} GPUs"} for r in rows])


def _same_bits(r: Mapping[str, Any]) -> str:
    """yes / NO against one GPU (centres, deltas, loops, memberships); where no run on one GPU holds the points,
    whether the ranks agree."""
    if r.get("identical") is not None:
        return "yes" if r["identical"] else "NO"
    agree = r.get("rank_digests_agree")
    return "-" if agree is None else ("ranks agree" if agree else "ranks DIFFER")


def plot_kmeans_multi(meta, rows, path: Path) -> Path:
    """Per shape, ms a loop against GPUs (the exchange's part shaded), ideal scaling dashed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ok = [r for r in rows if r.get("ms_per_loop") and not r.get("error") and not r.get("memory_point")]
    if not ok:
        empty_axes(ax, "no successful measurements")
        return finish_axes(fig, ax, meta, "k-means past one GPU", path, grid=False)
    shapes = list(dict.fromkeys(r["shape"] for r in ok))
    for i, shape in enumerate(shapes):
        pts = sorted((r for r in ok if r["shape"] == shape), key=lambda r: r["gpus"])
        g = [r["gpus"] for r in pts]
        ms = [r["ms_per_loop"] for r in pts]
        line, = ax.plot(g, ms, "o-", label=shape)
        if pts[0]["N"] == pts[-1]["N"]:
            ax.plot(g, [ms[0] / x for x in g], "--", color=line.get_color(), alpha=0.5)
        ax.bar([x + (i - (len(shapes) - 1) / 2) * 0.1 for x in g], [r.get("exchange_ms_per_loop") or 0 for r in pts],
               width=0.1, color=line.get_color(), alpha=0.4)
    ax.set_xlabel("GPUs (one process each, NCCL)")
    ax.set_ylabel("ms a loop (bars: the exchange)")
    ax.set_xticks(sorted({r["gpus"] for r in ok}))
    ax.set_yscale("log")
    return finish_axes(fig, ax, meta, "k-means past one GPU (dashed: ideal)", path,  # legend beside: lines span it
                       legend=dict(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5)))


STUDY = Study("kmeans_multi", "kmeans", "k-means past one GPU",
              "gpuopt.distributed.kmeans on 1, 2 (4) GPUs over NCCL: ms a loop, the exchange apart, speedup, "
              "efficiency, bitwise equality with one GPU",
              ("auto",), MULTI_COLUMNS, run_kmeans_multi, table_kmeans_multi, figures=plot_kmeans_multi,
              outputs=(Output("kmeans_multi.png"),), opt_in=True, gpu_only=True)


if __name__ == "__main__":  # a rank of run_kmeans_multi's torchrun launch
    worker(json.loads(sys.argv[1]), sys.argv[2])
