"""sparse_conv2d's fast_imma (int8 tensor cores: the input split into two bytes, the taps int8, exact s32 sums
combined in int64) against the CPU reference, exactly.

Outputs are poisoned by conftest (0xFF bytes = -1 as int32): a pooled output the kernel forgets to write cannot
equal the ReLU'd (>= 0) reference. Taps outside int8 take the exact int64 path (per 64-map tile).
"""

import numpy as np
import pytest

import gpuopt
from conftest import SEED
from gpuopt import datasets
from gpuopt.sparse import COOFilters, FASTFilters

from .test_gpu_sparse import I16, overflow_cases, ragged_filters, sparse_inputs
from .launch_args import args, shape

pytestmark = pytest.mark.gpu


def int8_filters(rng, m, c, r=3, s=3, density=0.3):
    return ragged_filters(rng, m, c, r, s, density=density, low=-128, high=127)


def check(x, w):
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    for filters in (w, FASTFilters.from_dense(w)):
        y = gpuopt.sparse_conv2d(x, filters, variant="fast_imma")
        assert y.dtype == np.int32 and y.shape == ref.shape
        np.testing.assert_array_equal(y, ref)
    return ref


@pytest.mark.data
def test_real_nctu_layer_device_resident(data_root):
    x = datasets.read_nctu_neurons_txt(data_root / "nctu_sparse_conv" / "inNeu.txt")
    w = FASTFilters.from_dense(datasets.make_nctu_filters(512, 512, seed=SEED)).to_device()
    assert w.taps_fit_int8
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    for variant in ("fast_imma", "auto", None):
        y = gpuopt.sparse_conv2d(gpuopt.to_device(x), w, variant=variant).numpy()
        np.testing.assert_array_equal(y, ref)
    assert (ref > 0).any()


# (C, H, W, M, R, S): C not a multiple of the 64-channel stage (1, 63, 65, 130) and several stages; M not a multiple
# of the 64 maps per block (1, 63, 65, 70); H odd (the dropped row) and H % 8 != 0; W = 2..33 below the 32 columns a
# block computes, W = 31 and 32 (W = 33 is rejected: test_rejects_shapes); 1x1, 1x3, 3x1 filters in the 3x3 frame;
# H = 511 (256 row tiles).
SHAPES = [(1, 2, 2, 1, 3, 3), (1, 3, 9, 2, 3, 3), (3, 3, 2, 5, 3, 3), (9, 7, 5, 3, 3, 3), (17, 31, 31, 5, 3, 3),
          (8, 32, 32, 8, 3, 3), (63, 20, 32, 63, 3, 3), (65, 33, 31, 65, 3, 3), (130, 32, 32, 70, 3, 3),
          (4, 8, 8, 2, 1, 1), (5, 17, 32, 33, 3, 1), (4, 9, 31, 3, 1, 3), (2, 511, 4, 2, 3, 3), (3, 12, 7, 129, 1, 1),
          (300, 16, 32, 40, 3, 3), (128, 6, 17, 64, 3, 3)]


@pytest.mark.parametrize("c,h,w,m,r,s", SHAPES, ids=str)
def test_matches_cpu_reference(rng, c, h, w, m, r, s):
    check(sparse_inputs(rng, c, h, w), int8_filters(rng, m, c, r, s))


@pytest.mark.parametrize("zeros", [1.0, 0.95, 0.8, 0.5, 0.0])
def test_input_densities(rng, zeros):
    check(sparse_inputs(rng, 70, 20, 32, zeros=zeros), int8_filters(rng, 65, 70))


@pytest.mark.parametrize("nnz", [0, 1, 3, 9])
def test_taps_per_slice(rng, nnz):
    w = np.zeros((66, 40, 3, 3), np.int16)
    for m in range(66):
        for c in range(40):
            w[m, c].flat[rng.permutation(9)[:nnz]] = rng.integers(-128, 128, nnz)
    check(sparse_inputs(rng, 40, 14, 30), w)


def test_single_nonzero():
    x = np.zeros((70, 9, 32), np.int16)
    x[66, 8, 31] = -7  # the last channel chunk, the last (odd) row, the last column
    w = np.zeros((65, 70, 3, 3), np.int16)
    w[64, 66, 0, 0] = -3
    w[0, 66, 2, 2] = 5
    ref = check(x, w)
    assert ref.max() == 0  # map 64 would write (9, 32), outside; map 0 (7, 30) = 5 * -7, ReLU'd
    x[66, 3, 20] = -7
    ref = check(x, w)
    assert ref[64, 2, 10] == 21 and ref[0].max() == 0  # map 64: y(4, 21) = -3 * -7 (tap (0, 0) reads (3, 20))


def test_int16_and_int8_limits(rng):
    # The input's bytes at their limits (-32768: high byte -128, low 0; 32767: 127, 255), taps at -128 and 127.
    x = sparse_inputs(rng, 9, 9, 10, low=I16.min, high=I16.max, zeros=0.3)
    x[0, 0, 0], x[1, 1, 1], x[2, 2, 2], x[3, 3, 3] = I16.min, I16.max, -1, -256
    w = int8_filters(rng, 5, 9, density=0.5)
    w[0, :, 1, 1], w[1, :, 0, 0], w[2, :, 2, 2] = -128, 127, -128
    check(x, w)
    # The largest sums that fit: 16 channels x 9 taps of 32767 * -128 = -603,963,392 x ... within int32
    x = np.full((16, 6, 6), I16.min, np.int16)
    w = np.full((2, 16, 3, 3), -128, np.int16)
    w[1] = 127
    assert check(x, w).max() == 16 * 9 * 32768 * 128  # the centre windows, all 9 taps in the image


def test_taps_outside_int8_take_the_exact_path(rng):
    # One map tile with a tap of 128 (int8 has 127) computes exact int64 windows; the other tile the tensor cores.
    x = sparse_inputs(rng, 20, 11, 13, low=I16.min, high=I16.max)
    w = int8_filters(rng, 70, 20)
    w[3, 5, 1, 1] = 128
    assert not FASTFilters.from_dense(w).taps_fit_int8
    check(x, w)
    check(x, ragged_filters(rng, 4, 20))  # -300..300
    # ... and where max|x| * sum|w| exceeds int32 but every sum fits
    x = np.zeros((3, 6, 7), np.int16)
    x[1, 2, 3], x[0, 4, 4] = I16.max, I16.min
    w = np.zeros((2, 3, 3, 3), np.int16)
    w[0, :, 1, 1], w[1, :, 0, 2] = I16.max, I16.min
    assert check(x, w).max() == 2**30


def int8_overflow_cases():
    # Taps in int8, sums past int32: 60 channels x 9 taps x 32767 x 127 = 2.25e9; negative; only in the dropped row.
    yield "int8_positive", np.full((60, 4, 4), I16.max, np.int16), np.full((1, 60, 3, 3), 127, np.int16)
    yield "int8_negative", np.full((60, 4, 4), I16.min, np.int16), np.full((1, 60, 3, 3), 127, np.int16)
    x = np.zeros((180, 5, 4), np.int16)  # 180 x 3 taps x 32767 x 127 = 2.25e9, only in row 4 (H = 5)
    x[:, 4, :] = I16.max
    w = np.zeros((2, 180, 3, 3), np.int16)
    w[1, :, 1, :] = 127
    yield "int8_dropped_row", x, w
    x = np.zeros((180, 4, 5), np.int16)  # the same down column 4 (W = 5)
    x[:, :, 4] = I16.min
    w = np.zeros((2, 180, 3, 3), np.int16)
    w[1, :, :, 1] = -127
    yield "int8_dropped_column", x, w


@pytest.mark.parametrize("case", list(overflow_cases()) + list(int8_overflow_cases()), ids=lambda c: c[0])
def test_int32_overflow_raises(case):
    _, x, w = case
    with pytest.raises(ValueError, match="does not fit in int32"):
        gpuopt.sparse_conv2d(x, w, variant="cpu")
    for filters in (w, FASTFilters.from_dense(w)):
        with pytest.raises(ValueError, match="does not fit in int32"):
            gpuopt.sparse_conv2d(x, filters, variant="fast_imma")
    small = np.ones_like(x)  # the flag is per call
    np.testing.assert_array_equal(gpuopt.sparse_conv2d(small, np.ones_like(w), variant="fast_imma"),
                                  gpuopt.sparse_conv2d(small, np.ones_like(w), variant="cpu"))


def test_device_arrays_and_resident_filters(rng):
    x = sparse_inputs(rng, 13, 34, 32)
    w = int8_filters(rng, 9, 13)
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    filters = FASTFilters.from_dense(w).to_device()
    for f in (filters, COOFilters.from_dense(w).to_device(), gpuopt.to_device(w)):
        dy = gpuopt.sparse_conv2d(gpuopt.to_device(x), f, variant="fast_imma")
        assert isinstance(dy, gpuopt.DeviceArray) and dy.shape == ref.shape
        np.testing.assert_array_equal(dy.numpy(), ref)
    y, t = gpuopt.sparse_conv2d(x, filters, variant="fast_imma", timing=True)
    np.testing.assert_array_equal(y, ref)
    assert t.details["filter_bytes_sent"] == 0 and t.kernel_ms > 0


def test_auto_takes_fast_imma_when_the_taps_fit_int8(rng):
    x = sparse_inputs(rng, 5, 12, 16)
    for w in (int8_filters(rng, 3, 5), ragged_filters(rng, 3, 5)):
        ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
        for filters in (w, FASTFilters.from_dense(w), gpuopt.to_device(w)):
            y = gpuopt.sparse_conv2d(x, filters)
            np.testing.assert_array_equal(y.numpy() if isinstance(y, gpuopt.DeviceArray) else y, ref)


def test_rejects_shapes():
    from gpuopt._ext import cuda_module

    cuda = cuda_module()
    for c, h, w, r in [(1, 4, 33, 3), (1, 512, 4, 3), (1, 4, 4, 5), (4097, 4, 4, 3)]:
        with pytest.raises(ValueError, match="fast_imma"):
            cuda.check.sparse_conv2d_fast_imma(shape(cuda, c, h, w, 1, r, r))
    x, w = np.zeros((2, 4, 33), np.int16), np.ones((1, 2, 3, 3), np.int16)
    with pytest.raises(ValueError, match="W <= 32"):
        gpuopt.sparse_conv2d(x, w, variant="fast_imma")
    with pytest.raises(ValueError, match="width"):
        cuda.sparse_conv2d_fast_imma(args(cuda, 0, [0], 10, 0, 0, 1, 4, 4, 1, 3, 3))
    with pytest.raises(ValueError, match="null"):
        cuda.sparse_conv2d_fast_imma(args(cuda, 0, [0], 1, 0, 0, 1, 4, 4, 1, 3, 3))
