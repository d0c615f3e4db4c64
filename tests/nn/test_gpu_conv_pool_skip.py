"""conv2d_pool/zero_skip (the layer by scattering its input, zero values skipped by a warp-uniform test) against the
CPU reference and against ``fused`` bit for bit (the same fma order over (c, r, s), a skipped term is one whose fma
leaves the sum unchanged), outputs poisoned by conftest: MNIST's conv2 on inputs with zeros in every pattern (none,
ReLU'd, whole rows and channels, all), K under and over one warp of maps and not a multiple of 32, one image and
batches with an odd number of row-group warps, every activation and pooling, NaN and -0.0 inputs, device arrays,
determinism, and the rejections made before anything is copied."""

import numpy as np
import pytest

import gpuopt
from gpuopt import nn
from .test_gpu_conv_pool import (EVERY_ACTIVATION_AND_POOL, _case, assert_close, check_device_arrays, check_matches_cpu,
                                 check_nan_windows)
from .test_gpu_nn import misaligned

pytestmark = pytest.mark.gpu

VARIANT = "zero_skip"
# (N, C, H, W, K, R)
SHAPES = [
    (9, 32, 12, 12, 64, 5),   # MNIST conv2 (2 row-group warps an image, 4 warps a block: a ragged last block)
    (1, 32, 12, 12, 64, 5),   # one image
    (5, 3, 12, 12, 33, 5),    # K = 33: two maps a lane, the second slot only in lane 0
    (4, 7, 12, 12, 32, 5),    # K = 32: one map a lane
    (3, 1, 12, 12, 5, 5),     # C = 1, K = 5: most lanes past K
    (6, 4, 8, 12, 17, 5),     # 8 x 12 input: one row group
    (2, 34, 12, 12, 64, 5),   # C = 34: the largest 64-map filter bank shared memory holds (218 KB + row buffers)
]


def _relu_input(rng, shape):
    """A case whose input is zero where a ReLU'd, pooled layer would be: about 58% zeros, whole rows and scattered."""
    x, w, b = _case(rng, shape)
    rows = rng.random(x.shape[:3] + (1,)) < 0.3
    x = np.where(rows | (rng.random(x.shape) < 0.4), 0, np.abs(x)).astype(np.float32)
    return x, w, b


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("activation,pool", EVERY_ACTIVATION_AND_POOL)
def test_matches_cpu(rng, shape, activation, pool):
    check_matches_cpu(rng, VARIANT, shape, activation, pool)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("pattern", ["dense", "relu", "rows", "channels", "all"])
def test_same_bits_as_fused(rng, shape, pattern):
    x, w, b = _case(rng, shape)
    if pattern == "relu":
        x = np.maximum(x, 0)
    elif pattern == "rows":
        x[:, :, ::3, :] = 0
        x[:, :, :, 1::2] *= rng.random(x.shape[:3] + (1,)) < 0.5
    elif pattern == "channels":
        x[:, ::2] = 0
    elif pattern == "all":
        x[:] = 0
    for activation, pool in (("relu", "avg"), ("none", "max")):
        out = nn.conv2d_pool(x, w, b, activation=activation, pool=pool, variant=VARIANT)
        np.testing.assert_array_equal(out, nn.conv2d_pool(x, w, b, activation=activation, pool=pool, variant="fused"))
        ref = nn.conv2d_pool(x, w, b, activation=activation, pool=pool, variant="cpu")
        assert_close(out, ref, x, w, b)


def test_mnist_like_input_and_negative_zero(rng):
    shape = (12, 32, 12, 12, 64, 5)
    x, w, b = _relu_input(rng, shape)
    x[x == 0] = rng.choice(np.array([0.0, -0.0], dtype=np.float32), size=int((x == 0).sum()))
    out = nn.conv2d_pool(x, w, None, activation="relu", pool="avg", variant=VARIANT)
    np.testing.assert_array_equal(out, nn.conv2d_pool(x, w, None, activation="relu", pool="avg", variant="fused"))
    assert_close(out, nn.conv2d_pool(x, w, None, activation="relu", pool="avg", variant="cpu"), x, w)


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_nan_reaches_its_windows(rng, pool):
    check_nan_windows(rng, VARIANT, (3, 4, 12, 12, 40, 5), (1, 2, 5, 7), pool)


def test_device_arrays_and_determinism(rng):
    check_device_arrays(rng, VARIANT, (5, 32, 12, 12, 64, 5), (5, 64, 4, 4), repeats=3)


def test_more_items_than_warps(rng):
    """Enough images that every warp of the persistent grid takes several items (the next item's first rows are
    copied during the last channel of this one) and the last round is ragged."""
    x, w, b = _relu_input(rng, (1901, 32, 12, 12, 64, 5))
    out = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant=VARIANT)
    np.testing.assert_array_equal(out, nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="fused"))
    some = slice(1850, 1901)
    assert_close(out[some], nn.conv2d_pool(x[some], w, b, activation="relu", pool="avg", variant="cpu"), x[some], w, b)


@pytest.mark.parametrize("shape", [(7, 32, 12, 12, 64, 5), (3, 5, 8, 12, 20, 5)], ids=str)
def test_misaligned_device_input(rng, shape):
    """An offset view 4 bytes past a 16-byte boundary: the rows are copied 4 bytes at a time, same bits."""
    x, w, b = _relu_input(rng, shape)
    out = nn.conv2d_pool(misaligned(x), w, b, activation="relu", pool="max", variant=VARIANT).numpy()
    np.testing.assert_array_equal(out, nn.conv2d_pool(x, w, b, activation="relu", pool="max", variant="fused"))


@pytest.mark.parametrize("x_shape,w_shape,pool_size,match", [
    ((2, 3, 13, 12), (8, 3, 5, 5), 2, "compiled for"),     # H not compiled
    ((2, 3, 12, 12), (8, 3, 3, 3), 2, "compiled for"),     # 3x3 filters
    ((2, 3, 12, 12), (65, 3, 5, 5), 2, "at most 64"),      # K > 64
    ((2, 3, 12, 12), (8, 3, 5, 5), 1, "pool_size must be 2"),
    ((2, 40, 12, 12), (64, 40, 5, 5), 2, "filter bank in shared memory"),  # 256 KB of filters
])
def test_rejects_before_copying(x_shape, w_shape, pool_size, match):
    x = np.ones(x_shape, np.float32)
    w = np.ones(w_shape, np.float32)
    with pytest.raises(ValueError, match=match):
        nn.conv2d_pool(x, w, activation="relu", pool_size=pool_size, variant=VARIANT)


def test_rejects_uint8_input(rng):
    x = rng.integers(0, 255, (2, 1, 12, 12), dtype=np.uint8)
    with pytest.raises(ValueError, match="float32"):
        nn.conv2d_pool(x, np.ones((4, 1, 5, 5), np.float32), variant=VARIANT, input_divisor=255.0)
