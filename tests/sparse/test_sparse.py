import numpy as np
import pytest

import gpuopt
from gpuopt import datasets
from gpuopt.sparse import COOFilters, FASTFilters
import oracles


def random_filters(rng, m, c, r=3, s=3, density=0.2, low=-300, high=300):
    w = rng.integers(low, high + 1, (m, c, r, s)).astype(np.int16)
    w[rng.uniform(size=w.shape) > density] = 0
    return w


# ---------------------------------------------------------------- formats
def test_dense_coo_fast_round_trip(rng):
    w = random_filters(rng, 7, 5, density=0.3, low=-32768, high=32767)
    coo = COOFilters.from_dense(w)
    np.testing.assert_array_equal(coo.to_dense(), w)
    fast = coo.to_fast()
    np.testing.assert_array_equal(fast.to_dense(), w)
    for name in ("data", "row", "col"):
        np.testing.assert_array_equal(getattr(fast.to_coo(), name), getattr(coo, name))
    assert fast.codes.dtype == np.int32 and coo.data.dtype == np.int16
    assert coo.offsets[-1] == coo.data.size == int((w != 0).sum())


def test_coo_layout_is_per_slice_row_major():
    w = np.zeros((1, 2, 3, 3), np.int16)
    w[0, 0, 2, 1] = 5
    w[0, 0, 0, 2] = -7
    w[0, 1, 1, 1] = 9
    coo = COOFilters.from_dense(w)
    assert coo.nnz.tolist() == [[2, 1]]
    assert coo.data.tolist() == [-7, 5, 9]
    assert coo.row.tolist() == [0, 2, 1] and coo.col.tolist() == [2, 1, 1]
    assert coo.offsets.tolist() == [0, 2, 3]


def test_fast_encoding_is_the_notes_formula():
    codes = FASTFilters.encode([5, -3, 655, 32767], [1, 2, 0, 2], [2, 0, 1, 2])
    assert codes.tolist() == [512, -280, 65501, 3276722]
    value, row, col = FASTFilters.decode(codes)
    assert value.tolist() == [5, -3, 655, 32767] and row.tolist() == [1, 2, 0, 2] and col.tolist() == [2, 0, 1, 2]


def test_lab_filters_one_nonzero_per_slice():
    w = datasets.make_nctu_filters(16, 12, seed=3)
    coo = COOFilters.from_dense(w)
    assert coo.uniform_nnz == 1
    data, row, col = coo.padded()
    assert data.shape == (16, 12, 1)
    np.testing.assert_array_equal(data[..., 0], w.reshape(16, 12, 9)[np.arange(16)[:, None], np.arange(12), row[..., 0] * 3 + col[..., 0]])


def test_padded_layout_handles_ragged_slices(rng):
    w = random_filters(rng, 3, 4, density=0.5)
    w[0, 0] = 0  # an empty slice
    coo = COOFilters.from_dense(w)
    data, row, col = coo.padded()
    rebuilt = np.zeros_like(w)
    for m in range(3):
        for c in range(4):
            for j in range(coo.nnz[m, c]):
                rebuilt[m, c, row[m, c, j], col[m, c, j]] = data[m, c, j]
    np.testing.assert_array_equal(rebuilt, w)


def test_fast_rejects_what_cannot_round_trip():
    with pytest.raises(ValueError, match="one decimal digit"):
        FASTFilters.from_dense(np.ones((1, 1, 11, 1), np.int16))
    with pytest.raises(ValueError, match="int16"):
        FASTFilters((1, 1, 3, 3), np.array([[1]]), np.array([3276800 + 100 * 100]))
    with pytest.raises(ValueError, match="row indices"):
        FASTFilters((1, 1, 3, 3), np.array([[1]]), np.array([5 * 100 + 7 * 10 + 1]))  # row 7 in a 3x3 filter


def test_coo_rejects_bad_structures():
    with pytest.raises(ValueError, match="nnz"):
        COOFilters((1, 1, 3, 3), np.array([[10]]), [1] * 10, [0] * 10, [0] * 10)
    with pytest.raises(ValueError, match="twice"):
        COOFilters((1, 1, 3, 3), np.array([[2]]), [1, 2], [1, 1], [2, 2])
    with pytest.raises(ValueError, match="col indices"):
        COOFilters((1, 1, 3, 3), np.array([[1]]), [1], [0], [3])
    with pytest.raises(ValueError, match="entries"):
        COOFilters((1, 2, 3, 3), np.array([[1, 1]]), [1], [0], [0])
    with pytest.raises(ValueError, match="int16"):
        COOFilters.from_dense(np.full((1, 1, 3, 3), 40000))
    # Repeats out of order, across the middle of a list, and in a later slice (the check sorts only when the
    # entries are not strictly increasing); entries out of order but distinct are accepted.
    with pytest.raises(ValueError, match="twice"):
        COOFilters((1, 2, 3, 3), np.array([[2, 3]]), [1, 2, 3, 4, 5], [0, 2, 1, 0, 1], [0, 2, 1, 0, 1])
    coo = COOFilters((1, 1, 3, 3), np.array([[3]]), [7, 8, 9], [2, 0, 1], [2, 0, 1])
    np.testing.assert_array_equal(coo.to_dense()[0, 0], [[8, 0, 0], [0, 9, 0], [0, 0, 7]])


@pytest.mark.parametrize("shape,density", [((3, 5, 3, 3), 0.3), ((2, 4, 7, 5), 0.05), ((1, 1, 1, 1), 1.0),
                                           ((4, 3, 5, 5), 0.0), ((6, 7, 3, 3), 1.0)], ids=str)
def test_from_dense_matches_numpy(rng, shape, density):
    """The C++ encoder against NumPy's mask-and-nonzero: the same lists, slice by slice, taps row-major."""
    w = rng.integers(-32768, 32768, shape).astype(np.int16)
    w[rng.random(shape) >= density] = 0
    m, c, r, s = shape
    flat = w.reshape(m * c, r * s)
    mask = flat != 0
    pos = np.flatnonzero(mask) % (r * s)
    coo = COOFilters.from_dense(w)
    np.testing.assert_array_equal(coo.nnz, mask.sum(axis=1).reshape(m, c))
    for got, want in ((coo.data, flat[mask]), (coo.row, pos // s), (coo.col, pos % s)):
        assert got.dtype == np.int16
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(coo.to_dense(), w)
    assert coo.offsets[-1] == mask.sum()
    if r <= 10 and s <= 10:
        fast = FASTFilters.from_dense(w)
        np.testing.assert_array_equal(fast.to_dense(), w)
        np.testing.assert_array_equal(fast.codes, FASTFilters.encode(flat[mask], pos // s, pos % s))
        # what from_coo skips, the checking constructor accepts
        np.testing.assert_array_equal(FASTFilters(w.shape, fast.nnz, fast.codes).to_dense(), w)


# ---------------------------------------------------------------- the layer
@pytest.mark.parametrize("c,h,w,m", [(1, 2, 2, 1), (3, 5, 7, 2), (8, 32, 32, 4), (5, 13, 11, 3), (17, 6, 9, 5)], ids=str)
@pytest.mark.parametrize("form", ["dense", "coo", "fast"])
def test_cpu_matches_int64_numpy(rng, c, h, w, m, form):
    x = rng.integers(0, 1000, (c, h, w)).astype(np.int16)
    x[rng.uniform(size=x.shape) < 0.8] = 0
    filt = random_filters(rng, m, c, density=0.25)
    arg = {"dense": filt, "coo": COOFilters.from_dense(filt), "fast": FASTFilters.from_dense(filt)}[form]
    y = gpuopt.sparse_conv2d(x, arg, variant="cpu")
    assert y.dtype == np.int32 and y.shape == (m, h // 2, w // 2)
    np.testing.assert_array_equal(y, oracles.sparse_conv(x, filt))


def test_cpu_5x5_filters(rng):
    x = rng.integers(-50, 50, (4, 9, 10)).astype(np.int16)
    filt = random_filters(rng, 3, 4, r=5, s=5, density=0.5)
    np.testing.assert_array_equal(gpuopt.sparse_conv2d(x, filt, variant="cpu"), oracles.sparse_conv(x, filt))


def test_int32_overflow_is_an_error_not_a_wrap():
    x = np.full((64, 4, 4), 32767, np.int16)
    w = np.full((1, 64, 3, 3), 32767, np.int16)
    with pytest.raises(ValueError, match="int32"):
        gpuopt.sparse_conv2d(x, w, variant="cpu")


def test_integer_inputs_of_other_dtypes_are_checked():
    x = np.arange(2 * 4 * 4).reshape(2, 4, 4)  # int64, fits int16
    w = np.ones((1, 2, 3, 3), dtype=np.int32)
    np.testing.assert_array_equal(gpuopt.sparse_conv2d(x, w, variant="cpu"), oracles.sparse_conv(x, w))
    with pytest.raises(ValueError, match="int16"):
        gpuopt.sparse_conv2d(x * 10000, w, variant="cpu")
    with pytest.raises(TypeError, match="integer"):
        gpuopt.sparse_conv2d(x.astype(np.float32), w, variant="cpu")


@pytest.mark.data
def test_real_nctu_layer_slice(data_root):
    x = datasets.read_nctu_neurons_txt(data_root / "nctu_sparse_conv" / "inNeu.txt")
    assert x.shape == (512, 32, 32)
    w = datasets.make_nctu_filters(8, 512, seed=0)  # the lab's filters are not public: generated, one non-zero per slice
    y = gpuopt.sparse_conv2d(x, FASTFilters.from_dense(w), variant="cpu")
    np.testing.assert_array_equal(y, oracles.sparse_conv(x, w))
    assert y.shape == (8, 16, 16)


def test_kernel_arrays_are_built_once_and_shared(rng):
    w = rng.integers(-5, 6, (3, 4, 3, 3)).astype(np.int16)
    coo = COOFilters.from_dense(w)
    arrays, width = coo.kernel_arrays("coo")
    assert coo.kernel_arrays("coo")[0] is arrays and width == int(coo.nnz.max())
    for got, want in zip(arrays, coo.padded()):
        np.testing.assert_array_equal(got, want)
    codes, _ = coo.kernel_arrays("fast")
    np.testing.assert_array_equal(codes[0], FASTFilters.encode(*coo.padded()))
    fast = coo.to_fast()
    assert fast.kernel_arrays("fast")[0] is codes  # the FAST form shares its COO form's arrays
    assert coo.on_device == ()
    with pytest.raises(ValueError, match="fmt must be one of"):
        coo.kernel_arrays("dense")


def test_to_device_without_a_gpu_says_so(rng):
    if gpuopt.cuda_available():
        pytest.skip("a GPU is present")
    coo = COOFilters.from_dense(rng.integers(-5, 6, (2, 2, 3, 3)).astype(np.int16))
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        coo.to_device()
    assert coo.on_device == ()


def test_auto_choice_takes_the_planes_kernel_where_it_applies():
    # The default on a GPU (gpuopt/sparse/auto.py): fast_imma where it applies and the taps fit int8, else
    # fast_sparse_input where its planes kernel applies (the kernels' limits, read from the build), fast_fused
    # elsewhere (where fast_sparse_input would run its slower atomic kernel).
    from gpuopt._ext import kernel_limits
    from gpuopt.registry import _PREFERRED, variants
    from gpuopt.sparse.auto import auto_choice

    limits = kernel_limits()
    wmax, hmax = limits["sparse_conv2d_planes_max_width"], limits["sparse_conv2d_planes_max_height"]
    assert (wmax, hmax, limits["sparse_conv2d_planes_max_taps"]) == (32, 511, 3)
    assert limits["sparse_conv2d_imma_max_channels"] == 4096
    assert auto_choice(512, 32, 32, 512, 3, 3) == "fast_imma"  # the lab's layer
    assert auto_choice(512, 32, 32, 512, 3, 3, taps_fit_int8=False) == "fast_sparse_input"
    for c, h, w, m, r, s in [(1, 2, 2, 1, 1, 1), (3, 511, 32, 70, 3, 1), (2, 511, 7, 2, 1, 3), (4096, 8, 8, 2, 3, 3)]:
        assert auto_choice(c, h, w, m, r, s) == "fast_imma"
        assert auto_choice(c, h, w, m, r, s, taps_fit_int8=False) == "fast_sparse_input"
    assert auto_choice(4097, 8, 8, 2, 3, 3) == "fast_sparse_input"  # past fast_imma's exact int32 byte sums
    for c, h, w, m, r, s in [(512, 32, 33, 512, 3, 3), (4, 64, 64, 8, 3, 3), (8, 32, 32, 8, 5, 5), (8, 16, 16, 8, 3, 5),
                             (8, 16, 16, 8, 7, 1), (3, 512, 32, 70, 3, 3), (2, 4000, 7, 2, 1, 1)]:
        assert auto_choice(c, h, w, m, r, s) == "fast_fused"


def test_taps_fit_int8():
    w = np.zeros((2, 3, 3, 3), np.int16)
    w[1, 2, 0, 1] = 127
    coo = COOFilters.from_dense(w)
    assert coo.taps_fit_int8 and coo.to_fast().taps_fit_int8
    w[0, 0, 2, 2] = -129
    assert not COOFilters.from_dense(w).taps_fit_int8
    w[0, 0, 2, 2] = -128
    assert FASTFilters.from_dense(w).taps_fit_int8
    assert COOFilters.from_dense(np.zeros((1, 1, 1, 1), np.int16)).taps_fit_int8


def test_auto_is_preferred():
    from gpuopt.registry import _PREFERRED, variants

    assert _PREFERRED["sparse_conv2d"] == ["auto"]  # variant=None: auto on a GPU, cpu without one
    assert not variants("sparse_conv2d")["auto"].params


def test_the_host_bound_that_spares_device_results_a_flag_read():
    """bound_proven: any int16 x (32768, or SparseNeurons' absmax) times the largest per-map sum of |w|, known
    for COO and FAST filters; dense filters are not summed per call (not proven)."""
    from gpuopt.sparse.api import SparseConvProblem
    from gpuopt.sparse.nctu import bound_proven

    x = np.zeros((8, 6, 6), np.int16)
    fits = np.zeros((2, 8, 3, 3), np.int16)
    fits[1, :, 1, :] = 2730  # 8 * 3 * 2730 = 65520: 32768 * 65520 < 2^31
    over = fits.copy()
    over[1, 0, 0, 0] = 16  # 65536: 32768 * 65536 = 2^31
    for w, proven in ((fits, True), (over, False)):
        for filters in (COOFilters.from_dense(w), FASTFilters.from_dense(w)):
            assert bound_proven(SparseConvProblem(x, filters, w.shape)) is proven
        assert not bound_proven(SparseConvProblem(x, w, w.shape))
