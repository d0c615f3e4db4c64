"""``gpuopt.distributed.kmeans``: k-means over data split between ranks, with the bits of one process's run.

Each rank holds a shard of the data x (N, D): rows [row_offset, row_offset + n_local). Shards start at a group of
the chunked sum tree (a multiple of G = 32,768 rows, ``gpuopt._ext.kernel_limits()["kmeans_sum_group"]``) and
tile [0, N), so each shard is whole groups of the global tree (only the shard that ends the data may end in a
partial one). A loop, on every rank:

1. assign its rows to the nearest centre (the cpu reference's rule: float32 distances summed over coordinates in
   order, ties to the lower index) and count its changed memberships;
2. its groups' sums and member counts, each group in the tree's order (:func:`kmeans_group_sums`, the walk the
   cpu reference's update runs);
3. one all-gather of every rank's slot: its group sums (groups_max x k*D float64, groups_max the most groups any
   rank holds), member counts (k) and change count (integers as float64: exact below 2^53). Not a float
   all-reduce, whose order of adds would depend on the number of ranks;
4. the group sums added in global group order into a total that starts at 0, mean = float32(total / count), an
   empty cluster keeps its centre, delta = float32(changed) / float32(N) (integers: exact in any order).

Step 4 is the same adds in the same order as ``gpuopt.kmeans(x, k, variant="cpu", summation="chunked")`` on the
whole data, so every rank gets that call's centres, delta history and loop count bit for bit, for any number of
ranks (and its memberships, shard by shard). On GPUs (:mod:`.kmeans_device`, csrc/kmeans/kmeans_multi.cu) steps 1-2
are the single-GPU loop's kernels, whose chunk and group sums are the cpu reference's, and step 4 runs on the device:
the same bits again, so a rank may run either (every rank runs the same variant, checked).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator, NamedTuple

import numpy as np

from .. import _core
from .._exec import Timing
from .._ext import cuda_available, kernel_limits
from .._validate import float_array, integer, real
from ..cuda import DeviceArray, stream_handle
from ..kmeans import KMeansResult
from . import kmeans_device
from .comm import CollectiveError, Communicator, ThreadGroup

__all__ = ["kmeans", "kmeans_group_sums", "shard_bounds", "sum_group", "VARIANTS"]

#: ``variant`` values: auto (the GPU where one is usable, with the loop gpuopt.kmeans' auto picks for the whole
#: data's shape; else cpu), cpu, or a single-GPU loop by name.
VARIANTS = ("auto", "cpu") + kmeans_device.LOOPS
_OVERLAP = (None, False, True)  # ``overlap`` values, by their index in the ranks' agreement


def sum_group() -> int:
    """Objects a group of the chunked sum tree (32,768): shards start at a multiple of it."""
    return int(kernel_limits()["kmeans_sum_group"])


def shard_bounds(n: int, size: int) -> list[tuple[int, int]]:
    """A split of N rows between ``size`` ranks that :func:`kmeans` takes: ``(start, stop)`` a rank, in rank
    order, whole groups dealt out as evenly as they go (the last nonempty shard ends at N). With more ranks than
    groups some shards are empty: those ranks pass x_local of shape (0, D) and still take part."""
    n, size, g = integer(n, "n", 0), integer(size, "size", 1), sum_group()
    groups = -(-n // g)
    return [(min(r * groups // size * g, n), min((r + 1) * groups // size * g, n)) for r in range(size)]


def _shard(x_local: Any, device_ok: bool = False) -> np.ndarray | DeviceArray:
    """x_local as a C-contiguous float32 (n_local, D) NumPy array, or (``device_ok``) a DeviceArray view of a
    device array; n_local may be 0 (a rank that owns no rows). Its values are checked where the loop reads them
    (:func:`_require_finite` on the host, the upload, or the device loop's close), not here."""
    x = float_array(x_local, "x_local", 2, "(n_local, D); a rank without rows passes shape (0, D)", empty_rows=True)
    if not isinstance(x, np.ndarray) and not device_ok:
        raise TypeError("x_local is a device array: kmeans_group_sums runs on the host; pass a NumPy array "
                        "(e.g. x_local.numpy())")
    return x


def _require_finite(x: np.ndarray) -> None:
    """ValueError for a NaN or inf in a host shard, checked in row blocks (no temporary the size of x)."""
    step = max(1, (1 << 24) // max(1, x.shape[1]))
    for i in range(0, x.shape[0], step):
        if not np.isfinite(x[i:i + step]).all():
            raise ValueError("x_local must contain only finite values (NaN/inf found)")


def kmeans_group_sums(x_local: Any, membership: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The chunked sum tree's group sums of a shard whose first row is a group boundary of the whole data.

    Returns ``(sums, counts)``: float64 (groups, k, D) and int64 (groups, k), groups = ceil(n_local / 32,768);
    a group's sums start at 0 and add its chunks' in order (each chunk its leaves', each leaf its members' in row
    order), 0 for a cluster without members in the group. Every shard's groups added in global group order from
    0, then float32(total / count), are the cpu reference's ``summation="chunked"`` centres.
    """
    x = _shard(x_local)
    _require_finite(x)
    k = integer(k, "k", 1)
    m = np.asarray(membership)
    if m.dtype.kind not in "iu":
        raise TypeError(f"membership must be an integer array, got dtype {m.dtype}")
    if m.shape != (x.shape[0],):
        raise ValueError(f"membership must have shape (n_local,) = ({x.shape[0]},), one entry a row of x_local; "
                         f"got {m.shape}")
    return _core.kmeans_group_sums(x, np.ascontiguousarray(m, np.int32), k)


class _Local(NamedTuple):
    x: np.ndarray | DeviceArray
    k: int
    threshold: float
    max_iter: int
    init: np.ndarray | None
    row_offset: int | None
    timeout: float
    variant: str
    loops_per_sync: int
    stream: int | None
    x_memory: str
    stream_rows: int
    overlap: bool | None


class _Layout(NamedTuple):
    n: int                 # N, all ranks' rows
    offsets: list[int]     # each rank's first global row
    rows: list[int]        # each rank's n_local
    order: list[int]       # the ranks in row order (nonempty shards only)
    streams: bool          # whether any rank streams its shard from host memory (a GPU loop)


@contextlib.contextmanager
def _together(comm: Communicator) -> Iterator[None]:
    """Work only this rank does: if it raises, the other ranks' collectives raise too (comm.fail) rather than
    wait. A CollectiveError is already every rank's, and an error every rank finds in the same gathered values
    is raised outside this (a fail there would wait for a collective no one else joins)."""
    try:
        yield
    except CollectiveError:
        raise
    except BaseException as exc:
        comm.fail(exc)
        raise


def _default_comm() -> Communicator:
    """torch.distributed's default group where the program made one (torch already imported: no import here),
    else a group of one rank."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        from .torch_comm import TorchCommunicator

        return TorchCommunicator()
    return ThreadGroup(1).communicator(0)


def _agree(comm: Communicator, a: _Local) -> _Layout:
    """Every rank's sizes and arguments, exchanged and compared: the same ValueError on every rank where they
    disagree or the shards do not tile [0, N) from group boundaries."""
    thr_bits = int(np.array(a.threshold, np.float32).view(np.int32))  # compared as the loop compares: float32
    streams = a.variant != "cpu" and kmeans_device.would_stream(a.x, a.x_memory, cuda_available())
    mine = np.array([[a.x.shape[0], a.x.shape[1], a.k, a.max_iter, thr_bits, a.init is not None,
                      a.row_offset is not None, a.row_offset or 0, VARIANTS.index(a.variant),
                      _OVERLAP.index(a.overlap), streams]], np.int64)
    table = np.concatenate(comm.all_gather(mine, timeout=a.timeout))
    names = {1: "D (x_local.shape[1])", 2: "k", 3: "max_iter", 4: "threshold (as float32)",
             5: "whether init is given", 6: "whether row_offset is given", 8: "variant", 9: "overlap"}
    for col, name in names.items():
        if (table[:, col] != table[0, col]).any():
            r = int(np.flatnonzero(table[:, col] != table[0, col])[0])
            shown = [float(np.array(v, np.int32).view(np.float32)) if col == 4 else VARIANTS[int(v)] if col == 8
                     else _OVERLAP[int(v)] if col == 9 else int(v) for v in table[:, col]]
            raise ValueError(f"every rank must give the same {name}: rank 0 has {shown[0]}, rank {r} {shown[r]} "
                             f"(all ranks: {shown})")
    rows = [int(v) for v in table[:, 0]]
    n, g = sum(rows), sum_group()
    offsets = [int(v) for v in table[:, 7]] if table[0, 6] else [sum(rows[:r]) for r in range(comm.size)]
    order = sorted((r for r in range(comm.size) if rows[r]), key=lambda r: offsets[r])
    expected = 0
    for r in order:
        if offsets[r] % g:
            given = "its row_offset" if table[0, 6] else "after the rows of the ranks before it"
            raise ValueError(f"rank {r}'s shard starts at row {offsets[r]} ({given}), not a multiple of {g}: every "
                             f"shard starts at a group of the sum tree, so every shard but the last holds a "
                             f"multiple of {g} rows (rows per rank: {rows})")
        if offsets[r] != expected:
            raise ValueError(f"the shards must tile rows [0, N) without gaps or overlaps: rank {r} starts at row "
                             f"{offsets[r]}, the shards before it end at {expected} (row_offset per rank: "
                             f"{offsets}, rows per rank: {rows})")
        expected += rows[r]
    if n == 0:
        raise ValueError("every rank's shard is empty: the data must have at least one row")
    if a.k > n:
        raise ValueError(f"k must be <= the number of objects N={n} (all ranks' rows), got k={a.k}")
    streaming = [r for r in range(comm.size) if table[r, 10]]
    if a.overlap and streaming:
        raise ValueError(f"overlap=True splits the exchange of shards on the device; rank {streaming[0]} streams "
                         f"its shard from host memory (give it x_memory='device', or overlap=None)")
    return _Layout(n, offsets, rows, order, bool(streaming))


def _parts(comm: Communicator, a: _Local, lay: _Layout) -> int:
    """The GPU loop's exchange in 1 part or 2 (the first all-gathered under the second's kernels): 2 where asked
    (overlap=True), or by default where the communicator moves slots device to device, every shard is on the
    device and some rank holds two groups or more. The same on every rank (it reads only gathered facts)."""
    wanted = comm.device_exchange if a.overlap is None else a.overlap
    return 2 if wanted and not lay.streams and max(-(-r // sum_group()) for r in lay.rows) >= 2 else 1


def _initial_centres(comm: Communicator, a: _Local, lay: _Layout) -> np.ndarray:
    """init, the same bits on every rank (checked), or the first k global rows (Liao's rule), gathered from the
    ranks that hold them."""
    me = comm.rank
    if a.init is not None:
        inits = comm.all_gather(a.init, timeout=a.timeout)
        for r, other in enumerate(inits):
            if other.tobytes() != inits[0].tobytes():  # bits: an empty cluster returns its init as given
                raise ValueError(f"init must be the same on every rank: rank {r}'s differs from rank 0's")
        return inits[0]
    first = max(0, min(lay.rows[me], a.k - lay.offsets[me]))
    mine = a.x.rows(first) if isinstance(a.x, DeviceArray) else a.x[:first]
    pieces = comm.all_gather(mine, timeout=a.timeout)
    return np.ascontiguousarray(np.concatenate([pieces[r] for r in lay.order])[:a.k])


def slot_layout(rows: list[int], k: int, d: int) -> tuple[int, int]:
    """(tail, size): a rank's slot of the exchange is ``size`` float64, its group sums [groups_max][k*D] first,
    then at ``tail`` the k member counts and the change count, padded to an even size (csrc/kmeans/kmeans.hpp's
    slot_layout: the one definition, the CPU's and the GPU's)."""
    return tuple(_core.kmeans_slot_layout([int(r) for r in rows], k, d))


def _cpu_slot(x: np.ndarray, membership: np.ndarray, changed: int, k: int, rows: list[int]) -> np.ndarray:
    d = x.shape[1]
    tail, size = slot_layout(rows, k, d)
    slot = np.zeros(size)
    if x.shape[0]:
        sums, counts = _core.kmeans_group_sums(x, membership, k)
        slot[:sums.size] = sums.ravel()
        slot[tail:tail + k] = counts.sum(axis=0)  # integers below 2**53: exact in float64
    slot[tail + k] = changed
    return slot


def _close_loop(gathered: np.ndarray, lay: _Layout, k: int, d: int, centres: np.ndarray) -> int:
    """The loop's end, the same on every rank: the group sums in global group order, the means; returns the
    number of changed memberships. ``gathered``: every rank's slot (ranks, size), rank order. ``centres`` is
    updated in place."""
    kd, g = k * d, sum_group()
    tail, _ = slot_layout(lay.rows, k, d)
    total = np.zeros(kd)
    for r in lay.order:  # the nonempty shards in row order: their groups in global group order
        for row in gathered[r, :-(-lay.rows[r] // g) * kd].reshape(-1, kd):
            total += row  # one group's sums, added to a total that started at 0: the cpu reference's adds
    counts = gathered[:, tail:tail + k].sum(axis=0)  # integers: exact in any order
    has = counts > 0
    means = total.reshape(k, d)[has] / counts[has, None]
    centres[has] = means.astype(np.float32)  # float32(total / count): rounded once, as the reference
    return int(gathered[:, tail + k].sum())


def kmeans(x_local: Any, k: int, *, threshold: float = 0.001, max_iter: int = 500, init: Any = None,
           row_offset: int | None = None, comm: Communicator | None = None, timeout: float = 300.0,
           variant: str = "auto", loops_per_sync: int = 8, stream: Any = None, x_memory: str = "auto",
           stream_rows: int = 0, overlap: bool | None = None, timing: bool = False):
    """k-means over the shards of every rank of ``comm``: ``gpuopt.kmeans(x, k, variant="cpu",
    summation="chunked")`` of the whole data, bit for bit, on the CPU or the GPUs (see the module docstring).

    Every rank calls it with its shard and the same other arguments (exchanged and compared first).

    Parameters
    ----------
    x_local : array_like float (n_local, D)
        This rank's rows of the data, rows [row_offset, row_offset + n_local); shape (0, D) for a rank that owns
        none (it still takes part). NumPy, a gpuopt DeviceArray, or any device array (``__cuda_array_interface__``
        or DLPack: a torch tensor, a CuPy array), used in place. NaN or inf raises ValueError: checked on the host
        for the CPU loop, as they are uploaded for a GPU one, and on the device for device and streamed shards
        (a NaN or inf point makes its cluster's sums non-finite: every rank raises at the same loop, as
        gpuopt.kmeans' device loops).
    k, threshold, max_iter : as :func:`gpuopt.kmeans`, the same on every rank.
    init : None, "first" or array_like float (k, D)
        Initial centres: the first k rows of the whole data (Liao's; gathered from the ranks that hold them), or
        these, which must be the same on every rank (their bits are compared).
    row_offset : int, optional
        This shard's first global row: a multiple of 32,768 (a group of the sum tree; :func:`sum_group`), the
        shards tiling [0, N) in any rank order. None on every rank: the shards are in rank order (rank r starts
        after the rows of ranks 0..r-1). Given on one rank, it must be given on all; an empty shard's is not used.
        :func:`shard_bounds` gives a split that fits.
    comm : Communicator, optional
        The ranks: a :class:`~gpuopt.distributed.ThreadGroup`'s communicator, a
        :class:`~gpuopt.distributed.TorchCommunicator`, or your own. None: torch.distributed's default group
        where the program has made one, else this process alone. Over NCCL the GPU loop's exchange runs device to
        device; any other communicator moves it through host memory.
    timeout : float
        Seconds a rank waits at a collective for the others (their loop's work included) before it raises. Over
        NCCL the loop's exchanges are bounded by the process group's own timeout instead (a host wait a loop would
        cost the batching below).
    variant : str
        ``"auto"`` (a GPU loop where CUDA is usable, the one :func:`gpuopt.kmeans`' auto runs for the whole
        data's shape; else ``"cpu"``), ``"cpu"``, or a loop by name: ``"device"`` (k*D <= 1024),
        ``"device_gemm"`` (k*D <= 4096), ``"device_tiled"``. The same on every rank.
    loops_per_sync : int
        GPU loops queued before the host reads the stop flag (later ones return at once on the device).
    stream : optional
        The GPU loop's stream (as :func:`gpuopt.kmeans`); default: x_local's (PyTorch's or CuPy's current
        stream for their arrays), else the legacy default stream.
    x_memory : str
        A host shard on a GPU: ``"device"`` (uploaded once), ``"stream"`` (left in host memory, page-locked for
        the call, and streamed through two device slabs every loop, the copy of one slab overlapping the kernels
        of the other: the ``stream`` variant's pipeline, for shards past the GPU's memory), or ``"auto"``
        (streamed where the points would take more than half the GPU's memory). The same results either way.
    stream_rows : int
        A streamed slab's rows: a multiple of 32,768 (whole groups); 0: 256 MiB of points.
    overlap : bool, optional
        A GPU loop's exchange in two all-gathers, the first (half the groups) under the kernels of the second
        half, so the exchange hides behind the loop's own work. None (default): where the communicator moves
        slots device to device (NCCL) and every shard is on the device; True also over host memory (slower
        there: two round trips; for tests); False: one all-gather. The same bits either way; the same on every
        rank.
    timing : bool
        Also return a dict of CUDA-event milliseconds for a GPU loop (``loop_ms``: the whole loop; ``local_ms``,
        ``exchange_ms`` (the stream's wait for the all-gathers, the other ranks' lateness included; the first
        loop's also waits out the ranks' different start times, ``exchange_ms_steady`` is the median of the
        others'), ``close_ms``), empty for the CPU.

    Returns
    -------
    KMeansResult
        ``membership`` of this rank's rows (n_local,) int32; ``centroids``, ``iterations``, ``delta`` and
        ``converged`` of the whole run, the same on every rank. NumPy arrays for a host shard, DeviceArrays for a
        device one. With ``timing``, ``(result, Timing)`` (``kernel_ms`` the loop, the dict in ``details``).

    Raises
    ------
    TypeError, ValueError
        This rank's arguments (the other ranks raise CollectiveError), or arguments the ranks disagree on and
        shards that do not tile [0, N) from group boundaries (the same error on every rank).
    CollectiveError
        Another rank failed (its error is named) or a collective timed out. Nothing is returned on any rank.
    """
    comm = _default_comm() if comm is None else comm
    if not isinstance(comm, Communicator):
        raise TypeError(f"comm must be a gpuopt.distributed.Communicator (e.g. ThreadGroup(n).communicator(rank) "
                        f"or TorchCommunicator()), got {type(comm).__name__}")
    with _together(comm):
        a = _validate(x_local, k, threshold, max_iter, init, row_offset, timeout, variant, loops_per_sync, stream,
                      x_memory, stream_rows, overlap)
    lay = _agree(comm, a)
    centres = _initial_centres(comm, a, lay).copy()
    d = a.x.shape[1]
    with _together(comm):
        loop = _resolve(a, lay, d)
        run = None
        if loop == "cpu":
            _require_finite(a.x)  # (a GPU loop checks its points on the upload or on the device)
        else:
            on = a.stream if a.stream is not None else (a.x._stream or 0) if isinstance(a.x, DeviceArray) else 0
            run = kmeans_device.prepare(comm, a.x, lay.rows, list(lay.order), a.k, a.threshold, a.max_iter,
                                        centres, loop, on, a.timeout, sum_group(), a.x_memory, a.stream_rows,
                                        _parts(comm, a, lay))
    # Every rank ready, and on the same loop: a failure above reaches the others here, not in a loop's exchange.
    picked = np.concatenate(comm.all_gather(np.array([VARIANTS.index(loop)], np.int64), timeout=a.timeout))
    if (picked != picked[0]).any():
        raise ValueError(f"every rank must run the same loop; variant={a.variant!r} picked "
                         f"{[VARIANTS[int(v)] for v in picked]} (ranks without a usable GPU run cpu: give variant)")
    if run is not None:
        iterations, delta, ms = kmeans_device.run(run, a.max_iter, a.loops_per_sync, timing)
        host = isinstance(a.x, np.ndarray)
        c, m = (run.centres.numpy(), run.membership.numpy()) if host else (run.centres, run.membership)
        result = KMeansResult(c, m, iterations, delta, bool(delta[-1] <= np.float32(a.threshold)))
    else:
        result, ms = _run_cpu(comm, a, lay, centres), {}
    if timing:
        return result, Timing(0.0, ms.get("loop_ms", 0.0), 0.0, "gpu" if run is not None else "cpu", ms)
    return result


def _resolve(a: _Local, lay: _Layout, d: int) -> str:
    """The loop this rank runs: ``a.variant``, auto resolved by the whole data's shape."""
    if a.variant != "auto":
        return a.variant
    if not (isinstance(a.x, DeviceArray) or cuda_available()):
        return "cpu"
    return kmeans_device.loop_for(lay.n, d, a.k) or "cpu"


def _run_cpu(comm: Communicator, a: _Local, lay: _Layout, centres: np.ndarray) -> KMeansResult:
    n_local, d = a.x.shape
    membership = np.full(n_local, -1, np.int32)  # -1: the first loop changes every membership
    limit, deltas = np.float32(a.threshold), []
    while True:
        with _together(comm):
            new = _core.kmeans_predict(a.x, centres) if n_local else membership
            changed = int(np.count_nonzero(new != membership))
            membership = new
            slot = _cpu_slot(a.x, membership, changed, a.k, lay.rows)
        gathered = np.concatenate(comm.all_gather(slot[None], timeout=a.timeout))
        changed_all = _close_loop(gathered, lay, a.k, d, centres)
        deltas.append(np.float32(changed_all) / np.float32(lay.n))  # float32 / float32, as record_iteration
        if not (deltas[-1] > limit and len(deltas) < a.max_iter):
            break
    delta = np.array(deltas, np.float32)
    return KMeansResult(centres, membership, len(deltas), delta, bool(delta[-1] <= limit))


def _validate(x_local, k, threshold, max_iter, init, row_offset, timeout, variant, loops_per_sync, stream,
              x_memory, stream_rows, overlap) -> _Local:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(map(repr, VARIANTS))}; got {variant!r}")
    if not (overlap is None or isinstance(overlap, bool)):
        raise TypeError(f"overlap must be None, True or False; got {overlap!r}")
    if x_memory not in kmeans_device.X_MEMORY:
        raise ValueError(f"x_memory must be one of {', '.join(map(repr, kmeans_device.X_MEMORY))}; got {x_memory!r}")
    stream_rows = integer(stream_rows, "stream_rows", 0)
    if stream_rows % sum_group():
        raise ValueError(f"stream_rows must be 0 or a multiple of {sum_group()} (whole groups of the sum tree), "
                         f"got {stream_rows}")
    x = _shard(x_local, device_ok=True)
    if isinstance(x, DeviceArray) and variant == "cpu":
        raise TypeError("x_local is a device array and variant='cpu' runs on the host: pass a NumPy array or a "
                        "GPU variant")
    loops_per_sync = integer(loops_per_sync, "loops_per_sync", 1)
    stream = stream_handle(stream)
    k = integer(k, "k", 1)
    threshold = real(threshold, "threshold", 0.0)
    max_iter = integer(max_iter, "max_iter", 1)
    row_offset = None if row_offset is None else integer(row_offset, "row_offset", 0)
    timeout = real(timeout, "timeout", 0.0)
    if timeout == 0:
        raise ValueError("timeout must be > 0 seconds")
    if isinstance(init, str):
        if init != "first":
            raise ValueError(f"init must be None, 'first' or an array (k, D); got {init!r} (the random draws of "
                             f"gpuopt.kmeans are not offered across ranks)")
        init = None
    elif init is not None:
        init = float_array(init, "init", 2, "(k, D)")
        if not isinstance(init, np.ndarray):
            raise TypeError("init is a device array: pass a NumPy array")
        if init.shape != (k, x.shape[1]):
            raise ValueError(f"init must have shape (k, D) = ({k}, {x.shape[1]}), got {init.shape}")
        if not np.isfinite(init).all():
            raise ValueError("init must contain only finite values")
    return _Local(x, k, threshold, max_iter, init, row_offset, timeout, variant, loops_per_sync, stream, x_memory,
                  stream_rows, overlap)
