"""``device_tiled`` with ``products="tf32x3"`` (the screen's dot products on the tensor cores, kmeans_tiled_tc.cuh):
near ties aimed at the tensor cores' rounding (gaps from a few ulps to 10% of the distance, so a bound too tight for
the split products or the mma accumulation shows as a membership Liao would not give), large offsets with a small
spread, exact ties at every distance of the fragment layout (the four lanes of a quad, the n8 tiles, the 32-centre
passes), every padded D (the A fragments hoisted for D <= 16, loaded a k8 step at a time past it; D = 4 padded to one
k8 step; D = 64 and 128: the deep path's 3xTF32 tile) and k around the tile edges and past 4096 coordinates: all bit for bit ``cpu(summation="chunked")`` and
``products="ffma"``."""

import numpy as np
import pytest

import gpuopt

from .test_gpu_kmeans import assert_same_as_chunked_cpu

pytestmark = pytest.mark.gpu


def assert_tc_exact(x, k, *, init=None, max_iter=2):
    """tf32x3 against cpu(summation="chunked") and against the FFMA screen, bit for bit."""
    res = assert_same_as_chunked_cpu(x, k, "device_tiled", products="tf32x3", threshold=0.0, max_iter=max_iter,
                                     init=init)
    ffma = gpuopt.kmeans(x, k, threshold=0.0, max_iter=max_iter, init=init, variant="device_tiled", products="ffma")
    np.testing.assert_array_equal(res.membership, ffma.membership)
    np.testing.assert_array_equal(res.centroids, ffma.centroids)


def near_ties(rng, centres, n, spread=1.0):
    """n points near the bisector of two random centres: exact midpoints, and offsets along a - b of 10^-9 .. 10^-1
    of |a - b| (either side), so the two nearest differ by anything from a few ulps to clearly."""
    k = len(centres)
    a, b = rng.integers(0, k, n), rng.integers(0, k, n)
    ca, cb = centres[a].astype(np.float64), centres[b].astype(np.float64)
    diff = ca - cb
    norm = np.linalg.norm(diff, axis=1, keepdims=True)
    unit = np.divide(diff, norm, out=np.zeros_like(diff), where=norm > 0)
    delta = rng.choice([-1.0, 1.0], (n, 1)) * 10.0 ** rng.uniform(-9, -1, (n, 1)) * norm * spread
    delta[::5] = 0.0
    return ((ca + cb) / 2 + delta * unit).astype(np.float32)


@pytest.mark.parametrize("d,k", [(1, 1), (1, 33), (3, 32), (3, 257), (4, 64), (16, 31), (16, 256), (16, 257),
                                 (17, 33), (64, 65), (128, 31), (128, 33)])
def test_near_ties_at_every_gap(rng, d, k):
    # k*D past 4096 at (64, 65) and (128, 33): the centres streamed through shared memory in blocks.
    centres = rng.uniform(0, 1, (k, d)).astype(np.float32)
    x = np.concatenate([centres, near_ties(rng, centres, 12_000), rng.uniform(0, 1, (3_000, d))]).astype(np.float32)
    assert_tc_exact(x, k, init=centres)


@pytest.mark.parametrize("offset", [1e4, -1e4, 3e2])
@pytest.mark.parametrize("spread", [1e-2, 1.0])
def test_large_offsets_small_spread(rng, offset, spread):
    # B = ||x|| + max ||c|| ~ 4e4 at D = 16: the bound is far above the gaps, so nearly every point takes Liao's path.
    d, k = 16, 64
    centres = (offset + spread * rng.uniform(-1, 1, (k, d))).astype(np.float32)
    x = np.concatenate([near_ties(rng, centres, 8_000), offset + spread * rng.normal(0, 1, (8_000, d))])
    assert_tc_exact(x.astype(np.float32), k, init=centres)


@pytest.mark.parametrize("step", [1, 2, 7, 8, 31, 32, 33])
def test_duplicate_centres_at_every_fragment_distance(rng, step):
    # Centre c and c + step equal (the same quad lane, the next lane, another n8 tile, the next 32-centre pass): the
    # lower index takes every point of the pair; the other is left empty and keeps its centre.
    d, k = 16, 96
    centres = rng.uniform(0, 1, (k, d)).astype(np.float32)
    for c in range(0, k - step, 2 * step + 1):
        centres[c + step] = centres[c]
    x = np.concatenate([centres, near_ties(rng, centres, 6_000), rng.uniform(0, 1, (4_000, d))]).astype(np.float32)
    assert_tc_exact(x, k, init=centres, max_iter=3)


def test_uniform_10m_like_data_matches_ffma_and_gemm(rng):
    # the kmeans study's 10M x 16 shape at 1/25 the points: the screen's gap test passes ~99% of the points here.
    x = rng.uniform(0, 1, (400_000, 16)).astype(np.float32)
    base = gpuopt.kmeans(x, 256, threshold=0.0, max_iter=3, variant="device_gemm")
    for products in ("tf32x3", "auto"):
        res = gpuopt.kmeans(x, 256, threshold=0.0, max_iter=3, variant="device_tiled", products=products)
        np.testing.assert_array_equal(res.membership, base.membership)
        np.testing.assert_array_equal(res.centroids, base.centroids)


def test_products_is_checked():
    x = np.zeros((100, 4), np.float32)
    with pytest.raises(ValueError, match="products"):
        gpuopt.kmeans(x, 4, variant="device_tiled", products="tf32")


@pytest.mark.parametrize("k", [1, 2, 7, 9, 33, 63, 255])
@pytest.mark.parametrize("offset", [0.0, 10.0])
def test_every_slot_of_the_packed_index(rng, k, offset):
    # The screen's index rides in g's three low bits (the n8 tile and column of a lane's pass) plus the pass's first
    # centre: points on and near every centre make each (pass, lane, slot) the best somewhere, pad centres past k
    # (finite pad norms) never; offset 10 makes every g positive, 0 leaves most negative.
    d = 16
    centres = (offset + rng.uniform(0, 1, (k, d))).astype(np.float32)
    near = np.repeat(centres, 20, axis=0) + rng.normal(0, 1e-3, (20 * k, d)).astype(np.float32)
    x = np.concatenate([centres, near, near_ties(rng, centres, 2_000)]).astype(np.float32)
    assert_tc_exact(x, k, init=centres)
