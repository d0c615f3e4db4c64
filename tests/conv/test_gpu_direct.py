"""conv2d ``direct_regblock`` against the CPU reference (outputs poisoned by conftest): every parameter value on
shapes that reach each code path (unrolled and generic filters, runs crossing rows and row segments, strides
above the filter, channel chunks, map tails and groups), awkward shapes, the reports' problems, the epilogue,
misaligned arrays, inputs over 2**31 elements, resources and the up-front rejections. The generic tests of
test_gpu_conv2d.py run it at its defaults too (device arrays, bitwise reproducibility among them)."""

import itertools

import numpy as np
import pytest

import gpuopt
from conftest import SEED, conv_call
from .cases import (AWKWARD_SHAPES, GRID_LIMIT_SHAPES, LAUNCH_GOOD, check_against_cpu, check_cs6235_problem,
                    check_launcher_rejects_bad_arguments, check_more_than_2_31_input_elements, check_shape,
                    cs6235_problems, ident, misaligned_copy, misaligned_empty, run_and_check, uniform)

pytestmark = pytest.mark.gpu

VARIANT = "direct_regblock"
_PARAMS = gpuopt.variants("conv2d")[VARIANT].params
CONFIGS = [dict(k_tile=k, pixels=p) for k, p in itertools.product(_PARAMS["k_tile"].allowed, _PARAMS["pixels"].allowed)]
CONFIG_IDS = [ident(VARIANT, c) for c in CONFIGS]


def cuda():
    from gpuopt._ext import cuda_module

    return cuda_module()


# (N, C, H, W, K, R, S, stride, padding), each with a (bias, activation). Unrolled 1x1, 3x3, 5x5, 7x7 and the
# generic R x S; K = 5, 17, 33 (tails of both map tiles); runs crossing rows (Q < 128) with several output
# rows per run, and row segments (Q = 1000 > 512, ragged last segment); strides u > R and v > S (rows and
# column phases skipped); padding up to the filter; C = 300 in 8 staged chunks.
SWEEP_SHAPES = [
    ((2, 5, 19, 23, 17, 3, 3, 1, 1), (True, "relu")),
    ((1, 37, 11, 13, 5, 5, 5, 2, 2), (False, None)),
    ((2, 3, 17, 9, 33, 2, 4, (1, 3), (1, 0)), (True, "tanh")),
    ((1, 2, 40, 40, 3, 7, 7, 1, 3), (True, None)),
    ((3, 4, 6, 6, 18, 1, 1, 1, 0), (False, "tanh")),
    ((2, 3, 9, 2001, 20, 3, 3, (1, 2), 1), (True, "relu")),
    ((1, 2, 23, 37, 9, 2, 3, (5, 4), (1, 2)), (False, None)),
    ((2, 300, 9, 9, 17, 3, 3, 1, 1), (True, "relu")),
]


@pytest.mark.parametrize("params", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("shape,epilogue", SWEEP_SHAPES, ids=[str(s) for s, _ in SWEEP_SHAPES])
def test_every_parameter_value(rng, params, shape, epilogue):
    n, c, h, w, k, r, s, stride, padding = shape
    with_bias, activation = epilogue
    run_and_check(VARIANT, uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s)), stride=stride, padding=padding,
                  bias=uniform(rng, k) if with_bias else None, activation=activation, **params)


# Beyond the shared awkward shapes: the grid-limit shapes (K beyond 65535 map tiles: grid y groups maps;
# 70001 channels: many chunks), a 20000-wide image (40 segments per row), a tall one-column image (runs
# span 512 rows).
AWKWARD = AWKWARD_SHAPES + GRID_LIMIT_SHAPES + [
    (1, 2, 5, 20000, 3, 3, 3, 1, 1),
    (2, 1, 3000, 1, 4, 3, 1, 1, (1, 0)),
]


@pytest.mark.parametrize("params", [{}, dict(k_tile=8, pixels=1)], ids=["auto", "k8-p1"])
@pytest.mark.parametrize("shape", AWKWARD, ids=str)
def test_awkward_shapes(rng, params, shape):
    check_shape(rng, VARIANT, shape, **params)


@pytest.fixture(scope="module")
def conf_problems():
    return cs6235_problems(np.random.default_rng([SEED, 6235, 7]), ("conf1", "conf3"))


@pytest.mark.parametrize("conf", ["conf1", "conf3"])
@pytest.mark.parametrize("params", CONFIGS, ids=CONFIG_IDS)
def test_cs6235_small_channel_configurations(conf_problems, conf, params):
    check_cs6235_problem(conf_problems[conf], VARIANT, params)


# The ECE408 layers at 1000 images (the reference checks three).
LAYERS = {
    "fashion-conv1": ((1000, 1, 64, 64), (6, 1, 5, 5)),
    "fashion-conv2": ((1000, 6, 30, 30), (16, 6, 5, 5)),
    "mnist-conv1": ((1000, 1, 28, 28), (32, 1, 5, 5)),
    "mnist-conv2": ((1000, 32, 12, 12), (64, 32, 5, 5)),
}


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("params", [{}, dict(k_tile=16, pixels=4)], ids=["auto", "k16-p4"])
def test_ece408_layers(rng, layer, params):
    x_shape, w_shape = LAYERS[layer]
    x, w, bias = uniform(rng, x_shape), uniform(rng, w_shape), uniform(rng, w_shape[0])
    images = [0, int(rng.integers(1, x_shape[0] - 1)), x_shape[0] - 1]
    run_and_check(VARIANT, x, w, bias=bias, activation="tanh", images=images, **params)


def test_misaligned_base_pointers(rng):
    """x, w, bias and y one float off a 16-byte boundary (the float4 weight loads are from shared memory)."""
    x, w, bias = uniform(rng, (2, 3, 21, 19)), uniform(rng, (20, 3, 3, 3)), uniform(rng, 20)
    out_shape = gpuopt.conv2d_output_shape(x.shape, w.shape, 2, 1)
    y = misaligned_empty(out_shape)
    dx, dw, db = misaligned_copy(x), misaligned_copy(w), misaligned_copy(bias)
    cuda().conv2d_direct_regblock(conv_call(cuda(), dx.ptr, dw.ptr, db.ptr, y.ptr, (2, 3, 21, 19, 20, 3, 3, 2, 2, 1, 1),
                                            "relu"), k_tile=0, pixels=0)
    check_against_cpu(y.numpy(), x, w, stride=2, padding=1, bias=bias, activation="relu", what="misaligned")
    dy = gpuopt.conv2d(dx, dw, stride=2, padding=1, bias=db, activation="relu", variant=VARIANT)
    check_against_cpu(dy.numpy(), x, w, stride=2, padding=1, bias=bias, activation="relu", what="through conv2d")


def test_more_than_2_31_input_elements(rng):
    check_more_than_2_31_input_elements(rng, [(VARIANT, {}), (VARIANT, dict(k_tile=16, pixels=1))])


def test_kernels_do_not_spill():
    infos = cuda().conv2d_direct_kernel_info()
    assert len(infos) == 2 * 3 * 5
    for info in infos:
        assert info["local_bytes"] == 0, f"{info['kernel']}: {info['local_bytes']} bytes of stack/spills"
        assert 0 < info["registers"] <= 128 and info["max_blocks_per_sm"] >= 4, info


def test_staged_channel_too_large_for_shared_memory_rejected(rng):
    """A 60 x 60 filter at stride 60 on a wide image: one channel stages 60 rows x 60 phases x 128 slots
    (1.8 MB): rejected before launch with the GPU's limit, and the process stays usable."""
    limit = gpuopt.device_info()["shared_memory_per_block_optin_bytes"]
    x, w = uniform(rng, (1, 1, 60, 60 * 600)), uniform(rng, (2, 1, 60, 60))
    with pytest.raises(ValueError, match=rf"conv2d direct_regblock .*bytes of shared memory per block; this GPU "
                                         rf"allows {limit}"):
        gpuopt.conv2d(x, w, stride=60, variant=VARIANT)
    check_shape(rng, VARIANT, (1, 2, 9, 9, 3, 3, 3, 1, 1))


def test_launchers_reject_bad_arguments_before_launch(rng):
    """Direct calls of the binding (bypassing gpuopt's checks) fail with ValueError and launch nothing."""
    more = [("too large for 32-bit positions", (1, 1, 2**16, 2**16, 3, 1, 1, 1, 1, 0, 0), {}),
            ("k_tile must be", LAUNCH_GOOD, {"k_tile": 4}),
            ("pixels must be", LAUNCH_GOOD, {"pixels": 8})]
    check_launcher_rejects_bad_arguments(cuda().conv2d_direct_regblock, rng, more, what=VARIANT, k_tile=0, pixels=0)


# ---------------------------------------------------------------- direct_fused (conv2d_pool's kernel, unpooled)
FUSED = "direct_fused"
# Valid stride-1 3x3 and 5x5 layers: odd and even P and Q (the patch grid's extra row/column is not stored),
# Q % 4 == 0 (16-byte row stores) and not, K tails of the 8-map groups and over 64 maps (two map blocks),
# short windows (4 maps a thread), C over one staged chunk, one image and many (persistent loop), wide rows
# (several tiles along q), the smallest input.
FUSED_SHAPES = [
    (1, 1, 5, 5, 1, 5, 5),
    (2, 3, 7, 9, 5, 3, 3),
    (3, 1, 28, 28, 32, 5, 5),
    (5, 32, 12, 12, 64, 5, 5),
    (2, 6, 30, 30, 16, 5, 5),
    (1, 7, 13, 70, 9, 3, 3),
    (4, 300, 9, 10, 70, 3, 3),
    (37, 2, 11, 8, 3, 5, 5),
    (2, 16, 3, 3, 8, 3, 3),
]


@pytest.mark.parametrize("params", [{}, dict(channels_per_block=8, images=1), dict(channels_per_block=64, images=3)],
                         ids=["auto", "cpb8-i1", "cpb64-i3"])
@pytest.mark.parametrize("shape", FUSED_SHAPES, ids=str)
def test_direct_fused_matches_cpu(rng, params, shape):
    n, c, h, w, k, r, s = shape
    bias = uniform(rng, k)
    for activation in (None, "relu"):
        # Not run_and_check: its `images` (which images to check) is also a parameter of this variant.
        x, wt = uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s))
        try:  # a forced block shape over the kernel's thread limit is refused up front, naming the limit
            gpuopt.nn.conv2d_pool_plan(x.shape, wt.shape, 1, **params)
        except ValueError as exc:
            assert "limit" in str(exc)
            with pytest.raises(ValueError, match="limit"):
                gpuopt.conv2d(x, wt, variant=FUSED, **params)
            return
        y = gpuopt.conv2d(x, wt, bias=bias, activation=activation, variant=FUSED, **params)
        assert np.isfinite(y).all(), f"{FUSED} {params}: unwritten (poisoned) or non-finite outputs"
        check_against_cpu(y, x, wt, bias=bias, activation=activation, what=f"{FUSED} {params}")


def test_direct_fused_ece408_layers_and_reproducible(rng):
    from .cases import ECE408

    for x_shape, w_shape in ECE408.values():
        x, w = uniform(rng, (min(x_shape[0], 64),) + tuple(x_shape[1:])), uniform(rng, w_shape)
        y = run_and_check(FUSED, x, w)
        np.testing.assert_array_equal(y, gpuopt.conv2d(x, w, variant=FUSED))


@pytest.mark.parametrize("stride,padding,fs,match", [
    (2, 0, 3, "stride-1"), (1, 1, 3, "valid"), (1, 0, 1, "3x3 or 5x5"), (1, 0, 7, "3x3 or 5x5")])
def test_direct_fused_refuses_what_it_does_not_compute(rng, stride, padding, fs, match):
    x, w = uniform(rng, (1, 2, 12, 12)), uniform(rng, (4, 2, fs, fs))
    with pytest.raises(ValueError, match=match):
        gpuopt.conv2d(x, w, stride=stride, padding=padding, variant=FUSED)
    run_and_check(FUSED, x, uniform(rng, (4, 2, 3, 3)))  # still usable


def test_direct_fused_launcher_rejects_bad_arguments(rng):
    check_launcher_rejects_bad_arguments(getattr(cuda(), "conv2d_direct_fused"), rng, what=FUSED,
                                         channels_per_block=0, images=0,
                                         more=[("channels_per_block", (1, 2, 5, 5, 3, 3, 3, 1, 1, 0, 0),
                                                {"channels_per_block": 12})])
