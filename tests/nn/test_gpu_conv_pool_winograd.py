"""conv2d_pool/winograd (fused Winograd F(m x m, r x r) + bias + activation + 2x2 pool in registers) against the
CPU reference, outputs poisoned by conftest: the reports' layers, awkward shapes (odd conv outputs whose last
row/column the pool drops, ragged tiles, C not a multiple of the 8-channel chunk, K not a multiple of the map
block, one image), every activation and pooling, device arrays, determinism and the rejections. Error bound:
each pooled output within 1e-5 of the magnitude its sum can reach, and 1e-5 relative overall (as ``fused``);
the transforms' own float32 error (F(4,5) ~1e-6, test_gpu_winograd.py) is well inside it."""

import numpy as np
import pytest

import gpuopt
from gpuopt import nn
from .test_gpu_conv_pool import SHAPES, _case, assert_close

pytestmark = pytest.mark.gpu

VARIANT = "winograd"
MORE_SHAPES = [
    (3, 9, 17, 15, 33, 5),    # conv 13 x 11: ragged tiles, odd sizes; K = 33 (32-map blocks), C = 9
    (11, 5, 9, 9, 12, 3),     # conv 7 x 7
    (1, 3, 6, 7, 2, 5),       # conv 2 x 3: one pooled output per map
]


@pytest.mark.parametrize("m", (2, 4))
@pytest.mark.parametrize("shape", SHAPES + MORE_SHAPES, ids=str)
@pytest.mark.parametrize("activation,pool", [("relu", "avg"), ("tanh", "max"), ("none", "max"), ("none", "avg")])
def test_matches_cpu(rng, m, shape, activation, pool):
    x, w, b = _case(rng, shape, with_bias=activation != "none")
    out = nn.conv2d_pool(x, w, b, activation=activation, pool=pool, variant=VARIANT, m=m)
    ref = nn.conv2d_pool(x, w, b, activation=activation, pool=pool, variant="cpu")
    assert np.isfinite(out).all()
    assert_close(out, ref, x, w, b)


def test_large_batch_mnist_conv2_close_to_fused(rng):
    """Issue 10's layer: many blocks of 16 tiles spanning images; within the fast stage's line of fused."""
    x, w, b = _case(rng, (403, 32, 12, 12, 64, 5))
    x = np.maximum(x, 0)
    out = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant=VARIANT)
    ref = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="cpu")
    assert_close(out, ref, x, w, b)
    fused = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="fused")
    assert float(np.abs(out - fused).max() / np.abs(fused).max()) < 1e-5


def test_device_arrays_and_deterministic(rng):
    x, w, b = _case(rng, (4, 32, 12, 12, 64, 5))
    dx, dw, db = gpuopt.to_device(x), gpuopt.to_device(w), gpuopt.to_device(b)
    out = nn.conv2d_pool(dx, dw, db, activation="relu", pool="avg", variant=VARIANT)
    assert isinstance(out, gpuopt.DeviceArray) and out.shape == (4, 64, 4, 4)
    host = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant=VARIANT)
    np.testing.assert_array_equal(out.numpy(), host)
    for _ in range(2):
        np.testing.assert_array_equal(nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant=VARIANT), host)


@pytest.mark.parametrize("w_shape,pool_size,match", [((4, 1, 7, 7), 2, "3x3 or 5x5"), ((4, 1, 3, 5), 2, "3x3 or 5x5"),
                                                      ((4, 1, 3, 3), 3, "pool_size must be 2")])
def test_rejected_before_launch_and_process_stays_usable(rng, w_shape, pool_size, match):
    x = rng.standard_normal((2, 1, 20, 20)).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    with pytest.raises(ValueError, match=match):
        nn.conv2d_pool(x, w, pool_size=pool_size, variant=VARIANT)
    with pytest.raises(ValueError, match=match):  # device arrays: the launcher's own check
        nn.conv2d_pool(gpuopt.to_device(x), gpuopt.to_device(w), pool_size=pool_size, variant=VARIANT)
    x, w, b = _case(rng, (1, 1, 9, 9, 3, 3))
    assert_close(nn.conv2d_pool(x, w, b, variant=VARIANT, pool="max"), nn.conv2d_pool(x, w, b, variant="cpu"), x, w, b)


def test_uint8_refused_naming_x(rng):
    x8 = rng.integers(0, 256, (2, 1, 28, 28), dtype=np.uint8)
    w = rng.standard_normal((4, 1, 5, 5)).astype(np.float32)
    with pytest.raises(ValueError, match="x: .*float32"):
        nn.conv2d_pool(x8, w, input_divisor=255.0, variant=VARIANT)
    with pytest.raises(ValueError, match="m"):
        nn.conv2d_pool(np.ones((2, 4, 8, 8), np.float32), np.ones((3, 4, 3, 3), np.float32), variant=VARIANT, m=3)
