"""DLPack both ways (gpuopt/cuda.py, csrc/bindings/cuda_dlpack.cpp): gpuopt's arrays read by PyTorch and CuPy
without a copy, theirs taken in by gpuopt.from_dlpack, the consumer's stream ordered after gpuopt's work."""

import numpy as np
import pytest

import gpuopt
from gpuopt._ext import cuda_module

pytestmark = pytest.mark.gpu

DTYPES = [np.float32, np.float64, np.int16, np.int32, np.int64, np.uint8, np.bool_]


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def _cupy():
    return pytest.importorskip("cupy")


def values(rng, shape, dtype):
    v = rng.standard_normal(shape) * 50
    return (v > 0) if dtype is np.bool_ else v.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (1,), (1, 1, 1)], ids=str)
def test_torch_reads_a_device_array_in_place(rng, dtype, shape):
    torch = _torch()
    host = values(rng, shape, dtype)
    d = gpuopt.to_device(host)
    t = torch.from_dlpack(d)
    assert t.is_cuda and tuple(t.shape) == shape and t.data_ptr() == d.ptr
    np.testing.assert_array_equal(t.cpu().numpy(), host)
    if dtype is not np.bool_:
        t.fill_(3)  # the same memory
        np.testing.assert_array_equal(d.numpy(), np.full(shape, 3, dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_torch_tensors_come_in_without_a_copy(rng, dtype):
    torch = _torch()
    host = values(rng, (4, 9), dtype)
    t = torch.from_numpy(host).cuda()
    d = gpuopt.from_dlpack(t)
    assert isinstance(d, gpuopt.DeviceArray) and d.ptr == t.data_ptr() and d.dtype == np.dtype(dtype)
    ptr = t.data_ptr()
    del t  # the view keeps the tensor alive
    torch.cuda.empty_cache()
    np.testing.assert_array_equal(d.numpy(), host)
    assert d.ptr == ptr


def test_round_trips_and_an_op_in_between(rng):
    torch = _torch()
    x = torch.randn(6, 10, device="cuda")
    y = gpuopt.nn.relu(gpuopt.from_dlpack(x))
    np.testing.assert_array_equal(torch.from_dlpack(y).cpu().numpy(), torch.relu(x).cpu().numpy())
    a, b = gpuopt.to_device(rng.standard_normal((8, 8)).astype(np.float32)), gpuopt.to_device(np.eye(8, dtype=np.float32))
    c = torch.from_dlpack(gpuopt.matmul(a, b))
    np.testing.assert_allclose(c.cpu().numpy(), a.numpy(), rtol=1e-6)


def test_cupy_both_ways(rng):
    cp = _cupy()
    host = rng.standard_normal((5, 7)).astype(np.float32)
    d = gpuopt.to_device(host)
    c = cp.from_dlpack(d)
    assert c.data.ptr == d.ptr
    np.testing.assert_array_equal(cp.asnumpy(c), host)
    back = gpuopt.from_dlpack(c * 2)
    np.testing.assert_array_equal(back.numpy(), 2 * host)


def test_a_side_stream_consumer_waits_for_gpuopt(rng):
    """torch reads gpuopt's result on its own stream: __dlpack__ orders that stream after the legacy stream's
    work (a 2 ms spin queued before the op would otherwise be overtaken)."""
    torch = _torch()
    cuda = cuda_module()
    host = rng.standard_normal(1 << 16).astype(np.float32)
    x = gpuopt.to_device(host)
    s = torch.cuda.Stream()
    for _ in range(20):
        cuda.spin(2000)
        y = gpuopt.nn.relu(x)
        with torch.cuda.stream(s):
            z = torch.from_dlpack(y).clone()
        s.synchronize()
        np.testing.assert_array_equal(z.cpu().numpy(), np.maximum(host, 0))


def test_copy_and_device_requests(rng):
    torch = _torch()
    d = gpuopt.to_device(np.arange(6, dtype=np.float32))
    t = torch.from_dlpack(d.__dlpack__(copy=True))
    assert t.data_ptr() != d.ptr
    np.testing.assert_array_equal(t.cpu().numpy(), np.arange(6))
    assert d.__dlpack_device__() == (2, torch.cuda.current_device())
    with pytest.raises(BufferError):
        d.__dlpack__(dl_device=(1, 0))
    with pytest.raises(ValueError, match="stream"):
        d.__dlpack__(stream=0)


def test_what_from_dlpack_refuses():
    torch = _torch()
    with pytest.raises(ValueError, match="C-contiguous"):
        gpuopt.from_dlpack(torch.zeros(4, 6, device="cuda").t())
    with pytest.raises(ValueError, match="to_device"):
        gpuopt.from_dlpack(torch.zeros(3))
    with pytest.raises(TypeError, match="__dlpack__"):
        gpuopt.from_dlpack([1, 2, 3])
    cap = gpuopt.to_device(np.zeros(3, np.float32)).__dlpack__()
    cuda_module().dlpack_import(cap)
    with pytest.raises(ValueError, match="taken once"):
        cuda_module().dlpack_import(cap)


class OnlyDLPack:
    """A CUDA tensor that speaks DLPack only (as JAX's do): no __cuda_array_interface__."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, **kw):
        return self._t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_ops_take_dlpack_only_inputs_like_device_arrays(rng):
    torch = _torch()
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    wrap = lambda a: OnlyDLPack(torch.from_numpy(a).cuda())  # noqa: E731
    y = gpuopt.conv2d(wrap(x), wrap(w), padding=1)
    assert isinstance(y, gpuopt.DeviceArray)
    np.testing.assert_allclose(y.numpy(), gpuopt.conv2d(x, w, padding=1, variant="cpu"), rtol=1e-4, atol=1e-5)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3)).astype(np.float32)
    np.testing.assert_allclose(gpuopt.matmul(wrap(a), wrap(b)).numpy(), a @ b, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(gpuopt.nn.relu(wrap(a)).numpy(), np.maximum(a, 0))
    xs = rng.integers(-5, 6, (3, 8, 8)).astype(np.int16)
    ws = rng.integers(-5, 6, (2, 3, 3, 3)).astype(np.int16)
    np.testing.assert_array_equal(gpuopt.sparse_conv2d(wrap(xs), wrap(ws), variant="fast_fused").numpy(),
                                  gpuopt.sparse_conv2d(xs, ws, variant="cpu"))
    assert gpuopt.cuda.is_device_array(wrap(a)) and not gpuopt.cuda.is_device_array(a)
