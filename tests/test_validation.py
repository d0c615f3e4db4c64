"""Bad input gets a clear Python exception naming the argument, never a crash."""

import numpy as np
import pytest

import gpuopt
from gpuopt import nn

F = np.float32
X4 = np.ones((1, 2, 5, 5), F)
W4 = np.ones((3, 2, 3, 3), F)


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(x=np.ones((2, 5, 5), F)), ValueError, r"x must be 4-D \(N, C, H, W\); got shape \(2, 5, 5\)"),
    (dict(w=np.ones((3, 3, 3), F)), ValueError, r"w must be 4-D"),
    (dict(x=np.ones((1, 2, 5, 5), np.int32)), TypeError, r"x must be a floating-point array.*int32.*astype"),
    (dict(x=np.ones((1, 2, 5, 5), bool)), TypeError, "x must be a floating-point array"),
    (dict(x=np.ones((1, 2, 5, 5), complex)), TypeError, "floating-point"),
    (dict(x=np.array([[[[object()]]]])), TypeError, "object"),
    (dict(x=None), TypeError, "x must be an array, got None"),
    (dict(x="abc"), TypeError, "numeric array"),
    (dict(x=np.ones((0, 2, 5, 5), F)), ValueError, "empty dimension"),
    (dict(w=np.ones((3, 4, 3, 3), F)), ValueError, "w has 4 input channels but x has 2"),
    (dict(w=np.ones((3, 2, 7, 3), F)), ValueError, r"filter 7x3 is larger than the padded input 5x5"),
    (dict(stride=0), ValueError, "stride must be >= 1"),
    (dict(stride=(1, 0)), ValueError, r"stride\[1\] must be >= 1"),
    (dict(stride=1.5), TypeError, "stride must be an integer"),
    (dict(stride=(1, 2, 3)), ValueError, "pair"),
    (dict(padding=-1), ValueError, "padding must be >= 0"),
    (dict(padding=True), TypeError, "padding must be an integer"),
    (dict(bias=np.ones(4, F)), ValueError, r"bias must have shape \(3,\)"),
    (dict(bias=np.ones((3, 1), F)), ValueError, "bias must be 1-D"),
    (dict(activation="sigmoid"), ValueError, r"activation must be one of \[None, 'none', 'relu', 'tanh'\]"),
])
def test_conv2d_bad_input(kwargs, exc, match):
    args = dict(x=X4, w=W4)
    args.update(kwargs)
    x, w = args.pop("x"), args.pop("w")
    with pytest.raises(exc, match=match):
        gpuopt.conv2d(x, w, variant="cpu", **args)


def test_padding_makes_a_large_filter_legal():
    assert gpuopt.conv2d(X4, np.ones((1, 2, 7, 7), F), padding=1).shape == (1, 1, 1, 1)


@pytest.mark.parametrize("a,b,exc,match", [
    (np.ones((2, 3), F), np.ones((4, 2), F), ValueError, r"inner dimensions differ: a is \(2, 3\)"),
    (np.ones(3, F), np.ones((3, 2), F), ValueError, r"a must be 2-D \(M, K\)"),
    (np.ones((2, 3), F), np.ones((3, 2), np.int64), TypeError, "b must be a floating-point array"),
    (np.ones((2, 0), F), np.ones((0, 2), F), ValueError, "empty dimension"),
    ([[1.0, 2.0]], [[1.0], [2.0]], None, None),  # nested lists of floats are fine
])
def test_matmul_bad_input(a, b, exc, match):
    if exc is None:
        assert gpuopt.matmul(a, b)[0, 0] == 5.0
        return
    with pytest.raises(exc, match=match):
        gpuopt.matmul(a, b)


X2 = np.random.default_rng(0).random((10, 3)).astype(F)


@pytest.mark.parametrize("args,kwargs,exc,match", [
    ((X2, 11), {}, ValueError, r"k must be <= the number of objects N=10, got k=11"),
    ((X2, 0), {}, ValueError, "k must be >= 1"),
    ((X2, 2.0), {}, TypeError, "k must be an integer"),
    ((X2, 2), dict(threshold=float("nan")), ValueError, "threshold must be finite"),
    ((X2, 2), dict(threshold=float("inf")), ValueError, "threshold must be finite"),
    ((X2, 2), dict(threshold=-0.1), ValueError, "threshold must be >= 0"),
    ((X2, 2), dict(threshold="0.1"), TypeError, "threshold must be a real number"),
    ((X2, 2), dict(max_iter=0), ValueError, "max_iter must be >= 1"),
    ((X2, 2), dict(init=np.ones((3, 3), F)), ValueError, r"init must have shape \(k, D\) = \(2, 3\)"),
    ((X2, 2), dict(init=np.full((2, 3), np.nan, F)), ValueError, "init must contain only finite"),
    ((X2.astype(np.int32), 2), {}, TypeError, "x must be a floating-point array"),
    ((np.array([[1.0], [np.nan]], F), 1), {}, ValueError, "x must contain only finite"),
    ((np.ones(5, F), 1), {}, ValueError, r"x must be 2-D \(N, D\)"),
])
def test_kmeans_bad_input(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        gpuopt.kmeans(*args, **kwargs)


@pytest.mark.parametrize("x,w,exc,match", [
    (np.ones((2, 4, 4), np.int16), np.ones((1, 3, 3, 3), np.int16), ValueError, "w has 3 input channels but x has 2"),
    (np.ones((2, 4, 4), np.int16), np.ones((1, 2, 2, 2), np.int16), ValueError, "odd sides"),
    (np.ones((2, 1, 4), np.int16), np.ones((1, 2, 3, 3), np.int16), ValueError, "at least 2x2"),
    (np.ones((4, 4), np.int16), np.ones((1, 1, 3, 3), np.int16), ValueError, r"x must be 3-D \(C, H, W\)"),
    (np.ones((1, 4, 4), np.float64), np.ones((1, 1, 3, 3), np.int16), TypeError, "x must be an integer array"),
    (np.ones((1, 4, 4), np.int16), np.ones((1, 1, 3, 3), np.float32), TypeError, "w must be an integer array"),
    (np.full((1, 4, 4), 2**20), np.ones((1, 1, 3, 3), np.int16), ValueError, r"fit in int16 \[-32768, 32767\]"),
])
def test_sparse_conv_bad_input(x, w, exc, match):
    with pytest.raises(exc, match=match):
        gpuopt.sparse_conv2d(x, w)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: nn.relu(np.float32(1.0)), ValueError, "at least one dimension"),
    (lambda: nn.tanh(np.ones(3, np.int8)), TypeError, "floating-point"),
    (lambda: nn.max_pool2d(np.ones(5, F)), ValueError, r"2-D \(H, W\)"),
    (lambda: nn.max_pool2d(np.ones((4, 4), F), 0), ValueError, "size must be >= 1"),
    (lambda: nn.avg_pool2d(np.ones((4, 4), F), 5), ValueError, "larger than the input"),
    (lambda: nn.fully_connected(np.ones((2, 3), F), np.ones((4, 5), F)), ValueError, r"\(in_features, out_features\)"),
    (lambda: nn.fully_connected(np.ones((2, 3), F), np.ones((3, 5), F), np.ones(4, F)), ValueError, r"bias must have shape \(5,\)"),
    (lambda: nn.argmax(np.ones(3, F)), ValueError, "2-D"),
])
def test_nn_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_internal_module_rejects_mismatched_arrays_without_crashing():
    # The compiled layer re-checks shapes from the arrays themselves (safety net).
    from gpuopt import _core
    with pytest.raises(ValueError, match="input channels"):
        _core.conv2d(X4, np.ones((1, 3, 3, 3), F), None, 1, 1, 0, 0, "none")
    with pytest.raises(TypeError):
        _core.matmul(np.ones((2, 2), np.float64), np.ones((2, 2), F))  # no silent conversion


# ------------------------------------------------------------------ sizes that cannot be allocated

@pytest.fixture
def small_machine(monkeypatch):
    """A machine of 1 GiB of memory and a GPU of 1 GiB, so that every call the tests reject is rejected here,
    whatever this machine has."""
    from gpuopt import _validate

    monkeypatch.setattr(_validate, "host_memory_bytes", lambda: 1 << 30)
    monkeypatch.setattr(_validate, "device_memory_bytes", lambda: 1 << 30)


def _quick_and_allocating_nothing(call, match):
    """``call`` raises ValueError matching ``match`` within a second, having allocated under 16 MiB."""
    import time
    import tracemalloc

    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=match) as err:
            call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.perf_counter() - started < 1.0 and peak < 16 << 20, (time.perf_counter() - started, peak)
    return str(err.value)


@pytest.mark.parametrize("variant", ["cpu", None])
@pytest.mark.parametrize("padding", [10**6, (0, 10**10), 10**30])  # over any host or GPU memory
def test_conv2d_padding_too_large_to_allocate(variant, padding):
    message = _quick_and_allocating_nothing(
        lambda: gpuopt.conv2d(X4, W4, padding=padding, variant=variant), r"^conv2d: padding=\(")
    assert "the output y (N, K, P, Q)" in message and "nothing was allocated" in message
    assert "physical memory" in message or "GPU's total memory" in message


def test_conv2d_size_message_names_the_sizes():
    message = _quick_and_allocating_nothing(lambda: gpuopt.conv2d(X4, W4, padding=10**6, variant="cpu"), "padding")
    assert "(1, 3, 2000003, 2000003) float32: 43.7 TiB" in message  # 4 * 3 * 2000003**2 bytes
    assert "x (N, C, H, W) = (1, 2, 5, 5), w (K, C, R, S) = (3, 2, 3, 3)" in message
    assert "accumulators" in message  # the CPU reference's per-thread P*Q float64


def test_conv2d_output_shape_checks_shapes_and_allocates_nothing():
    assert gpuopt.conv2d_output_shape((1, 2, 5, 5), (3, 2, 3, 3), padding=10**6) == (1, 3, 2000003, 2000003)
    with pytest.raises(ValueError, match="filter 7x7 is larger than the padded input 5x5"):
        gpuopt.conv2d_output_shape((1, 2, 5, 5), (3, 2, 7, 7))
    with pytest.raises(ValueError, match="stride must be >= 1"):
        gpuopt.conv2d_output_shape((1, 2, 5, 5), (3, 2, 3, 3), stride=0)


def test_large_padding_that_fits_still_runs():
    y = gpuopt.conv2d(X4, W4, padding=300, variant="cpu")
    assert y.shape == (1, 3, 603, 603) and y[0, 0, 300, 300] == 18.0


@pytest.mark.parametrize("call,match", [
    (lambda: gpuopt.matmul(np.ones((10**6, 1), F), np.ones((1, 10**6), F), variant="cpu"),
     r"^matmul: a \(M, K\) = \(1000000, 1\) and b \(K, N\) = \(1, 1000000\) would need 3.64 TiB"),
    (lambda: gpuopt.matmul(np.ones((10**6, 1), F), np.ones((1, 10**6), F)), r"^matmul: .* output c \(M, N\)"),
    (lambda: nn.fully_connected(np.ones((10**6, 1), F), np.ones((1, 10**6), F)),
     r"^fully_connected: x \(N, in_features\) = \(1000000, 1\) and w"),
    (lambda: nn.conv2d_pool(np.ones((100, 1, 28, 28), np.uint8), np.ones((10**6, 1, 1, 1), F), input_divisor=255.0,
                            variant="cpu"),
     r"^conv2d_pool: x .* w \(K, C, R, S\) = \(1000000, 1, 1, 1\) and pool_size=2 .*the unpooled convolution"),
    (lambda: nn.conv2d_pool(np.ones((100, 1, 28, 28), F), np.ones((10**6, 1, 1, 1), F), pool_size=2),
     r"^conv2d_pool: .*the output \(N, K, P, Q\) = \(100, 1000000, 14, 14\)"),
])
def test_outputs_too_large_to_allocate(call, match, small_machine):
    _quick_and_allocating_nothing(call, match)


def _huge_coo():
    """A COO filter of declared side 10**6 + 1 with no entry: nothing stored, 2 * 10**12 bytes dense."""
    from gpuopt.sparse import COOFilters

    empty = np.zeros(0, np.int16)
    return COOFilters((1, 1, 10**6 + 1, 10**6 + 1), np.zeros((1, 1), np.int32), empty, empty, empty)


def test_sparse_filters_too_large_to_expand():
    message = _quick_and_allocating_nothing(
        lambda: gpuopt.sparse_conv2d(np.ones((1, 8, 8), np.int16), _huge_coo(), variant="cpu"),
        r"^sparse_conv2d: x \(C, H, W\) = \(1, 8, 8\) and COOFilters \(M, C, R, S\) = \(1, 1, 1000001, 1000001\)")
    assert "the dense filters (M, C, R, S) = (1, 1, 1000001, 1000001) int16: 1.82 TiB" in message


def test_sparse_output_too_large_to_allocate(small_machine):
    from gpuopt.sparse import COOFilters

    m = 10**6
    w = COOFilters.from_dense(np.ones((1, 1, 3, 3), np.int16))
    many = COOFilters((m, 1, 3, 3), np.zeros((m, 1), np.int32), *(np.zeros(0, np.int16),) * 3)
    assert gpuopt.sparse_conv2d(np.ones((1, 8, 8), np.int16), w, variant="cpu").shape == (1, 4, 4)
    x = np.ones((1, 4000, 4000), np.int16)
    _quick_and_allocating_nothing(lambda: gpuopt.sparse_conv2d(x, many),
                                 r"the output \(M, H // 2, W // 2\) = \(1000000, 2000, 2000\) int32")


def test_network_chunk_too_large_for_the_machine(small_machine):
    net = gpuopt.models.MnistCNN.random(0, memory_budget_bytes=None)
    images = np.zeros((10_000, 28, 28), np.uint8)  # 2.1 GB of activations in one chunk
    message = _quick_and_allocating_nothing(lambda: net.forward(images, variant="serial"),
                                           r"^mnist stage 'serial': a chunk of 10,000 images \(max_batch=None, "
                                           r"memory_budget_bytes=None\) would need 1.97 GiB of host memory")
    assert "1 GiB of this machine's physical memory" in message
    assert net.forward(images[:100], variant="serial", max_batch=10).shape == (100, 10)  # smaller chunks run


def test_check_memory_sides(monkeypatch):
    """The output counts where it is made and where the caller gets it; scratch where the variant keeps it."""
    from gpuopt import _validate
    from gpuopt._validate import Buffer, check_memory

    monkeypatch.setattr(_validate, "host_memory_bytes", lambda: 4 << 30)
    monkeypatch.setattr(_validate, "device_memory_bytes", lambda: 1 << 30)
    out = [Buffer("the output", 2 << 30)]
    check_memory("op", "args", out, gpu=False, device_result=False)  # 2 GiB on a 4 GiB host
    for gpu, device_result in ((True, False), (True, True), (False, True)):  # the output is on the device too
        with pytest.raises(ValueError, match=r"^op: args would need 2 GiB of device memory \(the output: 2 GiB\), "
                                             r"more than the 1 GiB of the GPU's total memory; nothing was allocated$"):
            check_memory("op", "args", out, gpu=gpu, device_result=device_result)
    with pytest.raises(ValueError, match="3 GiB of device memory"):
        check_memory("op", "args", [Buffer("a", 1 << 30, "device"), Buffer("b", 2 << 30, "device")], gpu=True,
                     device_result=False)
    with pytest.raises(ValueError, match=r"5 GiB of host memory \(a: 2 GiB; b: 3 GiB\)"):
        check_memory("op", "args", [Buffer("a", 2 << 30), Buffer("b", 3 << 30, "host")], gpu=False,
                     device_result=False)
    asked = []  # small calls never ask where they run (the common path stays a few multiplications)
    check_memory("op", "args", [Buffer("a", 1 << 20)], gpu=lambda: asked.append(1) or True, device_result=False)
    assert not asked
    monkeypatch.setattr(_validate, "host_memory_bytes", lambda: None)  # unknown: no bound
    check_memory("op", "args", [Buffer("a", 1 << 60)], gpu=False, device_result=False)


def test_host_memory_is_this_machines():
    import os

    from gpuopt._validate import format_bytes, host_memory_bytes

    assert host_memory_bytes() == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert format_bytes(512) == "512 bytes" and format_bytes(3 << 30) == "3 GiB"
    assert format_bytes(16 * 10**12) == "14.6 TiB"
