"""kmeans' initial centres (first, random, kmeans++; seeded) and kmeans_predict, on the CPU."""

import numpy as np
import pytest

import gpuopt
from gpuopt.kmeans.init import initial_centres


@pytest.fixture
def x():
    return np.random.default_rng(5).random((400, 3), dtype=np.float32)


def _row_indices(x, centres):
    """Which row of x each centre is (every centre must be one)."""
    out = []
    for c in centres:
        hits = np.flatnonzero((x == c).all(axis=1))
        assert hits.size, f"{c} is not a row of x"
        out.append(int(hits[0]))
    return out


def test_first_is_liaos_default(x):
    np.testing.assert_array_equal(initial_centres(x, 4), x[:4])
    a = gpuopt.kmeans(x, 4, variant="cpu")
    b = gpuopt.kmeans(x, 4, init="first", seed=99, variant="cpu")
    np.testing.assert_array_equal(a.centroids, b.centroids)


@pytest.mark.parametrize("method", ["random", "kmeans++"])
def test_seeded_distinct_rows(x, method):
    c1 = initial_centres(x, 6, method, seed=3)
    np.testing.assert_array_equal(c1, initial_centres(x, 6, method, seed=3))  # the seed decides
    assert not np.array_equal(c1, initial_centres(x, 6, method, seed=4))
    assert len(set(_row_indices(x, c1))) == 6 and c1.dtype == np.float32 and c1.shape == (6, 3)
    r1 = gpuopt.kmeans(x, 6, init=method, seed=3, variant="cpu")
    r2 = gpuopt.kmeans(x, 6, init=c1, variant="cpu")
    np.testing.assert_array_equal(r1.centroids, r2.centroids)


def test_random_is_numpys_choice(x):
    idx = np.random.default_rng(11).choice(400, 5, replace=False)
    np.testing.assert_array_equal(initial_centres(x, 5, "random", seed=11), x[idx])


def test_kmeans_plus_plus_spreads_the_centres():
    """Two tight clusters far apart and k = 2: D(x)^2 sampling takes the second centre from the other cluster
    (probability ~1 - 1e-6); uniform sampling would do it half the time."""
    g = np.random.default_rng(0)
    x = np.concatenate([g.normal(0, 0.01, (300, 2)), g.normal(100, 0.01, (300, 2))]).astype(np.float32)
    for seed in range(20):
        i, j = _row_indices(x, initial_centres(x, 2, "kmeans++", seed=seed))
        assert (i < 300) != (j < 300), seed


def test_kmeans_plus_plus_with_fewer_distinct_points_than_k():
    x = np.repeat(np.array([[0, 0], [1, 1], [5, 5]], np.float32), 10, axis=0)  # 3 distinct points, 30 rows
    c = initial_centres(x, 5, "kmeans++", seed=0)
    assert {tuple(r) for r in c.tolist()} == {(0, 0), (1, 1), (5, 5)}  # all three, then any rows
    assert len(set(_row_indices(x, c))) <= 5


@pytest.mark.parametrize("kwargs,error,match", [
    ({"init": "bogus"}, ValueError, r"init must be one of \['first', 'random', 'kmeans\+\+'\]"),
    ({"init": "random", "seed": -1}, ValueError, "seed must be >= 0"),
    ({"init": "random", "seed": 1.5}, TypeError, "seed must be an integer"),
])
def test_bad_init_arguments(x, kwargs, error, match):
    with pytest.raises(error, match=match):
        gpuopt.kmeans(x, 3, variant="cpu", **kwargs)


# ----------------------------------------------------------------------------------------------- predict


def test_predict_is_the_first_assignment(x):
    init = initial_centres(x, 7, "random", seed=2)
    first_loop = gpuopt.kmeans(x, 7, init=init, max_iter=1, variant="cpu").membership
    pred = gpuopt.kmeans_predict(x, init, variant="cpu")
    assert pred.dtype == np.int32 and pred.shape == (400,)
    np.testing.assert_array_equal(pred, first_loop)
    d = ((x[:, None, :] - init[None]) ** 2).sum(axis=2)  # and the nearest centre by NumPy (no ties here)
    np.testing.assert_array_equal(pred, d.argmin(axis=1))


def test_predict_ties_go_to_the_lower_centre():
    centroids = np.array([[1, 1], [0, 0], [0, 0], [2, 2]], np.float32)
    pts = np.array([[0, 0], [0.5, 0.5], [1.5, 1.5], [9, 9]], np.float32)
    np.testing.assert_array_equal(gpuopt.kmeans_predict(pts, centroids), [1, 0, 0, 3])


@pytest.mark.parametrize("args,error,match", [
    ((np.zeros((4, 3), np.float32), np.zeros((2, 2), np.float32)), ValueError, "must have D = 3"),
    ((np.zeros((4, 3), np.int32), np.zeros((2, 3), np.float32)), TypeError, "x must be a floating-point array"),
    ((np.full((4, 3), np.nan, np.float32), np.zeros((2, 3), np.float32)), ValueError, "x must contain only finite"),
    ((np.zeros((4, 3), np.float32), np.full((2, 3), np.inf, np.float32)), ValueError, "centroids must contain"),
    ((np.zeros((0, 3), np.float32), np.zeros((2, 3), np.float32)), ValueError, "empty dimension"),
])
def test_predict_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        gpuopt.kmeans_predict(*args)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["first", "random", "kmeans++"])
def test_device_input_gives_the_same_centres_and_predictions(x, method):
    dx = gpuopt.to_device(x)
    np.testing.assert_array_equal(initial_centres(dx, 5, method, seed=7), initial_centres(x, 5, method, seed=7))
    c = initial_centres(x, 5, method, seed=7)
    out = gpuopt.kmeans_predict(dx, c)
    assert isinstance(out, gpuopt.DeviceArray)
    np.testing.assert_array_equal(out.numpy(), gpuopt.kmeans_predict(x, c, variant="cpu"))

