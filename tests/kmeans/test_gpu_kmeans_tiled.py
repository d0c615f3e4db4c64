"""``device_tiled``: the register-tiled dot form (256-point tiles, 32-centre passes, D padded to 4..64) and the sums
from a per-chunk stable sort, held to the bits of ``cpu(summation="chunked")`` and ``device_gemm``: tile and chunk
tails, every padded D and the D > 64 path, k around the 32-centre pass, ties split across the threads that merge a
point's (best, second), one cluster holding a whole chunk, the grid, near-tie-heavy data (the queue of Liao's path),
and k*D past 4096 (the centres streamed through shared memory in blocks; D > 64 with many centres); each with the
screen's products on the tensor cores (3xTF32) and in FP32 FMAs (test_gpu_kmeans_tiled_tc.py: near ties aimed at the
tensor cores' rounding)."""

import numpy as np
import pytest

import gpuopt

from .test_gpu_kmeans import assert_same_as_chunked_cpu

pytestmark = pytest.mark.gpu


@pytest.fixture(params=["tf32x3", "ffma"])
def products(request):
    """The screen's dot products: every test runs on the tensor cores (3xTF32) and in FP32 FMAs."""
    return request.param


@pytest.mark.parametrize("n", [1, 127, 128, 129, 255, 256, 257, 1023, 1025, 33_000])
def test_tile_and_chunk_tails(rng, n, products):
    x = rng.uniform(-1, 1, (n, 16)).astype(np.float32)
    assert_same_as_chunked_cpu(x, min(n, 70), "device_tiled", products=products, threshold=0.0, max_iter=5)


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 8, 9, 12, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 128, 129])
def test_every_padded_dimension(rng, d, products):
    # D padded to 4, 8, 16, 32, 64 (zeros in x and c); D > 64, and D > 32 with tf32x3: the deep path.
    k = min(4096 // d, 40)
    x = rng.uniform(0, 1, (5_000, d)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, "device_tiled", products=products, threshold=0.0, max_iter=4)
    grid = rng.integers(0, 3, (5_000, d)).astype(np.float32)  # exact ties
    assert_same_as_chunked_cpu(grid, k, "device_tiled", products=products, threshold=0.0, max_iter=4)


@pytest.mark.parametrize("k", [1, 2, 63, 64, 65, 127, 129, 256, 511])
def test_k_around_the_centre_pass(rng, k, products):
    # Pad centres (||c||^2 = +inf) past k in the last 32-centre pass; ties between centres held by different
    # threads of a point's row (centre c and c + 4 on one integer grid).
    x = rng.integers(0, 4, (20_000, 8)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, "device_tiled", products=products, threshold=0.0, max_iter=5)


def test_one_cluster_holds_whole_chunks(rng, products):
    # The sort's longest run: all 1024 objects of a chunk in one cluster (and the other clusters empty there).
    x = np.concatenate([rng.normal(0, 0.01, (40_000, 4)), rng.normal(50, 1, (3_000, 4))]).astype(np.float32)
    x[[1, 5]] = 50.0  # two far centres among the first k
    assert_same_as_chunked_cpu(x, 6, "device_tiled", products=products, threshold=0.0, max_iter=6)


def test_equals_device_gemm_and_not_the_grid(rng, products):
    x = rng.uniform(0, 1, (300_001, 16)).astype(np.float32)
    base = gpuopt.kmeans(x, 256, threshold=0.0, max_iter=3, variant="device_gemm")
    for blocks in (0, 1, 3, 1024):
        res = gpuopt.kmeans(x, 256, threshold=0.0, max_iter=3, variant="device_tiled", blocks=blocks,
                            products=products)
        np.testing.assert_array_equal(res.membership, base.membership)
        np.testing.assert_array_equal(res.centroids, base.centroids)
        np.testing.assert_array_equal(res.delta, base.delta)
        assert res.iterations == base.iterations == 3


def test_device_input_and_limits(rng, products):
    x = rng.uniform(-1, 1, (70_000, 16)).astype(np.float32)
    res = gpuopt.kmeans(gpuopt.to_device(x), 200, threshold=0.0, max_iter=3, variant="device_tiled",
                        products=products)
    ref = gpuopt.kmeans(x, 200, threshold=0.0, max_iter=3, variant="cpu", summation="chunked")
    np.testing.assert_array_equal(res.membership.numpy(), ref.membership)
    np.testing.assert_array_equal(res.centroids.numpy(), ref.centroids)
    with pytest.raises(ValueError, match="k = 8193 clusters; at most 8192"):
        gpuopt.kmeans(np.zeros((9000, 1), np.float32), 8193, variant="device_tiled", products=products)


def lattice_and_midpoints(rng, k, d, n):
    """k centres on an integer lattice and n midpoints between two of them, every third a few ulps off."""
    lattice = rng.integers(0, 4, (k, d)).astype(np.float32)
    a, b = rng.integers(0, k, n), rng.integers(0, k, n)
    mid = (lattice[a] + lattice[b]) * np.float32(0.5)
    mid[::3] = np.nextafter(mid[::3], np.float32(np.inf))
    return lattice, mid


@pytest.mark.parametrize("blocks", [0, 1])
def test_near_tie_heavy_data(rng, blocks, products):
    # Centres on an integer lattice (the first k objects: Liao's start), the rest midpoints between two of them,
    # exact or a few ulps off, many duplicated: most points fail the gap test, so a block's queue passes a tile's
    # worth between flushes and is run in groups of 256 and a remainder (blocks=1: every tile through one queue).
    d, k = 16, 64
    lattice, mid = lattice_and_midpoints(rng, k, d, 30_000)
    dup = np.repeat(mid[:100], 60, axis=0)
    x = np.concatenate([lattice, mid, dup, lattice[::-1]]).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, "device_tiled", products=products, threshold=0.0, max_iter=4, blocks=blocks)
    base = gpuopt.kmeans(x, k, threshold=0.0, max_iter=4, variant="device_gemm")
    res = gpuopt.kmeans(x, k, threshold=0.0, max_iter=4, variant="device_tiled", blocks=blocks,
                            products=products)
    np.testing.assert_array_equal(res.membership, base.membership)


@pytest.mark.parametrize("n,d,k", [
    (3_000, 17, 300),     # D padded to 32: blocks of 128 centres, the last one 64 (k padded to 320)
    (5_000, 64, 97),      # blocks of 64 centres at D = 64, k not a multiple of a register pass
    (2_100, 4, 1_100),    # blocks of 1024 centres at D = 4, a second block of 96 with pad centres
    (1_500, 80, 70),      # D > 64: the deep path, k*D = 5600
    (1_200, 130, 40),     # D > 128: the deep path, k*D = 5200
])
def test_centres_streamed_past_4096_coordinates(rng, n, d, k, products):
    x = rng.uniform(0, 1, (n, d)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, "device_tiled", products=products, threshold=0.0, max_iter=3)
    grid = rng.integers(0, 3, (n, d)).astype(np.float32)  # exact ties across centre blocks
    assert_same_as_chunked_cpu(grid, k, "device_tiled", products=products, threshold=0.0, max_iter=3)


@pytest.mark.parametrize("blocks", [0, 1])
def test_near_ties_with_streamed_centres(rng, blocks, products):
    # The near-tie queue's g recomputed from the centres in global memory (not the staged block): lattice
    # centres and midpoints between them, k*D = 16 x 300 = 4800.
    d, k = 16, 300
    lattice, mid = lattice_and_midpoints(rng, k, d, 8_000)
    x = np.concatenate([lattice, mid, lattice[::-1]]).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, "device_tiled", products=products, threshold=0.0, max_iter=3, blocks=blocks)


@pytest.mark.parametrize("groups", [33, 10])
@pytest.mark.parametrize("variant", ["device_tiled", "device_gemm"])
@pytest.mark.parametrize("d,k", [(16, 256), (4, 1_025), (3, 1_366)])
def test_finish_past_8_groups(rng, variant, d, k, groups):
    # More than 8 groups of chunks and k*D >= 4096: finish_loop takes 4 (cluster, coordinate) entries a warp, 8 groups
    # a round, the last round partial (k*D = 4098: one entry a warp). Rows scaled by 10^-6..10^6, so the group order
    # shows in the float64 sums.
    if variant == "device_gemm" and k * d > 4096:
        pytest.skip("device_gemm takes k*D <= 4096")
    n = (groups - 1) * 32 * 1024 + 5_000
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32) * np.float32(10) ** rng.integers(-6, 7, (n, 1)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, variant, threshold=0.0, max_iter=2)


@pytest.mark.parametrize("blocks", [0, 1, 3])
@pytest.mark.parametrize("n,d,k", [(33 * 1024 + 77, 5, 7), (70 * 1024 + 1, 3, 25), (40 * 1024, 16, 256)], ids=str)
def test_ragged_groups_and_an_empty_cluster(rng, n, d, k, blocks):
    # More than 32 chunks with k*D <= 4096 (finish_loop one entry a warp, two or three groups): more groups than
    # blocks (blocks=1), a ragged last group, n not a multiple of the chunk, k*D not a multiple of 4 (35, 75), an empty
    # cluster (a far initial centre keeps its place), 3 loops; rows scaled by 10^-6..10^6 so the order of the adds
    # shows in the float64 sums.
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32) * np.float32(10) ** rng.integers(-6, 7, (n, 1)).astype(np.float32)
    init = x[rng.choice(n, k, replace=False)].copy()
    init[k // 2] = np.float32(1e12)  # no point comes nearer to it than to any other centre
    res = assert_same_as_chunked_cpu(x, k, "device_tiled", threshold=0.0, max_iter=3, init=init, blocks=blocks)
    assert not np.any(res.membership == k // 2)
    np.testing.assert_array_equal(res.centroids[k // 2], init[k // 2])
