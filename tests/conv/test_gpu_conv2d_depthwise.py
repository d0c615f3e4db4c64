"""conv2d ``depthwise`` (groups = C) on the GPU against the float64 oracle, both kernels. The patch kernel: odd
plane sizes around every tile's edge (the 32x32, 16x16 and 8x8 tiles, each forced and by ``auto``), stride 1, 2 and
(2, 1), padding past the filter's half, dilation 2 and 3, filters 1x1 to 7x7 and non-square, 1 and 2 maps a
channel, N = 1 and more planes than a grid step. The rows kernel: 3x3, 5x5 and 7x7 at stride 1 and 2, bands of one
plane (many where a batch is small, one reading only padding) and units of whole planes across image boundaries
with a short last unit, more units than resident blocks (stride 2: the persistent blocks' double-buffered loop), x at every 4-byte offset from 16-byte alignment (the staged run's head and tail), planes
wider than 48 KiB of rows (the opt-in) and too wide (refused, auto falls to the patch kernel); bitwise equal to the
patch kernel (the same FMA chain). Every activation with and without bias; host, DeviceArray and torch inputs.
Outputs poisoned first (conftest). Bad input: groups other than C, kernel='rows' on a layer it does not take or
with a patch tile: ValueError naming the variant, before anything is copied."""

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


# (N, C, H, W, multiplier, R, S, stride, padding, dilation) that the rows kernel takes
ROWS_SHAPES = [
    (2, 16, 112, 112, 1, 3, 3, 1, 1, 1),           # MobileNetV2's first depthwise, small batch: many bands a plane
    (3, 24, 56, 56, 1, 3, 3, 2, 1, 1),             # stride 2, bands
    (63, 41, 7, 7, 1, 3, 3, 1, 1, 1),              # 2,583 planes of 7x7: two a unit, across images, short last unit
    (1, 2, 150, 101, 1, 7, 7, 1, 3, 1),            # ConvNeXt's 7x7, odd width: bands of 4 rows, unaligned runs
    (2, 5, 33, 31, 2, 3, 3, 1, 1, 1),              # two maps a channel
    (1, 2, 40, 60, 1, 3, 3, 1, 6, 1),              # padding 6: the first and last bands read only padding
    (2, 6, 15, 15, 1, 3, 3, 2, 0, 1),              # stride 2, odd plane, no padding (last input row unused)
    (3, 4, 2, 2, 1, 5, 5, 1, 2, 1),                # a plane smaller than the filter
    (2, 8, 30, 30, 1, 7, 7, 2, 3, 1),              # 7x7 stride 2
    (4, 10, 29, 29, 1, 5, 5, 2, 2, 1),             # 5x5 stride 2 (EfficientNet), odd
    (1, 1, 6, 3000, 1, 3, 3, 1, 1, 1),             # 3,000 wide: two buffers of 72 KiB (the shared-memory opt-in)
    (32, 32, 56, 56, 1, 3, 3, 1, 1, 1),            # stride 1: 2,048 bands, a block each
    (32, 48, 56, 56, 1, 3, 3, 2, 1, 1),            # stride 2: 768 units of two planes, more than resident blocks
    (64, 480, 14, 14, 1, 3, 3, 2, 1, 1),           # ... 750 units of 41 planes: the persistent blocks loop
    (16, 64, 60, 60, 1, 7, 7, 2, 3, 1),            # ... 7x7: 512 units, two blocks an SM
]

def _rows_takes(shape):
    r, s, stride, dilation = shape[5:8] + shape[9:]
    return r == s and r in (3, 5, 7) and _pair(stride) in ((1, 1), (2, 2)) and _pair(dilation) == (1, 1)


KERNELS = [("auto", "auto"), ("rows", "auto"), ("patch", "auto"), ("patch", 32), ("patch", 16), ("patch", 8)]


def _layer(rng, shape):
    n, c, h, w, m, r, s, stride, padding, dilation = shape
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c * m, 1, r, s)).astype(np.float32)
    bias = rng.standard_normal(c * m).astype(np.float32)
    ref = oracles.conv2d(x, wt, bias, _pair(stride), _pair(padding), "relu", _pair(dilation), c)
    return x, wt, bias, dict(stride=stride, padding=padding, dilation=dilation, groups=c, activation="relu"), ref


@pytest.mark.parametrize("shape", SHAPES + ROWS_SHAPES, ids=str)
@pytest.mark.parametrize("kernel, tile", KERNELS, ids=str)
def test_depthwise_matches_float64(rng, shape, kernel, tile):
    x, wt, bias, kw, ref = _layer(rng, shape)
    if kernel == "rows" and not _rows_takes(shape):
        with pytest.raises(ValueError, match="conv2d/depthwise: kernel='rows' takes (square|stride 1 or 2|no dil)"):
            gpuopt.conv2d(x, wt, bias=bias, variant="depthwise", kernel=kernel, tile=tile, **kw)
        return
    y = gpuopt.conv2d(x, wt, bias=bias, variant="depthwise", kernel=kernel, tile=tile, **kw)
    assert y.shape == ref.shape
    assert relative_error(y, ref) < 1e-5


@pytest.mark.parametrize("shape", ROWS_SHAPES, ids=str)
def test_rows_equals_patch_bitwise(rng, shape):
    # Both sum an output's taps in (r, s) order from zero, one fmaf each (zeros outside the image included).
    x, wt, bias, kw, _ = _layer(rng, shape)
    rows = gpuopt.conv2d(x, wt, bias=bias, variant="depthwise", kernel="rows", **kw)
    patch = gpuopt.conv2d(x, wt, bias=bias, variant="depthwise", kernel="patch", **kw)
    assert rows.tobytes() == patch.tobytes()


@pytest.mark.parametrize("offset", [0, 1, 2, 3])
@pytest.mark.parametrize("shape", [(63, 41, 7, 7, 1, 3, 3, 1, 1, 1), (1, 2, 150, 101, 1, 7, 7, 1, 3, 1),
                                   (3, 5, 57, 9, 1, 3, 3, 2, 1, 1)], ids=str)
def test_rows_on_unaligned_x(rng, shape, offset):
    # x's data `offset` floats past a 16-byte boundary: the staged run's head and tail of single floats
    torch = pytest.importorskip("torch")
    x, wt, bias, kw, ref = _layer(rng, shape)
    buf = torch.empty(x.size + 4, dtype=torch.float32, device="cuda")
    assert buf.data_ptr() % 16 == 0
    xt = buf[offset:offset + x.size].view(x.shape)
    xt.copy_(torch.from_numpy(x))
    y = gpuopt.conv2d(xt, torch.from_numpy(wt).cuda(), bias=torch.from_numpy(bias).cuda(), variant="depthwise",
                      kernel="rows", **kw)
    assert relative_error(y.cpu().numpy() if hasattr(y, "cpu") else y.numpy(), ref) < 1e-5


def test_too_wide_for_rows(rng):
    # 20,000 columns: 6 rows are 469 KiB, past any GPU's shared memory; auto runs the patch kernel
    x, wt, bias, kw, ref = _layer(rng, (1, 2, 8, 20000, 1, 3, 3, 1, 1, 1))
    with pytest.raises(ValueError, match=r"kernel='rows' takes a unit's input rows in shared memory \(.*too wide"):
        gpuopt.conv2d(x, wt, bias=bias, variant="depthwise", kernel="rows", **kw)
    assert relative_error(gpuopt.conv2d(x, wt, bias=bias, variant="depthwise", **kw), ref) < 1e-5


def test_rows_takes_no_patch_tile(rng):
    x, wt, bias, kw, _ = _layer(rng, (1, 4, 9, 9, 1, 3, 3, 1, 1, 1))
    with pytest.raises(ValueError, match="tile applies to the patch kernel; kernel='rows' takes tile='auto'"):
        gpuopt.conv2d(x, wt, variant="depthwise", kernel="rows", tile=16, **kw)


@pytest.mark.parametrize("activation", ["none", "relu", "tanh"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("kernel", ["rows", "patch"])
def test_activations_and_bias(rng, activation, with_bias, kernel):
    x = rng.standard_normal((2, 12, 19, 23)).astype(np.float32)
    wt = rng.standard_normal((12, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(12).astype(np.float32) if with_bias else None
    y = gpuopt.conv2d(x, wt, padding=1, groups=12, bias=bias, activation=activation, variant="depthwise",
                      kernel=kernel)
    ref = oracles.conv2d(x, wt, bias, (1, 1), (1, 1), activation, (1, 1), 12)
    assert relative_error(y, ref) < 1e-5


@pytest.mark.parametrize("kernel", ["rows", "patch"])
def test_more_planes_than_one_grid_step_and_deterministic(rng, kernel):
    # 4,096 planes of 5x5 (the patch kernel: 8x8 tiles, four planes a block, every block several plane steps; the
    # rows kernel: whole planes, several a unit)
    x = rng.standard_normal((64, 64, 5, 5)).astype(np.float32)
    wt = rng.standard_normal((64, 1, 3, 3)).astype(np.float32)
    y = gpuopt.conv2d(x, wt, padding=1, groups=64, variant="depthwise", kernel=kernel)
    assert relative_error(y, oracles.conv2d(x, wt, None, (1, 1), (1, 1), "none", (1, 1), 64)) < 1e-5
    again = gpuopt.conv2d(x, wt, padding=1, groups=64, variant="depthwise", kernel=kernel)
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
    assert [i["kernel"] for i in infos] == ["depthwise_32x32", "depthwise_16x16", "depthwise_8x8"] + [
        f"depthwise_rows_{r}x{r}_s{u}" for r in (3, 5, 7) for u in (1, 2)]
    for info in infos:
        assert info["local_bytes"] == 0, f"{info['kernel']}: {info['local_bytes']} bytes of stack/spills"
        # 3x3 and 5x5 rows kernels at 4-5 blocks (50-64 registers), 7x7 at 2 (100: the 49 taps in registers)
        assert info["max_blocks_per_sm"] >= (2 if "7x7" in info["kernel"] else 4), info


def test_a_patch_past_shared_memory_is_refused_before_launch(rng):
    # a 60 x 60 filter at stride 60 dilated 2: the 32x32 tile's patch is ~1,979 floats a side
    limit = gpuopt.device_info()["shared_memory_per_block_optin_bytes"]
    x, wt = rng.standard_normal((1, 1, 2000, 2000)).astype(np.float32), np.ones((1, 1, 20, 20), np.float32)
    with pytest.raises(ValueError, match=str(limit)):
        gpuopt.conv2d(x, wt, stride=60, dilation=2, variant="depthwise", tile=32)
    with pytest.raises(ValueError, match="kernel='rows' takes square 3x3, 5x5 or 7x7 filters"):
        gpuopt.conv2d(x, wt, stride=60, dilation=2, variant="depthwise", kernel="rows")
    y = gpuopt.conv2d(x[:, :, :64, :64], wt[:, :, :3, :3], padding=1, variant="depthwise")  # still usable
    assert np.isfinite(y).all()
