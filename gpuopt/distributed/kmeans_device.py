"""One rank's k-means loop on its GPU (:func:`gpuopt.distributed.kmeans` with a GPU variant).

csrc/kmeans/kmeans_multi.cu (declared in kmeans_cuda.hpp) computes it: ``local`` (the single-GPU loop's assignment and chunk sums over this
rank's shard, then its groups' sums, counts and change count into its slot), the all-gather of every rank's slot
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

__all__ = ["LOOPS", "loop_for", "Run", "prepare", "run"]

#: The single-GPU loops a rank can run (kmeans_choices.hpp's kMultiLoops).
LOOPS = ("device", "device_gemm", "device_tiled")


def loop_for(n: int, d: int, k: int) -> str | None:
    """The loop ``auto`` runs for the whole data's shape (gpuopt.kmeans' rule: device_persistent's sums are
    device's), or None where no GPU loop takes it (the CPU variant then)."""
    from ..kmeans.auto import auto_choice

    choice = auto_choice(n, d, k)
    return {"device_persistent": "device", "device": "device", "device_tiled": "device_tiled"}.get(choice)


class Run(NamedTuple):
    """A rank's loop, allocated and ready (every rank's ``prepare`` succeeded before the first loop)."""

    rank: Any               # the compiled KMeansRank
    x: DeviceArray          # the shard on the device (uploaded from host memory, or the caller's)
    centres: DeviceArray    # (k, D): the initial centres in, the result out
    membership: DeviceArray
    slot: DeviceArray       # (slot_doubles,) float64
    gathered: DeviceArray   # (ranks, slot_doubles) float64
    exchange: Any           # all-gathers slot into gathered
    stream: int


def prepare(comm: Any, x: Any, rows: list[int], order: list[int], k: int, threshold: float, max_iter: int,
            centres: np.ndarray, loop: str, stream: int, timeout: float) -> Run:
    """Upload (a host shard; ValueError for a non-finite value) and allocate on ``stream``, then start the loop
    state: what can fail on one rank only (bad values, out of memory), before any loop's collective."""
    cuda = cuda_module()
    previous = cuda.set_stream(stream)
    try:
        if isinstance(x, np.ndarray):
            if x.shape[0]:
                x, finite = to_device_checked(x, check_finite=True)
                if not finite:
                    raise ValueError("x_local must contain only finite values (NaN/inf found)")
            else:
                x = DeviceArray.empty(x.shape, np.float32)
        n_local, d = x.shape
        c = to_device(np.ascontiguousarray(centres, np.float32))
        membership = DeviceArray.empty((n_local,), np.int32)
        rank = cuda_host_module("gpuopt.distributed.kmeans").KMeansRank(
            x.ptr if n_local else 0, rows, order, comm.rank, d, k, threshold, max_iter, c.ptr,
            membership.ptr if n_local else 0, loop=loop)
        slot = DeviceArray.empty((rank.slot_doubles,), np.float64)
        gathered = DeviceArray.empty((comm.size, rank.slot_doubles), np.float64)
        exchange = comm.slot_exchange(slot, gathered, stream, timeout=timeout)
    finally:
        cuda.set_stream(previous)
    return Run(rank, x, c, membership, slot, gathered, exchange, stream)


def run(r: Run, max_iter: int, loops_per_sync: int, timing: bool = False) -> tuple[int, np.ndarray, dict]:
    """The loop to its stop: (loops run, delta history, CUDA-event ms where ``timing``: ``loop_ms`` the whole loop,
    ``exchange_ms`` the stream's wait for the all-gathers, ``local_ms`` and ``close_ms``)."""
    cuda = cuda_module()
    events: list[tuple[Any, Any, Any, Any]] = []
    previous = cuda.set_stream(r.stream)
    try:
        start = _event(cuda, r.stream) if timing else None
        done, iterations, delta = False, 0, np.empty(0, np.float32)
        while not done:
            for _ in range(min(loops_per_sync, max_iter - iterations)):  # the same count on every rank
                marks = [_event(cuda, r.stream)] if timing else None
                r.rank.local(r.slot.ptr)
                if timing:
                    marks.append(_event(cuda, r.stream))
                r.exchange()
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
            ms["loops_queued"] = float(len(events))
    finally:
        cuda.set_stream(previous)
    return iterations, np.asarray(delta, np.float32), ms


def _event(cuda: Any, stream: int) -> Any:
    e = cuda.Event()
    e.record(stream)
    return e
