"""conv2d ``depthwise`` (groups = C) on the GPU against the float64 oracle: odd plane sizes around every tile's edge
(the 32x32, 16x16 and 8x8 tiles, each forced and by ``auto``), stride 1, 2 and (2, 1), padding past the filter's
half, dilation 2 and 3, filters 1x1 to 7x7 and non-square, 1 and 2 maps a channel, N = 1 and more planes than a
grid step; every activation with and without bias; host, DeviceArray and torch inputs. Outputs poisoned first
(conftest). Bad input: groups other than C raises ValueError naming the variant, before anything is copied."""

import numpy as np
import pytest

import gpuopt
import oracles
from conftest import relative_error

from .test_conv2d import _pair

pytestmark = pytest.mark.gpu

# (N, C, H, W, multiplier, R, S, stride, padding, dilation)
SHAPES = [
    (8, 96, 28, 28, 1, 3, 3, 1, 1, 1),             # MobileNetV2's stride-1 depthwise (32x32 tile, one partial)
    (4, 144, 56, 56, 1, 3, 3, 2, 1, 1),            # its stride 2: 28x28 out
    (2, 32, 7, 7, 1, 3, 3, 1, 1, 1),               # 7x7 planes: the 8x8 tile, four planes a block
    (3, 16, 14, 14, 1, 3, 3, 1, 1, 1),             # 16x16 tile
    (1, 5, 33, 31, 2, 3, 3, 1, 1, 1),              # two maps a channel, past a 32-tile edge on both sides
    (2, 6, 17, 25, 1, 5, 3, (2, 1), (4, 2), (2, 3)),
    (1, 3, 40, 9, 1, 7, 7, 1, 5, 3),               # padding past the dilated filter's half
    (2, 4, 12, 12, 3, 1, 1, 1, 0, 1),              # 1x1: a per-channel scale, three maps a channel
    (1, 7, 65, 66, 1, 2, 4, 3, 0, 2),              # even filters, stride 3, no padding
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("tile", ["auto", 32, 16, 8])
def test_depthwise_matches_float64(rng, shape, tile):
    n, c, h, w, m, r, s, stride, padding, dilation = shape
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c * m, 1, r, s)).astype(np.float32)
    bias = rng.standard_normal(c * m).astype(np.float32)
    y = gpuopt.conv2d(x, wt, stride=stride, padding=padding, dilation=dilation, groups=c, bias=bias,
                      activation="relu", variant="depthwise", tile=tile)
    ref = oracles.conv2d(x, wt, bias, _pair(stride), _pair(padding), "relu", _pair(dilation), c)
    assert y.shape == ref.shape
    assert relative_error(y, ref) < 1e-5


@pytest.mark.parametrize("activation", ["none", "relu", "tanh"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_activations_and_bias(rng, activation, with_bias):
    x = rng.standard_normal((2, 12, 19, 23)).astype(np.float32)
    wt = rng.standard_normal((12, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(12).astype(np.float32) if with_bias else None
    y = gpuopt.conv2d(x, wt, padding=1, groups=12, bias=bias, activation=activation, variant="depthwise")
    ref = oracles.conv2d(x, wt, bias, (1, 1), (1, 1), activation, (1, 1), 12)
    assert relative_error(y, ref) < 1e-5


def test_more_planes_than_one_grid_step_and_deterministic(rng):
    # 4,096 planes of 5x5 (8x8 tiles, four planes a block): every block runs several plane steps
    x = rng.standard_normal((64, 64, 5, 5)).astype(np.float32)
    wt = rng.standard_normal((64, 1, 3, 3)).astype(np.float32)
    y = gpuopt.conv2d(x, wt, padding=1, groups=64, variant="depthwise")
    assert relative_error(y, oracles.conv2d(x, wt, None, (1, 1), (1, 1), "none", (1, 1), 64)) < 1e-5
    again = gpuopt.conv2d(x, wt, padding=1, groups=64, variant="depthwise")
    assert y.tobytes() == again.tobytes()


def test_device_inputs_in_place(rng):
    x = rng.standard_normal((4, 32, 20, 20)).astype(np.float32)
    wt = rng.standard_normal((32, 1, 3, 3)).astype(np.float32)
    ref = oracles.conv2d(x, wt, None, (2, 2), (1, 1), "none", (1, 1), 32)
    y = gpuopt.conv2d(gpuopt.to_device(x), gpuopt.to_device(wt), stride=2, padding=1, groups=32,
                      variant="depthwise")
    assert isinstance(y, gpuopt.cuda.DeviceArray) and relative_error(y.numpy(), ref) < 1e-5
    torch = pytest.importorskip("torch")
    yt = gpuopt.conv2d(torch.from_numpy(x).cuda(), torch.from_numpy(wt).cuda(), stride=2, padding=1, groups=32,
                       variant="depthwise")
    assert relative_error(np.asarray(yt.cpu()) if hasattr(yt, "cpu") else yt.numpy(), ref) < 1e-5


@pytest.mark.parametrize("groups, c, k", [(1, 4, 4), (2, 4, 4), (4, 8, 8)])
def test_only_depthwise_layers(rng, groups, c, k):
    x = rng.standard_normal((1, c, 8, 8)).astype(np.float32)
    wt = rng.standard_normal((k, c // groups, 3, 3)).astype(np.float32)
    with pytest.raises(ValueError, match=f"conv2d/depthwise takes depthwise layers only, groups = C.*groups={groups} "
                                         f"with C={c}"):
        gpuopt.conv2d(x, wt, groups=groups, variant="depthwise")


def test_a_one_channel_plain_layer_is_depthwise(rng):
    x = rng.standard_normal((3, 1, 10, 10)).astype(np.float32)
    wt = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    y = gpuopt.conv2d(x, wt, padding=1, variant="depthwise")
    assert relative_error(y, oracles.conv2d(x, wt, None, (1, 1), (1, 1), "none", (1, 1), 1)) < 1e-5


def test_kernels_do_not_spill():
    from gpuopt._ext import cuda_module

    infos = cuda_module().conv2d_depthwise_kernel_info()
    assert [i["kernel"] for i in infos] == ["depthwise_32x32", "depthwise_16x16", "depthwise_8x8"]
    for info in infos:
        assert info["local_bytes"] == 0, f"{info['kernel']}: {info['local_bytes']} bytes of stack/spills"
        assert info["max_blocks_per_sm"] >= 4, info


def test_a_patch_past_shared_memory_is_refused_before_launch(rng):
    # a 60 x 60 filter at stride 60 dilated 2: the 32x32 tile's patch is ~1,979 floats a side
    limit = gpuopt.device_info()["shared_memory_per_block_optin_bytes"]
    x, wt = rng.standard_normal((1, 1, 2000, 2000)).astype(np.float32), np.ones((1, 1, 20, 20), np.float32)
    with pytest.raises(ValueError, match=str(limit)):
        gpuopt.conv2d(x, wt, stride=60, dilation=2, variant="depthwise", tile=32)
    y = gpuopt.conv2d(x[:, :, :64, :64], wt[:, :, :3, :3], padding=1, variant="depthwise")  # still usable
    assert np.isfinite(y).all()
