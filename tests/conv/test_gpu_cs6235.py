"""The CS6235 conv2d variants against the CPU reference: every parameter value on awkward
shapes, the report's four configurations, bias and activations, device arrays, the shared
tile's limits and the 64-bit offset path (outputs poisoned by conftest).

Defaults of every variant also run in test_gpu_conv2d.py (it takes every CUDA variant)."""

import itertools

import numpy as np
import pytest

import gpuopt
from conftest import SEED, relative_error
from .cases import CS6235, check_device_arrays, check_more_than_2_31_input_elements, ident, uniform

pytestmark = pytest.mark.gpu

VARIANTS = ["plain", "reorder", "unroll_k", "unroll_c", "unroll_nk", "shared", "general"]


def param_grid(variant, **fixed):
    """Every combination of the variant's allowed parameter values (``fixed`` pins some)."""
    params = gpuopt.variants("conv2d")[variant].params
    names = [n for n in params if n not in fixed]
    for values in itertools.product(*(params[n].allowed for n in names)):
        yield {**fixed, **dict(zip(names, values))}


# ---------------------------------------------------------------- every parameter value

# (N, C, H, W, K, R, S, stride, padding). Unroll tails everywhere: K in {1, 3, 5, 7, 11,
# 13, 17, 33, 37} and C in {1, 2, 3, 4, 5, 7, 17, 19, 23, 33} are multiples of no factor
# > 1 (or only of 2, 4: K = 4 never), N in {1, 2, 3, 5, 6, 9} not multiples of 4; 1x1,
# R != S, stride > filter, padding >= filter (windows wholly in the padding), a wide
# input; (1, 7, 3, 3, 37, ...) gives every thread of a block its own map (the shared
# tile then holds up to 37 maps), (2, 23, 3, 3, 5, 1, 1, ...) several shared tiles over C.
SWEEP_SHAPES = [
    (1, 1, 1, 1, 1, 1, 1, 1, 0),
    (3, 5, 13, 17, 7, 5, 3, (2, 3), (2, 1)),
    (5, 19, 9, 11, 17, 3, 2, 1, (1, 0)),
    (2, 3, 8, 8, 3, 3, 3, 4, 3),
    (9, 33, 6, 7, 13, 1, 1, 1, 0),
    (1, 2, 3, 40, 5, 3, 3, 1, 0),
    (2, 4, 6, 6, 11, 4, 2, 1, (3, 0)),
    (1, 7, 3, 3, 37, 3, 3, 1, 0),
    (2, 23, 3, 3, 5, 1, 1, 1, 0),
    (6, 17, 5, 5, 33, 2, 2, 1, 1),
    (1, 1, 1, 1, 3, 3, 3, 1, 1),
]
# (bias, activation) cycled over the shapes.
EPILOGUES = [(False, None), (True, "relu"), (True, "tanh"), (False, "tanh"), (True, None)]

SWEEP = [(v, p) for v in VARIANTS for p in param_grid(v)]


@pytest.fixture(scope="module")
def sweep_problems():
    """Inputs and CPU references of SWEEP_SHAPES, made once for the module."""
    rng = np.random.default_rng([SEED, 6235])
    problems = []
    for i, (n, c, h, w, k, r, s, stride, padding) in enumerate(SWEEP_SHAPES):
        with_bias, act = EPILOGUES[i % len(EPILOGUES)]
        x, wt = uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s))
        bias = uniform(rng, k) if with_bias else None
        kw = dict(stride=stride, padding=padding, bias=bias, activation=act)
        problems.append((x, wt, kw, gpuopt.conv2d(x, wt, variant="cpu", **kw)))
    return problems


@pytest.mark.parametrize("variant,params", SWEEP, ids=[ident(v, p) for v, p in SWEEP])
def test_every_parameter_value_on_awkward_shapes(sweep_problems, variant, params):
    for (x, wt, kw, ref), shape in zip(sweep_problems, SWEEP_SHAPES):
        y = gpuopt.conv2d(x, wt, variant=variant, **kw, **params)
        assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == ref.shape, shape
        assert np.isfinite(y).all(), f"unwritten (poisoned) or non-finite outputs for {shape}"
        assert relative_error(y, ref) < 1e-5, shape


# ---------------------------------------------------------------- the report's configurations

# Defaults of every variant, every unroll value and loop order, and the general kernel at
# every block size (the report's Fig 2 sweep).
CONF_RUNS = ([(v, {}) for v in ("plain", "reorder", "unroll_nk", "shared")]
             + [(v, p) for v in ("unroll_k", "unroll_c") for p in param_grid(v, block_size=128)]
             + [("general", p) for p in param_grid("general")])


@pytest.fixture(scope="module")
def conf_problems():
    """Device inputs of the four configurations (bias, relu) and the CPU reference of the
    images checked: all for N = 1; the first, the last and one random image for N = 128
    (every output is still checked for poison), as test_gpu_conv2d.py does."""
    rng = np.random.default_rng([SEED, 6235, 4])
    problems = {}
    for conf, (n, c, k, h, w, r, s, u, v) in CS6235.items():
        x, wt, bias = uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s)), uniform(rng, k)
        images = list(range(n)) if n == 1 else [0, int(rng.integers(1, n - 1)), n - 1]
        ref = gpuopt.conv2d(x[images], wt, stride=(u, v), bias=bias, activation="relu", variant="cpu")
        dev = tuple(gpuopt.to_device(a) for a in (x, wt, bias))
        problems[conf] = (dev, (u, v), images, ref)
    return problems


@pytest.mark.parametrize("conf", list(CS6235))
@pytest.mark.parametrize("variant,params", CONF_RUNS, ids=[ident(v, p) for v, p in CONF_RUNS])
def test_cs6235_configurations(conf_problems, conf, variant, params):
    (dx, dw, dbias), stride, images, ref = conf_problems[conf]
    dy = gpuopt.conv2d(dx, dw, stride=stride, bias=dbias, activation="relu", variant=variant, **params)
    assert isinstance(dy, gpuopt.DeviceArray)
    y = dy.numpy()
    assert y.shape == gpuopt.conv2d_output_shape(dx.shape, dw.shape, stride)
    assert np.isfinite(y).all(), "unwritten (poisoned) or non-finite outputs"
    assert relative_error(y[images], ref) < 1e-5


# ---------------------------------------------------------------- epilogue, device arrays

# Per variant: its defaults and its most tail-heavy setting.
EXTREMES = [(v, {}) for v in VARIANTS] + [
    ("unroll_k", dict(unroll=16, loop_order="crs")),
    ("unroll_k", dict(unroll=16, loop_order="rsc", block_size=1024)),
    ("unroll_c", dict(unroll=16, block_size=32)),
    ("unroll_nk", dict(block_size=1024)),
    ("shared", dict(block_size=1024)),
    ("shared", dict(block_size=32)),
]


@pytest.mark.parametrize("variant,params", EXTREMES, ids=[ident(v, p) for v, p in EXTREMES])
@pytest.mark.parametrize("activation", [None, "relu", "tanh"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
def test_bias_and_activation(rng, variant, params, activation, with_bias):
    # N = 5, K = 17, C = 19: tails for every unroll factor; 2 x 3 filter, padding, stride 2.
    x, wt = uniform(rng, (5, 19, 12, 9)), uniform(rng, (17, 19, 2, 3))
    bias = uniform(rng, 17) if with_bias else None
    kw = dict(stride=(2, 1), padding=(1, 2), bias=bias, activation=activation)
    y = gpuopt.conv2d(x, wt, variant=variant, **kw, **params)
    assert np.isfinite(y).all()
    assert relative_error(y, gpuopt.conv2d(x, wt, variant="cpu", **kw)) < 1e-5
    if activation == "relu":
        assert (y >= 0).all() and (y == 0).any()
    elif activation == "tanh":
        assert (np.abs(y) <= 1).all()


@pytest.mark.parametrize("variant,params", EXTREMES, ids=[ident(v, p) for v, p in EXTREMES])
def test_device_arrays_in_device_array_out(rng, variant, params):
    check_device_arrays(rng, variant, **params)


def test_general_runs_the_kernel_its_plan_names(rng):
    """The general switch picks the same instantiation as the explicit variant, so the
    results are bitwise equal."""
    cases = [
        ((9, 5, 11, 11), (6, 5, 3, 3), "unroll_nk", {}),                                   # N >= 8, K >= 4
        ((3, 5, 11, 11), (6, 5, 3, 3), "unroll_k", dict(unroll=2, loop_order="rsc")),      # small N, C < 256
        ((9, 5, 11, 11), (3, 5, 3, 3), "unroll_k", dict(unroll=2, loop_order="rsc")),      # K < 4
    ]
    for x_shape, w_shape, variant, params in cases:
        x, w = uniform(rng, x_shape), uniform(rng, w_shape)
        y = gpuopt.conv2d(x, w, padding=1, variant="general")
        np.testing.assert_array_equal(y, gpuopt.conv2d(x, w, padding=1, variant=variant, **params))
        assert relative_error(y, gpuopt.conv2d(x, w, padding=1, variant="cpu")) < 1e-5
    # C >= 256 and small N: k and c unrolled (2 x 8).
    x, w = uniform(rng, (2, 300, 6, 6)), uniform(rng, (7, 300, 2, 2))
    assert relative_error(gpuopt.conv2d(x, w, variant="general"), gpuopt.conv2d(x, w, variant="cpu")) < 1e-5


# ---------------------------------------------------------------- shared-memory tile limits

def test_shared_tile_over_48k_and_over_the_limit(rng):
    # N = 1 and P = Q = 1: each thread of a block its own map, so a 1024-thread block's tile
    # holds 600 maps x 5x5 taps of one channel = 60,000 bytes: above the 48 KB default,
    # launched with the opt-in.
    x, w = uniform(rng, (1, 2, 5, 5)), uniform(rng, (600, 2, 5, 5))
    y = gpuopt.conv2d(x, w, variant="shared", block_size=1024)
    assert relative_error(y, gpuopt.conv2d(x, w, variant="cpu")) < 1e-5
    # 1025 maps x 8x8 taps = 262,400 bytes: more than any GPU allows per block; rejected up
    # front with the limit in the message, and the process stays usable.
    x, w = uniform(rng, (1, 4, 8, 8)), uniform(rng, (1025, 4, 8, 8))
    limit = gpuopt.device_info()["shared_memory_per_block_optin_bytes"]
    assert limit < 262_400
    with pytest.raises(ValueError, match=rf"needs 262400 bytes of shared memory per block; this GPU allows {limit}"):
        gpuopt.conv2d(x, w, variant="shared", block_size=1024)
    # Smaller blocks span fewer maps: 129 x 64 x 4 = 33,024 bytes at 128 threads.
    y = gpuopt.conv2d(x, w, variant="shared", block_size=128)
    assert relative_error(y, gpuopt.conv2d(x, w, variant="cpu")) < 1e-5


# ---------------------------------------------------------------- 64-bit offsets

# x with more than 2**31 elements (10.5 GB): the kernels switch to 64-bit offsets.
BIG_RUNS = [(v, {}) for v in VARIANTS] + [
    ("unroll_k", dict(unroll=16, loop_order="crs", block_size=1024)),  # register-bounded fallback kernel
    ("unroll_c", dict(unroll=8, block_size=1024)),
    ("unroll_nk", dict(block_size=1024)),
    ("shared", dict(block_size=1024)),
]


def test_more_than_2_31_input_elements(rng):
    check_more_than_2_31_input_elements(rng, BIG_RUNS)
