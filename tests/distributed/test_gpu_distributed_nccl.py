"""gpuopt.distributed.kmeans over NCCL: two to four processes (as many GPUs as the machine has), one GPU each,
launched by torchrun; the slots all-gathered device to device. Every rank's centres, delta history and loop count, and the memberships joined, are the bits of
the single-GPU loop and of ``cpu(summation="chunked")``, for torch and NumPy shards and every loop; a rank that fails
fails every rank; Liao's command line under torchrun writes his files with those bits. Needs torch and two GPUs
(three and four for those launches)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpuopt
from gpuopt import datasets
from gpuopt.distributed import shard_bounds

pytestmark = pytest.mark.gpu

# (name, N, D, k, variant, shard): the loops, a shard smaller than a group, the deep path, host shards uploaded
# and streamed in slabs of one group, and the exchange in one all-gather (the others: two where shards allow).
CASES = [("device", 100_000, 4, 6, "device", "torch"), ("gemm", 100_000, 8, 300, "device_gemm", "torch"),
         ("tiled", 200_001, 16, 256, "device_tiled", "torch"), ("deep", 70_001, 257, 10, "auto", "torch"),
         ("host", 100_000, 4, 6, "auto", "numpy"), ("streamed", 200_001, 16, 256, "device_tiled", "stream"),
         ("one_part", 200_001, 16, 256, "device_tiled", "torch")]

_WORKER = textwrap.dedent("""
    import datetime, json, os, sys
    import numpy as np, torch, torch.distributed as dist, gpuopt
    from gpuopt.distributed import CollectiveError, TorchCommunicator, shard_bounds
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120))
    cases, mode, out = json.loads(sys.argv[1]), sys.argv[2], {}
    for name, n, d, k, variant, shard_kind in cases:
        x = np.random.default_rng(n + d).uniform(-1, 1, (n, d)).astype(np.float32)
        if mode == "fail" and rank == 1:
            x[shard_bounds(n, size)[1][0] + 3, 0] = np.nan
        a, b = shard_bounds(n, size)[rank]
        shard = torch.from_numpy(x[a:b]).cuda() if shard_kind == "torch" else x[a:b]
        # the exchange in two parts by default over NCCL (every shard on the device); one all-gather for one_part
        extra = dict(x_memory="stream", stream_rows=32768) if shard_kind == "stream" else \
            dict(overlap=False) if name == "one_part" else {}
        try:
            r = gpuopt.distributed.kmeans(shard, k, variant=variant, threshold=0.0, max_iter=5,
                                          comm=TorchCommunicator(timeout=60), **extra)
            host = lambda v: v if isinstance(v, np.ndarray) else v.numpy()
            out[name] = {"centres": host(r.centroids).tobytes().hex(), "delta": r.delta.tobytes().hex(),
                         "iterations": r.iterations, "membership": host(r.membership).tobytes().hex(),
                         "device_result": not isinstance(r.centroids, np.ndarray)}
        except Exception as exc:
            out[name] = {"error": type(exc).__name__, "message": str(exc)}
    dist.destroy_process_group()
    with open(f"rank{rank}.json", "w") as f:
        json.dump(out, f)
""")

#: NCCL on the device machines: NVLink multicast (NVLS) off, as their README asks.
_NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def gpus(count=2):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.distributed")
    if torch.cuda.device_count() < count:
        pytest.skip(f"needs {count} GPUs (this machine has {torch.cuda.device_count()})")


def torchrun(args, cwd, nproc=2, timeout=600):
    env = {**os.environ, **_NCCL_ENV}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def run_workers(tmp_path, cases, mode="ok", nproc=2):
    gpus(nproc)
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    done = torchrun([str(script), json.dumps(cases), mode], tmp_path, nproc=nproc)
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(nproc)]


@pytest.mark.parametrize("nproc", [2, 3, 4])
def test_nccl_ranks_give_the_single_gpu_bits(tmp_path, nproc):
    outs = run_workers(tmp_path, CASES, nproc=nproc)
    for name, n, d, k, variant, shard_kind in CASES:
        x = np.random.default_rng(n + d).uniform(-1, 1, (n, d)).astype(np.float32)
        ref = gpuopt.kmeans(x, k, variant="cpu", summation="chunked", threshold=0.0, max_iter=5)
        one = gpuopt.kmeans(x, k, variant=None if variant == "auto" else variant, threshold=0.0, max_iter=5)
        assert one.centroids.tobytes() == ref.centroids.tobytes(), name
        for r, out in enumerate(outs):
            got = out[name]
            assert "error" not in got, (name, r, got)
            assert got["centres"] == ref.centroids.tobytes().hex(), (name, r)
            assert got["delta"] == ref.delta.tobytes().hex() and got["iterations"] == ref.iterations, (name, r)
            assert got["device_result"] == (shard_kind == "torch")
        joined = np.concatenate([np.frombuffer(bytes.fromhex(o[name]["membership"]), np.int32) for o in outs])
        np.testing.assert_array_equal(joined, ref.membership, err_msg=name)
        assert [len(bytes.fromhex(o[name]["membership"])) // 4 for o in outs] == \
            [b - a for a, b in shard_bounds(n, nproc)]


@pytest.mark.parametrize("nproc", [2, 4])
def test_nccl_a_failing_rank_fails_every_rank(tmp_path, nproc):
    outs = run_workers(tmp_path, [c for c in CASES if c[0] == "host"], mode="fail", nproc=nproc)
    assert outs[1]["host"]["error"] == "ValueError" and "finite" in outs[1]["host"]["message"]
    for r in (0, *range(2, nproc)):
        assert outs[r]["host"]["error"] == "CollectiveError" and "rank 1 failed" in outs[r]["host"]["message"], r


@pytest.mark.parametrize("variant, nproc", [("auto", 2), ("auto", 4), ("cpu", 3)])
def test_liao_command_line_under_torchrun(tmp_path, variant, nproc):
    gpus(nproc if variant == "auto" else 2)
    x = np.random.default_rng(7).normal(size=(90_000, 5)).astype(np.float32)
    path = datasets.write_liao(tmp_path / "points.bin", x, binary=True)
    ref = gpuopt.kmeans(x, 7, variant="cpu", summation="chunked", threshold=0.0005)
    datasets.write_liao_output(path, ref.centroids, ref.membership, out_dir=tmp_path / "ref")
    done = torchrun(["-m", "gpuopt.kmeans", "-i", str(path), "-n", "7", "-b", "-t", "0.0005", "-o",
                     "--variant", variant, "--out", str(tmp_path / "out")], tmp_path, nproc=nproc)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.count("Writing membership of N=90000 data objects") == 1  # rank 0 only
    assert f"Loop iterations    = {ref.iterations}" in done.stdout
    for suffix in ("cluster_centres", "membership"):
        assert (tmp_path / "out" / f"points.bin.{suffix}").read_bytes() == \
            (tmp_path / "ref" / f"points.bin.{suffix}").read_bytes(), suffix


def test_command_line_failure_writes_nothing(tmp_path):
    gpus()
    done = torchrun(["-m", "gpuopt.kmeans", "-i", str(tmp_path / "absent.bin"), "-n", "3", "-b", "--out",
                     str(tmp_path / "out")], tmp_path)
    assert done.returncode != 0 and "no such file" in done.stderr
    assert not (tmp_path / "out").exists()
