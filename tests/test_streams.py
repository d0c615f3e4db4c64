"""The stream rules on the host side (gpuopt/cuda.py, gpuopt/_exec.py): what a ``stream=`` may be, which stream a
call runs on, what a DeviceArray reports of its stream. The GPU side is tests/test_gpu_streams.py."""

import numpy as np
import pytest

from gpuopt import _exec
from gpuopt.cuda import DeviceArray, cai_stream, stream_handle


class _TorchStream:
    cuda_stream = 0x5000


class _CupyStream:
    ptr = 0x6000


class _Protocol:
    def __cuda_stream__(self):
        return (0, 0x7000)


@pytest.mark.parametrize("given, handle", [(None, None), (0, 0), (1, 0), (2, 2), (0x1234, 0x1234),
                                           (np.int64(9), 9), (_TorchStream(), 0x5000), (_CupyStream(), 0x6000),
                                           (_Protocol(), 0x7000)])
def test_stream_handle(given, handle):
    assert stream_handle(given) == handle


@pytest.mark.parametrize("bad, error", [(True, TypeError), (1.0, TypeError), ("s", TypeError), (object(), TypeError),
                                        (-1, ValueError)])
def test_stream_handle_rejects(bad, error):
    with pytest.raises(error, match="stream"):
        stream_handle(bad)


def _array(stream):
    return DeviceArray((2,), np.float32, 0x1000, None, stream)


def test_a_device_array_reports_its_stream():
    assert _array(0).__cuda_array_interface__["stream"] == 1  # legacy: the interface's 1 (0 is disallowed)
    assert _array(0x5000).__cuda_array_interface__["stream"] == 0x5000
    assert _array(None).__cuda_array_interface__["stream"] is None  # complete: no wait
    view = DeviceArray((1,), np.float32, 0x1000, _array(0x5000))
    assert view.stream == 0x5000  # a view is on its owner's stream


def test_cai_stream():
    assert cai_stream(object(), {"version": 3, "stream": 1}) == 0
    assert cai_stream(object(), {"version": 3, "stream": 0x42}) == 0x42
    assert cai_stream(object(), {"version": 3, "stream": None}) == 0
    assert cai_stream(object(), {"version": 2}) == 0  # (not a torch tensor: nothing to ask)


class _Recorder:
    def __init__(self):
        self.waits = []

    def stream_wait(self, waiter, producer):
        self.waits.append((waiter, producer))


def test_call_stream_takes_the_first_device_input_and_waits_for_the_others(monkeypatch):
    rec = _Recorder()
    monkeypatch.setattr(_exec._ext, "cuda_module", lambda: rec)
    host = np.zeros(2, np.float32)
    assert _exec.call_stream((host, None), None) == 0  # NumPy only: the legacy stream
    assert _exec.call_stream((_array(None), _array(0x50), _array(0x60), _array(0x50)), None) == 0x50
    assert rec.waits == [(0x50, 0x60)]
    rec.waits.clear()
    assert _exec.call_stream((_array(0x50), _array(None)), 0x70) == 0x70  # explicit: waits for the input's stream
    assert rec.waits == [(0x70, 0x50)]


def test_alloc_parts_share_one_block_each_aligned():
    """DeviceArray._alloc_parts: one pool allocation for several arrays, each 256-byte aligned, all on the block's
    stream and keeping it alive (checked with a stand-in for the compiled module's Buffer)."""
    made = []

    class Buffer:
        def __init__(self, nbytes):
            made.append(nbytes)
            self.ptr, self.stream, self.nbytes = 4096, 7, nbytes

    class Cuda:
        pass

    Cuda.Buffer = Buffer
    f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
    a, b, c = DeviceArray._alloc_parts(Cuda(), DeviceArray._parts((((3, 5), f32), ((1,), i32), ((70,), i32))))
    assert made == [256 + 256 + 512]
    assert (a.ptr, b.ptr, c.ptr) == (4096, 4096 + 256, 4096 + 512)
    assert (a.shape, b.shape, c.shape) == ((3, 5), (1,), (70,)) and (a.dtype, b.dtype, c.dtype) == (f32, i32, i32)
    assert a._owner is b._owner is c._owner and a.stream == b.stream == c.stream == 7
