import numpy as np
import pytest

import gpuopt
from gpuopt import nn
from conftest import relative_error
import oracles


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (2, 3, 4, 5), (100001,)], ids=str)
def test_activations(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(nn.relu(x, variant="cpu"), np.maximum(x, 0))
    np.testing.assert_allclose(nn.tanh(x, variant="cpu"), np.tanh(x.astype(np.float64)), rtol=1e-6, atol=1e-7)
    assert nn.relu(x).shape == shape


def test_relu_keeps_nan():
    out = nn.relu(np.array([np.nan, -1.0, 2.0], np.float32))
    assert np.isnan(out[0]) and out[1] == 0 and out[2] == 2


@pytest.mark.parametrize("shape", [(2, 2), (5, 7), (3, 9, 8), (2, 3, 13, 6), (1, 1, 28, 28)], ids=str)
@pytest.mark.parametrize("size", [1, 2, 3])
def test_pooling(rng, shape, size):
    x = rng.standard_normal(shape).astype(np.float32)
    if shape[-1] < size or shape[-2] < size:
        with pytest.raises(ValueError, match="larger than the input"):
            nn.max_pool2d(x, size)
        return
    np.testing.assert_array_equal(nn.max_pool2d(x, size, variant="cpu"), oracles.pool2d(x, size, "max"))
    np.testing.assert_allclose(nn.avg_pool2d(x, size, variant="cpu"), oracles.pool2d(x, size, "avg"), rtol=1e-6, atol=1e-6)


def test_max_pool_nan_wins():
    x = np.array([[1.0, np.nan], [3.0, 2.0]], np.float32)
    assert np.isnan(nn.max_pool2d(x)[0, 0])


@pytest.mark.parametrize("n,i,o", [(1, 1, 1), (3, 1024, 128), (7, 13, 10), (64, 128, 10)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_fully_connected(rng, n, i, o, with_bias):
    x = rng.standard_normal((n, i)).astype(np.float32)
    w = rng.standard_normal((i, o)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32) if with_bias else None
    ref = x.astype(np.float64) @ w + (0 if b is None else b)
    assert relative_error(nn.fully_connected(x, w, b, variant="cpu"), ref) < 1e-6


def test_argmax(rng):
    x = rng.standard_normal((50, 10)).astype(np.float32)
    x[3, 4] = x[3, 7] = 100.0  # tie: first wins
    x[5, 6] = np.nan
    out = nn.argmax(x, variant="cpu")
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.argmax(x, axis=1))
    assert out[3] == 4 and out[5] == 6


def test_nn_ops_are_registered():
    for op in ("relu", "tanh", "max_pool2d", "avg_pool2d", "fully_connected", "argmax"):
        assert "cpu" in gpuopt.variants(op)
