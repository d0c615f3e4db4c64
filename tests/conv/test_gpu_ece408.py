"""The ECE408 Fashion-MNIST report's conv2d variants against the CPU reference (outputs poisoned
by conftest): every allowed parameter value, awkward shapes, the reports' layers, bias and
activations, tiled_channels' run-to-run spread, and the up-front rejections (constant memory, block
size, shared memory). Device arrays and bitwise reproducibility: test_gpu_conv2d.py, for every GPU
variant."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import gpuopt
from conftest import conv_call, relative_error
from gpuopt._ext import kernel_limits
from .cases import AWKWARD_SHAPES, LAUNCH_GOOD, check_launcher_rejects_bad_arguments, run_and_check, uniform

pytestmark = pytest.mark.gpu

VARIANTS = ["unroll_constmem", "tiled", "tiled_unrolled", "tiled_channels", "tiled_corner_turn"]
TILED = VARIANTS[1:]
_TABLE = gpuopt.variants("conv2d")
TILE_WIDTHS = _TABLE["tiled"].params["tile_width"].allowed
CHANNELS_PER_BLOCK = _TABLE["tiled_channels"].params["channels_per_block"].allowed
CONSTANT_BYTES = kernel_limits()["conv2d_constant_weight_bytes"]  # the kernels' 64 KB constant bank

# Small shapes for the parameter sweeps, (N, C, H, W, K, R, S, stride, padding): each unrolled filter
# size (1x1, 3x3, 5x5, 7x7) and the generic path (R != S), several tiles per map at every tile width
# (40 x 40 outputs), C = 37 (two corner-turned chunks of 32; not a multiple of channels_per_block).
SWEEP_SHAPES = [
    (2, 5, 19, 23, 3, 3, 3, 1, 1),
    (1, 37, 11, 13, 4, 5, 5, 2, 2),
    (2, 3, 17, 9, 5, 2, 4, (1, 3), (1, 0)),
    (1, 2, 40, 40, 3, 7, 7, 1, 3),
    (3, 4, 6, 6, 2, 1, 1, 1, 0),
]

# Beyond the shared awkward shapes: stride 3 on a 100 x 100 image, 65 maps, K = 70000 beyond the 65535 grid
# limit (the kernels loop over maps).
AWKWARD = AWKWARD_SHAPES + [
    (1, 2, 100, 100, 3, 5, 5, 3, 0),
    (1, 2, 9, 9, 65, 3, 3, 1, 1),
    (1, 1, 1, 1, 70000, 1, 1, 1, 0),
]

# (x shape, w shape) of the ECE408 layers: Fashion-MNIST (batches of 10 and 100) and MNIST.
LAYERS = {
    "fashion-conv1-b10": ((10, 1, 64, 64), (6, 1, 5, 5)),
    "fashion-conv2-b10": ((10, 6, 30, 30), (16, 6, 5, 5)),
    "fashion-conv1-b100": ((100, 1, 64, 64), (6, 1, 5, 5)),
    "fashion-conv2-b100": ((100, 6, 30, 30), (16, 6, 5, 5)),
    "mnist-conv1": ((10, 1, 28, 28), (32, 1, 5, 5)),
    "mnist-conv2": ((10, 32, 12, 12), (64, 32, 5, 5)),  # 204,800 bytes of filters: too big for constant memory
}


def weight_bytes(w_shape):
    return 4 * int(np.prod(w_shape))


def check_shape(rng, variant, shape, **params):
    n, c, h, w, k, r, s, stride, padding = shape
    x, wt = uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s))
    if variant == "unroll_constmem" and weight_bytes(wt.shape) > CONSTANT_BYTES:
        with pytest.raises(ValueError, match="65536"):
            gpuopt.conv2d(x, wt, stride=stride, padding=padding, variant=variant)
        return
    return run_and_check(variant, x, wt, stride=stride, padding=padding, **params)


# ------------------------------------------------------------------------------------------ sweeps


@pytest.mark.parametrize("variant", ["tiled", "tiled_unrolled", "tiled_corner_turn"])
@pytest.mark.parametrize("tile_width", TILE_WIDTHS)
@pytest.mark.parametrize("shape", SWEEP_SHAPES, ids=str)
def test_every_tile_width(rng, variant, tile_width, shape):
    check_shape(rng, variant, shape, tile_width=tile_width)


@pytest.mark.parametrize("tile_width", TILE_WIDTHS)
@pytest.mark.parametrize("channels_per_block", CHANNELS_PER_BLOCK)
def test_tiled_channels_every_parameter_pair(rng, tile_width, channels_per_block):
    params = dict(tile_width=tile_width, channels_per_block=channels_per_block)
    if tile_width * tile_width * channels_per_block > 1024:
        x, w = uniform(rng, (1, 2, 8, 8)), uniform(rng, (2, 2, 3, 3))
        with pytest.raises(ValueError, match="1024 threads per block"):
            gpuopt.conv2d(x, w, variant="tiled_channels", **params)
        return
    for shape in SWEEP_SHAPES:
        check_shape(rng, "tiled_channels", shape, **params)


@pytest.mark.parametrize("shape", SWEEP_SHAPES, ids=str)
def test_unroll_constmem_sweep_shapes(rng, shape):
    check_shape(rng, "unroll_constmem", shape)


# ------------------------------------------------------------------------------------------ shapes


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", AWKWARD, ids=str)
def test_awkward_shapes(rng, variant, shape):
    check_shape(rng, variant, shape)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layer", list(LAYERS))
def test_ece408_layers(rng, variant, layer):
    x_shape, w_shape = LAYERS[layer]
    x, w = uniform(rng, x_shape), uniform(rng, w_shape)
    if variant == "unroll_constmem" and weight_bytes(w_shape) > CONSTANT_BYTES:
        with pytest.raises(ValueError, match="65536"):
            gpuopt.conv2d(x, w, variant=variant)
        return
    n = x_shape[0]
    # Batches of 100: the reference checks the first, the last and one random image.
    images = None if n <= 10 else [0, int(rng.integers(1, n - 1)), n - 1]
    run_and_check(variant, x, w, images=images)


@pytest.fixture(scope="module")
def fashion_layers():
    """The two Fashion-MNIST layers (batch of 10) with bias, and their relu reference, computed once."""
    from conftest import SEED

    g = np.random.default_rng([SEED, 408])
    layers = []
    for x_shape, w_shape in (LAYERS["fashion-conv1-b10"], LAYERS["fashion-conv2-b10"]):
        x, w, b = uniform(g, x_shape), uniform(g, w_shape), uniform(g, w_shape[0])
        layers.append((x, w, b, gpuopt.conv2d(x, w, bias=b, activation="relu", variant="cpu")))
    return layers


@pytest.mark.parametrize("variant", TILED)
def test_report_tile_width_sweep_on_fashion_layers(fashion_layers, variant):
    """The report's Optimization 9 sweep, every tile width on both Fashion-MNIST layers."""
    cpbs = CHANNELS_PER_BLOCK if variant == "tiled_channels" else (None,)
    for x, w, b, ref in fashion_layers:
        for tile_width in TILE_WIDTHS:
            for cpb in cpbs:
                params = {"tile_width": tile_width}
                if cpb is not None:
                    if tile_width * tile_width * cpb > 1024:
                        continue
                    params["channels_per_block"] = cpb
                y = gpuopt.conv2d(x, w, bias=b, activation="relu", variant=variant, **params)
                assert np.isfinite(y).all()
                assert relative_error(y, ref) < 1e-5, params


# ------------------------------------------------------------------------------------------ epilogue


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("activation", [None, "relu", "tanh"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("shape", [(2, 3, 11, 13, 5, 3, 3, 1, 1), (3, 40, 7, 7, 13, 1, 1, 1, 0),
                                   (1, 2, 8, 8, 2, 3, 3, 4, 3), (2, 7, 10, 9, 3, 2, 3, 2, 1)], ids=str)
def test_bias_and_activation(rng, variant, activation, with_bias, shape):
    n, c, h, w, k, r, s, stride, padding = shape
    bias = uniform(rng, k) if with_bias else None
    y = run_and_check(variant, uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s)), stride=stride,
                      padding=padding, bias=bias, activation=activation)
    if activation == "relu":
        assert (y >= 0).all()
    elif activation == "tanh":
        assert (np.abs(y) <= 1).all()


@pytest.mark.parametrize("channels_per_block", [1, 2, 4, 8])
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_tiled_channels_activation_after_all_channels(channels_per_block, activation):
    """Channel 0 contributes +2 per tap and channel 1 -1: relu or tanh of each partial sum added up
    would differ from the activation of the whole sum (atomics and nonlinearities do not commute)."""
    x = np.ones((2, 2, 9, 9), np.float32)
    w = np.empty((3, 2, 3, 3), np.float32)
    w[:, 0], w[:, 1] = 2.0 / 9, -1.0 / 9  # a 3x3 window sums to 2 - 1 = 1 inside the image
    bias = np.array([-0.5, 0.0, 0.25], np.float32)
    y = gpuopt.conv2d(x, w, padding=1, bias=bias, activation=activation, variant="tiled_channels", tile_width=4,
                      channels_per_block=channels_per_block)
    ref = gpuopt.conv2d(x, w, padding=1, bias=bias, activation=activation, variant="cpu")
    assert relative_error(y, ref) < 1e-5
    centre = {"relu": np.maximum(1 + bias, 0), "tanh": np.tanh(1 + bias)}[activation]
    np.testing.assert_allclose(y[:, :, 4, 4], np.broadcast_to(centre, (2, 3)), rtol=1e-6, atol=1e-6)


def test_tiled_channels_is_close_run_to_run(rng):
    """Float atomics: runs may differ in the last bits (not bitwise reproducible), never by more."""
    x, w = uniform(rng, (4, 64, 12, 12)), uniform(rng, (8, 64, 3, 3))
    runs = [gpuopt.conv2d(x, w, padding=1, variant="tiled_channels", channels_per_block=4) for _ in range(3)]
    ref = gpuopt.conv2d(x, w, padding=1, variant="cpu")
    for y in runs:
        assert relative_error(y, ref) < 1e-5
        assert relative_error(y, runs[0]) < 1e-5


# ------------------------------------------------------------------------------------------ limits


def test_unroll_constmem_accepts_exactly_64_kb(rng):
    x, w = uniform(rng, (2, 64, 9, 9)), uniform(rng, (16, 64, 4, 4))
    assert weight_bytes(w.shape) == CONSTANT_BYTES
    run_and_check("unroll_constmem", x, w, padding=1, bias=uniform(rng, 16), activation="relu")
    x1, w1 = uniform(rng, (2, 16, 5, 5)), uniform(rng, (1024, 16, 1, 1))  # 64 KB in 128 groups of 8 maps
    assert weight_bytes(w1.shape) == CONSTANT_BYTES
    run_and_check("unroll_constmem", x1, w1)


def test_unroll_constmem_rejects_64_kb_plus_4_bytes(rng):
    from gpuopt._ext import cuda_module

    x, w = uniform(rng, (1, 16385, 2, 2)), uniform(rng, (1, 16385, 1, 1))
    assert weight_bytes(w.shape) == CONSTANT_BYTES + 4
    with pytest.raises(ValueError, match=r"65540 bytes.*65536-byte \(64 KB\) constant memory"):
        gpuopt.conv2d(x, w, variant="unroll_constmem")
    # The launcher's own check, for direct callers of the binding.
    dx, dw = gpuopt.to_device(x), gpuopt.to_device(w)
    dy = gpuopt.cuda.empty((1, 1, 2, 2))
    with pytest.raises(ValueError, match="65536-byte"):
        cuda_module().conv2d_unroll_constmem(conv_call(cuda_module(), dx.ptr, dw.ptr, 0, dy.ptr,
                                                       (1, 16385, 2, 2, 1, 1, 1, 1, 1, 0, 0)))
    # Nothing was launched; the process stays usable.
    run_and_check("unroll_constmem", uniform(rng, (1, 3, 5, 5)), uniform(rng, (2, 3, 3, 3)))


def test_unroll_constmem_reloads_weights_every_call(rng):
    x = uniform(rng, (2, 3, 12, 12))
    ws = [uniform(rng, (5, 3, 3, 3)), uniform(rng, (7, 3, 5, 5)), uniform(rng, (5, 3, 3, 3))]
    dys = [gpuopt.conv2d(gpuopt.to_device(x), gpuopt.to_device(w), variant="unroll_constmem") for w in ws]
    for w, dy in zip(ws, dys):  # queued back to back, read after all three: each used its own weights
        assert relative_error(dy.numpy(), gpuopt.conv2d(x, w, variant="cpu")) < 1e-5


def test_unroll_constmem_concurrent_host_threads(rng):
    """Calls from several host threads are serialised around the process-wide constant bank."""
    x = uniform(rng, (4, 8, 20, 20))
    ws = [uniform(rng, (6, 8, 3, 3)) for _ in range(8)]

    def run(w):
        return gpuopt.conv2d(x, w, padding=1, variant="unroll_constmem")

    with ThreadPoolExecutor(max_workers=4) as pool:
        ys = list(pool.map(run, ws * 3))
    for i, y in enumerate(ys):
        assert relative_error(y, gpuopt.conv2d(x, ws[i % len(ws)], padding=1, variant="cpu")) < 1e-5


@pytest.mark.parametrize("variant", TILED)
def test_tile_width_outside_the_sweep_rejected(rng, variant):
    x, w = uniform(rng, (1, 2, 8, 8)), uniform(rng, (2, 2, 3, 3))
    for bad in (64, 6, 0, True):
        with pytest.raises(ValueError, match=r"tile_width=.* is not allowed"):
            gpuopt.conv2d(x, w, variant=variant, tile_width=bad)


@pytest.mark.parametrize("variant", TILED)
def test_launchers_reject_blocks_over_1024_threads(rng, variant):
    from gpuopt._ext import cuda_module

    fn = getattr(cuda_module(), f"conv2d_{variant}")
    x, w = gpuopt.to_device(uniform(rng, (1, 2, 40, 40))), gpuopt.to_device(uniform(rng, (3, 2, 3, 3)))
    y = gpuopt.cuda.empty((1, 3, 38, 38))
    shape = (1, 2, 40, 40, 3, 3, 3, 1, 1, 0, 0)
    one_slice = {"channels_per_block": 1} if variant == "tiled_channels" else {}
    with pytest.raises(ValueError, match="tile_width must be .*, got 33"):  # 33 x 33: not a table value
        fn(conv_call(cuda_module(), x.ptr, w.ptr, 0, y.ptr, shape), tile_width=33, **one_slice)
    if variant == "tiled_channels":
        with pytest.raises(ValueError, match="32 x 32 x 2 = 2048 threads"):
            fn(conv_call(cuda_module(), x.ptr, w.ptr, 0, y.ptr, shape), tile_width=32, channels_per_block=2)
        with pytest.raises(ValueError, match="1024 threads per block"):
            gpuopt.conv2d(x, w, variant=variant, tile_width=16, channels_per_block=8)
    fn(conv_call(cuda_module(), x.ptr, w.ptr, 0, y.ptr, shape), tile_width=32, **one_slice)
    assert relative_error(y.numpy(), gpuopt.conv2d(x.numpy(), w.numpy(), variant="cpu")) < 1e-5


@pytest.mark.parametrize("variant", TILED)
def test_tile_too_large_for_shared_memory_rejected(rng, variant):
    """Stride 8 and T = 32: the staged input tile is 249 x 249 floats (248 KB), over any GPU's
    per-block shared memory (227 KB on the H200); T = 16 needs 121 x 121 (58 KB, above the 48 KB
    default: the kernel opts in) and runs."""
    x, w = uniform(rng, (1, 1, 256, 256)), uniform(rng, (2, 1, 1, 1))
    params = {"channels_per_block": 1} if variant == "tiled_channels" else {}
    with pytest.raises(ValueError, match="bytes of shared memory per block; this GPU allows"):
        gpuopt.conv2d(x, w, stride=8, variant=variant, tile_width=32, **params)
    run_and_check(variant, x, w, stride=8, tile_width=16, **params)
    if variant == "tiled_channels":  # two channel slices of 58 KB each
        run_and_check(variant, uniform(rng, (1, 3, 256, 256)), uniform(rng, (2, 3, 1, 1)), stride=8, tile_width=16,
                      channels_per_block=2)


@pytest.mark.parametrize("variant", VARIANTS)
def test_launchers_reject_bad_arguments_before_launch(rng, variant):
    """Direct calls of the bindings (bypassing gpuopt's checks) fail with ValueError and launch nothing."""
    from gpuopt._ext import cuda_module

    more = []
    if variant in TILED:
        more.append(("tile_width must be .*, got 0", LAUNCH_GOOD, {"tile_width": 0}))
    if variant == "tiled_channels":
        more.append(("channels_per_block must be .*, got 0", LAUNCH_GOOD, {"channels_per_block": 0}))
    params = {p.name: p.default for p in gpuopt.variants("conv2d")[variant].params.values()}
    check_launcher_rejects_bad_arguments(getattr(cuda_module(), f"conv2d_{variant}"), rng, more, what=variant,
                                         **params)
