import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gpuopt
from conftest import relative_error
import oracles

# 1, primes, non-multiples of every tile size (16/32/64/128), tall-skinny, and the
# CMU report's cases.
SIZES = [(1, 1, 1), (1, 7, 1), (5, 5, 5), (8, 8, 8), (10, 10, 10), (33, 33, 33), (31, 37, 41), (127, 1, 129),
         (1, 257, 3), (257, 131, 67), (1000, 17, 3), (128, 128, 128)]


@pytest.mark.parametrize("m,k,n", SIZES, ids=str)
def test_cpu_matches_float64(rng, m, k, n):
    a = rng.uniform(0, 1, (m, k)).astype(np.float32)
    b = rng.uniform(0, 1, (k, n)).astype(np.float32)
    c = gpuopt.matmul(a, b, variant="cpu")
    ref = oracles.matmul(a, b)
    assert c.dtype == np.float32 and c.shape == (m, n)
    assert relative_error(c, ref) < 1e-7
    np.testing.assert_allclose(c, ref, rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 70), k=st.integers(1, 70), n=st.integers(1, 70), seed=st.integers(0, 2**31 - 1))
def test_cpu_random_shapes(m, k, n, seed):
    g = np.random.default_rng(seed)
    a = g.standard_normal((m, k)).astype(np.float32)
    b = g.standard_normal((k, n)).astype(np.float32)
    assert relative_error(gpuopt.matmul(a, b, variant="cpu"), oracles.matmul(a, b)) < 1e-6


def test_accepts_float16_and_transposed_views(rng):
    a = rng.standard_normal((20, 30)).astype(np.float16)
    b = rng.standard_normal((40, 30)).astype(np.float32).T  # Fortran-ordered view
    c = gpuopt.matmul(a, b, variant="cpu")
    assert relative_error(c, oracles.matmul(a.astype(np.float32), b)) < 1e-6


def test_cancellation_is_accurate():
    # float64 accumulation: a float32 running sum would lose the 1.0 here.
    a = np.array([[1e8, 1.0, -1e8]], dtype=np.float32)
    b = np.ones((3, 1), dtype=np.float32)
    assert gpuopt.matmul(a, b, variant="cpu")[0, 0] == 1.0
