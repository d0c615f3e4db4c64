"""Bad input gets a clear Python exception naming the argument, never a crash."""

import numpy as np
import pytest

import gpuopt
from gpuopt import nn

F = np.float32
X4 = np.ones((1, 2, 5, 5), F)
W4 = np.ones((3, 2, 3, 3), F)


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(x=np.ones((2, 5, 5), F)), ValueError, r"x must be 4-D \(N, C, H, W\); got shape \(2, 5, 5\)"),
    (dict(w=np.ones((3, 3, 3), F)), ValueError, r"w must be 4-D"),
    (dict(x=np.ones((1, 2, 5, 5), np.int32)), TypeError, r"x must be a floating-point array.*int32.*astype"),
    (dict(x=np.ones((1, 2, 5, 5), bool)), TypeError, "x must be a floating-point array"),
    (dict(x=np.ones((1, 2, 5, 5), complex)), TypeError, "floating-point"),
    (dict(x=np.array([[[[object()]]]])), TypeError, "object"),
    (dict(x=None), TypeError, "x must be an array, got None"),
    (dict(x="abc"), TypeError, "numeric array"),
    (dict(x=np.ones((0, 2, 5, 5), F)), ValueError, "empty dimension"),
    (dict(w=np.ones((3, 4, 3, 3), F)), ValueError, "w has 4 input channels but x has 2"),
    (dict(w=np.ones((3, 2, 7, 3), F)), ValueError, r"filter 7x3 is larger than the padded input 5x5"),
    (dict(stride=0), ValueError, "stride must be >= 1"),
    (dict(stride=(1, 0)), ValueError, r"stride\[1\] must be >= 1"),
    (dict(stride=1.5), TypeError, "stride must be an integer"),
    (dict(stride=(1, 2, 3)), ValueError, "pair"),
    (dict(padding=-1), ValueError, "padding must be >= 0"),
    (dict(padding=True), TypeError, "padding must be an integer"),
    (dict(bias=np.ones(4, F)), ValueError, r"bias must have shape \(3,\)"),
    (dict(bias=np.ones((3, 1), F)), ValueError, "bias must be 1-D"),
    (dict(activation="sigmoid"), ValueError, r"activation must be one of \[None, 'none', 'relu', 'tanh'\]"),
])
def test_conv2d_bad_input(kwargs, exc, match):
    args = dict(x=X4, w=W4)
    args.update(kwargs)
    x, w = args.pop("x"), args.pop("w")
    with pytest.raises(exc, match=match):
        gpuopt.conv2d(x, w, variant="cpu", **args)


def test_padding_makes_a_large_filter_legal():
    assert gpuopt.conv2d(X4, np.ones((1, 2, 7, 7), F), padding=1).shape == (1, 1, 1, 1)


@pytest.mark.parametrize("a,b,exc,match", [
    (np.ones((2, 3), F), np.ones((4, 2), F), ValueError, r"inner dimensions differ: a is \(2, 3\)"),
    (np.ones(3, F), np.ones((3, 2), F), ValueError, r"a must be 2-D \(M, K\)"),
    (np.ones((2, 3), F), np.ones((3, 2), np.int64), TypeError, "b must be a floating-point array"),
    (np.ones((2, 0), F), np.ones((0, 2), F), ValueError, "empty dimension"),
    ([[1.0, 2.0]], [[1.0], [2.0]], None, None),  # nested lists of floats are fine
])
def test_matmul_bad_input(a, b, exc, match):
    if exc is None:
        assert gpuopt.matmul(a, b)[0, 0] == 5.0
        return
    with pytest.raises(exc, match=match):
        gpuopt.matmul(a, b)


X2 = np.random.default_rng(0).random((10, 3)).astype(F)


@pytest.mark.parametrize("args,kwargs,exc,match", [
    ((X2, 11), {}, ValueError, r"k must be <= the number of objects N=10, got k=11"),
    ((X2, 0), {}, ValueError, "k must be >= 1"),
    ((X2, 2.0), {}, TypeError, "k must be an integer"),
    ((X2, 2), dict(threshold=float("nan")), ValueError, "threshold must be finite"),
    ((X2, 2), dict(threshold=float("inf")), ValueError, "threshold must be finite"),
    ((X2, 2), dict(threshold=-0.1), ValueError, "threshold must be >= 0"),
    ((X2, 2), dict(threshold="0.1"), TypeError, "threshold must be a real number"),
    ((X2, 2), dict(max_iter=0), ValueError, "max_iter must be >= 1"),
    ((X2, 2), dict(init=np.ones((3, 3), F)), ValueError, r"init must have shape \(k, D\) = \(2, 3\)"),
    ((X2, 2), dict(init=np.full((2, 3), np.nan, F)), ValueError, "init must contain only finite"),
    ((X2.astype(np.int32), 2), {}, TypeError, "x must be a floating-point array"),
    ((np.array([[1.0], [np.nan]], F), 1), {}, ValueError, "x must contain only finite"),
    ((np.ones(5, F), 1), {}, ValueError, r"x must be 2-D \(N, D\)"),
])
def test_kmeans_bad_input(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        gpuopt.kmeans(*args, **kwargs)


@pytest.mark.parametrize("x,w,exc,match", [
    (np.ones((2, 4, 4), np.int16), np.ones((1, 3, 3, 3), np.int16), ValueError, "w has 3 input channels but x has 2"),
    (np.ones((2, 4, 4), np.int16), np.ones((1, 2, 2, 2), np.int16), ValueError, "odd sides"),
    (np.ones((2, 1, 4), np.int16), np.ones((1, 2, 3, 3), np.int16), ValueError, "at least 2x2"),
    (np.ones((4, 4), np.int16), np.ones((1, 1, 3, 3), np.int16), ValueError, r"x must be 3-D \(C, H, W\)"),
    (np.ones((1, 4, 4), np.float64), np.ones((1, 1, 3, 3), np.int16), TypeError, "x must be an integer array"),
    (np.ones((1, 4, 4), np.int16), np.ones((1, 1, 3, 3), np.float32), TypeError, "w must be an integer array"),
    (np.full((1, 4, 4), 2**20), np.ones((1, 1, 3, 3), np.int16), ValueError, r"fit in int16 \[-32768, 32767\]"),
])
def test_sparse_conv_bad_input(x, w, exc, match):
    with pytest.raises(exc, match=match):
        gpuopt.sparse_conv2d(x, w)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: nn.relu(np.float32(1.0)), ValueError, "at least one dimension"),
    (lambda: nn.tanh(np.ones(3, np.int8)), TypeError, "floating-point"),
    (lambda: nn.max_pool2d(np.ones(5, F)), ValueError, r"2-D \(H, W\)"),
    (lambda: nn.max_pool2d(np.ones((4, 4), F), 0), ValueError, "size must be >= 1"),
    (lambda: nn.avg_pool2d(np.ones((4, 4), F), 5), ValueError, "larger than the input"),
    (lambda: nn.fully_connected(np.ones((2, 3), F), np.ones((4, 5), F)), ValueError, r"\(in_features, out_features\)"),
    (lambda: nn.fully_connected(np.ones((2, 3), F), np.ones((3, 5), F), np.ones(4, F)), ValueError, r"bias must have shape \(5,\)"),
    (lambda: nn.argmax(np.ones(3, F)), ValueError, "2-D"),
])
def test_nn_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_internal_module_rejects_mismatched_arrays_without_crashing():
    # The compiled layer re-checks shapes from the arrays themselves (safety net).
    from gpuopt import _core
    with pytest.raises(ValueError, match="input channels"):
        _core.conv2d(X4, np.ones((1, 3, 3, 3), F), None, 1, 1, 0, 0, "none")
    with pytest.raises(TypeError):
        _core.matmul(np.ones((2, 2), np.float64), np.ones((2, 2), F))  # no silent conversion
