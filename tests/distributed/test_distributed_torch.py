"""TorchCommunicator: its protocol (header all-gather, padding, failures) over a stand-in for torch.distributed made
of threads (always run), and the real thing over gloo in separate processes (where torch is installed)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
import types

import numpy as np
import pytest

import gpuopt
from gpuopt.distributed import CollectiveError, ThreadGroup, TorchCommunicator, shard_bounds


# ----------------------------------------------------------------------------------------- a stand-in for torch


class _Tensor:
    def __init__(self, a):
        self.a = a

    def to(self, device):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.a


class _Work:
    def __init__(self, done):
        self.done = done

    def wait(self, timeout):
        self.done(timeout.total_seconds())
        return True


def fake_torch(size):
    """torch and torch.distributed as far as TorchCommunicator uses them: ranks are threads (a thread-local rank),
    collectives meet at a barrier; a wait that times out raises RuntimeError, as gloo's does."""
    barrier, slots, local = threading.Barrier(size), [None] * size, threading.local()

    def meet(timeout):
        try:
            barrier.wait(timeout)
        except threading.BrokenBarrierError:
            raise RuntimeError("Timed out waiting for the other ranks") from None

    def all_gather(out, t, group=None, async_op=False):
        def done(timeout):
            slots[local.rank] = t.a.copy()
            meet(timeout)
            for o, s in zip(out, slots):
                o.a = s.copy()
            meet(timeout)
        return _Work(done)

    def broadcast(t, src, group=None, async_op=False):
        def done(timeout):
            if local.rank == src:
                slots[src] = t.a.copy()
            meet(timeout)
            t.a[...] = slots[src]
            meet(timeout)
        return _Work(done)

    dist = types.SimpleNamespace(
        is_available=lambda: True, is_initialized=lambda: True, get_rank=lambda group=None: local.rank,
        get_world_size=lambda group=None: size, get_backend=lambda group=None: "gloo", all_gather=all_gather,
        broadcast=broadcast, get_global_rank=lambda group, r: r)
    torch = types.SimpleNamespace(
        from_numpy=lambda a: _Tensor(a), empty_like=lambda t: _Tensor(np.empty_like(t.a)), device=lambda d: d,
        distributed=dist)
    return torch, dist, local


@pytest.fixture
def fake(monkeypatch):
    def install(size):
        torch, dist, local = fake_torch(size)
        monkeypatch.setitem(sys.modules, "torch", torch)
        monkeypatch.setitem(sys.modules, "torch.distributed", dist)
        return local
    return install


def on_fake_ranks(local, size, fn):
    """fn() on `size` threads, each a rank of the stand-in; ThreadGroup only runs them (its communicator unused)."""
    def body(comm):
        local.rank = comm.rank
        return fn()
    return ThreadGroup(size, timeout=30).run(body)


def test_protocol_all_gather_broadcast(fake):
    local = fake(3)

    def fn():
        comm = TorchCommunicator()
        got = comm.all_gather(np.full((comm.rank, 2), comm.rank, np.float32))
        empty = comm.all_gather(np.zeros((0, 4)))
        root = comm.broadcast(np.arange(5, dtype=np.int64) if comm.rank == 2 else None, root=2)
        return got, empty, root

    for got, empty, root in on_fake_ranks(local, 3, fn):
        assert [g.shape for g in got] == [(0, 2), (1, 2), (2, 2)] and got[2].tolist() == [[2, 2], [2, 2]]
        assert [e.shape for e in empty] == [(0, 4)] * 3
        assert root.tolist() == [0, 1, 2, 3, 4]


def test_kmeans_over_the_protocol_and_by_default(fake):
    x = np.random.default_rng(9).normal(size=(70_001, 3)).astype(np.float32)
    ref = gpuopt.kmeans(x, 5, variant="cpu", summation="chunked", max_iter=8)
    bounds = shard_bounds(len(x), 3)
    local = fake(3)

    def fn():  # comm=None: torch.distributed's default group, as a program that made one gets
        start, stop = bounds[local.rank]
        return gpuopt.distributed.kmeans(x[start:stop], 5, max_iter=8)

    outs = on_fake_ranks(local, 3, fn)
    for out in outs:
        assert out.centroids.tobytes() == ref.centroids.tobytes() and out.delta.tobytes() == ref.delta.tobytes()
    np.testing.assert_array_equal(np.concatenate([o.membership for o in outs]), ref.membership)


def test_a_failing_rank_reaches_the_others_through_the_header(fake):
    x = np.zeros((100, 2), np.float32)
    local = fake(3)

    def fn():
        comm = TorchCommunicator(timeout=20)
        k = 0 if comm.rank == 1 else 3  # rank 1's k is invalid
        return gpuopt.distributed.kmeans(x if comm.rank == 0 else x[:0], k, comm=comm)

    start = time.monotonic()
    outs = on_fake_ranks(local, 3, fn)
    assert time.monotonic() - start < 5  # not the 20 s timeout
    assert isinstance(outs[1], ValueError) and "k must be >= 1" in str(outs[1])
    for o in (outs[0], outs[2]):
        assert isinstance(o, CollectiveError) and o.failed_rank == 1 and "ValueError: k must be >= 1" in str(o)


def test_timeouts_become_collective_errors(fake):
    local = fake(2)

    def fn():
        comm = TorchCommunicator()
        return None if comm.rank == 0 else comm.all_gather(np.zeros(3), timeout=0.3)

    outs = on_fake_ranks(local, 2, fn)
    assert outs[0] is None and isinstance(outs[1], CollectiveError) and "timed out after 0.3 s" in str(outs[1])


def test_without_torch_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(ImportError, match="TorchCommunicator needs PyTorch"):
        TorchCommunicator()


# ----------------------------------------------------------------------------------------- torch itself, over gloo

_RANK = textwrap.dedent("""
    import json, sys, datetime
    import numpy as np, torch.distributed as dist, gpuopt
    from gpuopt.distributed import TorchCommunicator, CollectiveError, shard_bounds
    rank, size, port, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=60))
    x = np.random.default_rng(11).normal(size=(70_001, 4)).astype(np.float32)
    a, b = shard_bounds(len(x), size)[rank]
    k = 0 if mode == "fail" and rank == 1 else 6
    try:
        r = gpuopt.distributed.kmeans(x[a:b], k, max_iter=10, comm=TorchCommunicator(timeout=30))
        out = {"centres": r.centroids.tobytes().hex(), "delta": r.delta.tobytes().hex(), "iterations": r.iterations,
               "membership": r.membership.tolist()}
    except Exception as exc:
        out = {"error": type(exc).__name__, "message": str(exc)}
    print(json.dumps(out))
""")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo_ranks(size, mode, cwd):
    pytest.importorskip("torch.distributed")
    port = _free_port()
    # cwd away from the checkout: the ranks import the installed gpuopt, as the tests do
    procs = [subprocess.Popen([sys.executable, "-c", _RANK, str(r), str(size), str(port), mode], cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(size)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=240)
        assert p.returncode == 0, stderr
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    return outs


def test_gloo_ranks_give_the_reference_bits(tmp_path):
    outs = _gloo_ranks(3, "ok", tmp_path)
    x = np.random.default_rng(11).normal(size=(70_001, 4)).astype(np.float32)
    ref = gpuopt.kmeans(x, 6, variant="cpu", summation="chunked", max_iter=10)
    for out in outs:
        assert "error" not in out, out
        assert out["centres"] == ref.centroids.tobytes().hex() and out["delta"] == ref.delta.tobytes().hex()
    assert sum((o["membership"] for o in outs), []) == ref.membership.tolist()


def test_gloo_a_failing_rank_fails_every_rank(tmp_path):
    outs = _gloo_ranks(3, "fail", tmp_path)
    assert outs[1]["error"] == "ValueError"
    assert all(o["error"] == "CollectiveError" and "rank 1 failed" in o["message"] for o in (outs[0], outs[2]))
