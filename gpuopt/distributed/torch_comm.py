"""A :class:`~gpuopt.distributed.comm.Communicator` over a ``torch.distributed`` process group (gloo or nccl).

torch is optional: it is imported when a TorchCommunicator is made, never at ``import gpuopt``.

torch.distributed has no way for one rank to interrupt the others' collective, so every collective here starts
with a header all-gather (a fixed 512 bytes a rank: a status, the array's dtype and shape, a failure message).
``fail`` sends a header with a failed status and nothing else: it pairs with whatever collective the other ranks
are waiting in, and their header tells them to raise instead of going on to the payload. A rank that dies or
hangs outright is caught by the timeouts: each wait is bounded by ``timeout`` (gloo honours it per operation; with
nccl the process group's own timeout, set in ``init_process_group``, is the bound). After a CollectiveError from a
timeout the process group is in an unknown state: destroy it.
"""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np

from .comm import CollectiveError, Communicator, check_gathered, failure_text

__all__ = ["TorchCommunicator"]

_HEADER_BYTES = 512
_FIELDS = 8  # int64: status, dtype code, ndim, shape[0..4]
_MAX_NDIM = 5
_OK, _FAILED = 1, 2
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint8))


def _torch():
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        raise ImportError("TorchCommunicator needs PyTorch (pip install torch); gpuopt.distributed.ThreadGroup "
                          "runs ranks as threads without it") from exc
    return torch, dist


class TorchCommunicator(Communicator):
    """This process's rank of a ``torch.distributed`` process group (``group`` None: the default group, which
    ``torch.distributed.init_process_group`` must have made). Arrays travel as tensors on ``device`` (default:
    the current CUDA device for nccl, the CPU otherwise). ``timeout``: seconds a collective waits when the caller
    gives none."""

    def __init__(self, group: Any = None, *, device: Any = None, timeout: float = 300.0) -> None:
        torch, dist = _torch()
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("TorchCommunicator: torch.distributed has no process group; call "
                               "torch.distributed.init_process_group first")
        self._torch, self._dist, self._group = torch, dist, group
        self.rank, self.size = dist.get_rank(group), dist.get_world_size(group)
        self._nccl = str(dist.get_backend(group)) == "nccl"
        self.device_exchange = self._nccl
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if self._nccl else torch.device("cpu")
        self._device, self.timeout = torch.device(device), float(timeout)

    # --------------------------------------------------------------------------------------------- the header

    def _wait(self, work: Any, timeout: float | None, what: str) -> None:
        seconds = self.timeout if timeout is None else timeout
        try:
            work.wait(timeout=datetime.timedelta(seconds=seconds))
        except Exception as exc:  # gloo's timeout, a peer that closed its connection, an NCCL error
            raise CollectiveError(f"torch.distributed {what} failed or timed out after {seconds:g} s on rank "
                                  f"{self.rank}: {exc}") from exc

    def _headers(self, status: int, a: np.ndarray | None, message: str, timeout: float | None) -> list[np.ndarray]:
        head = np.zeros(_FIELDS, np.int64)
        head[0] = status
        if a is not None:
            if a.dtype not in _DTYPES or a.ndim > _MAX_NDIM:
                raise ValueError(f"TorchCommunicator sends {', '.join(d.name for d in _DTYPES)} arrays of up to "
                                 f"{_MAX_NDIM} dimensions, got {a.dtype} with {a.ndim}")
            head[1], head[2] = _DTYPES.index(a.dtype), a.ndim
            head[3:3 + a.ndim] = a.shape
        text = message.encode("utf-8", "replace")[:_HEADER_BYTES - 8 * _FIELDS]
        raw = np.zeros(_HEADER_BYTES, np.uint8)
        raw[:8 * _FIELDS] = head.view(np.uint8)
        raw[8 * _FIELDS:8 * _FIELDS + len(text)] = np.frombuffer(text, np.uint8)
        mine = self._torch.from_numpy(raw).to(self._device)
        out = [self._torch.empty_like(mine) for _ in range(self.size)]
        self._wait(self._dist.all_gather(out, mine, group=self._group, async_op=True), timeout, "header all_gather")
        heads = [t.cpu().numpy() for t in out]
        for r, h in enumerate(heads):
            if h[:8 * _FIELDS].view(np.int64)[0] == _FAILED:
                reason = bytes(h[8 * _FIELDS:]).rstrip(b"\0").decode("utf-8", "replace")
                raise CollectiveError(f"rank {r} failed: {reason} (rank {self.rank} of {self.size} stops too)",
                                      r, reason)
        return [h[:8 * _FIELDS].view(np.int64) for h in heads]

    @staticmethod
    def _shape(head: np.ndarray) -> tuple[np.dtype, tuple[int, ...]]:
        return _DTYPES[int(head[1])], tuple(int(s) for s in head[3:3 + int(head[2])])

    # --------------------------------------------------------------------------------------------- collectives

    def all_gather(self, a: np.ndarray, *, timeout: float | None = None) -> list[np.ndarray]:
        a = np.ascontiguousarray(a)
        if a.ndim == 0:
            raise ValueError("all_gather takes arrays of at least one dimension (rows), got a scalar")
        shapes = [self._shape(h) for h in self._headers(_OK, a, "", timeout)]
        check_gathered([np.empty((0, *shape[1:]), dtype) for dtype, shape in shapes])
        rows = [shape[0] for _, shape in shapes]
        if max(rows) == 0:
            return [np.empty(shape, dtype) for dtype, shape in shapes]
        # torch's all_gather takes equal shapes: every rank pads to the longest, the padding is cut off after.
        padded = np.zeros((max(rows), *a.shape[1:]), a.dtype)
        padded[:a.shape[0]] = a
        mine = self._torch.from_numpy(padded).to(self._device)
        out = [self._torch.empty_like(mine) for _ in range(self.size)]
        self._wait(self._dist.all_gather(out, mine, group=self._group, async_op=True), timeout, "all_gather")
        return [t.cpu().numpy()[:n].copy() for t, n in zip(out, rows)]

    def broadcast(self, a: np.ndarray | None, root: int = 0, *, timeout: float | None = None) -> np.ndarray:
        if not 0 <= root < self.size:
            raise ValueError(f"root must be a rank in 0..{self.size - 1}, got {root}")
        if self.rank == root and a is None:
            raise ValueError("broadcast: the root rank must give an array")
        a = np.ascontiguousarray(a) if self.rank == root else None
        dtype, shape = self._shape(self._headers(_OK, a, "", timeout)[root])
        buf = self._torch.from_numpy(a.copy() if a is not None else np.empty(shape, dtype)).to(self._device)
        src = root if self._group is None else self._dist.get_global_rank(self._group, root)
        self._wait(self._dist.broadcast(buf, src=src, group=self._group, async_op=True), timeout, "broadcast")
        return buf.cpu().numpy().copy()

    def slot_exchange(self, slot: Any, gathered: Any, stream: int, *, timeout: float | None = None) -> Any:
        """Over NCCL, device to device: ``all_gather_into_tensor`` queued after the work on ``stream`` (NCCL's
        stream waits for it, and it for NCCL's), no host wait and no header (the loop's collectives are the same on
        every rank by construction; a rank that dies is caught by the process group's own timeout, set in
        ``init_process_group``). Other backends: through host memory (:class:`Communicator`'s)."""
        if not self._nccl:
            return super().slot_exchange(slot, gathered, stream, timeout=timeout)
        torch, dist, group = self._torch, self._dist, self._group
        send = torch.as_tensor(slot, device=self._device)  # __cuda_array_interface__: views, no copies
        recv = torch.as_tensor(gathered, device=self._device).view(-1)
        on = torch.cuda.ExternalStream(stream, device=self._device) if stream else \
            torch.cuda.default_stream(self._device)

        def exchange() -> None:
            with torch.cuda.stream(on):
                dist.all_gather_into_tensor(recv, send, group=group)
        return exchange

    def fail(self, exc: BaseException) -> None:
        try:
            self._headers(_FAILED, None, failure_text(exc), None)
        except Exception:  # the others raised on our header (or are gone): nothing more to tell them
            pass
