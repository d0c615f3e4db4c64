"""Half-precision points on the host: float16 (and ml_dtypes' bfloat16) are converted to float32 before the loop,
so the result is the float32 run's on the same points, bit for bit; other inputs pass through ``widened``
untouched."""

import numpy as np
import pytest

import gpuopt
from gpuopt.kmeans.half import widened


def test_float16_points_are_the_float32_run_on_them(rng):
    xh = rng.uniform(-4, 4, (5_001, 3)).astype(np.float16)
    got = gpuopt.kmeans(xh, 4, variant="cpu", threshold=0.0, max_iter=6)
    ref = gpuopt.kmeans(xh.astype(np.float32), 4, variant="cpu", threshold=0.0, max_iter=6)
    assert got.centroids.tobytes() == ref.centroids.tobytes() and got.iterations == ref.iterations
    np.testing.assert_array_equal(got.membership, ref.membership)


def test_bfloat16_host_points(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    xb = rng.uniform(-4, 4, (2_001, 3)).astype(ml_dtypes.bfloat16)
    got = gpuopt.kmeans(xb, 3, variant="cpu", threshold=0.0, max_iter=4)
    ref = gpuopt.kmeans(xb.astype(np.float32), 3, variant="cpu", threshold=0.0, max_iter=4)
    assert got.centroids.tobytes() == ref.centroids.tobytes()


@pytest.mark.parametrize("x", [np.zeros((3, 2), np.float32), np.zeros((3, 2), np.float64), [[1.0, 2.0]], "x"])
def test_other_inputs_pass_through(x):
    assert widened(x) is x
