"""conv2d ``unroll_tf32x3`` (any plain convolution as 3xTF32 warpgroup-MMA GEMMs over the split unrolled input) against
the float64 oracle: the 3x3 layers of VGG-16 and ResNet-50 (stride 1 and 2), a 7x7 stem, 5x5 layers of the reports,
awkward sizes (C*R*S and K not multiples of the tiles, odd P*Q, padding past the filter's half, one image, one
channel); chunks of images by a shrunk scratch budget, a short last chunk included; bias and every activation; host,
DeviceArray and torch inputs; bitwise repeatable. FP32-level error: at most 2x cuDNN FP32's own (strict, TF32 off)
against float64 on the same inputs, or 2x 2^-22 on short sums. Outputs poisoned first (conftest). Bad input: groups or
dilation raise ValueError naming the variant, before anything is copied."""

import pytest

import gpuopt
from conftest import conv_call
from .cases import check_against_cpu, check_tf32x3_against_float64, plain_tf32x3_tests, require_hopper, uniform

pytestmark = pytest.mark.gpu

VARIANT = "unroll_tf32x3"

# (N, C, H, W, K, R, S, stride, padding)
SHAPES = [
    (4, 128, 28, 28, 128, 3, 3, 1, 1),     # VGG-16 / ResNet-50 3x3 (batch cut down)
    (4, 128, 28, 28, 256, 3, 3, 2, 1),     # ResNet-50's stride-2 3x3
    (2, 3, 64, 64, 64, 7, 7, 2, 3),        # the ResNet-50 stem, smaller image
    (16, 6, 30, 30, 16, 5, 5, 1, 0),       # ECE408 Fashion conv2
    (8, 32, 12, 12, 64, 5, 5, 1, 0),       # ECE408 MNIST conv2
    (1, 3, 9, 7, 5, 3, 3, 1, 2),           # one image, padding past the filter's half
    (3, 13, 11, 13, 129, 3, 2, 2, 1),      # K past a tile, C*R*S = 78, odd P*Q, stride 2
    (2, 1, 4, 4, 1, 1, 1, 1, 0),           # one channel, one map, 1x1
]


def _cuda():
    from gpuopt._ext import cuda_module
    return cuda_module()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_unroll_tf32x3_matches_float64(rng, shape):
    require_hopper(VARIANT)
    check_tf32x3_against_float64(rng, VARIANT, shape)


@pytest.mark.parametrize("chunk", [1, 3, 7], ids=lambda c: f"chunk{c}")
def test_chunks_of_images(rng, chunk):
    """A scratch budget that holds `chunk` images' split input: 7 images in products of 1, 3 (3 + 3 + 1) or 7."""
    n, c, h, w, k, r, s, u, v, ph, pw = shape = (7, 5, 11, 9, 6, 3, 3, 2, 1, 1, 2)
    x, wt, bias = uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s)), uniform(rng, k)
    _, _, p, q = gpuopt.conv2d_output_shape(x.shape, wt.shape, (u, v), (ph, pw))
    budget = chunk * 8 * 64 * p * q + 3  # C*R*S = 45 taps, split to 64: 8 bytes an entry
    cuda = _cuda()
    assert cuda.conv2d_unroll_tf32x3_chunk_images(cuda.Conv2dShape(*shape), scratch_limit_bytes=budget) == chunk
    require_hopper(VARIANT)
    dx, dw, db = gpuopt.to_device(x), gpuopt.to_device(wt), gpuopt.to_device(bias)
    y = gpuopt.cuda.empty((n, k, p, q))
    cuda.conv2d_unroll_tf32x3(conv_call(cuda, dx.ptr, dw.ptr, db.ptr, y.ptr, shape, "tanh"), scratch_limit_bytes=budget)
    check_against_cpu(y.numpy(), x, wt, stride=(u, v), padding=(ph, pw), bias=bias, activation="tanh",
                      what=f"unroll_tf32x3, {chunk} images a product")


test_activations_and_bias, test_device_inputs_and_deterministic, test_only_plain_layers = plain_tf32x3_tests(VARIANT)
