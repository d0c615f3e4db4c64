"""Launchers' scratch from a per-thread, per-stream arena (csrc/common/scratch.hpp): calls queued back to back on
the legacy default stream reuse the same scratch bytes, which is right only because each call's kernels run after
the previous call's; these tests queue many calls behind a long kernel, with different inputs, filters and sizes
(the arena grows mid-run), and check every result against the CPU reference. Threads keep arenas of their own; a
side stream takes pool blocks; ``empty_cache`` gives the arenas back."""


import numpy as np
import pytest

import gpuopt
import gpuopt.nn
from gpuopt._ext import cuda_module
from gpuopt.sparse import FASTFilters
from threads import run_threads

pytestmark = pytest.mark.gpu


def _sparse_case(rng, c, h, w, m):
    x = rng.integers(-300, 300, size=(c, h, w)).astype(np.int16)
    x[rng.random(x.shape) < 0.6] = 0
    wd = rng.integers(-100, 100, size=(m, c, 3, 3)).astype(np.int16)
    wd[rng.random(wd.shape) < 0.5] = 0
    return x, wd


@pytest.mark.parametrize("variant", ["fast_imma", "fast_sparse_input", None])
def test_sparse_calls_queued_back_to_back_each_keep_their_scratch(rng, variant):
    cuda = cuda_module()
    cases = [_sparse_case(rng, c, h, w, m) for c, h, w, m in
             [(4, 8, 8, 8), (16, 12, 20, 16), (4, 8, 8, 8), (70, 30, 32, 70), (8, 10, 6, 24), (70, 30, 32, 70),
              (3, 5, 7, 2)] * 3]
    filters = [FASTFilters.from_dense(wd).to_device() for _, wd in cases]
    inputs = [gpuopt.to_device(x) for x, _ in cases]
    gpuopt.synchronize()
    cuda.spin(3000)  # every call below queues behind it
    outs = [gpuopt.sparse_conv2d(dx, f, variant=variant) for dx, f in zip(inputs, filters)]
    for (x, wd), y in zip(cases, outs):
        np.testing.assert_array_equal(y.numpy(), gpuopt.sparse_conv2d(x, wd, variant="cpu"))


@pytest.mark.parametrize("variant", ["fused", "zero_skip"])
def test_conv2d_pool_calls_queued_back_to_back_each_keep_their_filters(rng, variant):
    cuda = cuda_module()
    shapes = [((2, 3, 12, 12), (8, 3, 5, 5)), ((3, 6, 12, 12), (16, 6, 5, 5)), ((2, 3, 12, 12), (8, 3, 5, 5)),
              ((4, 1, 28, 28), (6, 1, 5, 5))] * 4
    if variant == "zero_skip":  # its compiled shapes: 12x12 (MNIST's conv2) and 8x12 inputs, 5x5 filters
        shapes = [((n, c, 12, 12), (k, c, 5, 5)) for n, c, k in [(2, 6, 16), (3, 4, 40), (2, 6, 16), (1, 2, 8)] * 4]
    cases = [(np.maximum(rng.standard_normal(xs), 0).astype(np.float32), rng.standard_normal(ws).astype(np.float32))
             for xs, ws in shapes]  # (ReLU'd inputs: zero_skip's zeros to skip)
    dev = [(gpuopt.to_device(x), gpuopt.to_device(w)) for x, w in cases]
    gpuopt.synchronize()
    cuda.spin(3000)
    outs = [gpuopt.nn.conv2d_pool(dx, dw, activation="relu", variant=variant) for dx, dw in dev]
    for (x, w), y in zip(cases, outs):
        want = gpuopt.nn.conv2d_pool(x, w, activation="relu", variant="cpu")
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)


def test_threads_keep_arenas_of_their_own(rng):
    # (banks of 4 x 5 x 5 x 48: past what fused arranges in its kernel, so each call arranges them in its scratch)
    cases = [[(rng.standard_normal((2, 4, 12, 12)).astype(np.float32),
               rng.standard_normal((48, 4, 5, 5)).astype(np.float32)) for _ in range(8)] for _ in range(4)]
    results: dict[int, list] = {}

    def work(i):
        dev = [(gpuopt.to_device(x), gpuopt.to_device(w)) for x, w in cases[i]]
        results[i] = [gpuopt.nn.conv2d_pool(dx, dw, activation="relu", variant="fused").numpy() for dx, dw in dev]

    run_threads(work, 4)
    for i in range(4):
        for (x, w), got in zip(cases[i], results[i]):
            want = gpuopt.nn.conv2d_pool(x, w, activation="relu", variant="cpu")
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_arena_on_the_default_stream_only_and_given_back(rng):
    cuda = cuda_module()
    # (a bank past the size the conv kernel arranges itself: fused arranges it first, into its scratch)
    x = gpuopt.to_device(rng.standard_normal((2, 32, 12, 12)).astype(np.float32))
    w = gpuopt.to_device(rng.standard_normal((64, 32, 5, 5)).astype(np.float32))
    want = gpuopt.nn.conv2d_pool(x.numpy(), w.numpy(), variant="cpu")
    gpuopt.cuda.empty_cache()
    assert cuda.scratch_arena_bytes() == 0
    side = cuda.new_stream()
    y = gpuopt.nn.conv2d_pool(x, w, variant="fused", stream=side)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    assert cuda.scratch_arena_bytes() == 0  # a stream that may be destroyed: pool blocks
    y = gpuopt.nn.conv2d_pool(x, w, variant="fused")
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    assert cuda.scratch_arena_bytes() > 0
    gpuopt.cuda.empty_cache()
    assert cuda.scratch_arena_bytes() == 0
    y = gpuopt.nn.conv2d_pool(x, w, variant="fused")  # a fresh arena after the release
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
