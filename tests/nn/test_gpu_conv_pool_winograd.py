"""conv2d_pool/winograd (fused Winograd F(m x m, r x r) + bias + activation + 2x2 pool in registers) against the
CPU reference, outputs poisoned by conftest: the reports' layers, awkward shapes (odd conv outputs whose last
row/column the pool drops, ragged tiles, C not a multiple of the 8-channel chunk, K not a multiple of the map
block, one image), every activation and pooling, device arrays, determinism and the rejections. Error bound:
each pooled output within 1e-5 of the magnitude its sum can reach (F(4x4, 5x5): 3e-5), and 1e-5 relative overall
(as ``fused``). F(4x4, 5x5)'s transforms (points 0, +-1, +-1/2, +-2) amplify float32 rounding: on a one-channel
layer, where no sum over channels averages it out, one output in ~16,000 reached 1.1e-5 of its magnitude in a
fresh-random H200 run (the direct sums stay below 1e-6); over the whole output the error is ~1e-6
(test_gpu_winograd.py)."""

import numpy as np
import pytest

import gpuopt
from gpuopt import nn
import oracles
from .test_gpu_conv_pool import SHAPES, _case, assert_close, check_device_arrays, check_matches_cpu

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
    check_matches_cpu(rng, VARIANT, shape, activation, pool, per_output=3e-5 if m == 4 else 1e-5, m=m)


def test_large_batch_mnist_conv2_close_to_fused(rng):
    """The MNIST winograd stage's conv2 layer: many blocks of 16 tiles spanning images; within the fast stage's line of fused."""
    x, w, b = _case(rng, (403, 32, 12, 12, 64, 5))
    x = np.maximum(x, 0)
    out = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant=VARIANT)
    ref = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="cpu")
    assert_close(out, ref, x, w, b)
    fused = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="fused")
    assert float(np.abs(out - fused).max() / np.abs(fused).max()) < 1e-5


def test_device_arrays_and_deterministic(rng):
    check_device_arrays(rng, VARIANT, (4, 32, 12, 12, 64, 5), (4, 64, 4, 4), repeats=2)


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


FIVE_BY_FIVE = [s for s in SHAPES + MORE_SHAPES if s[5] == 5]


@pytest.mark.parametrize("products", ("fma", "tf32x3"))
@pytest.mark.parametrize("shape", FIVE_BY_FIVE, ids=str)
def test_products_both_ways_match_cpu(rng, products, shape):
    """F(4x4, 5x5) with the per-point products on FFMA and on the tensor cores (3xTF32), every 5x5 shape (K below,
    at and past the 32-map block; C = 1 to 32, over the 8-channel chunk; ragged tiles; one image)."""
    x, w, b = _case(rng, shape)
    out = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant=VARIANT, m=4, products=products)
    ref = nn.conv2d_pool(x, w, b, activation="relu", pool="avg", variant="cpu")
    assert np.isfinite(out).all()
    assert_close(out, ref, x, w, b)


@pytest.mark.parametrize("c", (32, 128))
def test_tf32x3_within_the_winograd_bound_of_float64(rng, c):
    """3xTF32 keeps FP32-level products: MNIST conv2 (inputs in [0, 1] as after conv1's ReLU; C = 32: the resident-V
    block, and C = 128: the chunked one, 16 chunks accumulated in the tensor cores) within F(4,5)'s bound against
    float64 (gpuopt.conv.winograd.ERROR_BOUNDS), and within 4e-6 relative of the FFMA products."""
    from gpuopt.conv.winograd import ERROR_BOUNDS

    x = rng.uniform(0, 1, (64, c, 12, 12)).astype(np.float32)
    w = (rng.standard_normal((64, c, 5, 5)) / np.sqrt(c * 25)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    ref = oracles.pool2d(oracles.conv2d(x, w, b), 2, "avg")  # float64, no activation: every output counts
    got = {p: nn.conv2d_pool(x, w, b, pool="avg", variant=VARIANT, products=p) for p in ("fma", "tf32x3", "auto")}
    # auto: the resident-V tensor-core block for C <= 32 (MNIST conv2), FFMA past it
    np.testing.assert_array_equal(got["auto"], got["tf32x3" if c <= 32 else "fma"])
    for p in ("fma", "tf32x3"):
        err = float(np.linalg.norm(got[p] - ref) / np.linalg.norm(ref))
        assert err <= ERROR_BOUNDS[(4, 5)], (p, err)
    diff = float(np.linalg.norm(got["tf32x3"] - got["fma"]) / np.linalg.norm(got["fma"]))
    assert 0 < diff < 1e-6 * 4, diff  # different arithmetic (not the FFMA kernel by another name), same accuracy


@pytest.mark.parametrize("w_shape,m", [((4, 3, 3, 3), 4), ((4, 3, 5, 5), 2)])
def test_tf32x3_refused_outside_f45_naming_products(rng, w_shape, m):
    x = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    with pytest.raises(ValueError, match="products"):
        nn.conv2d_pool(x, w, variant=VARIANT, m=m, products="tf32x3")
    with pytest.raises(ValueError, match="products"):
        nn.conv2d_pool(x, w, variant=VARIANT, m=m, products="fp16")


@pytest.mark.parametrize("pool", ("avg", "max"))
@pytest.mark.parametrize("shape", [(1, 32, 12, 12, 64, 5), (6, 17, 11, 13, 40, 5), (3, 5, 9, 9, 96, 5)], ids=str)
def test_resident_block_pooled(rng, shape, pool):
    """The resident-V block (C <= 32, auto for K > 16): one image, ragged tiles and conv outputs with a trailing odd
    row/column the pool drops, C = 5..32, K = 40 (a partial second map block) and 96 (three); auto is that block."""
    x, w, b = _case(rng, shape)
    out = nn.conv2d_pool(x, w, b, activation="relu", pool=pool, variant=VARIANT)
    assert_close(out, nn.conv2d_pool(x, w, b, activation="relu", pool=pool, variant="cpu"), x, w, b)
    np.testing.assert_array_equal(out, nn.conv2d_pool(x, w, b, activation="relu", pool=pool, variant=VARIANT,
                                                      products="tf32x3"))
