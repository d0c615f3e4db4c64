import numpy as np
import pytest

import gpuopt
from gpuopt import nn
from conftest import needs_cuda_build, relative_error
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


@pytest.mark.parametrize("activation", [None, "none", "relu", "tanh"])
@pytest.mark.parametrize("n,i,o", [(1, 1, 1), (7, 13, 10), (64, 128, 10)])
def test_fully_connected_activation(rng, n, i, o, activation):
    x = rng.standard_normal((n, i)).astype(np.float32)
    w = rng.standard_normal((i, o)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    out = nn.fully_connected(x, w, b, activation=activation, variant="cpu")
    ref = oracles.apply_activation(x.astype(np.float64) @ w + b, activation or "none")
    assert relative_error(out, ref) < 1e-6
    if activation == "relu":
        assert (out >= 0).all()
    # The activation is applied to the float result: exactly the activation op on the plain layer's output.
    plain = nn.fully_connected(x, w, b, variant="cpu")
    if activation in ("relu", "tanh"):
        np.testing.assert_array_equal(out, getattr(nn, activation)(plain, variant="cpu"))
    else:
        np.testing.assert_array_equal(out, plain)


def test_fully_connected_bad_activation():
    with pytest.raises(ValueError, match="activation must be one of"):
        nn.fully_connected(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), activation="sigmoid")
    with pytest.raises(ValueError, match="activation must be one of"):
        nn.fully_connected(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), activation=1)


@pytest.mark.parametrize("shape", [(1, 1), (1, 10), (10000, 10), (7, 1), (3, 1000), (2, 5000)], ids=str)
@pytest.mark.parametrize("scale", [1.0, 100.0])
def test_softmax(rng, shape, scale):
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    out = nn.softmax(x, variant="cpu")
    assert out.dtype == np.float32 and out.shape == shape and np.isfinite(out).all()
    np.testing.assert_allclose(out, oracles.softmax(x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out.sum(axis=1, dtype=np.float64), 1.0, rtol=1e-6)


def test_softmax_special_values():
    x = np.array([[1, np.nan, 2], [np.inf, 0, 1], [-np.inf] * 3, [-np.inf, 0, 0], [1e30, -1e30, 1e30]], np.float32)
    out = nn.softmax(x, variant="cpu")
    assert np.isnan(out[:3]).all()
    np.testing.assert_array_equal(out[3:], [[0, 0.5, 0.5], [0.5, 0, 0.5]])
    np.testing.assert_array_equal(np.isnan(out), np.isnan(oracles.softmax(x)))


def test_softmax_rejects_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        nn.softmax(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="empty dimension"):
        nn.softmax(np.ones((0, 3), np.float32))
    with pytest.raises(TypeError, match="floating-point"):
        nn.softmax(np.ones((2, 3), np.int64))


@needs_cuda_build
@pytest.mark.parametrize("variant,dims", [("matmul", (2**31, 4, 4)), ("matmul", (4, 2**31, 4)),
                                          ("cublas", (4, 4, 2**31)), ("cublas", (2**31, 1, 1))])
def test_fully_connected_limits_are_checked_before_copying(variant, dims):
    """The GEMM variants' index limits (C++: check.fully_connected_<variant>) reject a shape before anything is
    copied; fake arrays with only a shape stand in for inputs too large to make."""
    from types import SimpleNamespace

    from conftest import CheckOnlyContext

    v = gpuopt.variants("fully_connected")[variant]
    n, i, o = dims
    x, w = SimpleNamespace(shape=(n, i)), SimpleNamespace(shape=(i, o))
    with pytest.raises(ValueError, match="2\\^31"):
        v.impl(CheckOnlyContext(v), x, w, None, "none")


@needs_cuda_build
def test_row_kernels_column_limit_is_checked_before_copying():
    from types import SimpleNamespace

    from conftest import CheckOnlyContext, DeviceTouched

    for op, variant in [("argmax", "warp"), ("argmax", "streams"), ("softmax", "cuda")]:
        v = gpuopt.variants(op)[variant]
        with pytest.raises(ValueError, match="2\\^31"):
            v.impl(CheckOnlyContext(v), SimpleNamespace(shape=(3, 2**31)))
        try:  # a shape within the limits passes the checks and gets as far as the first copy
            v.impl(CheckOnlyContext(v), SimpleNamespace(shape=(3, 10)))
        except DeviceTouched:
            pass
        except RuntimeError as exc:  # no GPU here: the launcher lookup stops it first
            assert "needs a CUDA GPU" in str(exc)


def test_argmax(rng):
    x = rng.standard_normal((50, 10)).astype(np.float32)
    x[3, 4] = x[3, 7] = 100.0  # tie: first wins
    x[5, 6] = np.nan
    out = nn.argmax(x, variant="cpu")
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.argmax(x, axis=1))
    assert out[3] == 4 and out[5] == 6


def test_nn_ops_are_registered():
    for op in ("relu", "tanh", "max_pool2d", "avg_pool2d", "fully_connected", "argmax", "softmax"):
        assert "cpu" in gpuopt.variants(op)
        assert gpuopt.variants(op)["cpu"].test == "tests/nn/test_nn.py"


@needs_cuda_build
def test_gpu_launchers_reject_bad_arguments_before_any_cuda_call():
    """The launchers' own checks (direct callers of gpuopt._cuda): every call here is rejected before anything
    touches the device, so fake addresses (256) are never dereferenced, with or without a GPU."""
    from conftest import cuda_build

    cuda, p = cuda_build(), 256
    cases = [
        (lambda: cuda.relu_cuda(p, p, -1), ValueError, "n must be >= 0"),
        (lambda: cuda.tanh_cuda(p + 2, p, 5), ValueError, "4-byte aligned"),
        (lambda: cuda.max_pool2d_basic(p, p, 1, 3, 3, 4), ValueError, "window larger"),
        (lambda: cuda.avg_pool2d_coalesced(p, p, 1, 3, 3, 0), ValueError, "window larger"),
        (lambda: cuda.fully_connected_tiled(p, p, 0, p, 0, 3, 4, "none"), ValueError, "must be positive"),
        (lambda: cuda.fully_connected_matmul(p, p, 0, p, 2, 3, 4, "sigmoid"), ValueError, "activation must be"),
        (lambda: cuda.fully_connected_matmul(p, p, 0, p, 2**31, 3, 4, "relu"), ValueError, "2\\^31"),
        (lambda: cuda.fully_connected_cublas(p, p, 0, p, 2, 2**31, 4, "none"), ValueError, "2\\^31"),
        (lambda: cuda.argmax_basic(p, p, 3, 0), ValueError, "cols >= 1"),
        (lambda: cuda.argmax_warp(p, p, 3, 2**31), ValueError, "2\\^31"),
        (lambda: cuda.argmax_streams(p, p, np.empty(4, np.int64), 3, 10), ValueError, "shape \\(rows,\\)"),
        (lambda: cuda.argmax_streams(p, p, np.empty(3, np.int32), 3, 10), TypeError, "incompatible"),
        (lambda: cuda.argmax_streams(p, p, np.empty(6, np.int64)[::2], 3, 10), TypeError, "incompatible"),
        (lambda: cuda.softmax_cuda(p, p, -1, 10), ValueError, "rows must be >= 0"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match):
            call()
