"""The collectives a data-parallel loop needs, behind a small interface, and ranks as threads of one process.

* :class:`Communicator`: ``rank`` and ``size``; ``all_gather(a)`` (every rank's array in rank order: the first
  dimension may differ between ranks, the dtype and the other dimensions may not); ``broadcast(a, root)``; and
  ``fail(exc)``: this rank cannot go on, so every other rank's pending or next collective raises
  :class:`CollectiveError` instead of waiting for it.
* :class:`ThreadGroup`: ``size`` ranks as threads of this process (tests; shards held by one process). A barrier
  with a timeout and a shared failure record: ``fail`` breaks the barrier, so the others wake at once.
* ``TorchCommunicator`` (:mod:`.torch_comm`): a ``torch.distributed`` process group.

A GPU loop exchanges device buffers: ``slot_exchange(slot, gathered)`` returns a call that all-gathers every rank's
``slot`` into ``gathered``. Here through host memory (any communicator: tests, ranks as threads of one GPU); a
TorchCommunicator over NCCL does it device to device, queued on the loop's stream with no host wait.

Every collective takes ``timeout`` (seconds, None: the communicator's own): a rank that waits longer for the others
raises CollectiveError rather than hanging. A group whose collective failed stays failed: make a new one.
"""

from __future__ import annotations

import abc
import threading
from typing import Any, Callable

import numpy as np

__all__ = ["Communicator", "CollectiveError", "ThreadGroup", "failure_text", "check_gathered"]


class CollectiveError(RuntimeError):
    """A collective could not complete: another rank failed (``failed_rank``, its ``reason``) or the ranks did not
    all arrive within the timeout (``failed_rank`` None). Raised on every rank still taking part."""

    def __init__(self, message: str, failed_rank: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.failed_rank, self.reason = failed_rank, reason


class Communicator(abc.ABC):
    """One rank's view of a group of ``size`` ranks (see the module docstring)."""

    rank: int
    size: int
    #: Whether :meth:`slot_exchange` moves slots device to device, queued without a host wait (NCCL): then a GPU
    #: loop splits its exchange in two, the first half's under the second half's kernels.
    device_exchange: bool = False

    @abc.abstractmethod
    def all_gather(self, a: np.ndarray, *, timeout: float | None = None) -> list[np.ndarray]:
        """Every rank's ``a``, in rank order (copies). The dtype and every dimension but the first must agree."""

    @abc.abstractmethod
    def broadcast(self, a: np.ndarray | None, root: int = 0, *, timeout: float | None = None) -> np.ndarray:
        """Rank ``root``'s ``a`` on every rank (a copy; other ranks' ``a`` is ignored and may be None)."""

    @abc.abstractmethod
    def fail(self, exc: BaseException) -> None:
        """Tell the other ranks that this one failed with ``exc``: their pending or next collective raises
        CollectiveError naming this rank. Never raises."""

    def slot_exchange(self, slot: Any, gathered: Any, stream: int, *,
                      timeout: float | None = None) -> Callable[[], None]:
        """A call that all-gathers every rank's ``slot`` (a 1-D gpuopt DeviceArray, the same size on every rank)
        into ``gathered`` (a (size, len(slot)) DeviceArray, rank order), ordered on ``stream`` (a handle) after the
        work queued there. This one goes through host memory (it waits for ``stream``, then :meth:`all_gather`);
        a communicator with a device transport overrides it."""
        from .._ext import cuda_module

        cuda = cuda_module()

        def exchange() -> None:
            slots = self.all_gather(slot.numpy()[None], timeout=timeout)  # .numpy() waits for the slot's stream
            host = np.ascontiguousarray(np.concatenate(slots))
            previous = cuda.set_stream(stream)
            try:
                cuda.copy_h2d(gathered.ptr, host, host.nbytes)  # queued on `stream` (host data staged on return)
            finally:
                cuda.set_stream(previous)
        return exchange


def failure_text(exc: BaseException) -> str:
    """How a rank's failure reads on the others: ``ValueError: x_local must ...``."""
    return f"{type(exc).__name__}: {exc}"


def check_gathered(arrays: list[np.ndarray]) -> None:
    """All-gathered arrays must share the dtype and every dimension but the first: ValueError (the same on every
    rank, which sees the same arrays) naming the first rank that differs from rank 0."""
    first = arrays[0]
    for r, a in enumerate(arrays):
        if a.dtype != first.dtype or a.shape[1:] != first.shape[1:]:
            raise ValueError(f"all_gather: rank {r} gave {a.dtype} rows of shape {a.shape[1:]}, rank 0 "
                             f"{first.dtype} rows of shape {first.shape[1:]}")


class ThreadGroup:
    """``size`` ranks as threads of one process. ``communicator(rank)`` is rank ``rank``'s
    :class:`Communicator`; :meth:`run` runs a function on every rank, each in its own thread.

    ``timeout``: the seconds a collective waits for the other ranks when the caller gives none.
    """

    def __init__(self, size: int, timeout: float = 60.0) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be an int >= 1 (the number of ranks), got {size!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.size, self.timeout = size, float(timeout)
        self._barrier = threading.Barrier(size)
        self._slots: list[Any] = [None] * size
        self._lock = threading.Lock()
        self._failure: tuple[int | None, str] | None = None  # (rank or None for a timeout, reason)

    def communicator(self, rank: int) -> Communicator:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.size:
            raise ValueError(f"rank must be an int in 0..{self.size - 1}, got {rank!r}")
        return _ThreadCommunicator(self, rank)

    def run(self, fn: Callable[[Communicator], Any], join_timeout: float | None = None) -> list[Any]:
        """``fn(communicator)`` on every rank, each in a thread of its own; the outcomes in rank order: what
        ``fn`` returned, or the exception it raised. Waits for every rank (their collectives are bounded by their
        timeouts); with ``join_timeout``, a rank still running after that many seconds is reported as a
        TimeoutError (its thread is a daemon: it cannot keep the process alive)."""
        outcomes: list[Any] = [TimeoutError(f"the rank did not finish within {join_timeout} s")] * self.size

        def body(rank: int) -> None:
            try:
                outcomes[rank] = fn(self.communicator(rank))
            except BaseException as exc:  # reported, not raised: the caller sees every rank's outcome
                outcomes[rank] = exc

        threads = [threading.Thread(target=body, args=(r,), name=f"gpuopt-rank-{r}", daemon=True)
                   for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(join_timeout)  # each join waits at most join_timeout: a stuck rank cannot hide the others
        return outcomes

    def _record(self, rank: int | None, reason: str) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = (rank, reason)
        self._barrier.abort()


class _ThreadCommunicator(Communicator):
    def __init__(self, group: ThreadGroup, rank: int) -> None:
        self._group, self.rank, self.size = group, rank, group.size

    def _wait(self, timeout: float | None) -> None:
        g = self._group
        seconds = g.timeout if timeout is None else timeout
        try:
            g._barrier.wait(seconds)
        except threading.BrokenBarrierError:
            # Broken by fail() (the failure is recorded first) or by a wait that timed out (nothing recorded).
            g._record(None, f"a collective timed out: the ranks did not all arrive within {seconds:g} s")
            failed_rank, reason = g._failure  # type: ignore[misc]
            who = f"rank {failed_rank} failed: " if failed_rank is not None else ""
            raise CollectiveError(f"{who}{reason} (rank {self.rank} of {self.size} stops too)",
                                  failed_rank, reason) from None

    def all_gather(self, a: np.ndarray, *, timeout: float | None = None) -> list[np.ndarray]:
        g = self._group
        g._slots[self.rank] = np.array(a, copy=True)
        self._wait(timeout)
        out = [np.array(s, copy=True) for s in g._slots]
        self._wait(timeout)  # no rank writes its next slot before every rank has read this one
        check_gathered(out)
        return out

    def broadcast(self, a: np.ndarray | None, root: int = 0, *, timeout: float | None = None) -> np.ndarray:
        if not 0 <= root < self.size:
            raise ValueError(f"root must be a rank in 0..{self.size - 1}, got {root}")
        g = self._group
        if self.rank == root:
            if a is None:
                raise ValueError("broadcast: the root rank must give an array")
            g._slots[root] = np.array(a, copy=True)
        self._wait(timeout)
        out = np.array(g._slots[root], copy=True)
        self._wait(timeout)
        return out

    def fail(self, exc: BaseException) -> None:
        self._group._record(self.rank, failure_text(exc))
