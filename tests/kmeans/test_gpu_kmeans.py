"""k-means "liao" (Liao's CUDA port, fixed) against the CPU reference: bit-identical
memberships, iterations, delta histories and centres. Device memory is poisoned by
conftest, so a membership or coordinate the kernels fail to write shows up as a
difference (or a -1 / NaN)."""

import gc
import re

import numpy as np
import pytest

import gpuopt
from gpuopt import datasets

pytestmark = pytest.mark.gpu

THREADS = list(gpuopt.variants("kmeans")["liao"].params["threads"].allowed)


def assert_same_as_cpu(x, k, *, threshold=0.001, max_iter=500, init=None, variant="liao", **params):
    ref = gpuopt.kmeans(x, k, threshold=threshold, max_iter=max_iter, init=init, variant="cpu")
    res = gpuopt.kmeans(x, k, threshold=threshold, max_iter=max_iter, init=init, variant=variant, **params)
    assert res.membership.dtype == np.int32 and res.centroids.dtype == np.float32
    assert res.membership.shape == ref.membership.shape and res.centroids.shape == ref.centroids.shape
    np.testing.assert_array_equal(res.membership, ref.membership)
    assert res.iterations == ref.iterations
    np.testing.assert_array_equal(res.delta, ref.delta)
    np.testing.assert_array_equal(res.centroids, ref.centroids)  # same float32 sums, same order
    assert res.converged == ref.converged
    return res


@pytest.mark.parametrize("name", list(datasets.KMEANS_SHAPES))
def test_report_shapes_blobs(name):
    x, _ = datasets.make_kmeans_blobs(name, k=3, seed=7)
    res = assert_same_as_cpu(x, 3)
    assert res.delta[0] == 1.0  # every object leaves membership -1 in the first loop


@pytest.mark.data
@pytest.mark.parametrize("name", ["color17695.bin", "edge17695.bin", "texture17695.bin"])
@pytest.mark.parametrize("k", [3, 4, 16])
def test_liao_data(data_root, name, k):
    x = datasets.read_liao(data_root / "kmeans_liao" / name)
    assert x.shape[0] == 17695
    assert_same_as_cpu(x, k)


def test_uniform_noise_threshold_zero(rng):
    # No cluster structure: many loops and many near-ties, run to a fixed point.
    x = rng.uniform(0, 1, (20000, 3)).astype(np.float32)
    res = assert_same_as_cpu(x, 8, threshold=0.0)
    assert res.iterations > 5


def test_exact_ties_on_a_grid(rng):
    # Integer coordinates: many objects exactly equidistant from two centres; the lower
    # index must win, as in the reference.
    x = rng.integers(0, 5, (5000, 2)).astype(np.float32)
    assert_same_as_cpu(x, 6, threshold=0.0)
    tie = np.array([[0.0], [2.0], [1.0]], dtype=np.float32)  # object 2 is equidistant
    assert gpuopt.kmeans(tie, 2, max_iter=1, variant="liao").membership.tolist() == [0, 1, 0]


def test_single_object():
    x = np.array([[1.5, -2.0, 3.25]], dtype=np.float32)
    res = assert_same_as_cpu(x, 1)
    assert res.membership.tolist() == [0] and res.delta.tolist() == [1.0, 0.0]  # -1 -> 0, then stable


def test_k_equals_n(rng):
    x = rng.standard_normal((7, 3)).astype(np.float32)
    res = assert_same_as_cpu(x, 7)
    assert sorted(res.membership.tolist()) == list(range(7))


def test_one_coordinate(rng):
    x = rng.standard_normal((3001, 1)).astype(np.float32)
    assert_same_as_cpu(x, 5, threshold=0.0)


def test_empty_cluster_keeps_its_centre():
    x = np.array([[0.0], [0.1], [0.2]], dtype=np.float32)
    init = np.array([[0.1], [100.0]], dtype=np.float32)
    res = assert_same_as_cpu(x, 2, init=init)
    assert res.centroids[1, 0] == 100.0 and (res.membership == 0).all()


def test_max_iter_caps_loops(rng):
    x = rng.uniform(0, 1, (2000, 2)).astype(np.float32)
    res = assert_same_as_cpu(x, 16, threshold=0.0, max_iter=3)
    assert res.iterations == 3


@pytest.mark.parametrize("threads", THREADS)
def test_every_block_size(rng, threads):
    # N not a multiple of any block size: the last block has idle threads.
    x, _ = datasets.make_kmeans_blobs(9999, 5, k=6, seed=int(rng.integers(1 << 30)))
    assert_same_as_cpu(x, 6, threads=threads)
    noise = rng.uniform(-1, 1, (4097, 4)).astype(np.float32)
    assert_same_as_cpu(noise, 9, threshold=0.0, max_iter=40, threads=threads)


@pytest.mark.parametrize("threads", [32, 128, 1024])
def test_more_than_1024_partial_counts(rng, threads):
    # 200,000 objects: 6250 (32 threads), 1563 (128) or 196 (1024) per-block counts; the
    # first loop must count every object (delta 1.0 exactly), which the report's compute_delta
    # could not do beyond 1024 blocks.
    x, _ = datasets.make_kmeans_blobs(200000, 4, k=5, seed=int(rng.integers(1 << 30)))
    res = assert_same_as_cpu(x, 5, threads=threads)
    assert res.delta[0] == 1.0


def test_device_array_input(rng):
    x, _ = datasets.make_kmeans_blobs(5000, 6, k=4, seed=int(rng.integers(1 << 30)))
    host = gpuopt.kmeans(x, 4, variant="liao")
    dev = gpuopt.kmeans(gpuopt.to_device(x), 4, variant="liao")
    assert isinstance(dev.centroids, gpuopt.DeviceArray) and isinstance(dev.membership, gpuopt.DeviceArray)
    assert dev.centroids.shape == (4, 6) and dev.membership.shape == (5000,)
    assert dev.membership.dtype == np.int32 and dev.centroids.dtype == np.float32
    np.testing.assert_array_equal(dev.membership.numpy(), host.membership)
    np.testing.assert_array_equal(dev.centroids.numpy(), host.centroids)
    np.testing.assert_array_equal(dev.delta, host.delta)
    assert dev.iterations == host.iterations
    # With an explicit init too.
    init = x[10:14].copy()
    dev = gpuopt.kmeans(gpuopt.to_device(x), 4, init=init, variant="liao")
    ref = gpuopt.kmeans(x, 4, init=init, variant="cpu")
    np.testing.assert_array_equal(dev.membership.numpy(), ref.membership)
    np.testing.assert_array_equal(dev.centroids.numpy(), ref.centroids)


def test_timing(rng):
    x, _ = datasets.make_kmeans_blobs(50000, 8, k=4, seed=int(rng.integers(1 << 30)))
    res, t = gpuopt.kmeans(x, 4, variant="liao", timing=True)
    assert t.device == "gpu" and t.kernel_ms > 0 and t.h2d_ms > 0
    loop = {key: t.details[key] for key in ("loop_h2d_ms", "loop_kernels_ms", "loop_d2h_ms")}
    assert all(v >= 0 for v in loop.values()) and loop["loop_kernels_ms"] > 0 and loop["loop_d2h_ms"] > 0
    assert t.details["transpose_ms"] >= 0
    # The phases lie inside the timed loop, on the same device timeline.
    assert sum(loop.values()) + t.details["transpose_ms"] <= t.kernel_ms * 1.01 + 0.05
    np.testing.assert_array_equal(res.membership, gpuopt.kmeans(x, 4, variant="cpu").membership)
    # Device input: x used in place on the device, downloaded once for the host-side
    # update (d2h), and the results uploaded to device arrays (h2d).
    _, td = gpuopt.kmeans(gpuopt.to_device(x), 4, variant="liao", timing=True)
    assert td.d2h_ms > 0 and td.h2d_ms > 0
    assert td.kernel_ms > 0 and "loop_kernels_ms" in td.details


def test_centres_beyond_48kb_of_shared_memory(rng):
    # 40 x 500 centre coordinates = 80 KB: needs the opt-in above the default 48 KB.
    x, _ = datasets.make_kmeans_blobs(3000, 500, k=40, seed=int(rng.integers(1 << 30)))
    assert_same_as_cpu(x, 40, max_iter=5, threads=1024)


def test_centres_too_large_for_shared_memory_rejected_before_running():
    from gpuopt._ext import cuda_module

    cuda = cuda_module()
    limit = gpuopt.device_info()["shared_memory_per_block_optin_bytes"]
    x = np.linspace(0, 1, 60000, dtype=np.float32).reshape(60000, 1)  # k*D = 60000 floats = 240 KB
    gc.collect()
    in_use = cuda.pool_in_use_bytes()
    with pytest.raises(ValueError, match="shared memory") as info:
        gpuopt.kmeans(x, 60000, variant="liao")
    assert str(limit) in str(info.value)
    assert cuda.pool_in_use_bytes() == in_use  # nothing was copied to the device


@pytest.mark.parametrize("threads", [48, 2048, 0, 100])
def test_invalid_threads_rejected(threads):
    x = np.zeros((10, 2), dtype=np.float32)
    with pytest.raises(ValueError, match=r"threads=.*not allowed.*" + re.escape(str(THREADS))):
        gpuopt.kmeans(x, 2, variant="liao", threads=threads)


def test_check_rejects_what_the_kernel_cannot_run():
    # The C++ safety net under the registry's check.
    from gpuopt._ext import cuda_module

    check = cuda_module().check.kmeans_liao
    with pytest.raises(ValueError, match="threads must be .*, got 96"):  # the table's values (kLiaoThreads)
        check(100, 2, 3, threads=96)
    with pytest.raises(ValueError, match="1024"):
        check(100, 2, 3, threads=2048)
    with pytest.raises(ValueError, match="k must be"):
        check(10, 2, 11, threads=128)
    check(100, 2, 3, threads=128)  # fits: no error


# ------------------------------------------------------------------ the CMU report's ladder over Liao's port

LADDER = ["liao_occupancy", "liao_aos", "liao_vec"]


@pytest.mark.parametrize("variant", LADDER)
@pytest.mark.parametrize("name", list(datasets.KMEANS_SHAPES))
def test_ladder_report_shapes(variant, name):
    x, _ = datasets.make_kmeans_blobs(name, k=3, seed=7)
    assert_same_as_cpu(x, 3, variant=variant)


@pytest.mark.data
@pytest.mark.parametrize("variant", LADDER)
@pytest.mark.parametrize("name", ["color17695.bin", "edge17695.bin", "texture17695.bin"])
@pytest.mark.parametrize("k", [3, 5, 8, 16])
def test_ladder_liao_data(data_root, variant, name, k):
    assert_same_as_cpu(datasets.read_liao(data_root / "kmeans_liao" / name), k, variant=variant)


@pytest.mark.parametrize("variant", LADDER)
@pytest.mark.parametrize("d", [1, 3, 4, 8, 9, 16])  # float4 rows (D % 4 == 0) and the scalar fallback
def test_ladder_awkward_data(rng, variant, d):
    noise = rng.uniform(-1, 1, (4097, d)).astype(np.float32)
    assert_same_as_cpu(noise, 9, threshold=0.0, max_iter=40, variant=variant)
    grid = rng.integers(0, 4, (3001, d)).astype(np.float32)  # exact ties
    assert_same_as_cpu(grid, 5, threshold=0.0, variant=variant)
    assert_same_as_cpu(grid[:5], 5, variant=variant)  # k = N
    assert_same_as_cpu(grid[:1], 1, variant=variant)  # N = 1


@pytest.mark.parametrize("variant", LADDER)
@pytest.mark.parametrize("threads,reduction", [(32, 0), (128, 32), (256, 512), (1024, 1024), (64, 128)])
def test_ladder_thread_counts(rng, variant, threads, reduction):
    x, _ = datasets.make_kmeans_blobs(9999, 8, k=6, seed=int(rng.integers(1 << 30)))
    assert_same_as_cpu(x, 6, variant=variant, threads=threads, reduction_threads=reduction)


def test_vec_on_a_misaligned_device_view(rng):
    """A device x whose rows are not 16-byte aligned takes the scalar AoS path: the same result."""
    x = rng.uniform(-1, 1, (1001, 4)).astype(np.float32)
    buf = gpuopt.to_device(np.concatenate([np.zeros(1, np.float32), x.ravel()]))
    view = gpuopt.DeviceArray((1001, 4), np.float32, buf.ptr + 4, buf)
    ref = gpuopt.kmeans(x, 5, threshold=0.0, variant="cpu")
    res = gpuopt.kmeans(view, 5, threshold=0.0, variant="liao_vec")
    np.testing.assert_array_equal(res.membership.numpy(), ref.membership)
    np.testing.assert_array_equal(res.centroids.numpy(), ref.centroids)


def test_ladder_rejects_bad_thread_counts():
    x = np.zeros((100, 4), np.float32)
    with pytest.raises(ValueError, match="reduction_threads=48 is not allowed"):
        gpuopt.kmeans(x, 2, variant="liao_aos", reduction_threads=48)
    from gpuopt._ext import cuda_module

    with pytest.raises(ValueError, match="reduction_threads must be 0"):
        cuda_module().check.kmeans_liao_vec(100, 4, 2, threads=256, reduction_threads=48)


# ------------------------------------------------------------------ "device": the whole loop on the GPU


# The loop-on-the-GPU variants (two kernels a loop, one with the finish fused, the dot form's assignment, the dot
# form tiled with sorted sums, the whole run in one launch): every test runs all five, each held to the same bits.
# LOOP_LIMIT: the most centre coordinates k*D each holds (device_tiled: any k*D, at most kMaxClusters = 8192 clusters).
DEVICE_LOOPS = ["device", "device_fused", "device_gemm", "device_tiled", "device_persistent"]
LOOP_LIMIT = {"device": 1024, "device_fused": 1024, "device_gemm": 4096, "device_tiled": None,
              "device_persistent": 1024}


@pytest.fixture(params=DEVICE_LOOPS)
def loop(request):
    return request.param


def assert_same_as_chunked_cpu(x, k, variant, *, threshold=0.001, max_iter=500, init=None, **params):
    ref = gpuopt.kmeans(x, k, threshold=threshold, max_iter=max_iter, init=init, variant="cpu", summation="chunked")
    res = gpuopt.kmeans(x, k, threshold=threshold, max_iter=max_iter, init=init, variant=variant, **params)
    np.testing.assert_array_equal(res.membership, ref.membership)
    assert res.iterations == ref.iterations
    np.testing.assert_array_equal(res.delta, ref.delta)
    np.testing.assert_array_equal(res.centroids, ref.centroids)  # the same float64 sums in the same order
    return res


@pytest.mark.parametrize("name", list(datasets.KMEANS_SHAPES))
def test_device_report_shapes(name, loop):
    x, _ = datasets.make_kmeans_blobs(name, k=3, seed=7)
    assert_same_as_chunked_cpu(x, 3, loop)


@pytest.mark.data
@pytest.mark.parametrize("name", ["color17695.bin", "edge17695.bin", "texture17695.bin"])
@pytest.mark.parametrize("k", [3, 5, 8, 16])
def test_device_liao_data(data_root, name, k, loop):
    x = datasets.read_liao(data_root / "kmeans_liao" / name)
    res = assert_same_as_chunked_cpu(x, k, loop)
    liao = gpuopt.kmeans(x, k, variant="cpu")
    differ = int(np.count_nonzero(res.membership != liao.membership))
    assert differ <= x.shape[0] // 100, f"{differ} memberships differ from the Liao-exact result"


@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (7, 3, 7), (1023, 4, 5), (1024, 8, 3), (1025, 16, 64), (5000, 2, 1),
                                   (20001, 5, 9)], ids=str)
def test_device_awkward_shapes(rng, n, d, k, loop):
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, loop, threshold=0.0, max_iter=60)
    grid = rng.integers(0, 3, (n, d)).astype(np.float32)  # exact ties, duplicates, empty clusters
    assert_same_as_chunked_cpu(grid, k, loop, threshold=0.0, max_iter=60)


def _cancelling(rng, n, d):
    """+-1e15 in equal numbers among noise objects: the float64 rounding of the partial sums is as large as what is
    left of the noise, so every summation order but the tree's gives other float32 means (tests/kmeans/test_kmeans.py
    shows this on the CPU)."""
    big = rng.permutation(np.concatenate([np.repeat(np.array([1e15, -1e15]), n // 4), np.zeros(n - n // 4 * 2)]))
    return np.where(big[:, None] != 0, big[:, None], rng.standard_normal((n, d)) * 100).astype(np.float32)


@pytest.mark.parametrize("n,d,k", [(70000, 3, 1), (70001, 16, 32), (40000, 16, 64), (3000, 1024, 1), (3000, 257, 2),
                                   (100000, 8, 3)], ids=str)
def test_device_follows_the_summation_tree(rng, n, d, k, loop):
    # Leaves of 32, chunks of 32 leaves (in one pass, or 16 or 8 leaves a pass for larger k*D), groups of 32 chunks,
    # groups in order: the same bits as the CPU's tree on data where any other order shows.
    x = _cancelling(rng, n, d)
    assert_same_as_chunked_cpu(x, 1, loop, max_iter=1)
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32) * np.float32(10) ** rng.integers(-6, 7, (n, 1)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, loop, threshold=0.0, max_iter=4)


@pytest.mark.parametrize("blocks", [1, 3, 64, 1024])
def test_device_result_does_not_depend_on_the_grid(rng, blocks, loop):
    x = _cancelling(rng, 50000, 4)
    base = gpuopt.kmeans(x, 1, max_iter=1, variant=loop)
    res = gpuopt.kmeans(x, 1, max_iter=1, variant=loop, blocks=blocks)
    np.testing.assert_array_equal(res.centroids, base.centroids)
    assert_same_as_chunked_cpu(rng.uniform(0, 1, (50000, 4)).astype(np.float32), 6, loop, threshold=0.0, max_iter=20,
                               blocks=blocks)


def test_device_repeated_runs_give_the_same_bits(rng, loop):
    x, _ = datasets.make_kmeans_blobs(120000, 8, k=3, seed=int(rng.integers(1 << 30)))
    runs = [gpuopt.kmeans(x, 3, threshold=0.0, max_iter=30, variant=loop) for _ in range(3)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.centroids, runs[0].centroids)
        np.testing.assert_array_equal(r.membership, runs[0].membership)
        np.testing.assert_array_equal(r.delta, runs[0].delta)


@pytest.mark.parametrize("loops_per_sync", [1, 2, 8, 32])
def test_device_batches_of_loops_stop_where_the_reference_stops(rng, loops_per_sync, loop):
    x, _ = datasets.make_kmeans_blobs(30000, 6, k=5, seed=int(rng.integers(1 << 30)))
    batches = {} if loop == "device_persistent" else dict(loops_per_sync=loops_per_sync)  # one launch: no batches
    for max_iter in (1, 3, 500):
        assert_same_as_chunked_cpu(x, 5, loop, max_iter=max_iter, **batches)


def test_device_input_stays_on_the_device(rng, loop):
    x = rng.uniform(-1, 1, (4000, 4)).astype(np.float32)
    res = gpuopt.kmeans(gpuopt.to_device(x), 4, variant=loop)
    assert isinstance(res.centroids, gpuopt.DeviceArray) and isinstance(res.membership, gpuopt.DeviceArray)
    ref = gpuopt.kmeans(x, 4, variant="cpu", summation="chunked")
    np.testing.assert_array_equal(res.membership.numpy(), ref.membership)
    np.testing.assert_array_equal(res.centroids.numpy(), ref.centroids)


def test_device_limits_are_checked_before_launch(loop):
    if LOOP_LIMIT[loop] is None:  # no k*D limit: the number of clusters is checked
        with pytest.raises(ValueError, match="k = 8193 clusters; at most 8192"):
            gpuopt.kmeans(np.zeros((9000, 2), np.float32), 8193, variant=loop)
        return
    k = LOOP_LIMIT[loop] // 40 + 1  # one centre past the limit
    x = np.zeros((2000, 40), np.float32)
    with pytest.raises(ValueError, match=f"k\\*D = {k * 40}"):
        gpuopt.kmeans(x, k, variant=loop)


# ------------------------------------------------------------------ kmeans_predict "device"

@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (257, 3, 5), (1000, 8192, 2), (5000, 7, 3000), (100_000, 16, 256)],
                         ids=str)
def test_device_predict_equals_cpu(n, d, k):
    rng = np.random.default_rng(n + d + k)
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    c = rng.uniform(-1, 1, (k, d)).astype(np.float32)
    out = gpuopt.kmeans_predict(x, c, variant="device")  # allocations poisoned: a missed object shows as -1
    assert isinstance(out, np.ndarray) and out.dtype == np.int32
    np.testing.assert_array_equal(out, gpuopt.kmeans_predict(x, c, variant="cpu"))


def test_device_predict_ties_across_shared_memory_tiles():
    # 8192 // 7 = 1170 centres a tile: equal centres at 5, 1175 and 2900 (three tiles) tie for every object.
    rng = np.random.default_rng(3)
    c = rng.uniform(10, 20, (3000, 7)).astype(np.float32)
    c[1175] = c[2900] = c[5] = 0.0
    x = rng.integers(-1, 2, (4000, 7)).astype(np.float32)
    out = gpuopt.kmeans_predict(gpuopt.to_device(x), gpuopt.to_device(c), variant="device")
    assert (out.numpy() == 5).all()
    np.testing.assert_array_equal(out.numpy(), gpuopt.kmeans_predict(x, c, variant="cpu"))


def test_device_predict_is_the_default_on_a_gpu_and_checks_its_limits():
    assert gpuopt.registry.default_variant("kmeans_predict") == "device"
    with pytest.raises(ValueError, match="at most 8192 coordinates"):
        gpuopt.kmeans_predict(np.zeros((2, 8193), np.float32), np.zeros((1, 8193), np.float32), variant="device")
