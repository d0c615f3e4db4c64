"""conv2d_pool's CPU reference against NumPy, its argument checks and the fused kernel's planner (host only)."""

import numpy as np
import pytest

from gpuopt import nn
from conftest import needs_cuda_build, relative_error
import oracles


def numpy_conv_pool(x, w, bias, activation, pool, size=2):
    """The layer in float64 NumPy: the oracle's convolution, then the oracle's pooling."""
    y = oracles.conv2d(np.asarray(x, np.float64), w, bias, activation=activation)
    return oracles.pool2d(y, size, pool)


@pytest.mark.parametrize("activation", ["none", "relu", "tanh"])
@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("shape", [(2, 3, 9, 11, 4, 3), (1, 1, 28, 28, 5, 5), (3, 2, 7, 6, 1, 2)], ids=str)
def test_cpu_matches_numpy(rng, activation, pool, shape):
    n, c, h, w_, k, r = shape
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = rng.standard_normal((k, c, r, r)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32)
    out = nn.conv2d_pool(x, w, b, activation=activation, pool=pool, variant="cpu")
    ref = numpy_conv_pool(x, w, b, activation, pool)
    assert out.dtype == np.float32 and out.shape == ref.shape == (n, k, (h - r + 1) // 2, (w_ - r + 1) // 2)
    assert relative_error(out, ref) < 1e-6


def test_cpu_uint8_input_is_divided(rng):
    x8 = rng.integers(0, 256, (2, 1, 12, 12), dtype=np.uint8)
    w = rng.standard_normal((3, 1, 5, 5)).astype(np.float32)
    out = nn.conv2d_pool(x8, w, activation="relu", pool="avg", input_divisor=255.0, variant="cpu")
    ref = nn.conv2d_pool(x8.astype(np.float32) / np.float32(255), w, activation="relu", pool="avg", variant="cpu")
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(x=np.zeros((2, 1, 28, 28), np.float32), w=np.zeros((4, 2, 5, 5), np.float32)), ValueError, "input channels"),
    (dict(x=np.zeros((2, 28, 28), np.float32), w=np.zeros((4, 1, 5, 5), np.float32)), ValueError, "4-D"),
    (dict(x=np.zeros((2, 1, 28, 28), np.int32), w=np.zeros((4, 1, 5, 5), np.float32)), TypeError, "floating"),
    (dict(x=np.zeros((2, 1, 5, 5), np.float32), w=np.zeros((4, 1, 5, 5), np.float32)), ValueError, "pooling window"),
    (dict(x=np.zeros((0, 1, 9, 9), np.float32), w=np.zeros((4, 1, 5, 5), np.float32)), ValueError, "empty"),
    (dict(x=np.zeros((1, 1, 9, 9), np.float32), w=np.zeros((4, 1, 5, 5), np.float32), bias=np.zeros(3, np.float32)),
     ValueError, "bias"),
    (dict(x=np.zeros((1, 1, 9, 9), np.float32), w=np.zeros((4, 1, 5, 5), np.float32), pool="min"), ValueError, "pool"),
    (dict(x=np.zeros((1, 1, 9, 9), np.float32), w=np.zeros((4, 1, 5, 5), np.float32), activation="gelu"),
     ValueError, "activation"),
    (dict(x=np.zeros((1, 1, 9, 9), np.float32), w=np.zeros((4, 1, 5, 5), np.float32), input_divisor=255.0),
     ValueError, "uint8"),
    (dict(x=np.zeros((1, 1, 9, 9), np.uint8), w=np.zeros((4, 1, 5, 5), np.float32), input_divisor=0.0),
     ValueError, "input_divisor"),
])
def test_bad_arguments(kwargs, error, match):
    x, w = kwargs.pop("x"), kwargs.pop("w")
    with pytest.raises(error, match=match):
        nn.conv2d_pool(x, w, variant="cpu", **kwargs)


@needs_cuda_build
def test_plan_of_the_mnist_layers():
    conv1 = nn.conv2d_pool_plan((10000, 1, 28, 28), (32, 1, 5, 5))
    assert (conv1["tile_q"], conv1["channels_per_block"], conv1["threads"]) == (24, 32, 288)
    conv2 = nn.conv2d_pool_plan((10000, 32, 12, 12), (64, 32, 5, 5))
    assert conv2["images"] * 64 == conv2["threads"] and conv2["shared_bytes"] <= 72 * 1024
    assert conv2["blocks"] == 10000 // conv2["images"]
    assert (conv1["channels_per_thread"], conv2["channels_per_thread"]) == (4, 8)  # first layers: the short tile


@needs_cuda_build
@pytest.mark.parametrize("w_shape,pool_size,match", [((4, 1, 7, 7), 2, "3x3 or 5x5"), ((4, 1, 3, 5), 2, "3x3 or 5x5"),
                                                      ((4, 1, 3, 3), 3, "pool_size must be 2 \\(or 1")])
def test_plan_rejects_what_fused_cannot_run(w_shape, pool_size, match):
    with pytest.raises(ValueError, match=match):
        nn.conv2d_pool_plan((1, 1, 20, 20), w_shape, pool_size)


@needs_cuda_build
def test_fused_rejects_before_any_copy():
    """The fused launcher's checks run before an input is copied (conftest's CheckOnlyContext raises on a copy)."""
    from conftest import passes_host_checks
    from gpuopt.nn.conv_pool import ConvPoolProblem

    def problem(r, pool_size=2):
        x, w = np.zeros((1, 2, 20, 20), np.float32), np.zeros((3, 2, r, r), np.float32)
        return ConvPoolProblem(x, w, None, "relu", "avg", pool_size, 1.0)

    launch = dict(channels_per_block=0, images=0, channels_per_thread=0)
    assert passes_host_checks("conv2d_pool", "fused", problem(5), **launch)
    with pytest.raises(ValueError, match="3x3 or 5x5"):
        passes_host_checks("conv2d_pool", "fused", problem(7), **launch)
    with pytest.raises(ValueError, match="pool_size must be 2"):
        passes_host_checks("conv2d_pool", "fused", problem(3, pool_size=3), **launch)
    with pytest.raises(ValueError, match="channels_per_thread"):
        passes_host_checks("conv2d_pool", "fused", problem(3), **dict(launch, channels_per_thread=2))


@needs_cuda_build
def test_smallc_plan_of_the_first_layers():
    """direct_smallc: MNIST conv1 as 7 images of 36 patches (252 of 256 threads) and all 32 maps; the planes are the
    images themselves (the contiguous staging path); Fashion conv1 4 images of 225 patches (four rounds of 256)."""
    conv1 = nn.conv2d_pool_smallc_plan((10000, 1, 28, 28), (32, 1, 5, 5))
    assert (conv1["images"], conv1["maps"], conv1["patches"], conv1["threads"]) == (7, 32, 36, 256)
    assert (conv1["rows"], conv1["pitch"]) == (28, 28) and conv1["blocks"] == 1429
    fashion = nn.conv2d_pool_smallc_plan((10000, 1, 64, 64), (6, 1, 5, 5))
    assert (fashion["images"], fashion["maps"], fashion["patches"], fashion["rows"], fashion["pitch"]) == \
        (4, 6, 225, 64, 64)
    odd = nn.conv2d_pool_smallc_plan((3, 3, 13, 10), (70, 3, 3, 3), 1)  # conv 11 x 8 unpooled: 3 x 2 patches
    assert (odd["patches"], odd["rows"], odd["pitch"], odd["maps"]) == (6, 14, 12, 24)


@needs_cuda_build
def test_smallc_rejects_before_any_copy():
    from conftest import passes_host_checks
    from gpuopt.nn.conv_pool import ConvPoolProblem

    def problem(c, r, h=20, pool_size=2, n=1):
        x, w = np.zeros((n, c, h, h), np.float32), np.zeros((3, c, r, r), np.float32)
        return ConvPoolProblem(x, w, None, "relu", "avg", pool_size, 1.0)

    launch = dict(images=0, maps=0)
    assert passes_host_checks("conv2d_pool", "direct_smallc", problem(4, 5), **launch)
    with pytest.raises(ValueError, match="C\\*R\\*S = 150"):
        passes_host_checks("conv2d_pool", "direct_smallc", problem(6, 5), **launch)
    with pytest.raises(ValueError, match="3x3 or 5x5"):
        passes_host_checks("conv2d_pool", "direct_smallc", problem(1, 7), **launch)
    with pytest.raises(ValueError, match="x: one staged image"):
        passes_host_checks("conv2d_pool", "direct_smallc", problem(1, 5, h=400), **launch)
    with pytest.raises(ValueError, match="do not fit"):  # 16 staged 4 x 60 x 60 images: over the budget
        passes_host_checks("conv2d_pool", "direct_smallc", problem(4, 5, h=60, n=20), **dict(launch, images=16))
