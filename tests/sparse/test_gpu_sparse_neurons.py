"""SparseNeurons on the device (round 6): the compaction kernel's lists against their NumPy encoding, the round trip,
and fast_sparse_input on sparse neurons (the planes kernel alone) against the CPU reference, exactly.

Device allocations are poisoned by conftest (0xFF bytes = -1 as int32): an unwritten output, list entry, row pointer
or overflow flag (the kernel zeroes it itself when the host proved the int32 bound) shows.
"""

import numpy as np
import pytest

import gpuopt
from conftest import SEED
from gpuopt import datasets
from gpuopt.sparse import FASTFilters, SparseNeurons

from .test_gpu_sparse import I16, overflow_cases, ragged_filters, sparse_inputs

pytestmark = pytest.mark.gpu


def run_sparse(x, w, **kw):
    """fast_sparse_input on device-resident sparse neurons (NumPy result)."""
    y = gpuopt.sparse_conv2d(SparseNeurons.from_dense(x).to_device(), w, variant="fast_sparse_input", **kw)
    assert isinstance(y, gpuopt.DeviceArray)
    return y.numpy()


def check(x, w):
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    for filters in (w, FASTFilters.from_dense(w).to_device()):
        np.testing.assert_array_equal(run_sparse(x, filters), ref)
    return ref


def assert_lists_equal(n, x):
    nz, rowptr, absmax = n.host_lists()
    d = {k: a.numpy() for k, a in n.device_lists().items()}
    np.testing.assert_array_equal(d["rowptr"], rowptr)
    np.testing.assert_array_equal(d["absmax"], absmax)
    for c in range(x.shape[0]):  # entries past a channel's count are scratch (unwritten)
        k = rowptr[c, -1]
        np.testing.assert_array_equal(d["nz"][c, :k], nz[c, :k], err_msg=f"channel {c}")


@pytest.mark.parametrize("zeros", [0.0, 0.5, 0.8, 0.99, 1.0])
@pytest.mark.parametrize("c,h,w", [(1, 1, 1), (3, 2, 2), (5, 7, 32), (4, 33, 31), (2, 511, 3), (9, 20, 17)])
def test_device_lists_equal_the_encoding(rng, c, h, w, zeros):
    x = sparse_inputs(rng, c, h, w, I16.min, I16.max, zeros)
    n = SparseNeurons.from_dense(x).to_device()
    assert n.on_device
    assert_lists_equal(n, x)
    np.testing.assert_array_equal(n.to_dense(), x)  # the compaction's round trip
    n2 = SparseNeurons.from_dense(gpuopt.to_device(x)).to_device()  # device maps in: no host copy needed
    np.testing.assert_array_equal(n2.to_dense(), x)


@pytest.mark.data
def test_real_nctu_layer(data_root):
    x = datasets.read_nctu_neurons_txt(data_root / "nctu_sparse_conv" / "inNeu.txt")
    w = FASTFilters.from_dense(datasets.make_nctu_filters(512, 512, seed=SEED)).to_device()
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    n = SparseNeurons.from_dense(x).to_device()
    for _ in range(2):  # deterministic, and the lists are reused
        np.testing.assert_array_equal(gpuopt.sparse_conv2d(n, w, variant="fast_sparse_input").numpy(), ref)
    for variant in ("fast_imma", "auto", "fast_fused"):  # other variants read the dense maps
        np.testing.assert_array_equal(gpuopt.sparse_conv2d(n, w, variant=variant).numpy(), ref, err_msg=variant)
    coo = data_root / "nctu_sparse_conv" / "inNeu.coo"
    if coo.exists():
        np.testing.assert_array_equal(SparseNeurons.from_coo(coo).to_device().to_dense(), x)
    assert (ref > 0).any()


# (C, H, W, M, R, S): one row tile and many (ragged), W < 32 and odd, H odd (the dropped row), C small (no cluster
# split) and large (split 2..8), M not a multiple of 32, 1x1 / 1x3 / 3x1 / 3x3; 5x5 falls back to the compaction
# path (the planes kernel takes up to 3x3).
SHAPES = [(1, 2, 2, 1, 3, 3), (3, 3, 9, 5, 3, 3), (17, 31, 32, 33, 3, 3), (64, 32, 32, 64, 3, 3),
          (300, 17, 13, 40, 3, 3), (130, 64, 32, 31, 3, 1), (20, 9, 7, 3, 1, 3), (8, 5, 5, 2, 1, 1),
          (6, 100, 24, 7, 3, 3), (10, 12, 12, 4, 5, 5), (600, 8, 8, 65, 3, 3)]


@pytest.mark.parametrize("c,h,w,m,r,s", SHAPES)
def test_matches_cpu_reference(rng, c, h, w, m, r, s):
    check(sparse_inputs(rng, c, h, w), ragged_filters(rng, m, c, r, s))


@pytest.mark.parametrize("zeros", [0.0, 0.2, 0.8, 0.99, 1.0])
def test_input_densities(rng, zeros):
    check(sparse_inputs(rng, 96, 20, 32, zeros=zeros), ragged_filters(rng, 40, 96))


def test_empty_channels_and_single_nonzero(rng):
    x = np.zeros((70, 16, 16), np.int16)
    x[33, 15, 0] = 7  # one non-zero in the last row, first column (the halo of a tile edge)
    w = ragged_filters(rng, 5, 70)
    w[:, 33] = rng.integers(1, 9, (5, 3, 3))
    ref = check(x, w)
    assert (ref > 0).any()


def test_int16_limits_both_bounds(rng):
    # Proven bound (the kernel zeroes the flag itself) and not proven (memset; the cluster bound then takes the
    # exact int64 path where it fails): both exact.
    x = sparse_inputs(rng, 40, 10, 10, I16.min, I16.max, zeros=0.9)
    small = np.zeros((3, 40, 3, 3), np.int16)
    small[:, :, 1, 1] = 1
    check(x, small)  # 32768 * 40 < 2^31: proven
    big = np.zeros((3, 40, 3, 3), np.int16)
    big[:, 0, 1, 1], big[:, 1, 0, 0], big[:, 5, 1, 1] = I16.max, I16.min, 1
    x2 = np.zeros_like(x)
    x2[:2] = rng.integers(-100, 101, x2[:2].shape)
    x2[5, ::3, ::2] = I16.max
    check(x2, big)  # the host bound fails (32767 * 65536 > 2^31), every sum fits: exact (int64 path where needed)


@pytest.mark.parametrize("case", list(overflow_cases()), ids=lambda c: c[0])
def test_int32_overflow_raises(case):
    _, x, w = case
    if x.shape[1] > 511 or x.shape[2] > 32:
        pytest.skip("beyond the sparse neurons' maps")
    with pytest.raises(ValueError, match="int32"):
        run_sparse(x, w)
    # and the flag does not stick: the next call is clean
    small = np.ones((1, x.shape[0], 3, 3), np.int16)
    np.testing.assert_array_equal(run_sparse(np.ones_like(x), small),
                                  gpuopt.sparse_conv2d(np.ones_like(x), small, variant="cpu"))


def test_host_neurons_take_the_compaction_path(rng):
    x = sparse_inputs(rng, 12, 8, 8)
    w = ragged_filters(rng, 3, 12)
    y = gpuopt.sparse_conv2d(SparseNeurons.from_dense(x), w, variant="fast_sparse_input", timing=True)
    assert isinstance(y[0], np.ndarray) and "neuron_lists" not in y[1].details
    np.testing.assert_array_equal(y[0], gpuopt.sparse_conv2d(x, w, variant="cpu"))
