"""One rank's k-means loop on its GPU (:func:`gpuopt.distributed.kmeans` with a GPU variant).

csrc/kmeans/kmeans_multi.cu (declared in kmeans_cuda.hpp) computes it: ``local`` (the single-GPU loop's assignment
and chunk sums over this rank's shard, then its groups' sums, counts and change count into its slot; a host shard
may be streamed through two device slabs), the all-gather of every rank's slot
(:meth:`Communicator.slot_exchange`: NCCL device to device under a TorchCommunicator over NCCL, else through host
memory), ``close`` (every group sum in global group order from 0, the means, delta, the stop flag), all queued on one
stream; the host reads the stop flag once every ``loops_per_sync`` loops (loops past the stop return at once on the
device, the same number on every rank, so every rank queues the same collectives).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._ext import cuda_host_module, cuda_module
from ..cuda import DeviceArray, to_device, to_device_checked

__all__ = ["LOOPS", "X_MEMORY", "loop_for", "Run", "prepare", "run"]

#: The single-GPU loops a rank can run (kmeans_choices.hpp's kMultiLoops).
LOOPS = ("device", "device_gemm", "device_tiled")
#: Where a host shard's points live during the loop: uploaded once, streamed from host memory every loop, or auto
#: (streamed where they would take more than half the GPU's memory).
X_MEMORY = ("auto", "device", "stream")
#: A streamed slab by default: the stream variant's budget (kStreamBudgetBytes), in whole groups.
STREAM_SLAB_BYTES = 256 << 20


def loop_for(n: int, d: int, k: int) -> str | None:
    """The loop ``auto`` runs for the whole data's shape (gpuopt.kmeans' rule: device_persistent's sums are
    device's), or None where no GPU loop takes it (the CPU variant then)."""
    from ..kmeans.auto import auto_choice

    choice = auto_choice(n, d, k)
    return {"device_persistent": "device", "device": "device", "device_tiled": "device_tiled"}.get(choice)


class Run(NamedTuple):
    """A rank's loop, allocated and ready (every rank's ``prepare`` succeeded before the first loop)."""

    rank: Any               # the compiled KMeansRank
    x: Any                  # the shard: on the device (uploaded, or the caller's), or the host array streamed
    centres: DeviceArray    # (k, D): the initial centres in, the result out
    membership: DeviceArray
    slot: DeviceArray       # (slot_doubles,) float64
    gathered: DeviceArray   # (ranks * slot_doubles,) float64: every rank's slot, part by part
    exchanges: tuple        # a call a part: all-gathers that part of slot into its part of gathered
    stream: int


def would_stream(x: Any, x_memory: str, cuda: bool) -> bool:
    """Whether a host shard ``x`` would be streamed from host memory (``cuda``: a GPU is usable to ask)."""
    if not isinstance(x, np.ndarray) or not x.shape[0] or x_memory == "device":
        return False
    return x_memory == "stream" or (cuda and stream_rows_for(x, x_memory, 0, 1) > 0)


def stream_rows_for(x: Any, x_memory: str, stream_rows: int, group: int) -> int:
    """The rows a streamed slab (0: x uploaded or on the device already), whole groups of ``group`` rows."""
    from .._ext import device_info

    if not isinstance(x, np.ndarray) or not x.shape[0]:
        if x_memory == "stream" and not isinstance(x, np.ndarray):
            raise ValueError("x_memory='stream' streams a host shard from host memory; x_local is on the device")
        return 0
    if x_memory == "device" or (x_memory == "auto" and x.nbytes <= device_info()["total_memory_bytes"] // 2):
        return 0
    return stream_rows or max(1, STREAM_SLAB_BYTES // (4 * x.shape[1] * group)) * group


def prepare(comm: Any, x: Any, rows: list[int], order: list[int], k: int, threshold: float, max_iter: int,
            centres: np.ndarray, loop: str, stream: int, timeout: float, group: int, x_memory: str = "auto",
            stream_rows: int = 0, parts: int = 1) -> Run:
    """Upload a host shard (ValueError for a non-finite value, checked as it is staged) or leave it for streaming
    (slabs of whole groups of ``group`` rows; its values checked on the device), allocate on ``stream`` and start
    the loop state: what can fail on one rank only (bad values, out of memory), before any loop's collective.
    ``parts`` = 2 (the same on every rank; a shard on the device): the slot is exchanged in two all-gathers, the
    first on the rank's side stream while the second part's kernels run."""
    cuda = cuda_module()
    previous = cuda.set_stream(stream)
    try:
        slab_rows = stream_rows_for(x, x_memory, stream_rows, group)
        if not slab_rows and isinstance(x, np.ndarray):
            if x.shape[0]:
                x, finite = to_device_checked(x, check_finite=True)
                if not finite:
                    raise ValueError("x_local must contain only finite values (NaN/inf found)")
            else:
                x = DeviceArray.empty(x.shape, np.float32)
        n_local, d = x.shape
        c = to_device(np.ascontiguousarray(centres, np.float32))
        membership = DeviceArray.empty((n_local,), np.int32)
        address = (x.ctypes.data if slab_rows else x.ptr) if n_local else 0
        rank = cuda_host_module("gpuopt.distributed.kmeans").KMeansRank(
            address, rows, order, comm.rank, d, k, threshold, max_iter, c.ptr, membership.ptr if n_local else 0,
            loop=loop, stream_rows=slab_rows, parts=parts)
        slot = DeviceArray.empty((rank.slot_doubles,), np.float64)
        gathered = DeviceArray.empty((comm.size * rank.slot_doubles,), np.float64)
        # Part p of every slot, gathered rank after rank into part p's region of gathered (kmeans_cuda.hpp).
        cuts = [0, rank.part_doubles, rank.slot_doubles][:parts] + [rank.slot_doubles]
        exchanges = tuple(
            comm.slot_exchange(_view(slot, (b - a,), a), _view(gathered, (comm.size, b - a), comm.size * a),
                               rank.side_stream if p < parts - 1 else stream, timeout=timeout)
            for p, (a, b) in enumerate(zip(cuts, cuts[1:])))
    finally:
        cuda.set_stream(previous)
    return Run(rank, x, c, membership, slot, gathered, exchanges, stream)


def _view(a: DeviceArray, shape: tuple, first: int) -> DeviceArray:
    """A view of ``a``'s elements [first, first + prod(shape)) as ``shape`` (kept alive by ``a``)."""
    return DeviceArray(shape, a.dtype, a.ptr + first * a.dtype.itemsize, a)


def run(r: Run, max_iter: int, loops_per_sync: int, timing: bool = False) -> tuple[int, np.ndarray, dict]:
    """The loop to its stop: (loops run, delta history, CUDA-event ms where ``timing``: ``loop_ms`` the whole loop,
    ``exchange_ms`` the stream's wait for the all-gathers (``exchange_ms_steady``: the median loop's after the
    first), ``local_ms`` and ``close_ms``)."""
    cuda = cuda_module()
    events: list[tuple[Any, Any, Any, Any]] = []
    previous = cuda.set_stream(r.stream)
    try:
        start = _event(cuda, r.stream) if timing else None
        done, iterations, delta = False, 0, np.empty(0, np.float32)
        while not done:
            for _ in range(min(loops_per_sync, max_iter - iterations)):  # the same count on every rank
                marks = [_event(cuda, r.stream)] if timing else None
                for p, exchange in enumerate(r.exchanges[:-1]):  # two parts: part 0's all-gather on the side
                    r.rank.local(r.slot.ptr, p)
                    cuda.stream_wait(r.rank.side_stream, r.stream)
                    exchange()
                r.rank.local(r.slot.ptr, len(r.exchanges) - 1)
                if timing:
                    marks.append(_event(cuda, r.stream))
                r.exchanges[-1]()
                if len(r.exchanges) > 1:
                    cuda.stream_wait(r.stream, r.rank.side_stream)
                if timing:
                    marks.append(_event(cuda, r.stream))
                r.rank.close(r.gathered.ptr)
                if timing:
                    marks.append(_event(cuda, r.stream))
                    events.append(tuple(marks))
            done, iterations, delta = r.rank.read()
        ms: dict[str, float] = {}
        if timing:
            end = _event(cuda, r.stream)
            end.synchronize()
            ms["loop_ms"] = start.elapsed_ms(end)
            for name, i in (("local_ms", 0), ("exchange_ms", 1), ("close_ms", 2)):
                ms[name] = float(sum(e[i].elapsed_ms(e[i + 1]) for e in events))
            # The first exchange also waits out the ranks' different start times: the steady state is the others'.
            later = [e[1].elapsed_ms(e[2]) for e in events[1:]]
            ms["exchange_ms_steady"] = float(np.median(later)) if later else ms["exchange_ms"]
            ms["loops_queued"] = float(len(events))
    finally:
        cuda.set_stream(previous)
    return iterations, np.asarray(delta, np.float32), ms


def _event(cuda: Any, stream: int) -> Any:
    e = cuda.Event()
    e.record(stream)
    return e
