"""The loop-on-the-GPU variants (``device``, ``device_fused``, ``device_gemm``, ``device_tiled``) and ``auto``: more groups than
the fused finish's one block stages at once, odd tails, an empty cluster, duplicates, k = N, the fused loop the
same bits as the two-kernel one on every grid and batch size; the dot form past k*D = 1024, its near-ties and
overflowing bounds (Liao's distances recomputed); auto's choice by shape."""

import numpy as np
import pytest

import gpuopt

from .test_gpu_kmeans import DEVICE_LOOPS, assert_same_as_chunked_cpu

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("loop", DEVICE_LOOPS)
@pytest.mark.parametrize("n,d,k", [(100_001, 8, 3), (100_001, 1, 1), (600_000, 16, 64), (33_793, 3, 5)], ids=str)
def test_many_groups_and_odd_tails(rng, loop, n, d, k):
    # 600,000 x 16, k=64: 19 groups of 32 chunks, more than the 8 the last block stages at once (k*D = 1024).
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32) * np.float32(10) ** rng.integers(-4, 5, (n, 1)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, loop, threshold=0.0, max_iter=3)


@pytest.mark.parametrize("loop", DEVICE_LOOPS)
def test_empty_cluster_keeps_its_centre(rng, loop):
    x = rng.uniform(0, 1, (5000, 4)).astype(np.float32)
    init = np.concatenate([x[:3], np.full((1, 4), 1e6, np.float32)])  # nothing is nearest to the far centre
    res = assert_same_as_chunked_cpu(x, 4, loop, threshold=0.0, max_iter=20, init=init)
    assert not (res.membership == 3).any()
    np.testing.assert_array_equal(res.centroids[3], init[3])


@pytest.mark.parametrize("loop", DEVICE_LOOPS)
def test_duplicates_and_k_equals_n(rng, loop):
    x = np.repeat(rng.uniform(0, 1, (9, 3)).astype(np.float32), 4, axis=0)  # every point four times
    res = assert_same_as_chunked_cpu(x, 36, loop, threshold=0.0, max_iter=10)  # duplicate centres: empty clusters
    assert res.delta[0] == 1.0
    assert_same_as_chunked_cpu(x[:9], 9, loop, threshold=0.0)  # k = N


@pytest.mark.parametrize("blocks", [1, 2, 3, 64, 1024])
def test_fused_equals_device_on_every_grid(rng, blocks):
    x = rng.uniform(0, 1, (100_001, 8)).astype(np.float32)
    base = gpuopt.kmeans(x, 3, threshold=0.0, max_iter=12, variant="device")
    for loops_per_sync in (1, 4, 64):
        res = gpuopt.kmeans(x, 3, threshold=0.0, max_iter=12, variant="device_fused", blocks=blocks,
                            loops_per_sync=loops_per_sync)
        np.testing.assert_array_equal(res.membership, base.membership)
        np.testing.assert_array_equal(res.centroids, base.centroids)
        np.testing.assert_array_equal(res.delta, base.delta)
        assert res.iterations == base.iterations == 12


@pytest.mark.parametrize("blocks", [1, 3, 64])
def test_fused_group_sums_on_every_grid_at_k_d_1024(rng, blocks):
    # k*D = 1024: a group's 32 chunk sums staged in 4 rounds of 8 by the block that writes its last one, 3 groups
    # (the last of 5 chunks); any block may be a group's last, or the last of several.
    x = rng.uniform(-1, 1, (70_001, 16)).astype(np.float32)
    base = gpuopt.kmeans(x, 64, threshold=0.0, max_iter=3, variant="device")
    res = gpuopt.kmeans(x, 64, threshold=0.0, max_iter=3, variant="device_fused", blocks=blocks, loops_per_sync=2)
    np.testing.assert_array_equal(res.membership, base.membership)
    np.testing.assert_array_equal(res.centroids, base.centroids)
    np.testing.assert_array_equal(res.delta, base.delta)


def test_fused_stops_inside_a_batch(rng):
    # Converges after a few loops: the rest of the batch returns at once, the history ends at the stop.
    x = np.concatenate([rng.normal(0, 0.01, (3000, 2)), rng.normal(5, 0.01, (3000, 2))]).astype(np.float32)
    ref = gpuopt.kmeans(x, 2, variant="cpu", summation="chunked")
    res = gpuopt.kmeans(x, 2, variant="device_fused", loops_per_sync=64)
    assert res.iterations == ref.iterations < 64 and res.converged  # stopped inside the first batch
    np.testing.assert_array_equal(res.delta, ref.delta)


# ------------------------------------------------------------------ device_gemm / device_tiled: the dot form past k*D = 1024

DOT_LOOPS = ["device_gemm", "device_tiled"]


@pytest.mark.parametrize("n,d,k", [(50_000, 16, 256), (20_001, 33, 100), (9_000, 4, 1024), (30_000, 8, 17),
                                   (1_000_000, 16, 256)], ids=str)
@pytest.mark.parametrize("dot", DOT_LOOPS)
def test_gemm_large_k_equals_cpu(rng, dot, n, d, k):
    # 33 coordinates: the generic path (no registers for x); 4 x 1024: k*D at the limit; k odd: the pad centre.
    x = rng.uniform(0, 1, (n, d)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, dot, threshold=0.0, max_iter=2 if n > 100_000 else 5)


@pytest.mark.parametrize("dot", DOT_LOOPS)
def test_gemm_near_ties_take_liao_s_distance(rng, dot):
    # Integer grid: many objects exactly as far from two centres (the lower index wins) and equal dot forms
    # whose Liao distances differ in rounding; +-1e15 objects overflow the bound (every object recomputed).
    grid = rng.integers(0, 4, (40_000, 8)).astype(np.float32)
    assert_same_as_chunked_cpu(grid, 200, dot, threshold=0.0, max_iter=6)
    x = (rng.uniform(-1, 1, (20_000, 8)) * 10.0 ** rng.integers(-3, 16, (20_000, 1))).astype(np.float32)
    assert_same_as_chunked_cpu(x, 150, dot, threshold=0.0, max_iter=3)
    near = (np.float32(1000) + rng.integers(0, 3, (30_000, 16)).astype(np.float32) * np.float32(2 ** -13))
    assert_same_as_chunked_cpu(near, 64, dot, threshold=0.0, max_iter=4)  # B^2 large against the gaps
    huge = rng.uniform(-3e19, 3e19, (5_000, 4)).astype(np.float32)  # 4B^2 overflows; Liao's distances may too
    assert_same_as_chunked_cpu(huge, 100, dot, threshold=0.0, max_iter=3)


@pytest.mark.parametrize("dot", DOT_LOOPS)
def test_gemm_memberships_are_liao_s(rng, dot):
    # One loop's memberships are the nearest centres of the initial ones by Liao's distance (predict's cpu).
    x = rng.standard_normal((60_000, 12)).astype(np.float32)
    res = gpuopt.kmeans(x, 300, max_iter=1, variant=dot)
    np.testing.assert_array_equal(res.membership, gpuopt.kmeans_predict(x, x[:300], variant="cpu"))


def test_auto_picks_by_shape():
    from gpuopt.kmeans.auto import auto_choice
    assert gpuopt.registry.default_variant("kmeans") == "auto"
    assert auto_choice(488_565, 8, 3) == "device_persistent"
    assert auto_choice(17_695, 9, 3) == "device_persistent"  # Liao's sets
    assert auto_choice(10_000_000, 16, 256) == "device_tiled"
    assert auto_choice(1_000_000, 16, 64) == "device_tiled"  # past the fused finish; the tensor-core screen
    assert auto_choice(1_000_000, 16, 32) == "device"
    assert auto_choice(1_000_000, 32, 8) == "device_tiled"  # longer points: the tile (H200: 0.37 against 1.23 ms)
    assert auto_choice(1_000_000, 64, 2) == "device"  # ... except for two centres
    assert auto_choice(1_000_000, 256, 2) == "device"
    assert auto_choice(1_000_000, 512, 2) == "device_tiled"  # two long centres: the deep path (4.17 against 5.33 ms)
    assert auto_choice(1_000_000, 1024, 2) == "device_tiled"  # (12.6 against device_gemm's 27.0)
    assert auto_choice(10_000_000, 8, 4) == "device"  # k*D x chunks = 312,512: past the fused finish
    assert auto_choice(1000, 4096, 2) == "device_tiled"  # past 4096 centre coordinates: the streamed centres
    assert auto_choice(1_000_000, 128, 1024) == "device_tiled"
    assert auto_choice(20_000, 2, 9000) in ("liao_vec", "cpu")  # past device_tiled's 8192 clusters


def test_auto_runs_its_choice(rng):
    x = rng.uniform(0, 1, (30_000, 8)).astype(np.float32)
    res = gpuopt.kmeans(x, 3, threshold=0.0, max_iter=5)  # variant=None on a GPU: auto
    ref = gpuopt.kmeans(x, 3, threshold=0.0, max_iter=5, variant="cpu", summation="chunked")
    np.testing.assert_array_equal(res.centroids, ref.centroids)
    np.testing.assert_array_equal(res.membership, ref.membership)


# ------------------------------------------------------------------ device / device_fused: x staged (D <= 8), PDL

STAGED_LOOPS = ["device", "device_fused"]


@pytest.mark.parametrize("variant", STAGED_LOOPS)
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 7, 8, 9])
@pytest.mark.parametrize("n", [100, 1024, 1025, 33_000], ids=str)
def test_staged_chunks_every_dim_and_tail(rng, variant, d, n):
    # D <= 8: each chunk of x copied into shared memory before the previous loop is waited for (16-byte pieces for
    # a whole aligned chunk, 4 bytes a float for the tail chunk, zeros past N); D = 9: read from x, as before.
    # N below one chunk, exactly one, one past it, and 33 chunks (one past a group).
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32) * np.float32(10) ** rng.integers(-3, 4, (n, 1)).astype(np.float32)
    for k in (1, 3, 7):
        assert_same_as_chunked_cpu(x, k, variant, threshold=0.0, max_iter=4)


@pytest.mark.parametrize("variant", STAGED_LOOPS)
@pytest.mark.parametrize("blocks", [1, 3, 8])
def test_staged_chunks_restaged_by_a_small_grid(rng, variant, blocks):
    # Fewer blocks than chunks: a block stages its next chunk after the last reads of the one before; loops queued
    # 1 and 4 at a time (every launch after the first a dependent one), the last batch cut short by max_iter.
    x = rng.uniform(0, 1, (65_537, 8)).astype(np.float32)
    for loops_per_sync in (1, 4):
        assert_same_as_chunked_cpu(x, 3, variant, threshold=0.0, max_iter=7, blocks=blocks,
                                   loops_per_sync=loops_per_sync)


@pytest.mark.parametrize("variant", STAGED_LOOPS)
@pytest.mark.parametrize("d", [4, 8, 3])
def test_staged_chunks_from_a_misaligned_device_view(rng, variant, d):
    # x 4 bytes past a 16-byte boundary: every chunk staged 4 bytes a float; the same bits.
    n = 40_001
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    buf = gpuopt.to_device(np.concatenate([np.zeros(1, np.float32), x.ravel()]))
    view = gpuopt.DeviceArray((n, d), np.float32, buf.ptr + 4, buf)
    ref = gpuopt.kmeans(x, 5, threshold=0.0, max_iter=6, variant="cpu", summation="chunked")
    res = gpuopt.kmeans(view, 5, threshold=0.0, max_iter=6, variant=variant)
    np.testing.assert_array_equal(res.membership.numpy(), ref.membership)
    np.testing.assert_array_equal(res.centroids.numpy(), ref.centroids)
    np.testing.assert_array_equal(res.delta, ref.delta)


@pytest.mark.parametrize("variant", STAGED_LOOPS)
@pytest.mark.parametrize("n,d,k", [(50_001, 8, 128), (20_000, 4, 256), (9_000, 1, 1024), (1_000, 1, 1_000)],
                         ids=str)
def test_staged_chunks_with_large_k(rng, variant, n, d, k):
    # k*D up to 1024 next to a staged chunk: the leaf sums in half the passes' slab (more passes a chunk); k = N.
    x = rng.uniform(0, 1, (n, d)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, variant, threshold=0.0, max_iter=3)
