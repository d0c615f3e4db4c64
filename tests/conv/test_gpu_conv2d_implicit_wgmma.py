"""conv2d ``implicit_gemm_tf32x3_wgmma`` (any plain convolution as one 3xTF32 warpgroup-MMA GEMM, the input windows
gathered inside the product) against the float64 oracle: the 3x3 layers of VGG-16 and ResNet-50 (stride 1 and 2),
a 7x7 stem, 5x5 layers of the reports, awkward sizes (C*R*S and K not multiples of the tiles, C*R*S under one
16-tap piece, odd N*P*Q, padding past the filter's half, one image, one channel, windows wholly in the padding);
bias and every activation; host, DeviceArray and torch inputs; bitwise repeatable. FP32-level error: at most 2x
cuDNN FP32's own (strict, TF32 off) against float64 on the same inputs, or 2x 2^-22 on short sums. Outputs poisoned
first (conftest). Bad input: groups or dilation raise ValueError naming the variant, before anything is copied."""

import numpy as np
import pytest

import gpuopt
from .cases import check_tf32x3_against_float64, plain_tf32x3_tests, require_hopper

pytestmark = pytest.mark.gpu

VARIANT = "implicit_gemm_tf32x3_wgmma"

# (N, C, H, W, K, R, S, stride, padding)
SHAPES = [
    (4, 64, 56, 56, 64, 3, 3, 1, 1),       # VGG-16's 64 > 64 (image cut down)
    (4, 128, 28, 28, 128, 3, 3, 1, 1),     # ResNet-50's 3x3/1 128
    (4, 128, 28, 28, 256, 3, 3, 2, 1),     # ResNet-50's stride-2 3x3
    (2, 3, 64, 64, 64, 7, 7, 2, 3),        # the ResNet-50 stem, smaller image: 147 taps
    (16, 6, 30, 30, 16, 5, 5, 1, 0),       # ECE408 Fashion conv2
    (8, 32, 12, 12, 64, 5, 5, 1, 0),       # ECE408 MNIST conv2
    (1, 3, 9, 7, 5, 3, 3, 1, 2),           # one image, padding past the filter's half (27 taps)
    (3, 13, 11, 13, 129, 3, 2, 2, 1),      # K past a tile, C*R*S = 78, odd P*Q, stride 2
    (2, 1, 4, 4, 1, 1, 1, 1, 0),           # one channel, one map, 1x1: one tap
    (1, 2, 3, 3, 3, 3, 3, 1, 3),           # windows wholly in the padding (zero columns)
    (3, 40, 17, 19, 200, 3, 3, 1, 1),      # N*P*Q past two column tiles, K past one row tile
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_float64(rng, shape):
    require_hopper(VARIANT)
    check_tf32x3_against_float64(rng, VARIANT, shape)


def test_same_bits_as_unroll_tf32x3(rng):
    # The same products in the same order (the split of the same values, the same MMA sequence): the same bits as
    # the variant whose B is split in memory.
    require_hopper(VARIANT)
    x = rng.standard_normal((3, 24, 15, 13)).astype(np.float32)
    wt = rng.standard_normal((40, 24, 3, 3)).astype(np.float32)
    a = gpuopt.conv2d(x, wt, padding=1, variant=VARIANT)
    b = gpuopt.conv2d(x, wt, padding=1, variant="unroll_tf32x3")
    np.testing.assert_array_equal(a, b)


test_activations_and_bias, test_device_inputs_and_deterministic, test_only_plain_layers = plain_tf32x3_tests(VARIANT)

