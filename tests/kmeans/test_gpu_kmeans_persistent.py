"""``device_persistent``: the whole run in one cooperative launch. The same bits as ``cpu(summation="chunked")`` and as
``device`` / ``device_fused`` on every grid (1, 3, 64 blocks and the full co-resident grid), with x staged in shared
memory or read from global memory every loop (``x_memory="global"`` reaches that path at small N); awkward N, k = 1
and k = N, empty clusters, early stops, every unrolled D and a generic one, device arrays, alternating plans.
(The variant also runs every test of test_gpu_kmeans.py / test_gpu_kmeans_fused.py that takes DEVICE_LOOPS.)"""

import numpy as np
import pytest

import gpuopt
from threads import run_threads

from .test_gpu_kmeans import _cancelling, assert_same_as_chunked_cpu

pytestmark = pytest.mark.gpu

V = "device_persistent"
GRIDS = [1, 3, 64, 0]  # 0: the full co-resident grid
X_MEMORY = ["auto", "global"]


@pytest.mark.parametrize("x_memory", X_MEMORY)
@pytest.mark.parametrize("blocks", GRIDS)
def test_equals_device_and_fused_on_every_grid(rng, blocks, x_memory):
    x = rng.uniform(0, 1, (100_001, 8)).astype(np.float32)  # 98 chunks: 1..64 blocks own 98..1 of them
    base = gpuopt.kmeans(x, 3, threshold=0.0, max_iter=12, variant="device")
    fused = gpuopt.kmeans(x, 3, threshold=0.0, max_iter=12, variant="device_fused")
    res = gpuopt.kmeans(x, 3, threshold=0.0, max_iter=12, variant=V, blocks=blocks, x_memory=x_memory)
    for other in (base, fused):
        np.testing.assert_array_equal(res.membership, other.membership)
        np.testing.assert_array_equal(res.centroids, other.centroids)
        np.testing.assert_array_equal(res.delta, other.delta)
    assert res.iterations == base.iterations == 12


@pytest.mark.parametrize("x_memory", X_MEMORY)
@pytest.mark.parametrize("blocks", GRIDS)
def test_follows_the_summation_tree_on_every_grid(rng, blocks, x_memory):
    # +-1e15 among noise: any other order of the leaf, chunk, group or total sums gives other float32 means.
    # 70,001 objects: 69 chunks, 3 groups (the last of 5 chunks).
    x = _cancelling(rng, 70_001, 5)
    assert_same_as_chunked_cpu(x, 1, V, max_iter=1, blocks=blocks, x_memory=x_memory)
    assert_same_as_chunked_cpu(x, 4, V, threshold=0.0, max_iter=3, blocks=blocks, x_memory=x_memory)
    y = rng.uniform(-1, 1, (40_000, 16)).astype(np.float32) * np.float32(10) ** rng.integers(-6, 7, (40_000, 1)).astype(
        np.float32)
    assert_same_as_chunked_cpu(y, 64, V, threshold=0.0, max_iter=3, blocks=blocks, x_memory=x_memory)  # k*D = 1024


@pytest.mark.parametrize("x_memory", X_MEMORY)
@pytest.mark.parametrize("d", list(range(1, 25)) + [25, 33])
def test_every_dimension(rng, d, x_memory):
    # D = 1..24 unrolled (x in registers), 25 and 33 generic; N not a multiple of 1024, a partial last leaf.
    n = 5_000 + d
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    assert_same_as_chunked_cpu(x, 3, V, threshold=0.0, max_iter=5, x_memory=x_memory)
    assert_same_as_chunked_cpu(x, 7, V, threshold=0.0, max_iter=3, x_memory=x_memory)  # k > 4: the scatter sums


@pytest.mark.parametrize("x_memory", X_MEMORY)
@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (5, 3, 5), (100, 8, 3), (1023, 8, 1), (1024, 8, 4), (1025, 2, 9),
                                   (3000, 4, 256), (300, 1, 300)], ids=str)
def test_small_and_awkward(rng, n, d, k, x_memory):
    # N below one chunk, exactly one, one past it; k = 1, k = N, k*D = 1024.
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, V, threshold=0.0, max_iter=20, x_memory=x_memory)
    grid = rng.integers(0, 3, (n, d)).astype(np.float32)  # exact ties, duplicates, empty clusters
    assert_same_as_chunked_cpu(grid, k, V, threshold=0.0, max_iter=20, x_memory=x_memory)


def test_k_equals_n_and_empty_clusters(rng):
    x = rng.uniform(0, 1, (64, 3)).astype(np.float32)
    assert_same_as_chunked_cpu(x, 64, V, threshold=0.0)
    init = np.concatenate([x[:3], np.full((1, 3), 1e6, np.float32)])  # the far centre stays empty
    res = assert_same_as_chunked_cpu(x, 4, V, threshold=0.0, max_iter=20, init=init)
    assert not (res.membership == 3).any()
    np.testing.assert_array_equal(res.centroids[3], init[3])


@pytest.mark.parametrize("x_memory", X_MEMORY)
def test_stops_on_the_device(rng, x_memory):
    # Converges well before max_iter: the launch ends itself, the history ends at the stop; max_iter = 1 and 2 too.
    x = np.concatenate([rng.normal(0, 0.01, (30_000, 2)), rng.normal(5, 0.01, (30_000, 2))]).astype(np.float32)
    res = assert_same_as_chunked_cpu(x, 2, V, max_iter=500, x_memory=x_memory)
    assert res.converged and res.iterations < 20
    for max_iter in (1, 2):
        res = assert_same_as_chunked_cpu(x, 2, V, threshold=0.0, max_iter=max_iter, x_memory=x_memory)
        assert res.iterations == max_iter and res.delta[0] == 1.0
    long = rng.uniform(0, 1, (200_000, 2)).astype(np.float32)  # many clusters on noise: a slow fixed point
    res = assert_same_as_chunked_cpu(long, 100, V, threshold=0.0, max_iter=80, x_memory=x_memory)
    assert res.iterations > 62  # a history longer than the first copy back


@pytest.mark.parametrize("x_memory", X_MEMORY)
def test_device_arrays_in_and_out(rng, x_memory):
    x = rng.uniform(-1, 1, (50_001, 8)).astype(np.float32)
    ref = gpuopt.kmeans(x, 3, threshold=0.0, max_iter=7, variant="cpu", summation="chunked")
    res = gpuopt.kmeans(gpuopt.to_device(x), 3, threshold=0.0, max_iter=7, variant=V, x_memory=x_memory)
    assert isinstance(res.centroids, gpuopt.DeviceArray) and isinstance(res.membership, gpuopt.DeviceArray)
    np.testing.assert_array_equal(res.membership.numpy(), ref.membership)
    np.testing.assert_array_equal(res.centroids.numpy(), ref.centroids)
    np.testing.assert_array_equal(res.delta, ref.delta)
    buf = gpuopt.to_device(np.concatenate([np.zeros(1, np.float32), x.ravel()]))  # rows 4 bytes off 16-byte aligned
    view = gpuopt.DeviceArray(x.shape, np.float32, buf.ptr + 4, buf)
    res = gpuopt.kmeans(view, 3, threshold=0.0, max_iter=7, variant=V, x_memory=x_memory)
    np.testing.assert_array_equal(res.membership.numpy(), ref.membership)
    np.testing.assert_array_equal(res.centroids.numpy(), ref.centroids)


def test_the_kmeans04_shape_equals_device(rng):
    x = rng.random((488_565, 8), dtype=np.float32)
    base = gpuopt.kmeans(x, 3, threshold=0.0, max_iter=10, variant="device_fused")
    for blocks in (0, 264, 132):  # 1, 2 and 4 staged chunks a block
        res = gpuopt.kmeans(x, 3, threshold=0.0, max_iter=10, variant=V, blocks=blocks)
        np.testing.assert_array_equal(res.membership, base.membership)
        np.testing.assert_array_equal(res.centroids, base.centroids)
        np.testing.assert_array_equal(res.delta, base.delta)


def test_bad_arguments_rejected_before_launch():
    x = np.zeros((2000, 40), np.float32)
    with pytest.raises(ValueError, match="k\\*D = 1040"):
        gpuopt.kmeans(x, 26, variant=V)
    with pytest.raises(ValueError, match="x_memory"):
        gpuopt.kmeans(x, 2, variant=V, x_memory="shared")
    with pytest.raises(ValueError, match="barrier"):
        gpuopt.kmeans(x, 2, variant=V, barrier="cg")  # measured, not kept (notes/kmeans.md round 6)
    from gpuopt._ext import cuda_module

    check = cuda_module().check.kmeans_device_persistent
    with pytest.raises(ValueError, match="blocks must be >= 0"):
        check(100, 2, 3, blocks=-1)
    with pytest.raises(ValueError, match="k must be in 1..n"):
        check(10, 2, 11)


@pytest.mark.parametrize("cg", [False, True])
def test_grid_barrier_cost_is_measured(cg):  # the hand-written barrier, and cooperative_groups' for comparison
    from gpuopt._ext import cuda_module

    ms = cuda_module().kmeans_grid_barrier_ms(4, 100, cg)
    assert 0 < ms < 100


def test_plans_of_two_shapes_alternate(rng):
    # The same kernel (D = 16, x staged) at two shared-memory sizes, each plan cached: the larger one launched again
    # after the smaller one set the kernel's opt-in lower (H200 call 2: cudaErrorCooperativeLaunchTooLarge before the
    # launcher set it at every launch).
    big = rng.uniform(0, 1, (40_000, 16)).astype(np.float32)  # k*D = 1024: ~117 KB a block
    small = rng.uniform(0, 1, (5_000, 16)).astype(np.float32)  # k = 3: ~83 KB
    for x, k in ((big, 64), (small, 3), (big, 64), (small, 3)):
        assert_same_as_chunked_cpu(x, k, V, threshold=0.0, max_iter=2)


# Round 7, the call's fixed cost: no memset (the barrier word cached per device, never reset), no copy of the initial
# centres (the kernel reads init), no copy back (the result in mapped host memory, grown past its first 64 entries),
# and the plan cache (gpuopt._plan) for device x.
HISTORY_FIRST = 64  # kmeans_persistent.cu kHistoryFirst


@pytest.fixture(params=[True, False], ids=["mapped", "copied"])
def result_path(request):
    from gpuopt._ext import cuda_module

    before = cuda_module().kmeans_persistent_mapped(request.param)
    yield request.param
    cuda_module().kmeans_persistent_mapped(before)


def _same(res, ref):
    def host(a):
        return a.numpy() if isinstance(a, gpuopt.DeviceArray) else a

    np.testing.assert_array_equal(host(res.membership), ref.membership)
    np.testing.assert_array_equal(host(res.centroids), ref.centroids)
    np.testing.assert_array_equal(res.delta, ref.delta)
    assert res.iterations == ref.iterations


def test_back_to_back_calls_of_other_shapes_and_grids(rng, result_path):
    # One barrier word for every run: runs of 1, 3, 64, 132 and the full grid, staged and global x, queued one after
    # the other with no host read between (device arrays), each checked afterwards.
    shapes = [(100_001, 8, 3), (5_003, 3, 7), (40_000, 16, 64), (1_000, 2, 2), (70_001, 5, 4)]
    runs = []
    for i, (n, d, k) in enumerate(shapes * 2):
        x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
        blocks, x_memory = (1, 3, 64, 132, 0)[(i + i // 5) % 5], X_MEMORY[i % 2]
        res = gpuopt.kmeans(gpuopt.to_device(x), k, threshold=0.0, max_iter=4 + i, variant=V, blocks=blocks,
                            x_memory=x_memory)
        runs.append((x, k, 4 + i, res))
    for x, k, max_iter, res in runs:
        _same(res, gpuopt.kmeans(x, k, threshold=0.0, max_iter=max_iter, variant="cpu", summation="chunked"))


def test_history_past_the_first_buffer(rng, result_path):
    # A run of more loops than the result's first size grows it; shorter runs after it reuse the larger one.
    long = rng.uniform(0, 1, (200_000, 2)).astype(np.float32)  # many clusters on noise: a slow fixed point
    first = assert_same_as_chunked_cpu(long, 100, V, threshold=0.0, max_iter=2 * HISTORY_FIRST)
    assert first.iterations > HISTORY_FIRST
    assert_same_as_chunked_cpu(long[:20_000], 5, V, threshold=0.0, max_iter=3)
    res = assert_same_as_chunked_cpu(long, 100, V, threshold=0.0, max_iter=HISTORY_FIRST + 1)
    assert res.iterations == min(HISTORY_FIRST + 1, first.iterations)


def test_early_stop_and_max_iter_one(rng, result_path):
    x = np.concatenate([rng.normal(0, 0.01, (30_000, 2)), rng.normal(5, 0.01, (30_000, 2))]).astype(np.float32)
    res = assert_same_as_chunked_cpu(x, 2, V, max_iter=500)
    assert res.converged and res.iterations < 20 and len(res.delta) == res.iterations
    res = assert_same_as_chunked_cpu(x, 2, V, threshold=0.0, max_iter=1)
    assert res.iterations == 1 and res.delta[0] == 1.0


@pytest.mark.parametrize("where", ["numpy", "device"])
def test_initial_centres_device_and_host(rng, where):
    # Device x with init "first" (the kernel reads x's first rows; they are not written), device x with host centres
    # (uploaded into the output), NumPy x either way; outputs poisoned, so every centre must be written.
    x = rng.uniform(-1, 1, (30_001, 6)).astype(np.float32)
    init = rng.uniform(-1, 1, (5, 6)).astype(np.float32)
    xd = gpuopt.to_device(x) if where == "device" else x
    for kw in ({}, {"init": "first"}, {"init": init}):
        ref = gpuopt.kmeans(x, 5, threshold=0.0, max_iter=6, variant="cpu", summation="chunked", **kw)
        _same(gpuopt.kmeans(xd, 5, threshold=0.0, max_iter=6, variant=V, **kw), ref)
    if where == "device":
        np.testing.assert_array_equal(xd.numpy(), x)  # x's first rows were the initial centres, left as they were
    # k = N: every object a centre, read from x in place (k*D = 900)
    _same(gpuopt.kmeans(gpuopt.to_device(x[:150]), 150, threshold=0.0, max_iter=3, variant=V),
          gpuopt.kmeans(x[:150], 150, threshold=0.0, max_iter=3, variant="cpu", summation="chunked"))


@pytest.mark.parametrize("variant", [V, None, "device_fused"])
def test_planned_calls_run_on_their_own_x(rng, variant):
    # The second and third calls of a problem replay its plan: each must start from ITS x's first rows.
    from gpuopt import _plan

    _plan.clear()
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(0, 1, (20_000, 8)).astype(np.float32)
        res = gpuopt.kmeans(gpuopt.to_device(x), 3, threshold=0.0, max_iter=5, variant=variant)
        _same(res, gpuopt.kmeans(x, 3, threshold=0.0, max_iter=5, variant="cpu", summation="chunked"))
        assert isinstance(res.centroids, gpuopt.DeviceArray)
    assert _plan.size() >= 1


def test_planned_calls_still_reject_bad_arguments(rng):
    x = gpuopt.to_device(rng.uniform(0, 1, (2_000, 4)).astype(np.float32))
    gpuopt.kmeans(x, 3, threshold=0.0, max_iter=2, variant=V)
    gpuopt.kmeans(x, 3, threshold=0.0, max_iter=2, variant=V)  # a plan hit
    with pytest.raises(ValueError, match="threshold"):
        gpuopt.kmeans(x, 3, threshold=-1.0, max_iter=2, variant=V)
    with pytest.raises(ValueError, match="max_iter"):
        gpuopt.kmeans(x, 3, threshold=0.0, max_iter=0, variant=V)
    with pytest.raises(ValueError, match="k must be"):
        gpuopt.kmeans(x, 2_001, threshold=0.0, max_iter=2, variant=V)
    with pytest.raises(TypeError):
        gpuopt.kmeans(x, 3.0, threshold=0.0, max_iter=2, variant=V)
    with pytest.raises(ValueError, match="x_memory"):
        gpuopt.kmeans(x, 3, threshold=0.0, max_iter=2, variant=V, x_memory="shared")
    bad = rng.uniform(0, 1, (2_000, 4)).astype(np.float32)
    bad[7, 1] = np.nan
    for _ in range(2):  # NumPy x is never planned: its finiteness is checked on every call
        with pytest.raises(ValueError, match="finite"):
            gpuopt.kmeans(bad, 3, threshold=0.0, max_iter=2, variant=V)


# Round 8: a group's sum by its last block (arrival counters, a done counter across runs) and chunk_pass (resident x,
# D unrolled, k <= 4: ballot masks for the leaf sums and the counts).
@pytest.mark.parametrize("x_memory", X_MEMORY)
@pytest.mark.parametrize("blocks", [1, 2, 3, 8, 64, 0])
def test_group_sums_by_their_last_block_on_uneven_grids(rng, blocks, x_memory):
    # 150,001 objects: 147 chunks, 5 groups (the last of 19 chunks), a last chunk of 497 objects (a leaf of 17).
    # 1 block: every group its own (no counter); 2: groups 0, 1, 3, 4 in one block, 2 shared; 3, 8, 64: shares of
    # 49, 18-19 and 2-3 chunks across group edges; 0: the co-resident grid (one chunk a block).
    x = _cancelling(rng, 150_001, 8)
    for k in (1, 3, 4, 5):
        assert_same_as_chunked_cpu(x, k, V, threshold=0.0, max_iter=4, blocks=blocks, x_memory=x_memory)


@pytest.mark.parametrize("x_memory", X_MEMORY)
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 8, 16, 32])
@pytest.mark.parametrize("d", [1, 3, 4, 8, 12, 24])
def test_k_one_to_32_with_ragged_chunks(rng, k, d, x_memory):
    # N with a ragged last leaf and chunk: chunk_pass for k <= 4 (resident), the general path past it.
    n = 33_000 + 7 * d + k
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    assert_same_as_chunked_cpu(x, k, V, threshold=0.0, max_iter=5, x_memory=x_memory)
    grid = rng.integers(0, 3, (n, d)).astype(np.float32)  # exact ties and duplicates: ties to the lower index
    assert_same_as_chunked_cpu(grid, k, V, threshold=0.0, max_iter=5, x_memory=x_memory)


@pytest.mark.parametrize("x_memory", X_MEMORY)
def test_early_stop_history_and_many_runs_of_the_done_counter(rng, x_memory):
    # Early stops at other loops, max_iter 1, a long history, and runs of other group counts in between: the done
    # counter carries over from run to run (host-tracked), the arrival counters stay zero between runs.
    x = np.concatenate([rng.normal(0, 0.01, (60_000, 8)), rng.normal(5, 0.01, (60_000, 8))]).astype(np.float32)
    for _ in range(2):
        res = assert_same_as_chunked_cpu(x, 2, V, max_iter=500, x_memory=x_memory)
        assert res.converged and len(res.delta) == res.iterations
        assert_same_as_chunked_cpu(x[:1_500], 3, V, threshold=0.0, max_iter=1, x_memory=x_memory)
        noise = rng.uniform(0, 1, (70_001, 4)).astype(np.float32)
        assert_same_as_chunked_cpu(noise, 4, V, threshold=0.0, max_iter=HISTORY_FIRST + 3, x_memory=x_memory)


# Deferred runs: a device x returns as soon as the loop is queued; the loop count and history stay on the device until
# the result is asked for them. On the legacy and per-thread default streams, counters of their own per (thread,
# stream), left at 0 by every run's last block; on other streams the call's own, zeroed by a queued memset.
def _cuda():
    from gpuopt._ext import cuda_module

    return cuda_module()


def test_deferred_call_returns_before_the_loop_runs(rng):
    x = rng.uniform(-1, 1, (60_001, 8)).astype(np.float32)
    ref = gpuopt.kmeans(x, 4, threshold=0.0, max_iter=6, variant="cpu", summation="chunked")
    xd = gpuopt.to_device(x)
    for variant in (V, None):  # auto picks device_persistent here
        gpuopt.kmeans(xd, 4, threshold=0.0, max_iter=6, variant=variant)  # settle plans and launches
        gpuopt.synchronize()
        _cuda().spin(300_000)  # 300 ms queued first: a call that waited for its loop would take longer
        import time

        t0 = time.perf_counter()
        res = gpuopt.kmeans(xd, 4, threshold=0.0, max_iter=6, variant=variant)
        took = time.perf_counter() - t0
        assert took < 0.15, f"the call waited {took * 1e3:.0f} ms for the GPU"
        assert "on the device" in repr(res)
        _same(res, ref)  # reads the record: waits for the spin and the loop
        assert not res.converged and "iterations=6" in repr(res)


@pytest.mark.parametrize("stream", ["legacy", "per_thread", "side"])
def test_deferred_runs_queued_behind_a_long_kernel(rng, stream):
    # Runs of other shapes, grids, group counts, early stops and max_iter 1, queued back to back behind a 20 ms
    # kernel with no host read between: each run must find its counters at 0 (the previous run's last block reset
    # them) and write its own record; outputs poisoned (the suite's pool poisoning), every record checked after.
    shapes = [(100_001, 8, 3), (5_003, 3, 7), (40_000, 16, 64), (1_000, 2, 2), (150_001, 5, 4), (488_565, 8, 3)]
    runs = []
    stream = {"legacy": 0, "per_thread": 2}[stream] if stream != "side" else _cuda().new_stream()
    previous = _cuda().set_stream(stream)
    _cuda().spin(20_000)
    _cuda().set_stream(previous)
    for i, (n, d, k) in enumerate(shapes * 2):
        x = (rng.uniform(-1, 1, (n, d)) if i % 3 else
             np.concatenate([rng.normal(0, 0.01, (n // 2, d)), rng.normal(5, 0.01, (n - n // 2, d))])).astype(np.float32)
        blocks, threshold, max_iter = (1, 3, 64, 0)[i % 4], (0.0, 0.0, 0.001)[i % 3], (1, 4 + i, 60)[i % 3]
        res = gpuopt.kmeans(gpuopt.to_device(x), k, threshold=threshold, max_iter=max_iter, variant=V, blocks=blocks,
                            stream=stream)
        runs.append((x, k, threshold, max_iter, res))
    for x, k, threshold, max_iter, res in runs:
        ref = gpuopt.kmeans(x, k, threshold=threshold, max_iter=max_iter, variant="cpu", summation="chunked")
        _same(res, ref)
        assert res.converged == ref.converged


def test_deferred_runs_on_four_threads(rng):
    # Each thread's per-thread default stream (its own counters, kernels possibly concurrent) and the legacy stream
    # (one stream shared by the threads, each with its own counters).
    xs = [rng.uniform(-1, 1, (30_000 + 977 * t, 4 + t)).astype(np.float32) for t in range(4)]
    refs = [gpuopt.kmeans(x, 3 + t, threshold=0.0, max_iter=5, variant="cpu", summation="chunked")
            for t, x in enumerate(xs)]

    def work(t):
        xd = gpuopt.to_device(xs[t])
        side = _cuda().new_stream()
        for i in range(12):
            res = gpuopt.kmeans(xd, 3 + t, threshold=0.0, max_iter=5, variant=V, stream=(0, 2, side)[(i + t) % 3])
            if i % 4 == 3:
                _same(res, refs[t])
        _same(res, refs[t])

    run_threads(work, 4)


def test_side_streams_numpy_and_captures(rng, result_path):
    # A user's own stream (deferred, the call's own counters) and NumPy x (waits in the call), interleaved with
    # deferred runs on the legacy stream: they share nothing. A capture: a device x's run replays with x changed in
    # place (its counters zeroed by a memset node each time); a run that must wait cannot be captured (an error).
    x = rng.uniform(-1, 1, (70_001, 5)).astype(np.float32)
    ref = gpuopt.kmeans(x, 4, threshold=0.0, max_iter=7, variant="cpu", summation="chunked")
    side = _cuda().new_stream()
    xd = gpuopt.to_device(x)
    for i in range(3):
        deferred = gpuopt.kmeans(xd, 4, threshold=0.0, max_iter=7, variant=V)
        on_side = gpuopt.kmeans(xd, 4, threshold=0.0, max_iter=7, variant=V, stream=side)
        host = gpuopt.kmeans(x, 4, threshold=0.0, max_iter=7, variant=V)
        assert "on the device" not in repr(host)
        for res in (on_side, host, deferred):
            _same(res, ref)
    from gpuopt.kmeans.api import KMeansResult

    cuda = _cuda()
    xd.synchronize()  # (complete: the capture need not wait for another stream)
    other = np.concatenate([rng.normal(0, 0.01, (35_000, 5)), rng.normal(5, 0.01, (35_001, 5))]).astype(np.float32)
    for host_x, error in ((x, RuntimeError), (xd, ValueError)):  # NumPy x's copy in; timing's wait
        refused = cuda.Graph()
        refused.begin(side)
        try:
            with pytest.raises(error, match="captur"):
                gpuopt.kmeans(host_x, 4, threshold=0.0, max_iter=7, variant=V, stream=side, timing=host_x is xd)
        finally:
            refused.end(True)
    graph = cuda.Graph()
    graph.begin(side)
    try:
        res = gpuopt.kmeans(xd, 4, threshold=0.001, max_iter=7, variant=V, stream=side)
    except BaseException:
        graph.end(True)
        raise
    graph.end(False)
    record = res._pending[0]
    for data in (x, other, x, other):
        cuda.copy_h2d(xd.ptr, data, data.nbytes)  # new points, same address
        gpuopt.synchronize()
        graph.launch(side)
        want = gpuopt.kmeans(data, 4, threshold=0.001, max_iter=7, variant="cpu", summation="chunked")
        replayed = KMeansResult._deferred(res.centroids, res.membership, record, 0.001)
        _same(replayed, want)
        assert replayed.converged == want.converged
    _same(gpuopt.kmeans(xd, 4, threshold=0.001, max_iter=7, variant=V, stream=side),
          gpuopt.kmeans(other, 4, threshold=0.001, max_iter=7, variant="cpu", summation="chunked"))


def test_deferred_one_loop_needs_no_read(rng):
    # max_iter = 1: one loop, every membership changed (delta 1.0), known on the host; the run still deferred.
    x = rng.uniform(-1, 1, (50_000, 8)).astype(np.float32)
    xd = gpuopt.to_device(x)
    for threshold in (0.0, 1.0):
        ref = gpuopt.kmeans(x, 3, threshold=threshold, max_iter=1, variant="cpu", summation="chunked")
        for _ in range(3):
            res = gpuopt.kmeans(xd, 3, threshold=threshold, max_iter=1)
            assert "on the device" not in repr(res)
            _same(res, ref)
            assert res.converged == ref.converged == (threshold >= 1.0)


def test_deferred_record_poisoned_when_not_written_is_an_error(rng):
    # The record is read as written by the run: a record the run did not write (NaN bits of the test pool's poison,
    # or anything out of 1..max_iter) raises instead of reporting a made-up loop count.
    from gpuopt.kmeans.api import KMeansResult

    record = gpuopt.to_device(np.full(8, -3, np.int32))
    res = KMeansResult._deferred(None, None, record, 0.0)
    with pytest.raises(RuntimeError, match="loop"):
        res.iterations
