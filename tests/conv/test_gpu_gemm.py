"""The GEMM-based conv2d variants (unroll, implicit_gemm, implicit_gemm_fast, implicit_gemm_tf32x3) against the CPU reference
(outputs and scratch poisoned by conftest): every allowed parameter value, awkward shapes, the CS6235
configurations and the ECE408 layers, bias and activations, misaligned base pointers, unroll's chunked path,
the kernels' resources and the up-front rejections. Device arrays and bitwise reproducibility: test_gpu_conv2d.py,
for every GPU variant."""

import numpy as np
import pytest

import gpuopt
import oracles
from conftest import SEED, conv_call
from gpuopt.conv.gemm import unroll_chunk_images
from .cases import (AWKWARD_SHAPES, CS6235, GRID_LIMIT_SHAPES, LAUNCH_GOOD, check_against_cpu, check_cs6235_problem,
                    check_launcher_rejects_bad_arguments, check_shape, cs6235_problems, ident, misaligned_copy,
                    misaligned_empty, run_and_check, uniform)

pytestmark = pytest.mark.gpu

_TABLE = gpuopt.variants("conv2d")
VARIANTS = ["unroll", "implicit_gemm", "implicit_gemm_fast"]
GEMMS = _TABLE["unroll"].params["gemm"].allowed
TILES = _TABLE["implicit_gemm"].params["tile"].allowed
FAST_TILES = _TABLE["implicit_gemm_fast"].params["tile"].allowed
# Every variant with every allowed value of its parameter.
CONFIGS = ([("unroll", {"gemm": g}) for g in GEMMS] + [("implicit_gemm", {"tile": t}) for t in TILES]
           + [("implicit_gemm_fast", {"tile": t}) for t in FAST_TILES])
CONFIG_IDS = [ident(v, p) for v, p in CONFIGS]


def cuda():
    from gpuopt._ext import cuda_module

    return cuda_module()


# ------------------------------------------------------------------------------------------ parameter sweep

# Small shapes, (N, C, H, W, K, R, S, stride, padding): C*R*S a multiple of 4 (16-byte W loads) and not, P*Q
# a multiple of 4 (16-byte stores) and not, K over several map tiles of every size (130 > 128), columns over
# several column tiles with a ragged edge, k-steps with a tail, R != S, strides 2 and 3, padding.
SWEEP_SHAPES = [
    (2, 5, 19, 23, 3, 3, 3, 1, 1),        # C*R*S = 45, P*Q = 437
    (1, 37, 11, 13, 130, 5, 5, 2, 2),     # C*R*S = 925, K = 130: two 128-map tiles, five 32-map tiles
    (2, 3, 17, 9, 5, 2, 4, (1, 3), (1, 0)),
    (3, 8, 12, 12, 33, 1, 1, 1, 0),       # C*R*S = 8 (one k-step), P*Q = 144
    (2, 4, 10, 10, 70, 3, 3, 1, 1),       # C*R*S = 36 (16-byte W), P*Q = 100 (16-byte y)
    (1, 2, 40, 40, 3, 7, 7, 1, 3),
]


@pytest.mark.parametrize("variant,params", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("shape", SWEEP_SHAPES, ids=str)
def test_every_parameter_value(rng, variant, params, shape):
    check_shape(rng, variant, shape, **params)


# ------------------------------------------------------------------------------------------ awkward shapes

AWKWARD = AWKWARD_SHAPES + GRID_LIMIT_SHAPES


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", AWKWARD, ids=str)
def test_awkward_shapes(rng, variant, shape):
    check_shape(rng, variant, shape)


@pytest.mark.parametrize("variant", VARIANTS)
def test_grid_loops_with_bias_and_activation(rng, variant):
    """K = 65535 * 16 + 1 maps of two 1 x 1 images: implicit_gemm's grid y (map tiles of 16) and unroll's
    epilogue grid y (maps; two images per GEMM, so the epilogue runs) loop past 65535, with bias and relu."""
    k = 65535 * 16 + 1
    x, w, bias = uniform(rng, (2, 1, 1, 1)), uniform(rng, (k, 1, 1, 1)), uniform(rng, k)
    run_and_check(variant, x, w, bias=bias, activation="relu")


@pytest.mark.parametrize("variant", ["implicit_gemm", "implicit_gemm_fast"])
def test_index_parts_beyond_int_range(rng, variant):
    """A 1 x 50000 image, a 86001 x 1 filter and 43000 rows of padding: each output's window has one tap inside
    the image (r = 43000), whose index parts h0*W = -2.15e9 and r*W = +2.15e9 overflow an int although their sum
    (the index) does not; the kernels add them modulo 2^32. The answer is known: y[q] = act(x[q] * w[43000] + b).
    (unroll would need 17 GB of X_unrolled for this shape.)"""
    x, w, bias = uniform(rng, (1, 1, 1, 50000)), uniform(rng, (1, 1, 86001, 1)), uniform(rng, 1)
    assert 43000 * 50000 > 2**31
    y = gpuopt.conv2d(x, w, padding=(43000, 0), bias=bias, activation="tanh", variant=variant)
    assert y.shape == (1, 1, 1, 50000) and np.isfinite(y).all()
    expected = np.tanh(x[0, 0, 0].astype(np.float64) * np.float64(w[0, 0, 43000, 0]) + np.float64(bias[0]))
    np.testing.assert_allclose(y[0, 0, 0], expected, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------ the reports' problems

CONF_RUNS = [(v, {}) for v in VARIANTS] + [("implicit_gemm_fast", {"tile": t}) for t in FAST_TILES[1:]]


@pytest.fixture(scope="module")
def conf_problems():
    return cs6235_problems(np.random.default_rng([SEED, 6235, 5]))


@pytest.mark.parametrize("conf", list(CS6235))
@pytest.mark.parametrize("variant,params", CONF_RUNS, ids=[ident(v, p) for v, p in CONF_RUNS])
def test_cs6235_configurations(conf_problems, conf, variant, params):
    check_cs6235_problem(conf_problems[conf], variant, params)


# (x shape, w shape) of the ECE408 layers: Fashion-MNIST and MNIST, batches of 10 (and 1000 for MNIST conv2).
LAYERS = {
    "fashion-conv1-b10": ((10, 1, 64, 64), (6, 1, 5, 5)),
    "fashion-conv2-b10": ((10, 6, 30, 30), (16, 6, 5, 5)),
    "mnist-conv1-b10": ((10, 1, 28, 28), (32, 1, 5, 5)),
    "mnist-conv2-b10": ((10, 32, 12, 12), (64, 32, 5, 5)),
    "mnist-conv2-b1000": ((1000, 32, 12, 12), (64, 32, 5, 5)),
}
LAYER_RUNS = [(v, {}) for v in VARIANTS] + [("implicit_gemm", {"tile": 32})] + \
             [("implicit_gemm_fast", {"tile": t}) for t in FAST_TILES[1:]]


@pytest.mark.parametrize("variant,params", LAYER_RUNS, ids=[ident(v, p) for v, p in LAYER_RUNS])
@pytest.mark.parametrize("layer", list(LAYERS))
def test_ece408_layers(rng, variant, params, layer):
    x_shape, w_shape = LAYERS[layer]
    x, w, bias = uniform(rng, x_shape), uniform(rng, w_shape), uniform(rng, w_shape[0])
    n = x_shape[0]
    # Batches of 1000: the reference checks the first, the last and one random image.
    images = None if n <= 10 else [0, int(rng.integers(1, n - 1)), n - 1]
    run_and_check(variant, x, w, bias=bias, activation="tanh", images=images, **params)


# ------------------------------------------------------------------------------------------ epilogue


@pytest.mark.parametrize("variant,params", [(v, {}) for v in VARIANTS] + [("unroll", {"gemm": "naive"})],
                         ids=VARIANTS + ["unroll-naive"])
@pytest.mark.parametrize("activation", [None, "relu", "tanh"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("shape", [(2, 3, 11, 13, 5, 3, 3, 1, 1), (3, 40, 7, 7, 13, 1, 1, 1, 0),
                                   (1, 2, 8, 8, 2, 3, 3, 4, 3), (2, 8, 10, 9, 67, 2, 2, 2, 1)], ids=str)
def test_bias_and_activation(rng, variant, params, activation, with_bias, shape):
    n, c, h, w, k, r, s, stride, padding = shape
    bias = uniform(rng, k) if with_bias else None
    y = run_and_check(variant, uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s)), stride=stride,
                      padding=padding, bias=bias, activation=activation, **params)
    if activation == "relu":
        assert (y >= 0).all()
    elif activation == "tanh":
        assert (np.abs(y) <= 1).all()


# ------------------------------------------------------------------------------------------ misaligned pointers


@pytest.mark.parametrize("tile", FAST_TILES)
def test_fast_misaligned_base_pointers(rng, tile):
    """The 16-byte paths (W loads: C*R*S % 4 == 0 and w aligned; y stores: P*Q % 4 == 0 and y aligned) fall back
    to 4-byte ones for base pointers one float off a 16-byte boundary: x, w, bias and y each, and all at once."""
    # C*R*S = 36 and P*Q = 64: both 16-byte paths are taken when aligned.
    x, w, bias = uniform(rng, (3, 4, 10, 10)), uniform(rng, (70, 4, 3, 3)), uniform(rng, 70)
    kw = dict(padding=0, bias=bias, activation="relu")
    shape = (3, 4, 10, 10, 70, 3, 3, 1, 1, 0, 0)
    out_shape = gpuopt.conv2d_output_shape(x.shape, w.shape)
    aligned = {name: gpuopt.to_device(a) for name, a in (("x", x), ("w", w), ("bias", bias))}
    off = {name: misaligned_copy(a) for name, a in (("x", x), ("w", w), ("bias", bias))}
    for where in ("none", "x", "w", "bias", "y", "all"):
        args = {name: (off if where in (name, "all") else aligned)[name] for name in ("x", "w", "bias")}
        y = misaligned_empty(out_shape) if where in ("y", "all") else gpuopt.cuda.empty(out_shape)
        cuda().conv2d_implicit_gemm_fast(conv_call(cuda(), args["x"].ptr, args["w"].ptr, args["bias"].ptr, y.ptr, shape,
                                                   "relu"), tile=tile)
        check_against_cpu(y.numpy(), x, w, **kw, what=f"{tile}, misaligned {where}")
    # Through gpuopt.conv2d: misaligned device inputs, an output it allocates.
    dy = gpuopt.conv2d(off["x"], off["w"], bias=off["bias"], activation="relu", variant="implicit_gemm_fast",
                       tile=tile)
    check_against_cpu(dy.numpy(), x, w, **kw, what=f"{tile} through conv2d")


@pytest.mark.parametrize("variant", ["unroll", "implicit_gemm"])
def test_other_variants_misaligned_base_pointers(rng, variant):
    x, w, bias = uniform(rng, (2, 4, 10, 10)), uniform(rng, (8, 4, 3, 3)), uniform(rng, 8)
    dy = gpuopt.conv2d(misaligned_copy(x), misaligned_copy(w), bias=misaligned_copy(bias), variant=variant)
    check_against_cpu(dy.numpy(), x, w, bias=bias, what=variant)


# ------------------------------------------------------------------------------------------ unroll's chunks


@pytest.mark.parametrize("gemm", GEMMS)
@pytest.mark.parametrize("chunk", [1, 3, 7], ids=lambda c: f"chunk{c}")
@pytest.mark.parametrize("epilogue", [(None, None), ("bias", "relu")], ids=["plain", "bias-relu"])
def test_unroll_chunks(rng, gemm, chunk, epilogue):
    """A scratch budget that holds `chunk` images: 7 images go through GEMMs of 1 (each written straight into y,
    the epilogue in place or skipped), 3 (3 + 3 + 1: a short last chunk) or all 7 images."""
    n, c, h, w, k, r, s, u, v, ph, pw = shape = (7, 3, 11, 9, 5, 3, 2, 2, 1, 1, 0)
    x, wt, bias = uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s)), uniform(rng, k)
    _, _, p, q = gpuopt.conv2d_output_shape(x.shape, wt.shape, (u, v), (ph, pw))
    budget = chunk * (c * r * s + k) * p * q * 4 + 3  # just over `chunk` images' scratch
    assert unroll_chunk_images(x.shape, wt.shape, (u, v), (ph, pw), budget) == chunk
    assert cuda().conv2d_unroll_chunk_images(cuda().Conv2dShape(*shape), scratch_limit_bytes=budget) == chunk
    use_bias, activation = epilogue
    dx, dw, db = gpuopt.to_device(x), gpuopt.to_device(wt), gpuopt.to_device(bias)
    y = gpuopt.cuda.empty((n, k, p, q))
    cuda().conv2d_unroll(conv_call(cuda(), dx.ptr, dw.ptr, db.ptr if use_bias else 0, y.ptr, shape, activation or "none"),
                         gemm=gemm, scratch_limit_bytes=budget)
    check_against_cpu(y.numpy(), x, wt, stride=(u, v), padding=(ph, pw), bias=bias if use_bias else None,
                      activation=activation, what=f"unroll {gemm}, {chunk} images per GEMM")


def test_unroll_default_budget_batches_the_whole_layer(rng):
    """Fashion-MNIST conv2 at 100 images: 45 MB of scratch, one GEMM; with a 4 MB budget, 11 GEMMs of 9 images
    and one of 1 give the same result."""
    x, w = uniform(rng, (100, 6, 30, 30)), uniform(rng, (16, 6, 5, 5))
    shape = (100, 6, 30, 30, 16, 5, 5, 1, 1, 0, 0)
    assert cuda().conv2d_unroll_chunk_images(cuda().Conv2dShape(*shape)) == 100
    dx, dw = gpuopt.to_device(x), gpuopt.to_device(w)
    y_one = gpuopt.conv2d(dx, dw, variant="unroll").numpy()
    y_chunks = gpuopt.cuda.empty(y_one.shape)
    assert cuda().conv2d_unroll_chunk_images(cuda().Conv2dShape(*shape), scratch_limit_bytes=4 << 20) == 9
    cuda().conv2d_unroll(conv_call(cuda(), dx.ptr, dw.ptr, 0, y_chunks.ptr, shape), gemm="async",
                         scratch_limit_bytes=4 << 20)
    images = [0, 50, 99]
    check_against_cpu(y_one[images], x[images], w, what="one GEMM")
    check_against_cpu(y_chunks.numpy()[images], x[images], w, what="chunks")


# ------------------------------------------------------------------------------------------ resources, limits


def test_kernels_do_not_spill():
    infos = cuda().conv2d_gemm_kernel_info()
    names = [i["kernel"] for i in infos]
    assert len(infos) == 4 + 2 * len(FAST_TILES), names
    for tile in FAST_TILES:
        bm, bn, bk = tile.split("x")
        assert any(n.startswith(f"implicit_gemm_fast<{bm}x{bn}x{bk} ") for n in names), tile
    for info in infos:
        assert info["local_bytes"] == 0, f"{info['kernel']}: {info['local_bytes']} bytes of stack/spills"
        assert 0 < info["registers"] <= 128 and info["max_blocks_per_sm"] >= 1, info
        assert info["static_shared_bytes"] + info["dynamic_shared_bytes"] <= 48 * 1024, info


@pytest.mark.parametrize("variant", VARIANTS)
def test_launchers_reject_bad_arguments_before_launch(rng, variant):
    """Direct calls of the bindings (bypassing gpuopt's checks) fail with ValueError and launch nothing."""
    bad_param = {"unroll": {"gemm": "cublas"}, "implicit_gemm": {"tile": 8},
                 "implicit_gemm_fast": {"tile": "256x128x8"}}[variant]
    more = [("must be", LAUNCH_GOOD, bad_param)]
    if variant == "unroll":
        more.append(("scratch_limit_bytes must be positive", LAUNCH_GOOD, {"scratch_limit_bytes": -1}))
    else:  # 2^20 images of 64 x 64: 2^32 columns (the pointers are never read)
        more.append((r"N\*P\*Q = 1048576\*4096 must be < 2\^31 - 1024", (2**20, 1, 64, 64, 3, 1, 1, 1, 1, 0, 0), {}))
    params = {p.name: p.default for p in gpuopt.variants("conv2d")[variant].params.values()}
    check_launcher_rejects_bad_arguments(getattr(cuda(), f"conv2d_{variant}"), rng, more, what=variant, **params)


# ------------------------------------------------------------------------------------------ implicit_gemm_tf32x3

# (N, C, H, W, K, R, S, stride, padding): K over 1, 2 and 4 n-tiles with ragged tails (1, 9, 17, 32), taps not a
# multiple of 8 and of 32 (flush tails), padding (the staged plane zero-filled), strides, P*Q not a multiple of
# 16 (the last m-tile recomputes its last pixel), one image and more images than resident blocks.
TF32X3_SHAPES = [(1, 1, 5, 5, 1, 3, 3, 1, 0), (3, 6, 30, 30, 16, 5, 5, 1, 0), (2, 5, 13, 11, 9, 3, 3, 1, 1),
                 (2, 7, 17, 19, 17, 5, 3, 2, 2), (1, 16, 12, 12, 32, 5, 5, 1, 0), (1200, 2, 9, 9, 3, 3, 3, 3, 1),
                 (2, 3, 8, 8, 32, 1, 1, 1, 0)]


@pytest.mark.parametrize("shape", TF32X3_SHAPES, ids=str)
def test_tf32x3_matches_cpu_reference(rng, shape):
    check_shape(rng, "implicit_gemm_tf32x3", shape)


@pytest.mark.parametrize("activation", [None, "relu", "tanh"])
def test_tf32x3_bias_activation_and_fp32_level_error(rng, activation):
    """Against float64: FP32-level error (within 3x an FFMA kernel's on the same data, far below one TF32
    product's 2^-11), bias and activation applied; the same bits on every run."""
    x, w, bias = uniform(rng, (4, 6, 30, 30)), uniform(rng, (16, 6, 5, 5)), uniform(rng, 16)
    y = run_and_check("implicit_gemm_tf32x3", x, w, bias=bias, activation=activation)
    if activation is None:
        exact = oracles.conv2d(x.astype(np.float64), w.astype(np.float64), bias.astype(np.float64), (1, 1), (0, 0),
                               "none")
        ffma = gpuopt.conv2d(x, w, bias=bias, variant="implicit_gemm_fast")
        err = np.linalg.norm(y - exact) / np.linalg.norm(exact)
        err_ffma = np.linalg.norm(ffma - exact) / np.linalg.norm(exact)
        assert err < 3 * err_ffma + 1e-7 and err < 1e-5, (err, err_ffma)
    np.testing.assert_array_equal(gpuopt.conv2d(x, w, bias=bias, activation=activation,
                                                variant="implicit_gemm_tf32x3"), y)


def test_tf32x3_kernels_do_not_spill():
    infos = cuda().conv2d_tf32x3_kernel_info()
    assert len(infos) == 3, infos
    for info in infos:
        assert info["local_bytes"] == 0 and info["threads"] == 128 and info["max_blocks_per_sm"] >= 1, info


def test_tf32x3_refuses_what_it_does_not_compute(rng):
    x = uniform(rng, (1, 2, 8, 8))
    with pytest.raises(ValueError, match="at most 32 output maps"):
        gpuopt.conv2d(x, uniform(rng, (33, 2, 3, 3)), variant="implicit_gemm_tf32x3")
    with pytest.raises(ValueError, match="stages one whole"):
        gpuopt.conv2d(uniform(rng, (1, 3, 160, 160)), uniform(rng, (4, 3, 3, 3)), variant="implicit_gemm_tf32x3")
