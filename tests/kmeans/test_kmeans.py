import numpy as np
import pytest

import gpuopt
from gpuopt import datasets
import oracles


def assert_same_as_liao(x, k, threshold=0.001, max_iter=500, init=None, variant="cpu"):
    res = gpuopt.kmeans(x, k, threshold=threshold, max_iter=max_iter, init=init, variant=variant)
    cen, mem, iters, deltas = oracles.liao_kmeans(x, k, threshold, max_iter, init)
    np.testing.assert_array_equal(res.membership, mem)
    assert res.iterations == iters
    np.testing.assert_array_equal(res.delta, deltas)
    np.testing.assert_array_equal(res.centroids, cen)  # same float32 operations, same order
    return res


@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (2, 3, 2), (97, 5, 3), (351, 34, 3), (1000, 4, 7), (7089, 4, 3)])
def test_cpu_matches_numpy_liao_on_blobs(n, d, k):
    x, _ = datasets.make_kmeans_blobs(n, d, k=k, seed=n * 31 + d)
    res = assert_same_as_liao(x, k)
    assert res.membership.dtype == np.int32 and res.centroids.dtype == np.float32
    assert res.converged == (res.delta[-1] <= np.float32(0.001))


def test_cpu_matches_numpy_liao_on_uniform_noise(rng):
    # No cluster structure: many loops, many near-ties.
    x = rng.uniform(0, 1, (3000, 3)).astype(np.float32)
    res = assert_same_as_liao(x, 8, threshold=0.0)
    assert res.iterations > 5


def test_ties_go_to_lower_index():
    x = np.array([[0.0], [2.0], [1.0]], dtype=np.float32)  # object 2 is equidistant
    res = gpuopt.kmeans(x, 2, max_iter=1, variant="cpu")
    assert res.membership.tolist() == [0, 1, 0]


def test_empty_cluster_keeps_its_centre():
    x = np.array([[0.0], [0.1], [0.2]], dtype=np.float32)
    init = np.array([[0.1], [100.0]], dtype=np.float32)
    res = gpuopt.kmeans(x, 2, init=init, variant="cpu")
    assert res.centroids[1, 0] == 100.0 and (res.membership == 0).all()
    assert_same_as_liao(x, 2, init=init)


def test_max_iter_caps_loops(rng):
    x = rng.uniform(0, 1, (2000, 2)).astype(np.float32)
    res = gpuopt.kmeans(x, 16, threshold=0.0, max_iter=3, variant="cpu")
    assert res.iterations == 3 and len(res.delta) == 3
    assert res.delta[0] == 1.0  # every object leaves membership -1 in the first loop


def test_threshold_zero_runs_to_a_fixed_point():
    x, _ = datasets.make_kmeans_blobs(500, 3, k=4, seed=5)
    res = gpuopt.kmeans(x, 4, threshold=0.0, variant="cpu")
    assert res.delta[-1] == 0.0 and res.converged


@pytest.mark.data
@pytest.mark.parametrize("name,dim", [("color17695.bin", 9), ("edge17695.bin", 18), ("texture17695.bin", 20),
                                      ("color100.txt", 9), ("edge100.txt", 18), ("texture100.txt", 20)])
@pytest.mark.parametrize("k", [3, 4])
def test_cpu_matches_numpy_liao_on_liao_data(data_root, name, dim, k):
    x = datasets.read_liao(data_root / "kmeans_liao" / name)
    assert x.shape[1] == dim
    assert_same_as_liao(x, k)


# ----------------------------------------------------------------------------- the chunked summation


def _chunked_means(x, membership, k, previous, fanouts=(32, 32, 32)):
    """The 'chunked' centre update written out: float64 over a tree of the object indices, leaves of 32 objects,
    chunks of 32 leaves, groups of 32 chunks, the groups in order; every level a sequential sum from 0 in index
    order (np.cumsum is sequential; a non-member adds +0.0, which changes no bit); the mean rounded once.
    fanouts=(n,) gives one flat float64 sum in object order (used to show the order matters)."""
    n, d = x.shape
    x64 = x.astype(np.float64)
    span = int(np.prod(fanouts))
    out = previous.copy()
    for c in range(k):
        count = int((membership == c).sum())
        if count == 0:
            continue
        level = np.zeros((-(-n // span) * span, d))
        level[:n][membership == c] = x64[membership == c]
        for size in fanouts:
            level = np.cumsum(level.reshape(-1, size, d), axis=1)[:, -1]
        total = np.cumsum(level, axis=0)[-1]
        out[c] = (total / count).astype(np.float32)
    return out


@pytest.mark.parametrize("n", [1, 31, 33, 1023, 1024, 1025, 5000, 40000])
def test_chunked_summation_is_the_written_out_order(rng, n):
    # Magnitudes over 16 decades: float64 sums of these depend on the order, so a wrong tree shows.
    x = (rng.standard_normal((n, 5)) * 10 ** rng.uniform(-8, 8, (n, 1))).astype(np.float32)
    k = min(4, n)
    init = x[:k].copy()
    one = gpuopt.kmeans(x, k, init=init, max_iter=1, variant="cpu", summation="chunked")
    first = gpuopt.kmeans_predict(x, init)
    np.testing.assert_array_equal(one.membership, first)
    np.testing.assert_array_equal(one.centroids, _chunked_means(x, first, k, init))
    full = gpuopt.kmeans(x, k, init=init, threshold=0.0, variant="cpu", summation="chunked")
    again = gpuopt.kmeans(x, k, init=init, threshold=0.0, variant="cpu", summation="chunked")
    np.testing.assert_array_equal(full.centroids, again.centroids)


@pytest.mark.parametrize("n", [5000, 70000])
def test_chunked_summation_order_shows_under_cancellation(rng, n):
    # One cluster; +-1e15 in equal numbers cancel among noise objects, so the float64 rounding of the partial sums (order-dependent,
    # about 1e2) is as large as the noise that is left: every other order gives other float32 means.
    big = rng.permutation(np.repeat(np.array([1e15, -1e15, 0.0, 0.0]), n // 4))  # n // 4 of each sign
    x = np.where(big[:, None] != 0, big[:, None], rng.standard_normal((n, 3)) * 100).astype(np.float32)
    init = x[:1].copy()
    res = gpuopt.kmeans(x, 1, init=init, max_iter=1, variant="cpu", summation="chunked")
    member = np.zeros(n, np.int32)
    np.testing.assert_array_equal(res.centroids, _chunked_means(x, member, 1, init))
    assert not np.array_equal(res.centroids, _chunked_means(x, member, 1, init, fanouts=(n,)))  # one flat sum
    assert not np.array_equal(res.centroids, _chunked_means(x, member, 1, init, fanouts=(1024,)))  # chunks only
    if n > 32768:
        assert not np.array_equal(res.centroids, _chunked_means(x, member, 1, init, fanouts=(32, 32)))  # no groups


def test_chunked_differs_from_liao_only_in_rounding(rng):
    x = (rng.standard_normal((6000, 3)) * 1000).astype(np.float32) + np.float32(1e4)
    liao = gpuopt.kmeans(x, 5, max_iter=1, variant="cpu")
    chunked = gpuopt.kmeans(x, 5, max_iter=1, variant="cpu", summation="chunked")
    np.testing.assert_array_equal(liao.membership, chunked.membership)  # the same assignment
    assert not np.array_equal(liao.centroids, chunked.centroids)  # float32 object-order sums round differently
    np.testing.assert_allclose(liao.centroids, chunked.centroids, rtol=1e-4)


def test_chunked_empty_cluster_keeps_its_centre():
    x = np.array([[0.0], [0.1], [0.2]], dtype=np.float32)
    init = np.array([[0.1], [100.0]], dtype=np.float32)
    res = gpuopt.kmeans(x, 2, init=init, variant="cpu", summation="chunked")
    assert res.centroids[1, 0] == 100.0 and (res.membership == 0).all()
    with pytest.raises(ValueError, match="summation='pairwise' is not allowed"):
        gpuopt.kmeans(x, 2, variant="cpu", summation="pairwise")


def test_numpy_x_is_never_planned(rng):
    # gpuopt._plan keeps kmeans plans for device x only: a NumPy x's finiteness is checked on every call.
    from gpuopt import _plan

    _plan.clear()
    x = rng.uniform(0, 1, (500, 3)).astype(np.float32)
    for _ in range(2):
        gpuopt.kmeans(x, 3, threshold=0.0, max_iter=2, variant="cpu")
    assert _plan.size() == 0
    x[4, 2] = np.nan
    with pytest.raises(ValueError, match="finite"):
        gpuopt.kmeans(x, 3, threshold=0.0, max_iter=2, variant="cpu")


class _Record:
    """Stands in for a deferred run's device record: [loop count][history as float32 bits], read by ``numpy()``."""

    def __init__(self, values):
        self.values, self.reads = np.asarray(values, np.int32), 0

    def numpy(self):
        self.reads += 1
        return self.values.copy()


def test_a_deferred_result_reads_its_record_once_on_first_access():
    from gpuopt.kmeans.api import KMeansResult

    history = np.array([1.0, 0.25, 0.0005], np.float32)
    record = _Record(np.concatenate([[3], history.view(np.int32), [-1, -1]]))  # max_iter 5, 3 loops run
    res = KMeansResult._deferred("c", "m", record, 0.001)
    assert "on the device" in repr(res) and record.reads == 0
    assert res.centroids == "c" and res.membership == "m" and record.reads == 0  # no read for the arrays
    assert res.iterations == 3 and record.reads == 1
    np.testing.assert_array_equal(res.delta, history)
    assert res.converged and record.reads == 1 and "iterations=3" in repr(res)
    with pytest.raises(AttributeError):
        res.iterations = 4  # read-only, as before
    stopped = KMeansResult._deferred("c", "m", _Record(np.concatenate([[2], history[:2].view(np.int32)])), 0.001)
    assert not stopped.converged and stopped.iterations == 2  # max_iter stopped it


@pytest.mark.parametrize("count", [0, 6, 2**31 - 1])
def test_a_deferred_record_the_run_did_not_write_raises(count):
    from gpuopt.kmeans.api import KMeansResult

    res = KMeansResult._deferred(None, None, _Record([count, 0, 0, 0, 0, 0]), 0.0)
    with pytest.raises(RuntimeError, match="loops"):
        res.delta


def test_a_deferred_record_of_non_finite_sums_raises_value_error():
    # kmeans_persistent.cu writes the last loop's delta as NaN where its centre sums were not finite (NaN or inf in
    # x); an unwritten record (the test pool's poison, -1 as int32) stays a RuntimeError (above).
    from gpuopt.kmeans.api import KMeansResult

    history = np.array([1.0, 0.5, np.nan], np.float32).view(np.int32)
    res = KMeansResult._deferred(None, None, _Record(np.concatenate([[3], history, [0, 0]])), 0.0)
    with pytest.raises(ValueError, match="only finite values: the centre sums of loop 3"):
        res.iterations
