"""SparseNeurons (round 6): the planes kernel's per-(channel, row) lists in NumPy, the round trip, the COO file, the
bound's filter side and the argument errors (no GPU needed; tests/sparse/test_gpu_sparse_neurons.py runs the device
side)."""

import numpy as np
import pytest

import gpuopt
from gpuopt import datasets
from gpuopt._ext import kernel_limits
from gpuopt.sparse import FASTFilters, SparseNeurons

I16 = np.iinfo(np.int16)


def neurons(rng, c, h, w, zeros):
    x = rng.integers(I16.min, I16.max + 1, (c, h, w)).astype(np.int16)
    x[rng.uniform(size=x.shape) < zeros] = 0
    return x


def expected_lists(x):
    """The encoding spelled out entry by entry (the kernel's: raster order, value << 16 | 4 * (iy * 32 + ix))."""
    c, h, w = x.shape
    nz = np.zeros((c, h * w), np.int32)
    rowptr = np.zeros((c, h + 1), np.int32)
    for ch in range(c):
        k = 0
        for iy in range(h):
            rowptr[ch, iy] = k
            for ix in range(w):
                v = int(x[ch, iy, ix])
                if v:
                    nz[ch, k] = np.array(((v & 0xFFFF) << 16) | (4 * (iy * 32 + ix)), np.uint32).view(np.int32)
                    k += 1
        rowptr[ch, h] = k
    return nz, rowptr, np.abs(x.astype(np.int32)).reshape(c, -1).max(axis=1)


@pytest.mark.parametrize("zeros", [0.0, 0.5, 0.8, 0.99, 1.0])
@pytest.mark.parametrize("c,h,w", [(1, 1, 1), (3, 2, 2), (5, 7, 32), (4, 33, 31), (2, 511, 3), (6, 32, 17)])
def test_host_lists_and_round_trip(rng, c, h, w, zeros):
    x = neurons(rng, c, h, w, zeros)
    n = SparseNeurons.from_dense(x)
    got = n.host_lists()
    for a, b, name in zip(got, expected_lists(x), ("nz", "rowptr", "absmax")):
        np.testing.assert_array_equal(a, b, err_msg=name)
    np.testing.assert_array_equal(n.to_dense(), x)
    assert n.nnz == np.count_nonzero(x) and n.absmax == int(np.abs(x.astype(np.int32)).max())
    assert not n.on_device and n.dense is n.numpy()


def test_empty_channels_single_nonzero_and_int16_limits():
    x = np.zeros((4, 5, 6), np.int16)
    x[2, 4, 5] = I16.min  # a single non-zero, the last position of a middle channel, int16's minimum
    n = SparseNeurons.from_dense(x)
    nz, rowptr, absmax = n.host_lists()
    assert rowptr[:, -1].tolist() == [0, 0, 1, 0] and absmax.tolist() == [0, 0, 32768, 0]
    assert nz[2, 0] >> 16 == I16.min and (nz[2, 0] & 0xFFFF) == 4 * (4 * 32 + 5)
    np.testing.assert_array_equal(n.to_dense(), x)
    x[1, 0, 0] = I16.max
    np.testing.assert_array_equal(SparseNeurons.from_dense(x).to_dense(), x)


def test_from_coo_file(tmp_path, rng):
    x = neurons(rng, 3, 32, 32, 0.8)
    path = datasets.write_nctu_neurons_coo(tmp_path / "n.coo", x)
    np.testing.assert_array_equal(SparseNeurons.from_coo(path).to_dense(), x)
    bad = tmp_path / "bad.coo"
    lines = path.read_text().splitlines()
    lines[2] = lines[2] + " x"  # a non-integer on line 3
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line"):
        SparseNeurons.from_coo(bad)


def test_bad_arguments_name_the_argument():
    lim = kernel_limits()
    with pytest.raises(ValueError, match=r"x.*wide"):
        SparseNeurons.from_dense(np.zeros((1, 4, lim["sparse_conv2d_planes_max_width"] + 1), np.int16))
    with pytest.raises(ValueError, match=r"x.*high"):
        SparseNeurons.from_dense(np.zeros((1, lim["sparse_conv2d_planes_max_height"] + 1, 4), np.int16))
    with pytest.raises(TypeError, match="x"):
        SparseNeurons.from_dense(np.zeros((1, 4, 4), np.float32))
    with pytest.raises(ValueError, match="x"):
        SparseNeurons.from_dense(np.full((1, 4, 4), 40000))
    with pytest.raises(ValueError, match="x"):
        SparseNeurons.from_dense(np.zeros((4, 4), np.int16))
    with pytest.raises(RuntimeError, match="to_device"):
        SparseNeurons.from_dense(np.zeros((1, 4, 4), np.int16)).device_lists()
    n = SparseNeurons.from_dense(np.ones((3, 4, 4), np.int16))
    with pytest.raises(ValueError, match="input channels"):
        gpuopt.sparse_conv2d(n, np.ones((2, 4, 3, 3), np.int16), variant="cpu")
    with pytest.raises(ValueError, match="2x2"):
        gpuopt.sparse_conv2d(SparseNeurons.from_dense(np.ones((3, 1, 4), np.int16)), np.ones((2, 3, 3, 3), np.int16),
                             variant="cpu")


def test_decode_rejects_bad_counts():
    with pytest.raises(ValueError, match="rowptr"):
        SparseNeurons.decode(np.zeros((1, 4), np.int32), np.array([[0, 0, 5]], np.int32), (1, 2, 2))


def test_cpu_variant_reads_the_dense_maps(rng):
    x = neurons(rng, 5, 9, 7, 0.7) // 64
    w = rng.integers(-50, 51, (3, 5, 3, 3)).astype(np.int16)
    np.testing.assert_array_equal(gpuopt.sparse_conv2d(SparseNeurons.from_dense(x), w, variant="cpu"),
                                  gpuopt.sparse_conv2d(x, w, variant="cpu"))


def test_max_map_abs_sum(rng):
    w = rng.integers(-300, 301, (4, 6, 3, 3)).astype(np.int16)
    w[rng.uniform(size=w.shape) < 0.6] = 0
    f = FASTFilters.from_dense(w)
    assert f.max_map_abs_sum == int(np.abs(w.astype(np.int64)).reshape(4, -1).sum(axis=1).max())
    assert FASTFilters.from_dense(np.zeros((2, 3, 3, 3), np.int16)).max_map_abs_sum == 0
