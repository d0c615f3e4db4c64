"""gpuopt.distributed: the collectives of ThreadGroup, argument checks across ranks, and failures: a rank that
raises makes every rank raise, within the timeout, and no rank returns a result."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

import gpuopt
from gpuopt.distributed import CollectiveError, Communicator, ThreadGroup, shard_bounds

G = 32768


def outcomes(shards, k, timeout=10.0, per_rank=None, **kw):
    """distributed.kmeans on one thread rank a shard; per_rank(rank) -> extra keyword arguments of that rank."""
    def rank_fn(comm):
        args = dict(kw, k=k, timeout=timeout)
        args.update(per_rank(comm.rank) if per_rank else {})
        return gpuopt.distributed.kmeans(shards[comm.rank], comm=comm, **args)

    start = time.monotonic()
    out = ThreadGroup(len(shards), timeout=timeout).run(rank_fn)
    return out, time.monotonic() - start


@pytest.fixture(scope="module")
def shards():
    x = np.random.default_rng(5).normal(size=(70_001, 3)).astype(np.float32)
    return [x[a:b] for a, b in shard_bounds(len(x), 3)]


# ----------------------------------------------------------------------------------------- the collectives


def test_all_gather_rows_may_differ_and_broadcast():
    def fn(comm):
        mine = np.full((comm.rank, 2), comm.rank, np.int64)
        got = comm.all_gather(mine)
        root = comm.broadcast(np.arange(3.0) if comm.rank == 1 else None, root=1)
        return got, root

    for got, root in ThreadGroup(3, timeout=10).run(fn):
        assert [g.shape for g in got] == [(0, 2), (1, 2), (2, 2)] and got[2].tolist() == [[2, 2], [2, 2]]
        assert root.tolist() == [0.0, 1.0, 2.0]


def test_all_gather_refuses_mismatched_rows_on_every_rank():
    outs = ThreadGroup(2, timeout=10).run(lambda c: c.all_gather(np.zeros((1, 2 + c.rank))))
    assert all(isinstance(o, ValueError) and "rank 1 gave float64 rows of shape (3,)" in str(o) for o in outs)


def test_fail_wakes_the_waiting_ranks_at_once():
    def fn(comm):
        if comm.rank == 2:
            time.sleep(0.2)  # the others are waiting in the collective by now
            comm.fail(KeyError("lost"))
            return "failed"
        return comm.all_gather(np.zeros(1))

    start = time.monotonic()
    outs = ThreadGroup(3, timeout=30).run(fn)
    assert time.monotonic() - start < 5
    assert outs[2] == "failed"
    for o in outs[:2]:
        assert isinstance(o, CollectiveError) and o.failed_rank == 2 and "rank 2 failed: KeyError: 'lost'" in str(o)


def test_a_rank_that_never_arrives_times_out_the_others():
    def fn(comm):
        return None if comm.rank == 0 else comm.all_gather(np.zeros(1), timeout=0.5)

    outs = ThreadGroup(3, timeout=30).run(fn)
    assert outs[0] is None
    for o in outs[1:]:
        assert isinstance(o, CollectiveError) and o.failed_rank is None and "timed out" in str(o)


# ----------------------------------------------------------------------------------------- a rank's own arguments


@pytest.mark.parametrize("bad,error,match", [
    (dict(x=np.full((4465, 3), np.nan, np.float32)), ValueError, "x_local must contain only finite values"),
    (dict(x=np.zeros((4465,), np.float32)), ValueError, "x_local must be 2-D"),
    (dict(x=np.zeros((4465, 3), np.int32)), TypeError, "x_local must be a floating-point array"),
    (dict(k=2.0), TypeError, "k must be an integer"),
    (dict(threshold=-1.0), ValueError, "threshold must be >= 0.0"),
    (dict(timeout=0), ValueError, "timeout must be > 0"),
    (dict(init="random"), ValueError, "init must be None, 'first' or an array"),
    (dict(init=np.zeros((4, 3), np.float32)), ValueError, r"init must have shape \(k, D\) = \(5, 3\)"),
])
def test_a_rank_with_bad_arguments_fails_every_rank(shards, bad, error, match):
    """Rank 2's own argument is wrong: it raises that error, the others a CollectiveError naming it, at once."""
    local = list(shards)
    if "x" in bad:
        local[2] = bad.pop("x")
    outs, seconds = outcomes(local, 5, per_rank=lambda r: bad if r == 2 else {})
    assert seconds < 5  # the others are woken by the failure, not by the 10 s timeout
    with pytest.raises(error, match=match):
        raise outs[2]
    for o in outs[:2]:
        assert isinstance(o, CollectiveError) and o.failed_rank == 2, o
        assert error.__name__ in str(o) and "rank 2 failed" in str(o)


# ----------------------------------------------------------------------------------------- what the ranks must agree on


@pytest.mark.parametrize("per_rank,match", [
    (lambda r: dict(k=5 + (r == 1)), r"every rank must give the same k: rank 0 has 5, rank 1 6"),
    (lambda r: dict(max_iter=10 * (1 + r)), r"the same max_iter"),
    (lambda r: dict(threshold=0.001 * (1 + r)), r"the same threshold \(as float32\)"),
    (lambda r: dict(row_offset=[0, G, 2 * G][r]) if r else {}, r"the same whether row_offset is given"),
    (lambda r: dict(init=np.full((5, 3), r, np.float32)), r"init must be the same on every rank: rank 1's"),
    (lambda r: dict(row_offset=[0, G, G][r]), r"must tile rows \[0, N\) .* rank 2 starts at row 32768, the shards "
                                              r"before it end at 65536"),
    (lambda r: dict(row_offset=[0, G, 2 * G + 1][r]), r"rank 2's shard starts at row 65537"),
])
def test_disagreement_raises_the_same_error_on_every_rank(shards, per_rank, match):
    outs, _ = outcomes(shards, 5, per_rank=per_rank)
    assert len({str(o) for o in outs}) == 1, outs
    for o in outs:
        with pytest.raises(ValueError, match=match):
            raise o


def test_shards_off_group_boundaries_and_other_sizes():
    x = np.zeros((50_000, 2), np.float32)
    outs, _ = outcomes([x[:40_000], x[40_000:]], 3)  # rank 1 would start at 40,000
    for o in outs:
        with pytest.raises(ValueError, match=r"rank 1's shard starts at row 40000 .* not a multiple of 32768"):
            raise o
    outs, _ = outcomes([x[:2], np.zeros((0, 2), np.float32)], 3)
    assert all(isinstance(o, ValueError) and "k must be <= the number of objects N=2" in str(o) for o in outs)
    outs, _ = outcomes([x[:2], np.zeros((0, 3), np.float32)], 1)
    assert all(isinstance(o, ValueError) and "the same D (x_local.shape[1]): rank 0 has 2, rank 1 3" in str(o)
               for o in outs)
    outs, _ = outcomes([np.zeros((0, 2), np.float32)] * 2, 1)
    assert all(isinstance(o, ValueError) and "every rank's shard is empty" in str(o) for o in outs)


def test_comm_must_be_a_communicator():
    with pytest.raises(TypeError, match="comm must be a gpuopt.distributed.Communicator"):
        gpuopt.distributed.kmeans(np.zeros((3, 2), np.float32), 2, comm=ThreadGroup(1))
    assert isinstance(ThreadGroup(1).communicator(0), Communicator)


# ----------------------------------------------------------------------------------------- failures inside the loop


def test_a_rank_failing_in_the_loop_fails_every_rank(shards, monkeypatch):
    """Rank 1's third group-sum call raises: every rank raises at that loop; no rank returns a result."""
    module = sys.modules["gpuopt.distributed.kmeans"]
    real, calls = module._core, {"n": 0}

    class Core:
        kmeans_predict = staticmethod(real.kmeans_predict)
        kmeans_slot_layout = staticmethod(real.kmeans_slot_layout)

        @staticmethod
        def kmeans_group_sums(x, membership, k):
            if threading.current_thread().name == "gpuopt-rank-1":
                calls["n"] += 1
                if calls["n"] == 3:
                    raise MemoryError("no room for the group sums")
            return real.kmeans_group_sums(x, membership, k)

    monkeypatch.setattr(module, "_core", Core)
    outs, seconds = outcomes(shards, 5, threshold=0.0, max_iter=50, variant="cpu")  # the host loop's group sums
    assert seconds < 5
    assert isinstance(outs[1], MemoryError)
    for r in (0, 2):
        assert isinstance(outs[r], CollectiveError) and "rank 1 failed: MemoryError: no room" in str(outs[r])


def test_a_rank_that_stops_coming_times_out_the_others(shards):
    def rank_fn(comm):
        if comm.rank == 0:
            return "gone"  # never joins: the others must not hang
        return gpuopt.distributed.kmeans(shards[comm.rank], 5, comm=comm, timeout=0.5)

    start = time.monotonic()
    outs = ThreadGroup(3, timeout=30).run(rank_fn)
    assert time.monotonic() - start < 5
    assert outs[0] == "gone"
    assert all(isinstance(o, CollectiveError) and "timed out" in str(o) for o in outs[1:])
