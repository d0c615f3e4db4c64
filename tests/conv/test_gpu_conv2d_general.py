"""conv2d with groups and dilation on the GPU: cuDNN (both algorithm sets), ``auto`` (which hands them to cuDNN, or
large depthwise layers to ``depthwise``'s rows kernel: tests/conv/test_gpu_auto.py) and ``variant=None``, against the float64 oracle on the CPU tests' shapes (odd sizes, stride 2, padding past the
filter's half, dilation 2 and 3, groups 2, 4 and C) and a few of real networks' (MobileNet's depthwise 3x3, a
dilated 3x3 of DeepLab's kind, ResNeXt's 32 groups), host and device inputs. Outputs poisoned first (conftest)."""

import numpy as np
import pytest

import gpuopt
import oracles
from conftest import relative_error

from .test_conv2d import GENERAL, _pair

pytestmark = pytest.mark.gpu

NETWORKS = [
    (8, 96, 28, 28, 96, 3, 3, 1, 1, 1, 96),     # MobileNetV2 depthwise
    (2, 64, 33, 33, 64, 3, 3, 1, 2, 2, 1),      # dilated 3x3, "same" padding
    (4, 128, 14, 14, 128, 3, 3, 1, 1, 1, 32),   # ResNeXt 32x4d
]


@pytest.mark.parametrize("shape", GENERAL + NETWORKS, ids=str)
@pytest.mark.parametrize("variant,params", [("cudnn", {}), ("cudnn", {"algorithms": "any"}), ("auto", {}),
                                            (None, {})], ids=["cudnn", "cudnn-any", "auto", "default"])
@pytest.mark.parametrize("on_device", [False, True])
def test_groups_and_dilation_match_float64(rng, shape, variant, params, on_device):
    if "cudnn" not in gpuopt.variants("conv2d"):
        pytest.skip("built without cuDNN")
    n, c, h, w, k, r, s, stride, padding, dilation, groups = shape
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((k, c // groups, r, s)).astype(np.float32)
    bias = rng.standard_normal(k).astype(np.float32)
    args = (gpuopt.to_device(x), gpuopt.to_device(wt)) if on_device else (x, wt)
    y = gpuopt.conv2d(*args, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias,
                      activation="relu", variant=variant, **params)
    y = y.numpy() if on_device else y
    ref = oracles.conv2d(x, wt, bias, _pair(stride), _pair(padding), "relu", _pair(dilation), groups)
    assert y.shape == ref.shape
    assert relative_error(y, ref) < (1e-4 if params.get("algorithms") == "any" else 1e-5)


def test_the_algorithm_cache_tells_groups_and_dilation_apart(rng):
    # One cuDNN setup per (shape, dilation, groups): the same x and filter sizes under another dilation or group
    # count must not reuse a setup built for the plain convolution.
    x = rng.standard_normal((2, 8, 16, 16)).astype(np.float32)
    for dilation, groups in ((1, 1), (2, 1), (1, 2), (2, 4), (1, 1)):
        wt = rng.standard_normal((8, 8 // groups, 3, 3)).astype(np.float32)
        y = gpuopt.conv2d(x, wt, padding=2, dilation=dilation, groups=groups, variant="cudnn")
        ref = oracles.conv2d(x, wt, None, (1, 1), (2, 2), "none", (dilation, dilation), groups)
        assert relative_error(y, ref) < 1e-5
