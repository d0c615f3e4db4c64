"""The ECE408 Fashion-MNIST conv2d variants in the registry: names, parameters, defaults and the
rejections that need no GPU (parameters are validated before the "no GPU" RuntimeError; the launchers'
host-side checks need the CUDA module, not a GPU)."""

import numpy as np
import pytest

import gpuopt
from conftest import cuda_module_without_gpu, fake_conv_call, needs_cuda_build, passes_host_checks
from gpuopt import registry
from gpuopt.conv import Conv2dProblem

TILE_WIDTHS = (4, 8, 12, 16, 20, 24, 28, 32)
EXPECTED = {
    "unroll_constmem": {},
    "tiled": {"tile_width": 16},
    "tiled_unrolled": {"tile_width": 16},
    "tiled_channels": {"tile_width": 16, "channels_per_block": 2},
    "tiled_corner_turn": {"tile_width": 16},
}


def table():
    return gpuopt.variants("conv2d")


def test_variants_registered_in_report_order():
    names = list(table())
    assert all(name in names for name in EXPECTED)
    order = [names.index(name) for name in EXPECTED]
    assert order == sorted(order), "simple to fast: unroll_constmem, tiled, tiled_unrolled, tiled_channels, corner turn"
    assert names.index("basic") < order[0]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_variant_metadata(name):
    v = table()[name]
    assert v.op == "conv2d" and v.name == name
    assert v.needs_cuda and v.report == "ece408-fashion" and v.description
    assert v.defaults() == EXPECTED[name]
    assert list(v.params) == list(EXPECTED[name])
    if "tile_width" in v.params:
        assert v.params["tile_width"].allowed == TILE_WIDTHS
        assert v.params["tile_width"].doc
    if name == "tiled_channels":
        p = v.params["channels_per_block"]
        assert p.allowed == (1, 2, 4, 8, 16, 32) and p.doc
    assert not v.available or gpuopt.cuda_available()
    assert name in str(v)


@pytest.mark.parametrize("name", [n for n in EXPECTED if n != "unroll_constmem"])
def test_tile_width_validated_before_the_gpu_check(name):
    x = np.ones((1, 2, 8, 8), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    for bad in (64, 6, 0, 2, True, 16.0, "16"):
        with pytest.raises(ValueError, match=r"conv2d/" + name + r": parameter tile_width=.* is not allowed"):
            registry.resolve("conv2d", name, {"tile_width": bad})
        with pytest.raises(ValueError, match="is not allowed"):
            gpuopt.conv2d(x, w, variant=name, tile_width=bad)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['tile'\]"):
        gpuopt.conv2d(x, w, variant=name, tile=16)
    for good in TILE_WIDTHS:
        params = {"tile_width": np.int64(good)}
        if gpuopt.cuda_available():
            _, resolved = registry.resolve("conv2d", name, params)
            assert resolved["tile_width"] == good and type(resolved["tile_width"]) is int
        else:
            with pytest.raises(RuntimeError, match=f"conv2d/{name} needs a CUDA GPU"):
                registry.resolve("conv2d", name, params)


def test_channels_per_block_validated():
    for bad in (3, 64, 0, True):
        with pytest.raises(ValueError, match=r"channels_per_block=.* is not allowed"):
            registry.resolve("conv2d", "tiled_channels", {"channels_per_block": bad})


def test_unroll_constmem_takes_no_parameters():
    x = np.ones((1, 1, 4, 4), np.float32)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['tile_width'\]; valid parameters: none"):
        gpuopt.conv2d(x, x[:, :, :3, :3], variant="unroll_constmem", tile_width=16)


def problem(x_shape, w_shape):
    x = np.zeros(x_shape, np.float32)
    w = np.zeros(w_shape, np.float32)
    return Conv2dProblem(x, w, None, (1, 1), (0, 0), "none")


@needs_cuda_build
def test_unroll_constmem_rejects_filters_over_64_kb_before_touching_the_device():
    # 16385 floats = 65540 bytes: rejected with the limit named, before anything is copied.
    with pytest.raises(ValueError, match=r"65540 bytes\) does not fit the 65536-byte \(64 KB\) constant memory"):
        passes_host_checks("conv2d", "unroll_constmem", problem((1, 16385, 2, 2), (1, 16385, 1, 1)))
    with pytest.raises(ValueError, match="204800 bytes"):  # the MNIST report's second layer
        passes_host_checks("conv2d", "unroll_constmem", problem((1, 32, 12, 12), (64, 32, 5, 5)))
    # Exactly 64 KB passes the check (and then needs the device).
    assert passes_host_checks("conv2d", "unroll_constmem", problem((1, 64, 9, 9), (16, 64, 4, 4)))


@needs_cuda_build
def test_tiled_channels_rejects_blocks_over_1024_threads_before_touching_the_device():
    p = problem((1, 2, 8, 8), (2, 2, 3, 3))
    for tile_width, cpb in ((32, 2), (16, 8), (12, 8), (8, 32), (20, 4)):
        with pytest.raises(ValueError, match=rf"{tile_width} x {tile_width} x {cpb} = \d+ threads; the limit is 1024"):
            passes_host_checks("conv2d", "tiled_channels", p, tile_width=tile_width, channels_per_block=cpb)
    assert passes_host_checks("conv2d", "tiled_channels", p, tile_width=16, channels_per_block=4)  # 1024 passes


@pytest.mark.skipif(cuda_module_without_gpu() is None,
                    reason="needs the CUDA module built and no usable GPU (tests/conv/test_gpu_ece408.py checks "
                           "the launchers with real device arrays)")
def test_launchers_validate_before_any_cuda_call():
    cuda = cuda_module_without_gpu()
    good = (1, 2, 40, 40, 3, 3, 3, 1, 1, 0, 0)  # every call below is rejected before a launch

    def call(x, shape):
        return fake_conv_call(cuda, shape, x=x)

    for name in ("conv2d_tiled", "conv2d_tiled_unrolled", "conv2d_tiled_corner_turn", "conv2d_tiled_channels"):
        fn = getattr(cuda, name)
        one = {"channels_per_block": 1} if name == "conv2d_tiled_channels" else {}
        for bad in (33, 0, 6):  # the table's values only (csrc/conv/conv2d_choices.hpp)
            with pytest.raises(ValueError, match=rf"tile_width must be 4, 8, .* or 32, got {bad}"):
                fn(call(256, good), tile_width=bad, **one)
        with pytest.raises(ValueError, match="must be device pointers"):
            fn(call(0, good), tile_width=16, **one)
        with pytest.raises(ValueError, match="filter larger than the padded input"):
            fn(call(256, (1, 2, 5, 5, 3, 7, 3, 1, 1, 0, 0)), tile_width=16, **one)
    with pytest.raises(ValueError, match="32 x 32 x 2 = 2048 threads"):
        cuda.conv2d_tiled_channels(call(256, good), tile_width=32, channels_per_block=2)
    for bad in (0, 3):
        with pytest.raises(ValueError, match=rf"channels_per_block must be 1, 2, .* or 32, got {bad}"):
            cuda.conv2d_tiled_channels(call(256, good), tile_width=16, channels_per_block=bad)
    with pytest.raises(ValueError, match=r"16385\*1\*1 floats = 65540 bytes\) does not fit the 65536-byte"):
        cuda.conv2d_unroll_constmem(call(256, (1, 16385, 2, 2, 1, 1, 1, 1, 1, 0, 0)))
    with pytest.raises(ValueError, match="over 2\\^63 bytes\\) does not fit the 65536-byte"):  # K*C*R*S overflows
        cuda.conv2d_unroll_constmem(call(256, (1, 2**40, 1, 1, 2**40, 1, 1, 1, 1, 0, 0)))


@needs_cuda_build
def test_constant_bank_limit_is_the_kernels():
    """The limit gpuopt reports is the one the launcher enforces: that many bytes of filters pass, 4 more do not."""
    from conftest import cuda_build
    from gpuopt._ext import kernel_limits

    floats = kernel_limits()["conv2d_constant_weight_bytes"] // 4
    check = cuda_build().check.conv2d_unroll_constmem
    check(cuda_build().Conv2dShape(1, floats, 2, 2, 1, 1, 1))
    with pytest.raises(ValueError, match=f"{4 * floats + 4} bytes"):
        check(cuda_build().Conv2dShape(1, floats + 1, 2, 2, 1, 1, 1))
