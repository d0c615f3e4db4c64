"""conv2d_pool/fused against the CPU reference (outputs poisoned by conftest): the reports' layers, awkward shapes
(tails in every dimension, several tiles and channel blocks, one image), every activation and pooling, uint8
input, NaN, device arrays, and the rejections made before anything is copied."""

import numpy as np
import pytest

import gpuopt
from gpuopt import nn
from conftest import relative_error
import oracles

pytestmark = pytest.mark.gpu

# (N, C, H, W, K, R): the MNIST layers, the Fashion layer, and shapes with a tail everywhere: K not a multiple of 8
# or above 64 (two channel blocks), odd conv outputs (last row/column dropped by the pool), C over one shared-memory
# chunk, an image wider than one tile (several tiles, each with its halo), one image, an image just over the filter.
SHAPES = [
    (7, 1, 28, 28, 32, 5),
    (9, 32, 12, 12, 64, 5),
    (3, 1, 64, 64, 6, 5),
    (5, 6, 30, 30, 16, 5),
    (2, 3, 13, 10, 5, 3),
    (1, 37, 11, 9, 70, 3),
    (2, 2, 45, 83, 13, 5),
    (1, 1, 6, 6, 1, 5),
    (6, 40, 8, 8, 9, 3),
]


# Every activation with both pools: what each conv2d_pool variant is checked against the CPU reference over.
EVERY_ACTIVATION_AND_POOL = [("relu", "avg"), ("tanh", "max"), ("none", "max"), ("relu", "max"), ("none", "avg"),
                             ("tanh", "avg")]


def assert_close(out, ref, x, w, b=None, per_output=1e-5):
    """Each output within ``per_output`` (1e-5) of the magnitude its sum can reach (sum |x||w| + |b| over its
    window): float32 rounding of up to C*R*S products, measured against what cancellation leaves."""
    mag = oracles.conv2d(np.abs(x), np.abs(w), None if b is None else np.abs(b))
    bound = oracles.pool2d(mag, 2, "max")
    assert out.shape == ref.shape and out.dtype == np.float32
    np.testing.assert_array_less(np.abs(out.astype(np.float64) - ref), per_output * bound + 1e-30)
    # ``per_output`` relative overall too, unless cancellation left the result far below what its sums reach (a
    # single pooled output of 0.015 from terms of size ~1 failed at 1.5e-5 through Winograd's transforms): then
    # relative to a tenth of the magnitude, which the per-output check above already holds ten times tighter. (F(4x4,
    # 5x5)'s 3e-5: one pooled output of 0.1995 from terms summing to 2.46 came out 2.0e-5 off, 3.9e-6 absolute.)
    diff = np.linalg.norm(out.astype(np.float64) - ref)
    assert diff < per_output * max(np.linalg.norm(ref), 0.1 * np.linalg.norm(bound)), relative_error(out, ref)


def _case(rng, shape, with_bias=True):
    n, c, h, w_, k, r = shape
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = (rng.standard_normal((k, c, r, r)) / np.sqrt(c * r * r)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32) if with_bias else None
    return x, w, b


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("activation,pool", [("relu", "avg"), ("tanh", "max"), ("none", "max"), ("relu", "max"),
                                             ("none", "avg")])
def test_fused_matches_cpu(rng, shape, activation, pool):
    check_matches_cpu(rng, "fused", shape, activation, pool)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fused_pool_size_1_is_the_layer_unpooled(rng, shape):
    """pool_size 1 (conv2d's direct_fused): every convolution output stored, float32 and uint8 input."""
    x, w, b = _case(rng, shape)
    out = nn.conv2d_pool(x, w, b, activation="relu", pool_size=1, variant="fused")
    ref = nn.conv2d_pool(x, w, b, activation="relu", pool_size=1, variant="cpu")
    assert out.shape == (shape[0], shape[4], shape[2] - shape[5] + 1, shape[3] - shape[5] + 1)
    assert np.isfinite(out).all()
    mag = oracles.conv2d(np.abs(x), np.abs(w), np.abs(b))
    np.testing.assert_array_less(np.abs(out.astype(np.float64) - ref), 1e-5 * mag + 1e-30)
    pixels = rng.integers(0, 256, shape[:4], dtype=np.uint8)
    out8 = nn.conv2d_pool(pixels, w, b, activation="tanh", pool_size=1, input_divisor=255.0, variant="fused")
    ref8 = nn.conv2d_pool(pixels, w, b, activation="tanh", pool_size=1, input_divisor=255.0, variant="cpu")
    assert relative_error(out8, ref8) < 1e-5


def test_fused_large_batch_mnist_conv2(rng):
    """Many blocks of 4 images, a tail of 3: every output written."""
    x, w, _ = _case(rng, (403, 32, 12, 12, 64, 5), with_bias=False)
    x = np.maximum(x, 0)
    out = nn.conv2d_pool(x, w, activation="relu", pool="avg", variant="fused")
    ref = nn.conv2d_pool(x, w, activation="relu", pool="avg", variant="cpu")
    assert_close(out, ref, x, w)


def test_uint8_input_equals_float_input_divided(rng):
    x8 = rng.integers(0, 256, (11, 1, 28, 28), dtype=np.uint8)
    w = rng.standard_normal((32, 1, 5, 5)).astype(np.float32)
    out8 = nn.conv2d_pool(x8, w, activation="relu", pool="avg", input_divisor=255.0, variant="fused")
    outf = nn.conv2d_pool(x8.astype(np.float32) / np.float32(255), w, activation="relu", pool="avg", variant="fused")
    np.testing.assert_array_equal(out8, outf)  # the same float32 inputs, bit for bit
    ref = nn.conv2d_pool(x8, w, activation="relu", pool="avg", input_divisor=255.0, variant="cpu")
    assert_close(out8, ref, x8.astype(np.float32) / np.float32(255), w)


def check_matches_cpu(rng, variant, shape, activation, pool, per_output=1e-5, **params):
    """``variant`` (with ``params``) against the CPU reference on a fresh case of ``shape``: every output finite, and
    within :func:`assert_close`'s bound (a bias only where there is an activation)."""
    x, w, b = _case(rng, shape, with_bias=activation != "none")
    out = nn.conv2d_pool(x, w, b, activation=activation, pool=pool, variant=variant, **params)
    ref = nn.conv2d_pool(x, w, b, activation=activation, pool=pool, variant="cpu")
    assert np.isfinite(out).all()
    assert_close(out, ref, x, w, b, per_output)


def check_nan_windows(rng, variant, shape, at, pool):
    """A NaN at x[at] (an input of image 1) reaches exactly the pooled windows it reaches in the CPU reference, image 0
    stays finite, and every other output is close to the reference's."""
    x, w, b = _case(rng, shape)
    x[at] = np.nan
    out = nn.conv2d_pool(x, w, b, activation="relu", pool=pool, variant=variant)
    ref = nn.conv2d_pool(x, w, b, activation="relu", pool=pool, variant="cpu")
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    assert np.isnan(out).any() and not np.isnan(out[0]).any()
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(out[ok], ref[ok], rtol=1e-4, atol=1e-5)


def check_device_arrays(rng, variant, shape, pooled, repeats=0):
    """Device arrays in, a DeviceArray of shape ``pooled`` out, equal to the NumPy call's result, and the same bits
    over ``repeats`` more NumPy calls (relu + 2x2 average pool). Returns the device weights for further checks."""
    x, w, b = _case(rng, shape)
    dx, dw, db = gpuopt.to_device(x), gpuopt.to_device(w), gpuopt.to_device(b)
    out = nn.conv2d_pool(dx, dw, db, activation="relu", pool="avg", variant=variant)
    assert isinstance(out, gpuopt.DeviceArray) and out.shape == pooled
    host = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant=variant)
    np.testing.assert_array_equal(out.numpy(), host)
    for _ in range(repeats):
        np.testing.assert_array_equal(nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant=variant), host)
    return dw


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_nan_reaches_exactly_the_windows_it_touches(rng, pool):
    check_nan_windows(rng, "fused", (2, 3, 14, 14, 8, 3), (1, 2, 6, 7), pool)


def test_device_arrays_in_device_array_out(rng):
    dw = check_device_arrays(rng, "fused", (4, 32, 12, 12, 64, 5), (4, 64, 4, 4))
    d8 = gpuopt.to_device(np.zeros((1, 32, 12, 12), np.uint8))
    zero = nn.conv2d_pool(d8, dw, None, activation="none", pool="max", input_divisor=255.0, variant="fused")
    np.testing.assert_array_equal(zero.numpy(), 0)


def test_deterministic(rng):
    x, w, b = _case(rng, (9, 32, 12, 12, 64, 5))
    first = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="fused")
    for _ in range(3):
        np.testing.assert_array_equal(nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="fused"), first)


def test_timing_reports_the_kernel(rng):
    x, w, b = _case(rng, (64, 1, 28, 28, 32, 5))
    out, t = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="fused", timing=True)
    assert out.shape == (64, 32, 12, 12) and t.kernel_ms > 0 and t.h2d_ms > 0 and t.d2h_ms > 0


@pytest.mark.parametrize("w_shape,pool_size,match", [((4, 1, 7, 7), 2, "3x3 or 5x5"), ((4, 1, 3, 5), 2, "3x3 or 5x5"),
                                                      ((4, 1, 3, 3), 3, "pool_size must be 2 \\(or 1")])
def test_rejected_before_launch_and_process_stays_usable(rng, w_shape, pool_size, match):
    x = rng.standard_normal((2, 1, 20, 20)).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    with pytest.raises(ValueError, match=match):
        nn.conv2d_pool(x, w, pool_size=pool_size, variant="fused")
    with pytest.raises(ValueError, match=match):  # device arrays: the launcher's own check
        nn.conv2d_pool(gpuopt.to_device(x), gpuopt.to_device(w), pool_size=pool_size, variant="fused")
    x, w, b = _case(rng, (1, 1, 9, 9, 3, 3))
    assert_close(nn.conv2d_pool(x, w, b, variant="fused", pool="max"), nn.conv2d_pool(x, w, b, variant="cpu"), x, w, b)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("channels_per_thread", [4, 8])
def test_both_register_tiles(rng, shape, channels_per_thread):
    """The 2x4x4 tile (picked for first layers) and the 2x4x8 tile, each forced on every shape."""
    x, w, b = _case(rng, shape)
    out = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="fused",
                         channels_per_thread=channels_per_thread)
    assert_close(out, nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="cpu"), x, w, b)


@pytest.mark.parametrize("channels_per_block,images", [(8, 1), (16, 3), (24, 2), (40, 1), (64, 4)])
def test_launch_parameters(rng, channels_per_block, images):
    x, w, b = _case(rng, (7, 6, 14, 14, 70, 5))
    out = nn.conv2d_pool(x, w, b, activation="tanh", pool="max", variant="fused",
                         channels_per_block=channels_per_block, images=images)
    assert_close(out, nn.conv2d_pool(x, w, b, activation="tanh", pool="max", variant="cpu"), x, w, b)
