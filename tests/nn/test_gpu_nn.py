"""The layer ops' GPU variants (gpuopt/nn/gpu.py, csrc/nn/*.cu) against their CPU references and NumPy, outputs
poisoned by conftest: awkward shapes (1x1, odd sizes, windows that do not divide the input, 2-D/3-D/4-D pooling,
N = 1 and 10000, D = 1 and past the block-per-row switch), NaN, inf and ties, device arrays in and out,
misaligned device views, and the clear errors."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import gpuopt
from conftest import relative_error
from gpuopt import nn
from gpuopt.cuda import DeviceArray, to_device
import oracles

pytestmark = pytest.mark.gpu

ACTIVATION = ["cuda"]
POOL = ["basic", "coalesced"]
FC = ["basic", "tiled", "matmul", "cublas"]
ARGMAX = ["basic", "warp", "streams"]
SOFTMAX = ["cuda"]
GPU_VARIANTS = {"relu": ACTIVATION, "tanh": ACTIVATION, "max_pool2d": POOL, "avg_pool2d": POOL,
                "fully_connected": FC, "argmax": ARGMAX, "softmax": SOFTMAX}


def test_every_gpu_variant_is_tested_here():
    for op, names in GPU_VARIANTS.items():
        assert [n for n, v in gpuopt.variants(op).items() if v.needs_cuda] == names, op


def misaligned(a):
    """A device copy of float32 ``a`` whose address is 4 bytes past a 16-byte boundary (an offset view)."""
    a = np.ascontiguousarray(a, np.float32)
    base = to_device(np.concatenate([np.zeros(1, np.float32), a.ravel()]))
    view = DeviceArray(a.shape, np.float32, base.ptr + 4, base)
    assert view.ptr % 16 == 4
    return view


def special_values(rng, shape):
    """Normal values with NaN, +-inf, -0.0 and 0.0 sprinkled in."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    for value in (np.nan, np.inf, -np.inf, -0.0, 0.0):
        flat[rng.integers(0, flat.size, max(1, flat.size // 50))] = value
    return x


# ----------------------------------------------------------------------------------------- relu, tanh

ACT_SHAPES = [(1,), (3,), (4,), (5,), (7, 3), (2, 3, 4, 5), (1000003,)]


def check_activation(op, out, x):
    ref = getattr(nn, op)(x, variant="cpu")
    if op == "relu":
        np.testing.assert_array_equal(out, ref)  # NaN where the reference has NaN, else exactly equal
        np.testing.assert_array_equal(out, np.maximum(x, 0))
    else:
        np.testing.assert_allclose(out, np.tanh(x.astype(np.float64)), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op", ["relu", "tanh"])
@pytest.mark.parametrize("shape", ACT_SHAPES, ids=str)
def test_activation(rng, op, shape):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    out = getattr(nn, op)(x, variant="cuda")
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == shape
    check_activation(op, out, x)


@pytest.mark.parametrize("op", ["relu", "tanh"])
def test_activation_special_values(rng, op):
    x = special_values(rng, (1001,))
    out = getattr(nn, op)(x, variant="cuda")
    np.testing.assert_array_equal(np.isnan(out), np.isnan(x))
    check_activation(op, out, x)


@pytest.mark.parametrize("op", ["relu", "tanh"])
@pytest.mark.parametrize("n", [1, 3, 1001])
def test_activation_device_arrays_and_misaligned_views(rng, op, n):
    x = rng.standard_normal((n,)).astype(np.float32)
    for dx in (to_device(x), misaligned(x)):
        out = getattr(nn, op)(dx, variant="cuda")
        assert isinstance(out, DeviceArray) and out.shape == (n,)
        check_activation(op, out.numpy(), x)


def test_relu_over_2_31_elements():
    """64-bit indices, the float4 body and the scalar tail: 2**31 + 5 floats of one byte pattern (0x3F: 0.747...,
    so relu is the identity); the output's first and last floats are read back (the rest was NaN-poisoned)."""
    from gpuopt._ext import cuda_module

    n = 2**31 + 5
    x = gpuopt.cuda.empty((n,), np.float32)
    cuda_module().memset(x.ptr, 0x3F, x.nbytes)
    y = nn.relu(x, variant="cuda")
    value = np.frombuffer(bytes([0x3F] * 4), np.float32)[0]
    try:
        for start in (0, n - 1029):
            part = DeviceArray((1029,), np.float32, y.ptr + 4 * start, y).numpy()
            np.testing.assert_array_equal(part, np.full(1029, value, np.float32))
    finally:
        del x, y
        gpuopt.cuda.empty_cache()  # 17 GB back to the driver


# ----------------------------------------------------------------------------------------- pooling

POOL_CASES = [((1, 1), 1), ((5, 7), 1), ((5, 7), 2), ((5, 7), 3), ((3, 9, 8), 2), ((3, 9, 8), 4),
              ((2, 3, 13, 6), 3), ((1, 1, 28, 28), 2), ((10, 32, 24, 24), 2), ((2, 64, 8, 8), 2), ((1, 1, 1, 65), 1),
              ((3, 2, 33, 31), 4), ((700, 3, 5, 5), 2), ((2, 1, 64, 64), 7)]


@pytest.mark.parametrize("variant", POOL)
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape,size", POOL_CASES, ids=str)
def test_pooling(rng, variant, kind, shape, size):
    x = rng.standard_normal(shape).astype(np.float32)
    pool = nn.max_pool2d if kind == "max" else nn.avg_pool2d
    out = pool(x, size, variant=variant)
    ref = pool(x, size, variant="cpu")
    assert out.shape == ref.shape == (*shape[:-2], shape[-2] // size, shape[-1] // size)
    if kind == "max":
        np.testing.assert_array_equal(out, ref)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out, oracles.pool2d(x, size, kind), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", POOL)
def test_avg_pool_sums_in_the_references_order(rng, variant):
    """Same window order and float operations as the reference: equal bit for bit."""
    x = (rng.standard_normal((4, 3, 29, 30)) * 1e3).astype(np.float32)
    for size in (2, 3, 5):
        np.testing.assert_array_equal(nn.avg_pool2d(x, size, variant=variant), nn.avg_pool2d(x, size, variant="cpu"))


@pytest.mark.parametrize("variant", POOL)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling_special_values(rng, variant, kind):
    x = special_values(rng, (2, 3, 17, 19))
    x[0, 0, :4, :4] = -np.inf  # whole windows of -inf
    x[0, 1, :2, :2] = np.nan  # a window of NaN
    pool = nn.max_pool2d if kind == "max" else nn.avg_pool2d
    for size in (2, 3):
        out, ref = pool(x, size, variant=variant), pool(x, size, variant="cpu")
        np.testing.assert_array_equal(out, ref)  # NaN exactly where the reference has NaN
        if kind == "max":
            windows = x[..., : out.shape[-2] * size, : out.shape[-1] * size]
            windows = windows.reshape(*x.shape[:-2], out.shape[-2], size, out.shape[-1], size)
            np.testing.assert_array_equal(np.isnan(out), np.isnan(windows).any(axis=(-3, -1)))


@pytest.mark.parametrize("variant", POOL)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling_device_arrays_and_misaligned_views(rng, variant, kind):
    x = rng.standard_normal((2, 3, 11, 10)).astype(np.float32)
    pool = nn.max_pool2d if kind == "max" else nn.avg_pool2d
    ref = pool(x, 2, variant="cpu")
    for dx in (to_device(x), misaligned(x)):
        out = pool(dx, 2, variant=variant)
        assert isinstance(out, DeviceArray) and out.shape == ref.shape
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------------------- fully connected

FC_SHAPES = [(1, 1, 1), (1, 1024, 128), (3, 1, 5), (5, 7, 1), (7, 13, 10), (10, 1024, 128), (64, 128, 10),
             (33, 17, 65), (129, 300, 257), (10000, 128, 10), (2, 4099, 3)]


def fc_reference(x, w, bias, activation):
    y = x.astype(np.float64) @ w.astype(np.float64) + (0 if bias is None else bias.astype(np.float64))
    return oracles.apply_activation(y, activation or "none")


@pytest.mark.parametrize("variant", FC)
@pytest.mark.parametrize("n,i,o", FC_SHAPES, ids=str)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("activation", [None, "relu", "tanh"])
def test_fully_connected(rng, variant, n, i, o, with_bias, activation):
    x = rng.standard_normal((n, i)).astype(np.float32)
    w = (rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32) if with_bias else None
    out = nn.fully_connected(x, w, b, activation=activation, variant=variant)
    assert isinstance(out, np.ndarray) and out.shape == (n, o) and out.dtype == np.float32
    # A float32 sum of i products errs by about sqrt(i) ulps of |x| . |w| (~1 here), not of the output, which
    # ReLU and bias can leave small on a few outputs: 1e-5 up to 1024 products, the standards' 1e-4 past that
    # (n=2, i=4099, o=3, tiled, relu measured 1.4e-5 on the H200).
    tol = 1e-5 if i <= 1024 else 1e-4
    assert relative_error(out, fc_reference(x, w, b, activation)) < tol
    cpu = nn.fully_connected(x, w, b, activation=activation, variant="cpu")
    assert relative_error(out, cpu) < tol


@pytest.mark.parametrize("variant", FC)
@pytest.mark.parametrize("o", [8, 10])  # matmul: 16-byte rows of w and y (vectorised) or not
def test_fully_connected_device_arrays_and_misaligned_views(rng, variant, o):
    x = rng.standard_normal((37, 50)).astype(np.float32)
    w = rng.standard_normal((50, o)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    ref = fc_reference(x, w, b, "relu")
    for args in ((to_device(x), to_device(w), to_device(b)), (misaligned(x), misaligned(w), misaligned(b)),
                 (x, to_device(w), b)):
        out = nn.fully_connected(*args, activation="relu", variant=variant)
        assert isinstance(out, DeviceArray) and out.shape == (37, o)
        assert relative_error(out.numpy(), ref) < 1e-5


@pytest.mark.parametrize("variant", FC)
def test_fully_connected_special_values(rng, variant):
    x = rng.standard_normal((6, 9)).astype(np.float32)
    w = rng.standard_normal((9, 5)).astype(np.float32)
    x[2, 3] = np.nan
    out = nn.fully_connected(x, w, activation="relu", variant=variant)
    assert np.isnan(out[2]).all() and not np.isnan(np.delete(out, 2, axis=0)).any()


@pytest.mark.parametrize("variant", FC)
def test_fully_connected_errors(variant):
    f = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="activation must be one of"):
        nn.fully_connected(f, np.ones((3, 4), np.float32), activation="sigmoid", variant=variant)
    with pytest.raises(ValueError, match=r"bias must have shape \(4,\)"):
        nn.fully_connected(f, np.ones((3, 4), np.float32), np.ones(5, np.float32), variant=variant)
    with pytest.raises(ValueError, match=r"\(in_features, out_features\)"):
        nn.fully_connected(f, np.ones((4, 4), np.float32), variant=variant)
    with pytest.raises(ValueError, match="2-D"):
        nn.fully_connected(np.ones(3, np.float32), np.ones((3, 4), np.float32), variant=variant)
    with pytest.raises(ValueError, match="empty dimension"):
        nn.fully_connected(np.ones((0, 3), np.float32), np.ones((3, 4), np.float32), variant=variant)


# ----------------------------------------------------------------------------------------- argmax

ARGMAX_SHAPES = [(1, 1), (1, 10), (7, 1), (10000, 10), (5, 16), (5, 17), (9, 33), (9, 64), (9, 65), (3, 1000),
                 (4, 4096), (3, 4097), (2, 20000), (1001, 3)]


def check_argmax(out, x):
    assert out.dtype == np.int64 and out.shape == (x.shape[0],)
    np.testing.assert_array_equal(out, np.argmax(x, axis=1))
    np.testing.assert_array_equal(out, nn.argmax(x, variant="cpu"))


@pytest.mark.parametrize("variant", ARGMAX)
@pytest.mark.parametrize("shape", ARGMAX_SHAPES, ids=str)
def test_argmax(rng, variant, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    out = nn.argmax(x, variant=variant)
    assert isinstance(out, np.ndarray)
    check_argmax(out, x)


@pytest.mark.parametrize("variant", ARGMAX)
@pytest.mark.parametrize("shape", [(2000, 10), (50, 100), (4, 9000)], ids=str)
def test_argmax_ties_nan_and_inf(rng, variant, shape):
    x = rng.integers(-3, 3, shape).astype(np.float32)  # many ties: the first index wins
    rows = x.shape[0]
    x[rng.integers(0, rows, rows // 4), rng.integers(0, shape[1], rows // 4)] = np.nan  # first NaN wins
    x[rng.integers(0, rows, rows // 4), rng.integers(0, shape[1], rows // 4)] = np.inf
    x[0] = -np.inf  # all -inf: index 0
    x[1] = np.nan  # all NaN: index 0
    x[2, -1] = np.nan  # NaN last, after larger values
    x[3] = -0.0
    x[3, -1] = 0.0  # -0.0 == 0.0: a tie, index 0
    check_argmax(nn.argmax(x, variant=variant), x)


@pytest.mark.parametrize("variant", ARGMAX)
def test_argmax_device_arrays_and_misaligned_views(rng, variant):
    x = rng.standard_normal((1001, 10)).astype(np.float32)
    for dx in (to_device(x), misaligned(x)):
        out = nn.argmax(dx, variant=variant)
        assert isinstance(out, DeviceArray) and out.dtype == np.int64
        check_argmax(out.numpy(), x)


def test_argmax_streams_reuses_and_grows_its_buffer(rng):
    """Sizes up and down (the pinned buffer grows once, then is reused; an odd count and a single row leave the
    second half short or empty), then concurrent calls from several threads (serialised by the launcher)."""
    for rows in (1, 2, 3, 10000, 5, 20001, 7):
        x = rng.standard_normal((rows, 10)).astype(np.float32)
        check_argmax(nn.argmax(x, variant="streams"), x)
    xs = [rng.standard_normal((r, 10)).astype(np.float32) for r in (101, 3000, 1, 50000, 999, 7)]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda a: nn.argmax(a, variant="streams"), xs))
    for out, x in zip(outs, xs):
        np.testing.assert_array_equal(out, np.argmax(x, axis=1))


def test_argmax_streams_timing(rng):
    x = rng.standard_normal((10000, 10)).astype(np.float32)
    out, t = nn.argmax(x, variant="streams", timing=True)
    check_argmax(out, x)
    assert t.device == "gpu" and t.kernel_ms > 0 and t.d2h_ms == 0


# ----------------------------------------------------------------------------------------- softmax

SOFTMAX_SHAPES = [(1, 1), (1, 10), (10000, 10), (7, 1), (5, 17), (64, 64), (33, 65), (3, 1000), (4, 4096),
                  (7, 4097), (2, 20000)]


def check_softmax(out, x):
    assert out.dtype == np.float32 and out.shape == x.shape
    np.testing.assert_allclose(out, nn.softmax(x, variant="cpu"), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out, oracles.softmax(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("variant", SOFTMAX)
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
@pytest.mark.parametrize("scale", [1.0, 100.0])  # 100: exp would overflow without the max subtracted
def test_softmax(rng, variant, shape, scale):
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    out = nn.softmax(x, variant=variant)
    assert isinstance(out, np.ndarray) and np.isfinite(out).all()
    check_softmax(out, x)
    np.testing.assert_allclose(out.sum(axis=1, dtype=np.float64), 1.0, rtol=1e-5)


@pytest.mark.parametrize("variant", SOFTMAX)
@pytest.mark.parametrize("cols", [10, 100, 5000])
def test_softmax_special_values(rng, variant, cols):
    x = rng.standard_normal((6, cols)).astype(np.float32)
    x[0, cols // 2] = np.nan
    x[1, -1] = np.inf
    x[2] = -np.inf
    x[3, 0] = -np.inf  # a single -inf: exp gives 0, the row is fine
    out = nn.softmax(x, variant=variant)
    assert np.isnan(out[:3]).all() and np.isfinite(out[3:]).all() and out[3, 0] == 0
    np.testing.assert_array_equal(np.isnan(out), np.isnan(nn.softmax(x, variant="cpu")))
    np.testing.assert_allclose(out[3:], oracles.softmax(x[3:]), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("variant", SOFTMAX)
def test_softmax_device_arrays_and_misaligned_views(rng, variant):
    x = rng.standard_normal((513, 37)).astype(np.float32)
    for dx in (to_device(x), misaligned(x)):
        out = nn.softmax(dx, variant=variant)
        assert isinstance(out, DeviceArray)
        check_softmax(out.numpy(), x)


# ----------------------------------------------------------------------------------------- bad input, every op


@pytest.mark.parametrize("op,variant", [(op, v) for op, names in GPU_VARIANTS.items() for v in names])
def test_bad_input_is_rejected_clearly(op, variant):
    fn = getattr(nn, op)
    if op == "fully_connected":
        with pytest.raises(TypeError, match="floating-point"):
            fn(np.ones((2, 3), np.int32), np.ones((3, 4), np.float32), variant=variant)
        return
    with pytest.raises(TypeError, match="floating-point"):
        fn(np.ones((4, 4), np.int32), variant=variant)
    with pytest.raises(TypeError, match="device array of dtype float64"):
        fn(to_device(np.ones((4, 4))), variant=variant)
    if op in ("relu", "tanh"):
        with pytest.raises(ValueError, match="at least one dimension"):
            fn(np.float32(1.0), variant=variant)
    elif op in ("max_pool2d", "avg_pool2d"):
        with pytest.raises(ValueError, match=r"2-D \(H, W\)"):
            fn(np.ones((1, 1, 1, 4, 4), np.float32), variant=variant)
        with pytest.raises(ValueError, match="larger than the input"):
            fn(np.ones((3, 4), np.float32), 4, variant=variant)
    else:
        with pytest.raises(ValueError, match="2-D"):
            fn(np.ones((2, 3, 4), np.float32), variant=variant)
        with pytest.raises(ValueError, match="empty dimension"):
            fn(np.ones((0, 4), np.float32), variant=variant)
