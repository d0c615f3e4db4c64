"""gpuopt.distributed.kmeans with ranks as threads: the cpu reference's chunked run, bit for bit, for any split."""

from __future__ import annotations

import numpy as np
import pytest

import gpuopt
from gpuopt import datasets
from gpuopt.distributed import ThreadGroup, kmeans_group_sums, shard_bounds, sum_group

G = 32768


def run_ranks(x, k, bounds, timeout=30.0, explicit_offsets=False, **kw):
    """distributed.kmeans on len(bounds) thread ranks, rank r holding rows bounds[r]; every rank's outcome."""
    def rank_fn(comm):
        start, stop = bounds[comm.rank]
        offset = start if explicit_offsets else None
        return gpuopt.distributed.kmeans(x[start:stop], k, comm=comm, row_offset=offset, timeout=timeout, **kw)

    return ThreadGroup(len(bounds), timeout=timeout).run(rank_fn)


def assert_same_as_reference(x, k, bounds, ref=None, **kw):
    ref = ref or gpuopt.kmeans(x, k, variant="cpu", summation="chunked", **kw)
    outs = run_ranks(x, k, bounds, **kw)
    for r, out in enumerate(outs):
        if isinstance(out, BaseException):
            raise AssertionError(f"rank {r} raised") from out
        assert out.centroids.tobytes() == ref.centroids.tobytes(), f"rank {r}: centres differ"
        assert out.iterations == ref.iterations and out.converged == ref.converged
        assert out.delta.dtype == np.float32 and out.delta.tobytes() == ref.delta.tobytes()
        start, stop = bounds[r]
        assert out.membership.dtype == np.int32 and out.membership.shape == (stop - start,)
    np.testing.assert_array_equal(np.concatenate([o.membership for o in outs]), ref.membership)
    return ref


@pytest.fixture(scope="module")
def uniform_100k():
    x = np.random.default_rng(100_000).uniform(0, 1, (100_000, 3)).astype(np.float32)
    kw = dict(threshold=0.001, max_iter=12)  # no structure: max_iter stops it
    ref = gpuopt.kmeans(x, 8, variant="cpu", summation="chunked", **kw)
    assert ref.iterations == 12 and not ref.converged
    return x, ref, kw


@pytest.fixture(scope="module")
def blobs_70001():
    x, _ = datasets.make_kmeans_blobs(70_001, 5, k=6, seed=70_001)
    ref = gpuopt.kmeans(x, 6, variant="cpu", summation="chunked", max_iter=100)
    assert ref.converged and 1 < ref.iterations < 100  # the threshold stops it
    return x, ref, dict(max_iter=100)


@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 5])
def test_uniform_100k_stopped_by_max_iter(uniform_100k, ranks):
    x, ref, kw = uniform_100k
    assert_same_as_reference(x, 8, shard_bounds(len(x), ranks), ref, **kw)


@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 5])
def test_ragged_70001_stopped_by_threshold(blobs_70001, ranks):
    x, ref, kw = blobs_70001
    bounds = shard_bounds(len(x), ranks)  # 3 groups: from 4 ranks on some shards are empty
    assert bounds[-1][1] == len(x) and (len(x) - G * 2) % G != 0
    assert_same_as_reference(x, 6, bounds, ref, **kw)


@pytest.mark.parametrize("case", range(4))
def test_random_shapes_and_splits(rng, case):
    """Random N (up to ~4.6 groups), D, k, rank count, cuts at random group boundaries (empty shards included) and
    a random rank order: the reference's bits."""
    n, d = int(rng.integers(1, 150_000)), int(rng.integers(1, 7))
    k, ranks = int(rng.integers(1, min(n, 12) + 1)), int(rng.integers(1, 6))
    groups = -(-n // G)
    cuts = np.sort(rng.integers(0, groups + 1, ranks - 1))
    edges = [0, *(min(int(c) * G, n) for c in cuts), n]
    bounds = [(edges[i], edges[i + 1]) for i in range(ranks)]
    bounds = [bounds[i] for i in rng.permutation(ranks)]  # any rank may hold any shard, given row_offset
    x = rng.normal(size=(n, d)).astype(np.float32)
    kw = dict(threshold=float(rng.choice([0.0, 0.01])), max_iter=int(rng.integers(1, 15)))
    ref = gpuopt.kmeans(x, k, variant="cpu", summation="chunked", **kw)
    outs = run_ranks(x, k, bounds, explicit_offsets=True, **kw)
    for (start, stop), out in zip(bounds, outs):
        assert not isinstance(out, BaseException), (n, d, k, bounds, out)
        assert out.centroids.tobytes() == ref.centroids.tobytes(), (n, d, k, bounds)
        assert out.iterations == ref.iterations and out.delta.tobytes() == ref.delta.tobytes()
        np.testing.assert_array_equal(out.membership, ref.membership[start:stop])


def test_shards_in_any_rank_order_with_empty_and_short_ones(blobs_70001):
    x, ref, kw = blobs_70001
    # rank 0 holds the ragged end, rank 2 the start; ranks 1 and 4 hold nothing
    bounds = [(65536, 70001), (0, 0), (0, 32768), (32768, 65536), (70001, 70001)]
    outs = run_ranks(x, 6, bounds, explicit_offsets=True, **kw)
    for out in outs:
        assert out.centroids.tobytes() == ref.centroids.tobytes() and out.delta.tobytes() == ref.delta.tobytes()
    for (start, stop), out in zip(bounds, outs):
        np.testing.assert_array_equal(out.membership, ref.membership[start:stop])


def test_a_shard_smaller_than_a_group_and_k_above_a_shards_rows(rng):
    x = rng.normal(size=(G + 10, 2)).astype(np.float32)
    assert_same_as_reference(x, 20, [(0, G), (G, G + 10)], max_iter=6)  # rank 1: 10 rows, k = 20


def test_first_k_rows_gathered_across_shards(rng):
    # k > 32,768: Liao's initial centres come from two ranks' shards (and rank 0 holds none of them)
    n, k = G + 100, G + 40
    x = rng.normal(size=(n, 1)).astype(np.float32)
    assert_same_as_reference(x, k, [(0, 0), (0, G), (G, n)], max_iter=1)


def test_duplicates_ties_and_empty_clusters(rng):
    # Coordinates in {0, 1, 2, 3}: duplicate points, equidistant centres (ties to the lower index), and equal
    # initial centres: in the first loop every tie goes to the first of them, the others stay empty
    x = rng.integers(0, 4, (50_000, 2)).astype(np.float32)
    x[:6] = [[1, 1], [1, 1], [0, 0], [2, 2], [1, 1], [3, 0]]
    bounds = shard_bounds(len(x), 3)
    first = assert_same_as_reference(x, 6, bounds, max_iter=1)
    assert not np.isin(first.membership, [1, 4]).any()
    assert first.centroids[1].tolist() == [1.0, 1.0] and first.centroids[4].tolist() == [1.0, 1.0]
    assert_same_as_reference(x, 6, bounds, threshold=0.0, max_iter=30)


def test_given_init_and_a_cluster_that_stays_empty(rng):
    x = rng.uniform(0, 1, (40_000, 3)).astype(np.float32)
    init = np.array([[0.2, 0.2, 0.2], [0.8, 0.8, 0.8], [100.0, 100.0, 100.0]], np.float32)
    ref = assert_same_as_reference(x, 3, [(0, G), (G, 40_000)], init=init)
    assert ref.centroids[2].tolist() == [100.0, 100.0, 100.0]


def test_no_comm_is_one_rank():
    x, _ = datasets.make_kmeans_blobs(3000, 4, k=5, seed=3)
    ref = gpuopt.kmeans(x, 5, variant="cpu", summation="chunked")
    out = gpuopt.distributed.kmeans(x, 5)
    assert out.centroids.tobytes() == ref.centroids.tobytes() and out.iterations == ref.iterations
    np.testing.assert_array_equal(out.membership, ref.membership)


def test_shard_bounds():
    assert sum_group() == G
    assert shard_bounds(70_001, 2) == [(0, G), (G, 70_001)]
    assert shard_bounds(70_001, 5) == [(0, 0), (0, G), (G, G), (G, 2 * G), (2 * G, 70_001)]
    assert shard_bounds(10, 3) == [(0, 0), (0, 0), (0, 10)]
    assert shard_bounds(0, 2) == [(0, 0), (0, 0)]


# ----------------------------------------------------------------------------------------- the group sums


def test_group_sums_of_one_shard_close_to_the_reference_centres(rng):
    x = rng.normal(size=(70_001, 4)).astype(np.float32)
    k = 9
    membership = gpuopt.kmeans_predict(x, x[:k], variant="cpu")
    sums, counts = kmeans_group_sums(x, membership, k)
    assert sums.shape == (3, k, 4) and sums.dtype == np.float64 and counts.shape == (3, k)
    assert counts.sum() == len(x) and counts[2].sum() == len(x) - 2 * G
    total = np.zeros((k, 4))
    for group in sums:  # from 0, in group order
        total += group
    centres = (total / counts.sum(axis=0)[:, None]).astype(np.float32)
    one_loop = gpuopt.kmeans(x, k, max_iter=1, variant="cpu", summation="chunked")
    assert centres.tobytes() == one_loop.centroids.tobytes()
    # a shard starting at a group boundary has the same groups as the whole data there
    tail_sums, tail_counts = kmeans_group_sums(x[G:], membership[G:], k)
    assert tail_sums.tobytes() == sums[1:].tobytes() and (tail_counts == counts[1:]).all()


def test_group_sums_of_an_empty_shard():
    sums, counts = kmeans_group_sums(np.zeros((0, 3), np.float32), np.zeros(0, np.int32), 4)
    assert sums.shape == (0, 4, 3) and counts.shape == (0, 4)


@pytest.mark.parametrize("membership,k,error,match", [
    (np.array([0, 1, 2]), 3, ValueError, r"membership must have shape \(n_local,\) = \(4,\)"),
    (np.array([0, 1, 2, 3]), 3, ValueError, r"membership must hold cluster indices in 0..k-1 \(k=3\), got 3"),
    (np.array([0, -1, 0, 0]), 3, ValueError,
     r"membership must hold cluster indices in 0..k-1 \(k=3\), got -1 at index 1"),
    (np.array([0.0, 1, 0, 0]), 3, TypeError, r"membership must be an integer array"),
    (np.array([0, 1, 0, 0]), 0, ValueError, r"k must be >= 1"),
])
def test_group_sums_arguments(membership, k, error, match):
    with pytest.raises(error, match=match):
        kmeans_group_sums(np.ones((4, 2), np.float32), membership, k)


def test_group_sums_binding_guards_its_bounds():
    with pytest.raises(ValueError, match=r"membership must hold cluster indices in 0..k-1 \(k=2\), got 5"):
        gpuopt._core.kmeans_group_sums(np.ones((3, 2), np.float32), np.array([0, 5, 1], np.int32), 2)


class _DeviceRows:
    """A foreign device array of shape (rows, 4) and ``typestr`` (no memory behind it: rows is 0 or it is refused)."""

    def __init__(self, rows, typestr="<f4"):
        self.shape = (rows, 4)
        self.__cuda_array_interface__ = dict(shape=self.shape, typestr=typestr, data=(0, False), version=3,
                                             strides=None)


def test_a_device_rank_without_rows_is_a_0_by_d_view():
    from gpuopt.distributed.kmeans import _shard

    view = _shard(_DeviceRows(0), device_ok=True)
    assert isinstance(view, gpuopt.cuda.DeviceArray) and view.shape == (0, 4)
    with pytest.raises(TypeError, match="float32"):
        _shard(_DeviceRows(0, "<f8"), device_ok=True)
    with pytest.raises(TypeError, match="device array"):  # group sums run on the host
        _shard(_DeviceRows(0))
    assert _shard(np.zeros((0, 3), np.float64)).dtype == np.float32  # a host rank without rows
    for empty in (np.zeros((3, 0), np.float32), np.zeros((0, 0), np.float32)):  # only the rows may be none
        with pytest.raises(ValueError, match="empty dimension"):
            _shard(empty)


@pytest.mark.parametrize("overlap", [1, "yes", 0])
def test_overlap_is_none_or_a_bool(overlap):
    with pytest.raises(TypeError, match="overlap must be None, True or False"):
        gpuopt.distributed.kmeans(np.zeros((10, 2), np.float32), 2, overlap=overlap, variant="cpu")


def test_overlap_must_agree(rng):
    x = rng.uniform(-1, 1, (100, 2)).astype(np.float32)

    def rank_fn(comm):
        return gpuopt.distributed.kmeans(x[comm.rank * 50:(comm.rank + 1) * 50], 2, comm=comm, variant="cpu",
                                         overlap=[None, True][comm.rank])
    outs = ThreadGroup(2, timeout=30).run(rank_fn)
    assert all(isinstance(o, ValueError) and "same overlap" in str(o) for o in outs)


@pytest.mark.parametrize("device_exchange, overlap, rows, streams, parts", [
    (True, None, [2 * G, G], False, 2),       # NCCL, shards on the device, a rank with two groups
    (False, None, [2 * G, G], False, 1),      # through host memory: one all-gather unless asked
    (False, True, [2 * G, G], False, 2),
    (True, False, [2 * G, G], False, 1),
    (True, None, [G, G, 5], False, 1),        # no rank holds two groups: nothing to split
    (True, None, [2 * G, G], True, 1),        # a rank streams its shard
])
def test_the_exchange_splits_where_it_can_overlap(device_exchange, overlap, rows, streams, parts):
    from gpuopt.distributed.kmeans import _Layout, _parts

    class Comm:
        pass

    comm, a = Comm(), type("A", (), {"overlap": overlap})()
    comm.device_exchange = device_exchange
    lay = _Layout(sum(rows), [sum(rows[:r]) for r in range(len(rows))], rows, list(range(len(rows))), streams)
    assert _parts(comm, a, lay) == parts
