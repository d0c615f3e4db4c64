"""conv2d ``pointwise_tf32x3`` (1x1 convolutions as one 3xTF32 warpgroup-MMA GEMM) against the float64 oracle: the
pointwise layers of ResNet-50, MobileNetV2 and the CS6235 report's conf4, a strided 1x1 (ResNet's downsampling
shortcut), and awkward sizes (C and K not multiples of the tiles, odd P*Q, one image, one channel); bias and every
activation; host, DeviceArray and torch inputs. FP32-level error: at most 2x cuDNN FP32's own (strict, TF32 off)
against float64 on the same inputs. Outputs poisoned first (conftest). Bad input: anything but a 1x1 filter
without padding raises ValueError naming the variant, before anything is copied."""

import numpy as np
import pytest

import gpuopt
from .cases import (check_activation_and_bias, check_device_and_torch_inputs, check_tf32x3_against_float64,
                    require_hopper)

pytestmark = pytest.mark.gpu

VARIANT = "pointwise_tf32x3"

# (N, C, H, W, K, stride)
SHAPES = [
    (32, 256, 28, 28, 256, 1),     # the pointwise layer of the conv issue's table
    (128, 832, 7, 7, 128, 1),      # CS6235 conf4
    (8, 64, 56, 56, 256, 1),       # ResNet-50 bottleneck expansion
    (8, 256, 56, 56, 512, 2),      # its strided downsampling shortcut
    (4, 24, 56, 56, 144, 1),       # MobileNetV2 expansion
    (1, 3, 9, 7, 5, 1),            # one image, three channels, five maps, odd plane
    (3, 130, 11, 13, 129, 2),      # C and K past a tile, odd P*Q, stride 2
    (2, 1, 4, 4, 1, 1),            # one channel, one map
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_pointwise_matches_float64(rng, shape):
    require_hopper(VARIANT)
    n, c, h, w, k, stride = shape
    check_tf32x3_against_float64(rng, VARIANT, (n, c, h, w, k, 1, 1, stride, 0))


@pytest.mark.parametrize("activation", ["none", "relu", "tanh"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_activations_and_bias(rng, activation, with_bias):
    require_hopper(VARIANT)
    check_activation_and_bias(rng, VARIANT, (2, 40, 9, 9), (36, 40, 1, 1), activation, with_bias)


def test_device_inputs_in_place_and_deterministic(rng):
    require_hopper(VARIANT)
    check_device_and_torch_inputs(rng, VARIANT, (4, 64, 14, 14), (96, 64, 1, 1))


@pytest.mark.parametrize("kw, w_shape", [({}, (4, 3, 3, 3)), (dict(padding=1), (4, 3, 1, 1)),
                                         (dict(groups=3), (3, 1, 1, 1)), (dict(dilation=2), (4, 3, 1, 1))])
def test_only_1x1_without_padding(rng, kw, w_shape):
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    wt = rng.standard_normal(w_shape).astype(np.float32)
    with pytest.raises(ValueError, match="pointwise_tf32x3"):
        gpuopt.conv2d(x, wt, variant="pointwise_tf32x3", **kw)
