"""sparse_conv2d GPU variants (dense / coo / fast) against the CPU reference, exactly.

Outputs and scratch are poisoned by conftest (0xFF bytes = -1 as int32), so an output
the kernels forget to write cannot equal the ReLU'd (>= 0) reference.
"""

import numpy as np
import pytest

import gpuopt
from conftest import SEED
from gpuopt import datasets
from gpuopt.sparse import COOFilters, FASTFilters

from .launch_args import args, shape

pytestmark = pytest.mark.gpu

GPU_VARIANTS = ["dense", "coo", "fast"]
FORMS = ["dense", "coo", "fast"]
I16 = np.iinfo(np.int16)


def as_form(w, form):
    return {"dense": lambda: w, "coo": lambda: COOFilters.from_dense(w), "fast": lambda: FASTFilters.from_dense(w)}[form]()


def sparse_inputs(rng, c, h, w, low=-1000, high=1000, zeros=0.8):
    x = rng.integers(low, high + 1, (c, h, w)).astype(np.int16)
    x[rng.uniform(size=x.shape) < zeros] = 0
    return x


def ragged_filters(rng, m, c, r=3, s=3, density=0.3, low=-300, high=300):
    """Random sparse filters with a different number of non-zeros per slice: some slices
    empty, one full (so the padded width is R*S), negative values included."""
    w = rng.integers(low, high + 1, (m, c, r, s)).astype(np.int16)
    w[rng.uniform(size=w.shape) > density] = 0
    w[rng.uniform(size=(m, c)) < 0.2] = 0  # empty slices
    w[0, 0] = 0
    full = rng.integers(low, high + 1, (r, s))
    full[full == 0] = 1
    w[m - 1, c - 1] = full
    return w


def check_all(x, w):
    """Every GPU variant on every filter form equals the CPU reference exactly."""
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    m, h, wd = w.shape[0], x.shape[1], x.shape[2]
    assert ref.shape == (m, h // 2, wd // 2)
    for variant in GPU_VARIANTS:
        for form in FORMS:
            y = gpuopt.sparse_conv2d(x, as_form(w, form), variant=variant)
            assert isinstance(y, np.ndarray) and y.dtype == np.int32 and y.shape == ref.shape, (variant, form)
            np.testing.assert_array_equal(y, ref, err_msg=f"variant={variant} filters={form}")


# ---------------------------------------------------------------- the real layer
@pytest.fixture(scope="module")
def real_layer(data_root):
    x = datasets.read_nctu_neurons_txt(data_root / "nctu_sparse_conv" / "inNeu.txt")
    # The lab's filters (filt.txt) are not public: generated ones of the same shape and
    # sparsity, one non-zero weight per 3x3 slice.
    w = datasets.make_nctu_filters(512, 512, seed=SEED)
    return x, w, gpuopt.sparse_conv2d(x, w, variant="cpu")


@pytest.mark.data
@pytest.mark.parametrize("variant", GPU_VARIANTS)
@pytest.mark.parametrize("form", FORMS)
def test_real_nctu_layer(real_layer, variant, form):
    x, w, ref = real_layer
    assert x.shape == (512, 32, 32) and ref.shape == (512, 16, 16)
    y = gpuopt.sparse_conv2d(x, as_form(w, form), variant=variant)
    np.testing.assert_array_equal(y, ref)
    assert (y > 0).any()  # the check is not vacuous


# ---------------------------------------------------------------- shapes and values
# (C, H, W, M, R, S): C = 1, odd H and/or W (pool drops the last row/column), H = W = 2,
# primes, filters larger than the maps, 1x1, 5x5, 9x9 and non-square filters.
SHAPES = [(1, 2, 2, 1, 3, 3), (1, 7, 5, 3, 3, 3), (3, 2, 2, 2, 3, 3), (2, 2, 3, 2, 3, 3), (5, 13, 11, 3, 3, 3),
          (17, 31, 37, 5, 3, 3), (2, 9, 10, 3, 5, 5), (3, 3, 5, 4, 5, 5), (4, 8, 8, 2, 1, 1), (3, 6, 7, 2, 7, 9),
          (2, 11, 12, 2, 9, 9), (64, 32, 32, 16, 3, 3), (7, 33, 65, 11, 3, 5)]


@pytest.mark.parametrize("c,h,w,m,r,s", SHAPES, ids=str)
def test_matches_cpu_reference(rng, c, h, w, m, r, s):
    check_all(sparse_inputs(rng, c, h, w), ragged_filters(rng, m, c, r, s))


def test_dense_inputs_and_filters(rng):
    # No zeros to skip: the sparse kernels must not depend on sparsity to be right.
    x = rng.integers(-100, 101, (6, 10, 9)).astype(np.int16)
    w = rng.integers(-100, 101, (4, 6, 3, 3)).astype(np.int16)
    check_all(x, w)


def test_full_int16_range_where_sums_fit(rng):
    # x over the whole int16 range with small weights, and the other way round.
    x = sparse_inputs(rng, 4, 9, 8, low=I16.min, high=I16.max, zeros=0.3)
    check_all(x, ragged_filters(rng, 3, 4, low=-7, high=7, density=0.5))
    x = sparse_inputs(rng, 4, 9, 8, low=-7, high=7, zeros=0.3)
    check_all(x, ragged_filters(rng, 3, 4, low=I16.min, high=I16.max, density=0.5))
    # Both at the extremes: a single product per output (one tap per filter, one map).
    x = sparse_inputs(rng, 3, 6, 7, low=I16.min, high=I16.max, zeros=0.2)
    x[0, 0, 0], x[0, 1, 1] = I16.min, I16.max
    w = np.zeros((4, 3, 3, 3), np.int16)
    for m, v in enumerate([I16.min, I16.max, -1, I16.min]):
        w[m, m % 3, rng.integers(0, 3), rng.integers(0, 3)] = v
    check_all(x, w)


def test_int32_boundary_fits():
    # 2 * 32767^2 = 2147352578 <= INT32_MAX and 2 * (-32768 * 32767) >= INT32_MIN: these fit.
    x = np.full((1, 4, 5), I16.max, np.int16)
    w = np.zeros((2, 1, 3, 3), np.int16)
    w[0, 0, 1, 1] = w[0, 0, 1, 2] = I16.max
    w[1, 0, 1, 1] = w[1, 0, 1, 2] = I16.min
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    assert ref.max() == 2 * 32767 * 32767
    check_all(x, w)


# ---------------------------------------------------------------- int32 overflow
def overflow_cases():
    # The lab-scale case: every sum far beyond int32.
    yield "all_max", np.full((64, 4, 4), I16.max, np.int16), np.full((1, 64, 3, 3), I16.max, np.int16)
    # Just above INT32_MAX: (-32768)^2 * 2 = 2^31.
    w = np.zeros((1, 1, 3, 3), np.int16)
    w[0, 0, 1, 1] = w[0, 0, 1, 2] = I16.min
    yield "max_plus_one", np.full((1, 4, 4), I16.min, np.int16), w
    # Below INT32_MIN: the ReLU would hide it, the reference still rejects it.
    w = np.zeros((1, 3, 3, 3), np.int16)
    w[0, :, 1, 1] = I16.min
    yield "negative", np.full((3, 4, 4), I16.max, np.int16), w
    # Only in the trailing odd row that the pool drops (H = 3): still an error.
    x = np.zeros((3, 3, 2), np.int16)
    x[:, 2, :] = I16.max
    w = np.zeros((2, 3, 3, 3), np.int16)
    w[1, :, 1, 1] = I16.max
    yield "dropped_row", x, w


@pytest.mark.parametrize("case", list(overflow_cases()), ids=lambda c: c[0])
def test_int32_overflow_raises_like_cpu(case):
    _, x, w = case
    with pytest.raises(ValueError, match="does not fit in int32"):
        gpuopt.sparse_conv2d(x, w, variant="cpu")
    for variant in GPU_VARIANTS:
        for form in FORMS:
            with pytest.raises(ValueError, match="does not fit in int32"):
                gpuopt.sparse_conv2d(x, as_form(w, form), variant=variant)
    # The flag is per call: the next call on good data succeeds.
    small = np.ones_like(x)
    y = gpuopt.sparse_conv2d(small, np.ones_like(w), variant="fast")
    np.testing.assert_array_equal(y, gpuopt.sparse_conv2d(small, np.ones_like(w), variant="cpu"))


# ---------------------------------------------------------------- placement and timing
@pytest.mark.parametrize("variant", GPU_VARIANTS)
def test_device_array_in_device_array_out(rng, variant):
    x = sparse_inputs(rng, 5, 12, 9)
    w = ragged_filters(rng, 4, 5)
    ref = gpuopt.sparse_conv2d(x, w, variant=variant)
    dx = gpuopt.to_device(x)
    for filters in (w, gpuopt.to_device(w), COOFilters.from_dense(w), FASTFilters.from_dense(w)):
        dy = gpuopt.sparse_conv2d(dx, filters, variant=variant)
        assert isinstance(dy, gpuopt.DeviceArray) and dy.shape == (4, 6, 4) and dy.dtype == np.int32
        np.testing.assert_array_equal(dy.numpy(), ref)


@pytest.mark.parametrize("variant", GPU_VARIANTS)
def test_timing_record(rng, variant):
    x = sparse_inputs(rng, 64, 32, 32)
    w = datasets.make_nctu_filters(64, 64, seed=1)
    y, t = gpuopt.sparse_conv2d(x, w, variant=variant, timing=True)
    np.testing.assert_array_equal(y, gpuopt.sparse_conv2d(x, w, variant="cpu"))
    assert t.device == "gpu" and t.h2d_ms > 0 and t.kernel_ms > 0 and t.d2h_ms > 0
    assert t.total_ms == pytest.approx(t.h2d_ms + t.kernel_ms + t.d2h_ms)


def test_fast_transfers_fewer_filter_bytes_than_coo(rng):
    # One non-zero per slice (the lab's filters): COO moves 3 int16 arrays, FAST 1 int32.
    m, c = 32, 48
    x = sparse_inputs(rng, c, 16, 16)
    w = datasets.make_nctu_filters(m, c, seed=2)
    details = {}
    for variant in GPU_VARIANTS:
        _, t = gpuopt.sparse_conv2d(x, COOFilters.from_dense(w), variant=variant, timing=True)
        details[variant] = t.details
    assert details["dense"]["filter_bytes"] == m * c * 9 * 2 and details["dense"]["filter_arrays"] == 1
    assert details["coo"]["filter_bytes"] == 3 * m * c * 2 and details["coo"]["filter_arrays"] == 3
    assert details["fast"]["filter_bytes"] == m * c * 4 and details["fast"]["filter_arrays"] == 1
    assert details["fast"]["filter_bytes"] < details["coo"]["filter_bytes"] < details["dense"]["filter_bytes"]


@pytest.mark.parametrize("variant", ["coo", "fast"])
@pytest.mark.parametrize("form", ["coo", "fast"])
def test_device_resident_filters_are_sent_once(rng, variant, form):
    """Filters moved to the device once (to_device) give the same result and send no filter bytes per call."""
    x = sparse_inputs(rng, 6, 10, 12)
    w = ragged_filters(rng, 5, 6)
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    filters = (COOFilters if form == "coo" else FASTFilters).from_dense(w)
    _, t = gpuopt.sparse_conv2d(x, filters, variant=variant, timing=True)
    assert t.details["filter_bytes_sent"] == t.details["filter_bytes"] > 0
    assert filters.to_device() is filters and filters.on_device == ("coo", "fast")
    for _ in range(2):
        y, t = gpuopt.sparse_conv2d(x, filters, variant=variant, timing=True)
        np.testing.assert_array_equal(y, ref)
        assert t.details["filter_bytes_sent"] == 0 and t.details["filter_bytes"] > 0
    dy = gpuopt.sparse_conv2d(gpuopt.to_device(x), filters, variant=variant)
    np.testing.assert_array_equal(dy.numpy(), ref)


# ---------------------------------------------------------------- bad parameters
def test_filters_larger_than_9_rejected():
    x = np.ones((1, 4, 4), np.int16)
    w = np.ones((1, 1, 11, 11), np.int16)
    gpuopt.sparse_conv2d(x, w, variant="cpu")  # the CPU reference takes any odd size
    for variant in GPU_VARIANTS:
        with pytest.raises(ValueError, match="up to 9x9"):
            gpuopt.sparse_conv2d(x, w, variant=variant)


def test_binding_rejects_bad_shapes_before_launch():
    from gpuopt._ext import cuda_module

    cuda = cuda_module()
    # Null pointers are never dereferenced: the shape checks come first.
    with pytest.raises(ValueError, match="H and W"):
        cuda.sparse_conv2d_dense(args(cuda, 0, [0], 0, 0, 0, 1, 1, 4, 1, 3, 3))
    with pytest.raises(ValueError, match="odd"):
        cuda.sparse_conv2d_dense(args(cuda, 0, [0], 0, 0, 0, 1, 4, 4, 1, 2, 3))
    with pytest.raises(ValueError, match="width"):
        cuda.sparse_conv2d_coo(args(cuda, 0, [0, 0, 0], 10, 0, 0, 1, 4, 4, 1, 3, 3))
    with pytest.raises(ValueError, match="width"):
        cuda.sparse_conv2d_fast(args(cuda, 0, [0], 0, 0, 0, 1, 4, 4, 1, 3, 3))
    with pytest.raises(ValueError, match="null"):
        cuda.sparse_conv2d_fast(args(cuda, 0, [0], 1, 0, 0, 1, 4, 4, 1, 3, 3))
    # The same shape checks, host only (what gpuopt runs before copying anything).
    for variant in GPU_VARIANTS:
        check = getattr(cuda.check, f"sparse_conv2d_{variant}")
        with pytest.raises(ValueError, match="H and W"):
            check(shape(cuda, 1, 1, 4, 1, 3, 3))
        with pytest.raises(ValueError, match="odd"):
            check(shape(cuda, 1, 4, 4, 1, 2, 3))
        check(shape(cuda, 1, 4, 4, 1, 3, 3))
