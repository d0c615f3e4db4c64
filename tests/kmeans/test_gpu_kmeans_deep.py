"""``device_tiled``'s deep path, past D = 64 and past D = 32 with products="tf32x3" (csrc/kmeans/kmeans_tiled_deep.cu):
the dot form as a tiled SGEMM whose K loop runs over D (128 points x 128 centres a block, 32 coordinates a step) on
points and centres shifted by the centres' mean, the near ties through the resolve pass (the same tiles over the
queue, Liao's distance for each candidate), held to the bits of ``cpu(summation="chunked")``: D just past a step and
far past it, k around the 128-centre tile, ragged N, exact ties (integer grids, duplicates), near-tie-heavy data
(most points through the queue), data far from the origin (where the shift matters), an empty cluster, rows off
16-byte alignment, device arrays, and the same bits for any grid. The sums of 16-byte rows with D >= 64 read x
directly (no staging): D = 64, 68, 256, 1000 here. The 3xTF32 tile (products="tf32x3") on the same kinds of data.
The auto products past D = 32 with more than 64 centres (the 3xTF32 tile) too. Points settled in the assign pass by
two Liao distances (their third-nearest clear of the bound). Every device allocation is poisoned (NaN) first
(conftest)."""

import numpy as np
import pytest

import gpuopt

from .test_gpu_kmeans import assert_same_as_chunked_cpu
from .test_gpu_kmeans_tiled import lattice_and_midpoints

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n,d,k", [
    (3_001, 65, 7),       # one coordinate past a step of 32 (the tile would pad to 128)
    (2_000, 100, 40),
    (2_000, 128, 33),
    (3_001, 129, 7),      # one coordinate past the tile path: a step of 32 with 31 pad coordinates
    (2_500, 257, 2),
    (1_100, 1_000, 7),
    (600, 2_049, 3),      # 65 steps of 32 coordinates
    (4_097, 160, 129),    # k one past a 128-centre tile (a second tile of pad centres)
    (500, 300, 1),
    (5_200, 129, 1_000),
], ids=str)
def test_matches_chunked_cpu(rng, n, d, k):
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, "device_tiled", threshold=0.0, max_iter=3)


@pytest.mark.parametrize("n,d,k,offset", [
    (4_000, 1_024, 8, 0.0),      # the study's data: uniform in (0, 1], most gaps near the unshifted bound
    (3_000, 512, 130, 0.0),
    (2_000, 256, 300, 1e3),      # far from the origin: unshifted, B^2 ~ 1e9 would queue every point
    (3_001, 64, 5, 1e2),         # the tile path's D with the direct sums
    (3_001, 68, 17, 0.0),
], ids=str)
def test_data_away_from_the_origin(rng, n, d, k, offset):
    x = (offset + (1.0 - rng.random((n, d)))).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, "device_tiled", threshold=0.0, max_iter=3)
    assert_same_as_chunked_cpu(x, k, "device_tiled", threshold=0.0, max_iter=2, blocks=1)


@pytest.mark.slow
def test_many_clusters(rng):
    x = rng.uniform(-1, 1, (5_300, 131)).astype(np.float32)
    assert_same_as_chunked_cpu(x, 5_000, "device_tiled", threshold=0.0, max_iter=2)


@pytest.mark.parametrize("d", [129, 200, 512])
def test_exact_ties_and_duplicates(rng, d):
    # An integer grid: exact ties between centres everywhere (gap 0: every such point through Liao's path, ties to
    # the lower index), and duplicated rows.
    grid = rng.integers(0, 3, (3_000, d)).astype(np.float32)
    x = np.concatenate([grid, grid[:500], grid[::-7]])
    assert_same_as_chunked_cpu(x, 40, "device_tiled", threshold=0.0, max_iter=4)


@pytest.mark.parametrize("blocks", [0, 1, 3])
def test_near_tie_heavy_data_and_any_grid(rng, blocks):
    # Lattice centres and midpoints between two of them (exact or a few ulps off): most points fail the gap test and
    # go through the queue; blocks=1 runs every tile and the whole queue on one block.
    d, k = 150, 30
    lattice, mid = lattice_and_midpoints(rng, k, d, 6_000)
    x = np.concatenate([lattice, mid, lattice[::-1]]).astype(np.float32)
    res = assert_same_as_chunked_cpu(x, k, "device_tiled", threshold=0.0, max_iter=3, blocks=blocks)
    assert res.iterations == 3


def test_an_empty_cluster_keeps_its_centre(rng):
    n, d, k = 4_000, 140, 9
    x = rng.normal(0, 1, (n, d)).astype(np.float32)
    init = x[rng.choice(n, k, replace=False)].copy()
    init[4] = np.float32(1e12)
    res = assert_same_as_chunked_cpu(x, k, "device_tiled", threshold=0.0, max_iter=3, init=init)
    assert not np.any(res.membership == 4)
    np.testing.assert_array_equal(res.centroids[4], init[4])


def test_rows_off_alignment_and_device_arrays(rng):
    # D = 133: rows start 4 bytes apart from 16-byte boundaries; x a view one float into its buffer too.
    n, d, k = 2_000, 133, 50
    buf = rng.uniform(-1, 1, n * d + 1).astype(np.float32)
    x = buf[1:].reshape(n, d)
    ref = gpuopt.kmeans(np.ascontiguousarray(x), k, threshold=0.0, max_iter=3, variant="cpu", summation="chunked")
    whole = gpuopt.to_device(buf)
    dev = gpuopt.DeviceArray((n, d), np.float32, whole.__cuda_array_interface__["data"][0] + 4, whole)
    res = gpuopt.kmeans(dev, k, threshold=0.0, max_iter=3, variant="device_tiled")
    np.testing.assert_array_equal(res.membership.numpy(), ref.membership)
    np.testing.assert_array_equal(res.centroids.numpy(), ref.centroids)
    assert res.iterations == ref.iterations


@pytest.mark.parametrize("d,k", [(200, 20), (200, 100), (100, 100), (40, 100)])  # "auto": k <= 64 FFMA, else 3xTF32
def test_auto_takes_it(rng, d, k):
    x = rng.uniform(-1, 1, (3_000, d)).astype(np.float32)
    ref = gpuopt.kmeans(x, k, threshold=0.0, max_iter=2, variant="cpu", summation="chunked")
    res = gpuopt.kmeans(x, k, threshold=0.0, max_iter=2)
    np.testing.assert_array_equal(res.membership, ref.membership)
    np.testing.assert_array_equal(res.centroids, ref.centroids)


# The 3xTF32 tile (products="tf32x3", kmeans_tiled_deep_tc.cuh): its own bound, the same bits.
@pytest.mark.parametrize("n,d,k,offset", [
    (3_001, 33, 7, 0.0),       # one coordinate past the tile's 3xTF32 screen (D <= 32)
    (2_500, 64, 200, 1e2),
    (3_001, 65, 7, 0.0),       # one coordinate past the tile path; k under one 128-centre tile
    (2_000, 128, 300, 0.0),    # four whole steps of 32; three centre tiles, the last part pad
    (3_001, 129, 7, 0.0),      # one coordinate past a step
    (2_000, 200, 130, 0.0),    # a second centre tile of pad centres
    (1_100, 1_000, 40, 0.0),
    (600, 2_049, 3, 0.0),      # 65 steps of 32 coordinates
    (5_200, 129, 1_000, 0.0),
    (3_000, 512, 130, 0.0),    # the map's data: most gaps near the bound
    (2_000, 256, 300, 1e3),    # far from the origin
    (500, 300, 1, 0.0),
], ids=str)
def test_tf32x3_tile_matches_chunked_cpu(rng, n, d, k, offset):
    x = (offset + rng.uniform(-1, 1, (n, d))).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, "device_tiled", products="tf32x3", threshold=0.0, max_iter=3)


@pytest.mark.parametrize("blocks", [0, 1, 3])
def test_tf32x3_tile_ties_near_ties_and_any_grid(rng, blocks):
    grid = rng.integers(0, 3, (3_000, 160)).astype(np.float32)  # exact ties and duplicates
    x = np.concatenate([grid, grid[:500]])
    assert_same_as_chunked_cpu(x, 40, "device_tiled", products="tf32x3", threshold=0.0, max_iter=3, blocks=blocks)
    lattice, mid = lattice_and_midpoints(rng, 30, 150, 6_000)  # most points through the queue
    x = np.concatenate([lattice, mid]).astype(np.float32)
    assert_same_as_chunked_cpu(x, 30, "device_tiled", products="tf32x3", threshold=0.0, max_iter=3, blocks=blocks)


# Points whose third-nearest centre is clear of the bound but whose two nearest are not: settled in the assign pass by
# two Liao distances (Top3, liao_pair) in the narrow tile (k <= 64) and in the 3xTF32 tile from 256 padded
# coordinates; exact ties of three and more (integer grids) still through the resolve pass.
@pytest.mark.parametrize("products", ["auto", "tf32x3", "ffma"])
@pytest.mark.parametrize("d,k", [(300, 100), (260, 40), (100, 30)])
@pytest.mark.parametrize("blocks", [0, 1])
def test_pairs_settled_by_two_liao_distances(rng, products, d, k, blocks):
    lattice, mid = lattice_and_midpoints(rng, k, d, 4_000)  # midpoints: two candidates each
    grid = rng.integers(0, 3, (1_000, d)).astype(np.float32)
    x = np.concatenate([lattice, mid, grid, mid[:300]]).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, "device_tiled", products=products, threshold=0.0, max_iter=3, blocks=blocks)
