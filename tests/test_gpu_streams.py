"""gpuopt on the caller's stream (gpuopt/cuda.py's rules, csrc/common/stream.hpp): every op family gives the same
result with ``stream=``, runs on PyTorch's current stream inside ``torch.cuda.stream`` (ordered with work queued
before and after it, a long kernel just before included), is captured by ``torch.cuda.graph`` (replays follow
in-place input changes), and the stream-ordered pool never hands a block freed on one stream to another too
early. The races these catch showed in up to 199 of 200 calls before, so each is repeated."""

import numpy as np
import pytest

import gpuopt
import gpuopt.nn
from gpuopt._ext import cuda_module
from gpuopt.models import MnistCNN

pytestmark = pytest.mark.gpu

REPEATS = 60  # a 1-in-50 race shows with probability > 0.7


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


@pytest.fixture(scope="module")
def side_stream():
    """A non-blocking stream of gpuopt's (a raw handle), as a user's own."""
    return cuda_module().new_stream()


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _calls(rng):
    """(name, call(device arrays..., stream=...), host inputs, CPU reference) of one op of every family."""
    x, w, b = _f32(rng, 2, 3, 12, 12), _f32(rng, 4, 3, 3, 3), _f32(rng, 4)
    a, bm = _f32(rng, 33, 40), _f32(rng, 40, 17)
    rows = _f32(rng, 9, 31)
    fc_w = _f32(rng, 31, 6)
    cpu = {"variant": "cpu"}
    return [
        ("conv2d", lambda x, w, b, **k: gpuopt.conv2d(x, w, bias=b, padding=1, activation="relu", **k), (x, w, b),
         gpuopt.conv2d(x, w, bias=b, padding=1, activation="relu", **cpu)),
        ("matmul", lambda a, b, **k: gpuopt.matmul(a, b, **k), (a, bm), a @ bm),
        ("conv2d_pool", lambda x, w, b, **k: gpuopt.nn.conv2d_pool(x, w, b, activation="relu", **k), (x, w, b),
         gpuopt.nn.conv2d_pool(x, w, b, activation="relu", **cpu)),
        ("relu", lambda x, **k: gpuopt.nn.relu(x, **k), (rows,), np.maximum(rows, 0)),
        ("tanh", lambda x, **k: gpuopt.nn.tanh(x, **k), (rows,), gpuopt.nn.tanh(rows, **cpu)),
        ("max_pool2d", lambda x, **k: gpuopt.nn.max_pool2d(x, 2, **k), (x,), gpuopt.nn.max_pool2d(x, 2, **cpu)),
        ("avg_pool2d", lambda x, **k: gpuopt.nn.avg_pool2d(x, 2, **k), (x,), gpuopt.nn.avg_pool2d(x, 2, **cpu)),
        ("fully_connected", lambda x, w, **k: gpuopt.nn.fully_connected(x, w, activation="tanh", **k), (rows, fc_w),
         gpuopt.nn.fully_connected(rows, fc_w, activation="tanh", **cpu)),
        ("argmax", lambda x, **k: gpuopt.nn.argmax(x, **k), (rows,), np.argmax(rows, axis=1)),
        ("softmax", lambda x, **k: gpuopt.nn.softmax(x, **k), (rows,), gpuopt.nn.softmax(rows, **cpu)),
    ]


def _close(got, want):
    got = np.asarray(got)
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_every_family_on_an_explicit_stream_equals_the_default(rng, side_stream):
    for name, call, host, want in _calls(rng):
        dev = [gpuopt.to_device(h).synchronize() for h in host]
        default = call(*dev)
        on = call(*dev, stream=side_stream)
        assert default.stream == 0, name
        assert on.stream == side_stream, name  # made there, and remembers it
        _close(on.numpy(), want)  # (numpy waits for the array's own stream)
        np.testing.assert_array_equal(on.numpy(), default.numpy(), err_msg=name)
        # NumPy in and out on a stream: copies and kernels there, the result waited for.
        _close(call(*host, stream=side_stream), want)


def test_kmeans_and_the_sparse_layer_on_an_explicit_stream(rng, side_stream):
    x = _f32(rng, 500, 5)
    ref = gpuopt.kmeans(x, 4, variant="cpu", summation="chunked")
    dx = gpuopt.to_device(x)
    got = gpuopt.kmeans(dx, 4, variant="device", stream=side_stream)
    np.testing.assert_array_equal(got.centroids.numpy(), ref.centroids)
    np.testing.assert_array_equal(got.membership.numpy(), ref.membership)
    from gpuopt.sparse import FASTFilters

    xs = rng.integers(-40, 40, size=(3, 10, 10)).astype(np.int16)
    xs[xs < 10] = 0
    ws = rng.integers(-3, 4, size=(5, 3, 3, 3)).astype(np.int16)
    ws[np.abs(ws) < 2] = 0
    want = gpuopt.sparse_conv2d(xs, ws, variant="cpu")
    fast = FASTFilters.from_dense(ws)
    y = gpuopt.sparse_conv2d(gpuopt.to_device(xs), fast.to_device(), stream=side_stream)
    assert y.stream == side_stream
    np.testing.assert_array_equal(y.numpy(), want)


def test_stream_argument_errors():
    with pytest.raises(TypeError, match="stream"):
        gpuopt.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), stream="default")
    with pytest.raises(TypeError, match="stream"):
        gpuopt.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), stream=1.5)
    with pytest.raises(ValueError, match="stream handle"):
        gpuopt.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), stream=-3)


def test_an_input_made_on_another_stream_is_waited_for(rng, side_stream):
    cuda = cuda_module()
    a, b = _f32(rng, 64, 64), _f32(rng, 64, 64)
    db = gpuopt.to_device(b).synchronize()
    for _ in range(REPEATS // 3):
        previous = cuda.set_stream(side_stream)
        try:  # a made on the side stream, behind a long kernel
            cuda.spin(3000)
            da = gpuopt.to_device(a)
        finally:
            cuda.set_stream(previous)
        assert da.stream == side_stream
        c = gpuopt.matmul(da, db, stream=0)  # the legacy stream waits for the side stream (an event)
        np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["matmul", "conv2d", "conv2d_pool", "sparse_conv2d"])
def test_torch_side_stream_orders_before_and_after(rng, op):
    """The measured race: inside ``torch.cuda.stream(s)`` a long kernel, torch writes the input, gpuopt reads it,
    torch copies the result, ``s.synchronize()``: every call right."""
    torch = _torch()
    if op == "sparse_conv2d":
        from gpuopt.sparse import FASTFilters

        ws = rng.integers(-3, 4, size=(4, 3, 3, 3)).astype(np.int16)
        wdev = FASTFilters.from_dense(ws).to_device()
        make = lambda: torch.from_numpy(rng.integers(0, 30, size=(3, 12, 12)).astype(np.int16))  # noqa: E731
        run = lambda x: gpuopt.sparse_conv2d(x, wdev)  # noqa: E731
        ref = lambda xh: gpuopt.sparse_conv2d(xh, ws, variant="cpu")  # noqa: E731
    else:
        w = torch.from_numpy(_f32(rng, 4, 3, 3, 3)).cuda()
        bm = torch.from_numpy(_f32(rng, 48, 40)).cuda()
        if op == "matmul":
            make = lambda: torch.from_numpy(_f32(rng, 64, 48))  # noqa: E731
            run = lambda x: gpuopt.matmul(x, bm)  # noqa: E731
            ref = lambda xh: xh @ bm.cpu().numpy()  # noqa: E731
        elif op == "conv2d":
            make = lambda: torch.from_numpy(_f32(rng, 2, 3, 16, 16))  # noqa: E731
            run = lambda x: gpuopt.conv2d(x, w, padding=1)  # noqa: E731
            ref = lambda xh: gpuopt.conv2d(xh, w.cpu().numpy(), padding=1, variant="cpu")  # noqa: E731
        else:
            make = lambda: torch.from_numpy(_f32(rng, 2, 3, 16, 16))  # noqa: E731
            run = lambda x: gpuopt.nn.conv2d_pool(x, w)  # noqa: E731
            ref = lambda xh: gpuopt.nn.conv2d_pool(xh, w.cpu().numpy(), variant="cpu")  # noqa: E731
    s = torch.cuda.Stream()
    host = make()
    x = torch.empty(host.shape, dtype=host.dtype, device="cuda")
    wrong = 0
    for i in range(REPEATS):
        host = make()
        src = host.cuda()
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(2_000_000)  # ~1 ms of GPU time queued just before
            x.copy_(src)
            y = run(x)
            assert y.stream == s.cuda_stream
            out = torch.as_tensor(y, device="cuda").clone()  # torch's read waits for y's stream (CAI)
        s.synchronize()
        if not np.allclose(out.cpu().numpy(), ref(host.numpy()), rtol=1e-4, atol=1e-4):
            wrong += 1
    assert wrong == 0, f"{op}: {wrong} of {REPEATS} calls wrong on a torch side stream"


def _graph_case(torch, rng, op):
    w = torch.from_numpy(_f32(rng, 4, 3, 3, 3)).cuda()
    bm = torch.from_numpy(_f32(rng, 48, 40)).cuda()
    if op == "matmul":
        return (lambda: torch.from_numpy(_f32(rng, 64, 48))), (lambda x: gpuopt.matmul(x, bm)), \
            (lambda xh: xh @ bm.cpu().numpy())
    if op == "conv2d":
        return (lambda: torch.from_numpy(_f32(rng, 2, 3, 16, 16))), (lambda x: gpuopt.conv2d(x, w, padding=1)), \
            (lambda xh: gpuopt.conv2d(xh, w.cpu().numpy(), padding=1, variant="cpu"))
    if op == "conv2d_pool":
        return (lambda: torch.from_numpy(_f32(rng, 2, 3, 16, 16))), (lambda x: gpuopt.nn.conv2d_pool(x, w)), \
            (lambda xh: gpuopt.nn.conv2d_pool(xh, w.cpu().numpy(), variant="cpu"))
    # a chain: conv2d -> relu -> max_pool2d (the intermediates are freed inside the capture)
    return (lambda: torch.from_numpy(_f32(rng, 2, 3, 16, 16))), \
        (lambda x: gpuopt.nn.max_pool2d(gpuopt.nn.relu(gpuopt.conv2d(x, w, padding=1)), 2)), \
        (lambda xh: gpuopt.nn.max_pool2d(np.maximum(gpuopt.conv2d(xh, w.cpu().numpy(), padding=1, variant="cpu"), 0),
                                         2, variant="cpu"))


@pytest.mark.parametrize("op", ["matmul", "conv2d", "conv2d_pool", "chain"])
def test_torch_graph_capture_and_replay(rng, op):
    torch = _torch()
    make, run, ref = _graph_case(torch, rng, op)
    host = make()
    x = host.cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up on a side stream, as torch's capture recipe says
        for _ in range(3):
            y = run(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = run(x)  # the warm-up's y is replaced inside the capture: its block is freed after it
    g.replay()  # y is the graph's memory, mapped from its first launch on
    out = torch.as_tensor(y, device="cuda")
    for _ in range(REPEATS // 3):
        host = make()
        x.copy_(host.cuda())  # in place: the replay reads the new values
        g.replay()
        np.testing.assert_allclose(out.cpu().numpy(), ref(host.numpy()), rtol=1e-4, atol=1e-4)
    del g, y, out
    torch.cuda.synchronize()


def test_the_pool_never_hands_a_block_to_another_stream_too_early(side_stream):
    """A block freed on stream A while A still has a write into it queued (behind a long kernel) must not be
    written by stream B before that: B's data would be overwritten."""
    cuda = cuda_module()
    other = cuda.new_stream()
    n = 1 << 20
    for _ in range(REPEATS // 3):
        previous = cuda.set_stream(side_stream)
        try:
            a = gpuopt.cuda.empty((n,), np.int32)
            cuda.spin(2000)
            cuda.memset(a.ptr, 0x11, 4 * n)  # queued behind the spin
        finally:
            cuda.set_stream(previous)
        del a  # freed on the side stream, in its order
        previous = cuda.set_stream(other)
        try:
            b = gpuopt.cuda.empty((n,), np.int32)
            cuda.memset(b.ptr, 0x22, 4 * n)
        finally:
            cuda.set_stream(previous)
        gpuopt.synchronize()
        assert (b.numpy() == 0x22222222).all()
        del b


def test_models_graph_forward_equals_eager():
    net = MnistCNN.random(3)
    rng = np.random.default_rng(5)
    images = rng.random((300, 28, 28), dtype=np.float32)
    eager = net.forward(gpuopt.to_device(images), variant="fast").numpy()
    for _ in range(3):  # capture on the first call, replays after
        images = rng.random((300, 28, 28), dtype=np.float32)
        eager = net.forward(gpuopt.to_device(images), variant="fast").numpy()
        got = net.forward(gpuopt.to_device(images), variant="fast", graph=True)
        assert isinstance(got, gpuopt.DeviceArray)
        np.testing.assert_array_equal(got.numpy(), eager)
        np.testing.assert_array_equal(net.forward(images, variant="fast", graph=True), eager)  # NumPy in and out
    assert len(net._graphs) == 1  # one per batch shape, whatever the images' placement
    graphs = next(iter(net._graphs.values()))
    assert len(graphs.bound) <= gpuopt.models.graph.BOUND_PER_SHAPE and graphs.general is not None
    pred = net.predict(gpuopt.to_device(images), variant="fast", graph=True)
    np.testing.assert_array_equal(pred.numpy(), np.argmax(eager, axis=1))
    with pytest.raises(ValueError, match="device-resident"):
        net.forward(images, variant="serial", graph=True)
    with pytest.raises(ValueError, match="per-layer"):
        net.forward(images, variant="fast", graph=True, timing=True)


def test_models_graph_reads_device_images_in_place_and_beyond_its_bound_graphs_copies():
    """A graph bound to the caller's device images (their address) replays on new contents written in place; more
    addresses than BOUND_PER_SHAPE go through the shape's general graph; every result equals the eager forward."""
    from gpuopt.models import graph as graph_module

    net = MnistCNN.random(4)
    rng = np.random.default_rng(6)
    batches = [gpuopt.to_device(rng.random((40, 28, 28), dtype=np.float32))
               for _ in range(graph_module.BOUND_PER_SHAPE + 2)]
    for rounds in range(3):
        for d in batches:
            fresh = rng.random((40, 28, 28), dtype=np.float32)
            gpuopt._ext.cuda_module().copy_h2d(d.ptr, fresh, fresh.nbytes)  # new contents, same address
            got = net.forward(d, variant="fast", graph=True)
            np.testing.assert_array_equal(got.numpy(), net.forward(d, variant="fast").numpy())
    (graphs,) = net._graphs.values()
    assert set(graphs.bound) == {d.ptr for d in batches[:graph_module.BOUND_PER_SHAPE]}
    assert all(g.images is None for g in graphs.bound.values()) and graphs.general is not None


def test_models_graph_launches_on_the_callers_stream_and_follows_it_across_streams(side_stream):
    """The graph runs on the images' stream (a long kernel queued there first must precede it); a call on another
    stream waits for the last one's launch and output copy: alternating streams, every result equals eager."""
    cuda = cuda_module()
    other = cuda.new_stream()
    net = MnistCNN.random(5)
    rng = np.random.default_rng(7)
    host = rng.random((64, 28, 28), dtype=np.float32)
    want = net.forward(host, variant="fast")
    for i in range(12):
        s = (side_stream, other, 0)[i % 3]
        previous = cuda.set_stream(s)
        try:
            d = gpuopt.cuda.empty(host.shape, np.float32)  # made on s
            cuda.spin(300)  # the upload below queues behind it: a graph that did not wait would read poison
            cuda.copy_h2d(d.ptr, host, host.nbytes)
        finally:
            cuda.set_stream(previous)
        out = net.forward(d, variant="fast", graph=True)
        assert out.stream == s
        np.testing.assert_array_equal(out.numpy(), want)
        np.testing.assert_array_equal(net.forward(host, variant="fast", graph=True), want)  # NumPy: legacy stream


def test_inputs_dropped_right_after_a_call_on_another_stream_are_not_reused_under_it(rng, side_stream):
    """An input made on the legacy stream, used by a call queued on a busy side stream, then dropped at once: its
    free is ordered after the side stream's work (Buffer.used_on), so new arrays made on the legacy stream meanwhile
    (the same sizes: the pool would hand the same bytes back) cannot overwrite it before the call's kernels read it.
    Every family, and k-means (whose call returns before its loop runs); a complete input (synchronised) too."""
    cuda = cuda_module()
    calls = _calls(rng)
    x = _f32(rng, 30_001, 6)
    calls.append(("kmeans", lambda x, **k: gpuopt.kmeans(x, 4, threshold=0.0, max_iter=5, **k), (x,),
                  gpuopt.kmeans(x, 4, threshold=0.0, max_iter=5, variant="cpu", summation="chunked")))
    for complete in (False, True):
        for name, call, host, want in calls:
            previous = cuda.set_stream(side_stream)
            cuda.spin(20_000)  # the call's kernels queue behind 20 ms of work
            cuda.set_stream(previous)
            dev = [gpuopt.to_device(h) for h in host]
            if complete:
                dev = [d.synchronize() for d in dev]
            out = call(*dev, stream=side_stream)
            del dev  # freed on the legacy stream now
            junk = [gpuopt.to_device(np.full_like(h, 7)) for h in host for _ in range(3)]  # same sizes, legacy
            gpuopt.synchronize(0)
            if name == "kmeans":
                np.testing.assert_array_equal(out.membership.numpy(), want.membership, err_msg=name)
                np.testing.assert_array_equal(out.centroids.numpy(), want.centroids, err_msg=name)
            else:
                _close(out.numpy(), want)
            del junk
