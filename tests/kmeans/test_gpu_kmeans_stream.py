"""k-means ``stream``: points streamed from host memory through device slabs, held to the in-memory variants' bits
(``device`` / ``device_gemm``, and ``cpu(summation="chunked")``): many slabs, N not a multiple of the slab, every
buffer count, both host paths (registered in place, staged), device input, the dot form past k*D = 1024, the result
independent of chunk_points; bad parameters rejected before anything runs."""

import numpy as np
import pytest

import gpuopt
from conftest import needs_cuda_build
from gpuopt import datasets

from .test_gpu_kmeans import _cancelling, assert_same_as_chunked_cpu

GROUP = 32_768  # objects a group of the summation tree: the slab's unit

gpu = pytest.mark.gpu


def assert_same_as(x, k, reference, *, threshold=0.0, max_iter=8, init=None, **params):
    """stream with ``params`` against ``reference`` (an in-memory variant) and cpu(summation="chunked")."""
    ref = gpuopt.kmeans(x, k, threshold=threshold, max_iter=max_iter, init=init, variant=reference)
    res = assert_same_as_chunked_cpu(x, k, "stream", threshold=threshold, max_iter=max_iter, init=init, **params)
    np.testing.assert_array_equal(res.membership, ref.membership)
    np.testing.assert_array_equal(res.centroids, ref.centroids)
    assert res.iterations == ref.iterations
    np.testing.assert_array_equal(res.delta, ref.delta)
    return res


@gpu
@pytest.mark.parametrize("buffers", [2, 3, 4])
@pytest.mark.parametrize("n", [5 * GROUP + 1234, 7 * GROUP, GROUP - 1, 1], ids=str)
def test_many_slabs_equal_device(rng, buffers, n):
    # One group a slab: up to 8 slabs a loop, the last one short (or the only one, N < one group).
    x = rng.uniform(-1, 1, (n, 5)).astype(np.float32) * np.float32(10) ** rng.integers(-4, 5, (n, 1)).astype(np.float32)
    assert_same_as(x, min(7, n), "device", chunk_points=GROUP, buffers=buffers)


@gpu
@pytest.mark.parametrize("chunk_points", [GROUP, 2 * GROUP, 4 * GROUP, 0])
def test_result_does_not_depend_on_the_slab(rng, chunk_points):
    # +-1e15 among noise: any summation order but the tree's shows in the centres.
    x = _cancelling(rng, 9 * GROUP + 77, 4)
    assert_same_as(x, 1, "device", max_iter=1, chunk_points=chunk_points)
    y = rng.uniform(0, 1, (9 * GROUP + 77, 6)).astype(np.float32)
    assert_same_as(y, 9, "device", max_iter=12, chunk_points=chunk_points)


@gpu
@pytest.mark.parametrize("host_memory", ["register", "staged"])
def test_both_host_paths(rng, host_memory):
    x, _ = datasets.make_kmeans_blobs(6 * GROUP + 5, 8, k=4, seed=int(rng.integers(1 << 30)))
    assert_same_as(x, 4, "device", threshold=0.001, max_iter=500, chunk_points=GROUP, host_memory=host_memory)
    # A non-contiguous view: copied once by the input rules, then streamed.
    wide = np.ascontiguousarray(np.repeat(x, 2, axis=1))[:, ::2]
    res = gpuopt.kmeans(wide, 4, threshold=0.0, max_iter=5, variant="stream", chunk_points=GROUP,
                        host_memory=host_memory)
    ref = gpuopt.kmeans(x, 4, threshold=0.0, max_iter=5, variant="device")
    np.testing.assert_array_equal(res.centroids, ref.centroids)


@gpu
def test_dot_form_past_1024_equals_device_gemm(rng):
    n = 3 * GROUP + 999
    x = rng.uniform(0, 1, (n, 16)).astype(np.float32)
    assert_same_as(x, 100, "device_gemm", max_iter=4, chunk_points=GROUP)  # k*D = 1600: auto takes the dot form
    grid = rng.integers(0, 3, (n, 16)).astype(np.float32)  # exact ties: Liao's distances recomputed
    assert_same_as(grid, 256, "device_gemm", max_iter=3, chunk_points=2 * GROUP)
    assert_same_as(x, 8, "device", max_iter=4, chunk_points=GROUP, assign="dot")  # the dot form below 1024 too
    with pytest.raises(ValueError, match=r"k\*D = 1600"):
        gpuopt.kmeans(x, 100, variant="stream", assign="liao")


@gpu
def test_device_input_streams_from_device_memory(rng):
    x = rng.uniform(-1, 1, (3 * GROUP + 1, 3)).astype(np.float32)
    res = gpuopt.kmeans(gpuopt.to_device(x), 5, threshold=0.0, max_iter=6, variant="stream", chunk_points=GROUP)
    assert isinstance(res.membership, gpuopt.DeviceArray)
    ref = gpuopt.kmeans(x, 5, threshold=0.0, max_iter=6, variant="device")
    np.testing.assert_array_equal(res.membership.numpy(), ref.membership)
    np.testing.assert_array_equal(res.centroids.numpy(), ref.centroids)


@gpu
def test_repeated_calls_and_early_stop(rng):
    # Loops stop where the reference stops, though the next loop's first slabs were already being copied.
    x, _ = datasets.make_kmeans_blobs(4 * GROUP, 6, k=5, seed=int(rng.integers(1 << 30)))
    for max_iter in (1, 2, 500):
        assert_same_as(x, 5, "device", threshold=0.001, max_iter=max_iter, chunk_points=GROUP, buffers=3)
    runs = [gpuopt.kmeans(x, 5, threshold=0.0, max_iter=9, variant="stream", chunk_points=GROUP) for _ in range(3)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.centroids, runs[0].centroids)
        np.testing.assert_array_equal(r.membership, runs[0].membership)


@gpu
def test_launcher_rejects_bad_configurations():
    from gpuopt._ext import cuda_module

    check = cuda_module().check.kmeans_stream
    with pytest.raises(ValueError, match="multiple of 32768"):
        check(100_000, 4, 3, chunk_points=1000)
    with pytest.raises(ValueError, match="buffers must be .*, got 1"):  # the table's values (kStreamBuffers)
        check(100_000, 4, 3, buffers=1)
    with pytest.raises(ValueError, match="host_memory must be"):
        check(100_000, 4, 3, host_memory="mapped")
    with pytest.raises(ValueError, match=r"k\*D = 4100"):
        check(100_000, 41, 100)


def test_bad_parameters_are_value_errors_before_anything_runs():
    x = np.zeros((100, 4), np.float32)
    for bad in (dict(chunk_points=1000), dict(chunk_points=-GROUP), dict(buffers=1), dict(buffers=5),
                dict(host_memory="mapped"), dict(assign="gemm")):
        with pytest.raises(ValueError, match="not allowed"):
            gpuopt.kmeans(x, 2, variant="stream", **bad)
    v = gpuopt.variants("kmeans")["stream"]
    assert v.needs_cuda and set(v.params) == {"chunk_points", "buffers", "host_memory", "assign"}
    assert all(c % GROUP == 0 for c in v.params["chunk_points"].allowed)


@needs_cuda_build
def test_slab_parameters_are_checked_without_a_gpu():
    # The slab's own checks come before any device query: they run on a machine without a GPU too.
    from conftest import cuda_build

    check = cuda_build().check.kmeans_stream
    with pytest.raises(ValueError, match="multiple of 32768"):
        check(100_000, 4, 3, chunk_points=GROUP + 1)
    with pytest.raises(ValueError, match="buffers must be .*, got 5"):
        check(100_000, 4, 3, buffers=5)
    with pytest.raises(ValueError, match="assign must be"):
        check(100_000, 4, 3, assign="gemm")
