"""gpuopt.distributed.kmeans on the GPU (csrc/kmeans/kmeans_multi.cu) with ranks as threads sharing one GPU, the
slots exchanged through host memory: the bits of ``cpu(summation="chunked")`` and of the single-GPU loop for 1 to 5
ranks, every loop (device, device_gemm, device_tiled with its tile and deep paths), ragged shards, a shard smaller
than a group, an empty shard, k above a rank's rows, an empty cluster; device shards in place; the exchange in two
parts (overlap=True); a failing rank.
Every device allocation is poisoned (NaN) first (conftest). Over NCCL on two GPUs: test_gpu_distributed_nccl.py."""

from __future__ import annotations

import numpy as np
import pytest

import gpuopt
from gpuopt.distributed import CollectiveError, ThreadGroup, shard_bounds

from .test_distributed_kmeans import G

pytestmark = pytest.mark.gpu


def run_ranks(x, k, bounds, timeout=120.0, shard=lambda a: a, **kw):
    """distributed.kmeans on len(bounds) thread ranks (rank r: rows bounds[r], passed through ``shard``)."""
    def rank_fn(comm):
        start, stop = bounds[comm.rank]
        return gpuopt.distributed.kmeans(shard(x[start:stop]), k, comm=comm, timeout=timeout, **kw)

    return ThreadGroup(len(bounds), timeout=timeout).run(rank_fn)


def host(a):
    return a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else np.asarray(a)


def assert_bits(x, k, bounds, variant, ref=None, shard=lambda a: a, ranks_kw=None, **kw):
    """Every rank's result against cpu(summation="chunked") on the whole data (and the memberships joined);
    ``ranks_kw``: the distributed call's own keywords."""
    ref = ref or gpuopt.kmeans(x, k, variant="cpu", summation="chunked", **kw)
    outs = run_ranks(x, k, bounds, variant=variant, shard=shard, **kw, **(ranks_kw or {}))
    for r, out in enumerate(outs):
        if isinstance(out, BaseException):
            raise AssertionError(f"rank {r} raised") from out
        assert host(out.centroids).tobytes() == ref.centroids.tobytes(), f"rank {r}: centres differ"
        assert out.iterations == ref.iterations and out.converged == ref.converged, r
        assert out.delta.tobytes() == ref.delta.tobytes(), r
        assert out.membership.shape == (bounds[r][1] - bounds[r][0],)
    np.testing.assert_array_equal(np.concatenate([host(o.membership) for o in outs]), ref.membership)
    return outs


@pytest.fixture(scope="module")
def blobs():
    x, _ = gpuopt.datasets.make_kmeans_blobs(140_001, 4, k=6, seed=140_001)
    return x


@pytest.mark.parametrize("variant,k", [("device", 6), ("device_gemm", 300), ("device_tiled", 6),
                                       ("device_tiled", 300), ("auto", 6)])
@pytest.mark.parametrize("ranks", [1, 2, 3, 5])
def test_every_loop_any_ranks(blobs, variant, k, ranks):
    assert_bits(blobs, k, shard_bounds(len(blobs), ranks), variant, threshold=0.0, max_iter=6)


def test_same_as_the_single_gpu_loop(blobs):
    one = gpuopt.kmeans(blobs, 6, variant="device_tiled", threshold=0.0, max_iter=6)
    outs = run_ranks(blobs, 6, shard_bounds(len(blobs), 3), variant="device_tiled", threshold=0.0, max_iter=6)
    assert all(o.centroids.tobytes() == one.centroids.tobytes() for o in outs)
    np.testing.assert_array_equal(np.concatenate([o.membership for o in outs]), one.membership)


@pytest.mark.parametrize("n,d,k", [(70_001, 1, 3), (70_001, 17, 40), (66_000, 129, 7), (40_000, 257, 5)], ids=str)
def test_long_and_short_points(rng, n, d, k):
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    assert_bits(x, k, shard_bounds(n, 3), "auto", threshold=0.0, max_iter=3)


@pytest.mark.parametrize("variant,k", [("device", 6), ("device_tiled", 300)])
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_the_exchange_in_two_parts(blobs, variant, k, ranks):
    # overlap=True: part 0 (the first half of every rank's groups) all-gathered from the side stream before part
    # 1's kernels; 5 groups: 3 + 2 on one rank, a rank whose shard ends inside part 0 at 2 ranks (2 + 3 groups)
    assert_bits(blobs, k, shard_bounds(len(blobs), ranks), variant, ranks_kw=dict(overlap=True), threshold=0.0,
                max_iter=6)


def test_two_parts_with_shards_out_of_order_and_long_points(rng):
    x = rng.uniform(-1, 1, (3 * G + 100, 3)).astype(np.float32)
    ref = gpuopt.kmeans(x, 5, variant="cpu", summation="chunked", threshold=0.0, max_iter=3)
    bounds = [(2 * G, 3 * G + 100), (0, 2 * G)]

    def rank_fn(comm):
        start, stop = bounds[comm.rank]
        return gpuopt.distributed.kmeans(x[start:stop], 5, comm=comm, row_offset=start, variant="device",
                                         init=x[:5], threshold=0.0, max_iter=3, overlap=True)
    outs = ThreadGroup(2, timeout=60).run(rank_fn)
    assert all(o.centroids.tobytes() == ref.centroids.tobytes() for o in outs)
    np.testing.assert_array_equal(np.concatenate([outs[1].membership, outs[0].membership]), ref.membership)
    y = rng.uniform(-1, 1, (2 * G + 7, 257)).astype(np.float32)
    assert_bits(y, 9, shard_bounds(len(y), 2), "auto", ranks_kw=dict(overlap=True), threshold=0.0, max_iter=3)


def test_two_parts_refuse_a_streamed_shard(blobs):
    outs = run_ranks(blobs, 6, shard_bounds(len(blobs), 2), variant="device", overlap=True, timeout=30,
                     shard=lambda a: a, x_memory="stream")
    assert all(isinstance(o, ValueError) and "overlap=True" in str(o) for o in outs)


def test_threshold_stops_every_rank_together(blobs):
    ref = gpuopt.kmeans(blobs, 6, variant="cpu", summation="chunked", max_iter=100)
    assert ref.converged and 1 < ref.iterations < 100
    for lps in (1, 3, 32):
        assert_bits(blobs, 6, shard_bounds(len(blobs), 2), "device", ref=ref, max_iter=100,
                    ranks_kw=dict(loops_per_sync=lps))


def test_awkward_shards(rng):
    # a rank with fewer rows than a group and than k; an empty shard (more ranks than groups); explicit offsets in
    # reverse rank order
    x = rng.uniform(-1, 1, (G + 100, 3)).astype(np.float32)
    assert_bits(x, 200, [(0, G), (G, G + 100)], "device_tiled", threshold=0.0, max_iter=3)
    assert_bits(x, 5, [(0, G), (G, G + 100), (G + 100, G + 100)], "device", threshold=0.0, max_iter=3)
    ref = gpuopt.kmeans(x, 5, variant="cpu", summation="chunked", threshold=0.0, max_iter=3)

    def rank_fn(comm):
        start, stop = [(G, G + 100), (0, G)][comm.rank]
        return gpuopt.distributed.kmeans(x[start:stop], 5, comm=comm, row_offset=start, variant="device",
                                         init=x[:5], threshold=0.0, max_iter=3)
    outs = ThreadGroup(2, timeout=60).run(rank_fn)
    assert all(o.centroids.tobytes() == ref.centroids.tobytes() for o in outs)
    np.testing.assert_array_equal(np.concatenate([outs[1].membership, outs[0].membership]), ref.membership)


def test_an_empty_cluster_keeps_its_centre(rng):
    x = rng.uniform(0, 1, (80_000, 2)).astype(np.float32)
    init = np.array([[0.2, 0.2], [0.8, 0.8], [50.0, 50.0]], np.float32)  # nothing near the third
    outs = assert_bits(x, 3, shard_bounds(len(x), 3), "device_tiled", init=init, threshold=0.0, max_iter=4)
    assert outs[0].centroids[2].tolist() == [50.0, 50.0]


def test_device_shards_in_place(blobs):
    outs = assert_bits(blobs, 6, shard_bounds(len(blobs), 2), "device_tiled", shard=gpuopt.to_device,
                       threshold=0.0, max_iter=4)
    assert all(isinstance(o.centroids, gpuopt.cuda.DeviceArray) for o in outs)


@pytest.mark.parametrize("variant", ["device", "device_tiled"])
def test_an_empty_device_shard(rng, variant):
    # more ranks than groups with torch shards: the last rank's is a (0, D) tensor, and it still takes part
    torch = pytest.importorskip("torch")
    x = rng.uniform(-1, 1, (G + 100, 3)).astype(np.float32)
    outs = assert_bits(x, 5, [(0, G), (G, G + 100), (G + 100, G + 100)], variant,
                       shard=lambda a: torch.from_numpy(a).cuda(), threshold=0.0, max_iter=3)
    assert all(isinstance(o.centroids, gpuopt.cuda.DeviceArray) for o in outs)


@pytest.mark.parametrize("variant,k", [("device", 6), ("device_tiled", 300)])
def test_streamed_from_host_memory(blobs, variant, k):
    # slabs of one group: 3 of them on rank 0, 2 (the last partial) on rank 1; and the same with slabs longer
    # than a shard (two slab buffers for one slab)
    for rows in (G, 8 * G):
        assert_bits(blobs, k, shard_bounds(len(blobs), 2), variant, ranks_kw=dict(x_memory="stream",
                    stream_rows=rows), threshold=0.0, max_iter=5)


def test_streaming_takes_host_shards_only(blobs):
    outs = run_ranks(blobs, 6, shard_bounds(len(blobs), 2), variant="device", shard=gpuopt.to_device,
                     x_memory="stream", timeout=30)
    assert any(isinstance(o, ValueError) and "streams a host shard" in str(o) for o in outs)
    with pytest.raises(ValueError, match="multiple of 32768"):
        gpuopt.distributed.kmeans(blobs, 6, stream_rows=1000)


def test_torch_shards_on_a_side_stream(blobs):
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert_bits(blobs, 6, shard_bounds(len(blobs), 2), "device",
                    shard=lambda a: torch.from_numpy(a).cuda(), threshold=0.0, max_iter=4)


def test_timing(blobs):
    outs = run_ranks(blobs, 6, shard_bounds(len(blobs), 2), variant="device", threshold=0.0, max_iter=3,
                     timing=True)
    for result, t in outs:
        assert result.iterations == 3 and t.device == "gpu"
        assert t.kernel_ms > 0 and {"local_ms", "exchange_ms", "close_ms"} <= set(t.details)


def test_a_failing_rank_fails_every_rank(blobs):
    bad = blobs.copy()
    bad[G + 5, 1] = np.nan  # in rank 1's shard: its upload finds it
    outs = run_ranks(bad, 6, shard_bounds(len(bad), 3), variant="device", timeout=30)
    assert isinstance(outs[1], ValueError) and "finite" in str(outs[1])
    assert all(isinstance(outs[r], CollectiveError) and "rank 1 failed" in str(outs[r]) for r in (0, 2))


@pytest.mark.parametrize("variant,where", [("device", "device"), ("device_tiled", "device"),
                                           ("device", "streamed")])
def test_a_non_finite_point_on_the_device_fails_every_rank_alike(blobs, variant, where):
    # Not read on the host (a device shard; a streamed one's slabs): found by the close of every rank from the
    # gathered sums, the same ValueError on every rank at the same loop.
    bad = blobs.copy()
    bad[G + 7, 2] = np.inf  # rank 1's shard
    kw = dict(shard=gpuopt.to_device) if where == "device" else dict(x_memory="stream", stream_rows=G)
    outs = run_ranks(bad, 6, shard_bounds(len(bad), 3), variant=variant, timeout=30, **kw)
    assert all(isinstance(o, ValueError) and "only finite values" in str(o) for o in outs), outs


def test_a_rank_out_of_memory_fails_every_rank(blobs, monkeypatch):
    # Rank 1's allocations fail (as a GPU out of memory does, in prepare): the others raise at the ready
    # all-gather, before any loop's exchange, naming it; nothing is returned anywhere.
    from gpuopt.distributed import kmeans_device

    real = kmeans_device.prepare

    def prepare(comm, *args, **kw):
        if comm.rank == 1:
            raise MemoryError("out of memory: the loop's buffers on rank 1's GPU")
        return real(comm, *args, **kw)

    monkeypatch.setattr(kmeans_device, "prepare", prepare)
    outs = run_ranks(blobs, 6, shard_bounds(len(blobs), 3), variant="device_tiled", timeout=30)
    assert isinstance(outs[1], MemoryError)
    assert all(isinstance(outs[r], CollectiveError) and "rank 1 failed: MemoryError" in str(outs[r]) for r in (0, 2))


def test_past_a_loops_limits_a_clear_error(blobs):
    outs = run_ranks(blobs, 300, shard_bounds(len(blobs), 2), variant="device", timeout=30)
    assert all(isinstance(o, (ValueError, CollectiveError)) for o in outs)
    assert any(isinstance(o, ValueError) and "k*D" in str(o) for o in outs)
