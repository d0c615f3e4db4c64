"""Forward passes replayed from CUDA graphs: ``Network.forward(images, graph=True)``.

The first call of a batch shape (head, stage, N, dtype, max_batch) copies the images into an input buffer of
its own, runs the forward once as usual (every kernel loaded, every plan made) and then captures the same
forward into a CUDA graph on a stream of gpuopt's; later calls of that shape copy their images into the buffer
and launch the graph: one launch instead of a host loop of op calls (the launch gaps of a device-resident
stage, notes/overhead.md). The graph's stream waits for the images' stream before the copy, and the caller's
stream (the images', or the legacy default stream for NumPy images) waits for the graph after it, so a call is
ordered as an eager one. The result is a copy of the graph's output (a later replay cannot change it). Only
device-resident GPU stages can be captured (their chain runs on the device from the images to the result).
"""

from __future__ import annotations

from typing import Any

from .._ext import require_cuda
from ..cuda import DeviceArray

__all__ = ["GraphForward", "graph_forward"]


class GraphForward:
    """One captured forward: its graph, stream, input buffer and output."""

    __slots__ = ("graph", "stream", "images", "out")

    def __init__(self, graph: Any, stream: int, images: DeviceArray, out: Any) -> None:
        self.graph, self.stream, self.images, self.out = graph, stream, images, out


_STREAMS: dict[int, int] = {}  # device -> gpuopt's capture stream (created once, never destroyed)


def _capture_stream(cuda: Any) -> int:
    device = cuda.current_device()
    if device not in _STREAMS:
        _STREAMS[device] = cuda.new_stream()
    return _STREAMS[device]


def _copy_in(cuda: Any, dst: DeviceArray, images: Any, stream: int) -> None:
    """The images (a device array or C-contiguous NumPy) into ``dst``, queued on ``stream``."""
    previous = cuda.set_stream(stream)
    try:
        if isinstance(images, DeviceArray):
            if images._stream is not None and images._stream != stream:
                cuda.stream_wait(stream, images._stream)
            cuda.copy_d2d(dst.ptr, images.ptr, dst.nbytes, stream)
        else:
            cuda.copy_h2d(dst.ptr, images, dst.nbytes, False)
    finally:
        cuda.set_stream(previous)


def graph_forward(net: Any, imgs: Any, head: str | None, variant: str | None, max_batch: int | None,
                  run: Any, check_finite: Any) -> Any:
    """``net``'s forward of the prepared images ``imgs`` (gpuopt.models.network._Images) replayed from its graph for
    this shape (captured on the first call); ``run(images, ...)`` is the network's eager forward, ``check_finite``
    its check of host images."""
    stage = net._stage(variant, head)
    if not (stage.gpu and stage.resident):
        raise ValueError(f"graph=True needs a device-resident GPU stage; {net.network} stage {stage.name!r} passes "
                         "host arrays between layers (use variant='fast' or another resident stage)")
    cuda = require_cuda(f"{net.network} forward(graph=True)")
    data = imgs.data
    key = (stage.name, head, tuple(data.shape), data.dtype.str, max_batch, cuda.current_device())
    cap = net._graphs.get(key)
    if cap is None:
        cap = _capture(cuda, imgs, head, stage.name, max_batch, run, check_finite)
        net._graphs[key] = cap
    else:
        if not imgs.device and not imgs.checked:
            check_finite(data)
        _copy_in(cuda, cap.images, data, cap.stream)
    cap.graph.launch(cap.stream)
    caller = data._stream if isinstance(data, DeviceArray) and data._stream is not None else 0
    if not imgs.device:
        return cap.out.numpy()
    out = cap.out.copy()  # on the graph's stream; the caller's stream waits for it
    cuda.stream_wait(caller, cap.stream)
    out._stream = caller
    return out


def _capture(cuda: Any, imgs: Any, head: str | None, stage: str, max_batch: int | None, run: Any,
             check_finite: Any) -> GraphForward:
    stream = _capture_stream(cuda)
    data = imgs.data
    if not imgs.device and not imgs.checked:
        check_finite(data)
    previous = cuda.set_stream(stream)
    try:
        images = DeviceArray.empty(data.shape, data.dtype)  # on the capture stream
    finally:
        cuda.set_stream(previous)
    _copy_in(cuda, images, data, stream)
    static = type(imgs)(images, True)  # the input buffer as the network's prepared images
    run(static, head, stage, False, max_batch)  # eager once: kernels loaded, plans made, weights uploaded
    graph = cuda.Graph()
    graph.begin(stream)
    try:
        out = run(static, head, stage, False, max_batch)
    except BaseException:
        graph.end(abort=True)
        raise
    graph.end()
    if not isinstance(out, DeviceArray):
        raise RuntimeError(f"stage {stage!r}: the captured forward returned host data")
    return GraphForward(graph, stream, images, out)
