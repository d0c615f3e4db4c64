"""conv2d_pool/direct_smallc (first layers: whole images staged, a 4x4 patch's input in registers) against the CPU
reference, outputs poisoned by conftest: the reports' first layers, awkward shapes (odd conv outputs whose last
row/column the pool drops, patch grids past the image, C = 1..4, 3x3 and 5x5, K under / over one block of maps, one
image, a large batch with a tail), every activation and pooling, pool_size 1, uint8 input, NaN, device arrays,
determinism, every launch parameter, and the rejections made before anything is copied. Error bound as ``fused``'s
(each output within 1e-5 of the magnitude its sum can reach, 1e-5 relative overall)."""

import numpy as np
import pytest

import gpuopt
from gpuopt import nn
from conftest import relative_error
import oracles
from .test_gpu_conv_pool import (EVERY_ACTIVATION_AND_POOL, _case, assert_close, check_device_arrays, check_matches_cpu,
                                 check_nan_windows)

pytestmark = pytest.mark.gpu

VARIANT = "direct_smallc"
# (N, C, H, W, K, R)
SHAPES = [
    (7, 1, 28, 28, 32, 5),    # MNIST conv1
    (3, 1, 64, 64, 6, 5),     # Fashion conv1 (225 patches an image: items loop past 256 threads)
    (2, 3, 13, 10, 5, 3),     # conv 11 x 8: pooled 5 x 4, last conv row dropped; staged planes padded past the image
    (5, 2, 17, 15, 70, 5),    # conv 13 x 11: odd both ways; K = 70: three groups of 24 maps, the last of 22
    (1, 4, 12, 12, 9, 5),     # C = 4 (C*R*S = 100, the limit), one image
    (4, 1, 6, 6, 1, 5),       # an image just over the filter: one pooled output
    (9, 1, 9, 31, 3, 3),      # a wide, short image
    (2, 1, 45, 83, 13, 5),    # 200 patches an image, planes padded past the image
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("activation,pool", EVERY_ACTIVATION_AND_POOL)
def test_matches_cpu(rng, shape, activation, pool):
    check_matches_cpu(rng, VARIANT, shape, activation, pool)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_pool_size_1_is_the_layer_unpooled(rng, shape):
    x, w, b = _case(rng, shape)
    out = nn.conv2d_pool(x, w, b, activation="relu", pool_size=1, variant=VARIANT)
    ref = nn.conv2d_pool(x, w, b, activation="relu", pool_size=1, variant="cpu")
    assert out.shape == (shape[0], shape[4], shape[2] - shape[5] + 1, shape[3] - shape[5] + 1)
    assert np.isfinite(out).all()
    mag = oracles.conv2d(np.abs(x), np.abs(w), np.abs(b))
    np.testing.assert_array_less(np.abs(out.astype(np.float64) - ref), 1e-5 * mag + 1e-30)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_uint8_input_equals_float_input_divided(rng, shape):
    """uint8 pixels divided by 255 as they are staged: the same float32 inputs as NumPy's x / 255, bit for bit (both
    staging paths: the contiguous one where the planes are the image, the padded one elsewhere)."""
    n, c, h, w_, k, r = shape
    x8 = rng.integers(0, 256, (n, c, h, w_), dtype=np.uint8)
    _, w, b = _case(rng, shape)
    out8 = nn.conv2d_pool(x8, w, b, activation="relu", pool="avg", input_divisor=255.0, variant=VARIANT)
    xf = x8.astype(np.float32) / np.float32(255)
    np.testing.assert_array_equal(out8, nn.conv2d_pool(xf, w, b, activation="relu", pool="avg", variant=VARIANT))
    assert_close(out8, nn.conv2d_pool(x8, w, b, activation="relu", pool="avg", input_divisor=255.0, variant="cpu"),
                 xf, w, b)


def test_large_batch_mnist_conv1(rng):
    """Many blocks of 7 images and a tail of 2 (1003 = 143 x 7 + 2): every output written, as fused."""
    x8 = rng.integers(0, 256, (1003, 1, 28, 28), dtype=np.uint8)
    _, w, b = _case(rng, (1, 1, 28, 28, 32, 5))
    out = nn.conv2d_pool(x8, w, b, activation="relu", pool="avg", input_divisor=255.0, variant=VARIANT)
    ref = nn.conv2d_pool(x8, w, b, activation="relu", pool="avg", input_divisor=255.0, variant="cpu")
    assert_close(out, ref, x8.astype(np.float32) / np.float32(255), w, b)
    fused = nn.conv2d_pool(x8, w, b, activation="relu", pool="avg", input_divisor=255.0, variant="fused")
    assert float(np.abs(out - fused).max() / np.abs(fused).max()) < 1e-5


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_nan_reaches_exactly_the_windows_it_touches(rng, pool):
    check_nan_windows(rng, VARIANT, (2, 1, 14, 14, 8, 3), (1, 0, 6, 7), pool)


def test_device_arrays_and_deterministic(rng):
    dw = check_device_arrays(rng, VARIANT, (9, 1, 28, 28, 32, 5), (9, 32, 12, 12), repeats=3)
    d8 = gpuopt.to_device(np.zeros((2, 1, 28, 28), np.uint8))
    zero = nn.conv2d_pool(d8, dw, None, activation="none", pool="max", input_divisor=255.0, variant=VARIANT)
    np.testing.assert_array_equal(zero.numpy(), 0)


@pytest.mark.parametrize("images,maps", [(1, 4), (3, 6), (7, 32), (16, 64), (2, 8), (5, 12)])
def test_launch_parameters(rng, images, maps):
    x, w, b = _case(rng, (11, 1, 28, 28, 32, 5))
    out = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant=VARIANT, images=images, maps=maps)
    assert_close(out, nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="cpu"), x, w, b)


def test_close_to_fused_on_the_fashion_layer(rng):
    """tanh after the max (monotone) instead of before: within tanh's rounding of fused, which applies it first."""
    x8 = rng.integers(0, 256, (5, 1, 64, 64), dtype=np.uint8)
    _, w, b = _case(rng, (1, 1, 64, 64, 6, 5))
    out = nn.conv2d_pool(x8, w, b, activation="tanh", pool="max", input_divisor=255.0, variant=VARIANT)
    fused = nn.conv2d_pool(x8, w, b, activation="tanh", pool="max", input_divisor=255.0, variant="fused")
    assert relative_error(out, fused) < 1e-6


@pytest.mark.parametrize("x_shape,w_shape,kw,match", [
    ((2, 1, 20, 20), (4, 1, 7, 7), {}, "3x3 or 5x5"),
    ((2, 1, 20, 20), (4, 1, 3, 5), {}, "3x3 or 5x5"),
    ((2, 1, 20, 20), (4, 1, 3, 3), dict(pool_size=3), "pool_size must be 2 \\(or 1"),
    ((2, 5, 20, 20), (4, 5, 5, 5), {}, "C\\*R\\*S = 125"),
    ((1, 1, 300, 300), (4, 1, 5, 5), {}, "x: one staged image"),
])
def test_rejected_before_launch_and_process_stays_usable(rng, x_shape, w_shape, kw, match):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    with pytest.raises(ValueError, match=match):
        nn.conv2d_pool(x, w, variant=VARIANT, **kw)
    with pytest.raises(ValueError, match=match):  # device arrays: the launcher's own check
        nn.conv2d_pool(gpuopt.to_device(x), gpuopt.to_device(w), variant=VARIANT, **kw)
    x, w, b = _case(rng, (1, 1, 9, 9, 3, 3))
    assert_close(nn.conv2d_pool(x, w, b, variant=VARIANT), nn.conv2d_pool(x, w, b, variant="cpu"), x, w, b)
