"""Forward passes replayed from CUDA graphs: ``Network.forward(images, graph=True)``.

The first call of a batch shape (head, stage, N, dtype, max_batch) runs the forward once as usual (every kernel
loaded, every plan made) and then captures the same forward into a CUDA graph on a stream of gpuopt's; later calls
launch the graph: one launch instead of a host loop of op calls (the launch gaps of a device-resident stage,
notes/overhead.md). Device images are read where they are: a graph is captured on the caller's array itself (its
address is the graph's input) for up to ``BOUND_PER_SHAPE`` addresses of a shape, so a loop over the same device
batch pays no copy; other images (NumPy, or device arrays at further addresses) are copied into an input buffer
of the shape's one general graph before its launch. A graph is launched on the caller's stream (the images', or the
legacy default stream for NumPy images), so a call is ordered as an eager one with no cross-stream wait; CUDA orders
each launch of a graph behind its previous launches, and where the caller's stream changes from one call to the
next, the new stream first waits for the old (the output copy of the last call, the input buffer's last reader).
The result is a copy of the graph's output (a later replay cannot change it).
Only device-resident GPU stages can be captured (their chain runs on the device from the images to the result).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._ext import require_cuda
from ..cuda import DeviceArray

__all__ = ["BOUND_PER_SHAPE", "GraphForward", "ShapeGraphs", "graph_forward"]

#: Graphs captured on callers' own device images (one per address), per batch shape. A graph holds its own
#: intermediate and output memory; further addresses share the shape's general graph (a copy in first).
BOUND_PER_SHAPE = 2


class GraphForward:
    """One captured forward: its graph, capture stream, input buffer (None: it reads the caller's images in place),
    output, and the stream it was last launched on (the capture stream until its first launch)."""

    __slots__ = ("graph", "stream", "images", "out", "last")

    def __init__(self, graph: Any, stream: int, images: DeviceArray | None, out: Any) -> None:
        self.graph, self.stream, self.images, self.out, self.last = graph, stream, images, out, stream


class ShapeGraphs:
    """The graphs of one batch shape: those bound to an image address, and the general one (copy in, then launch)."""

    __slots__ = ("bound", "general")

    def __init__(self) -> None:
        self.bound: dict[int, GraphForward] = {}  # device address of the images -> its graph
        self.general: GraphForward | None = None


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
    stage, gpu = net._stage_on(variant, head)
    if not (gpu and stage.resident):
        raise ValueError(f"graph=True needs a device-resident GPU stage; {net.network} stage {stage.name!r} passes "
                         "host arrays between layers (use variant='fast' or another resident stage)")
    cuda = require_cuda(f"{net.network} forward(graph=True)")
    data = imgs.data
    key = (stage.name, head, tuple(data.shape), data.dtype.str, max_batch, cuda.current_device())
    graphs = net._graphs.get(key)
    if graphs is None:
        graphs = net._graphs[key] = ShapeGraphs()
    device = isinstance(data, DeviceArray)
    caller = data._stream if device and data._stream is not None else 0
    address = data._ptr if device else None
    cap = graphs.bound.get(address) if address is not None else None
    fill = False  # the general graph's buffer to fill with these images
    if cap is None:
        if address is not None and len(graphs.bound) < BOUND_PER_SHAPE:
            cap = graphs.bound[address] = _capture(cuda, imgs, head, stage.name, max_batch, run, check_finite, True)
        elif graphs.general is None:
            cap = graphs.general = _capture(cuda, imgs, head, stage.name, max_batch, run, check_finite, False)
        else:
            cap, fill = graphs.general, True
    if cap.last != caller:  # after the last launch's stream: its output copy and its reads of the buffer
        cuda.stream_wait(caller, cap.last)
        cap.last = caller
    if fill:
        if not imgs.device and not imgs.checked:
            check_finite(data)
        _copy_in(cuda, cap.images, data, caller)
    cap.graph.launch(caller)
    if not imgs.device:
        host = np.empty(cap.out._shape, cap.out._dtype)
        cuda.copy_d2h(host, cap.out._ptr, host.nbytes, caller)
        return host
    return cap.out.copy(stream=caller)  # made on the caller's stream


def _capture(cuda: Any, imgs: Any, head: str | None, stage: str, max_batch: int | None, run: Any,
             check_finite: Any, bound: bool) -> GraphForward:
    """The forward captured on the caller's device images in place (``bound``), else on an input buffer of its own
    (filled here with these images)."""
    stream = _capture_stream(cuda)
    data = imgs.data
    if bound:
        if data._stream is not None and data._stream != stream:
            cuda.stream_wait(stream, data._stream)
        images = object.__new__(DeviceArray)  # the caller's images, as made on the capture stream
        images._shape, images._dtype, images._ptr, images._owner = data._shape, data._dtype, data._ptr, data
        images._stream = stream
    else:
        if not imgs.device and not imgs.checked:
            check_finite(data)
        previous = cuda.set_stream(stream)
        try:
            images = DeviceArray.empty(data.shape, data.dtype)  # on the capture stream
        finally:
            cuda.set_stream(previous)
        _copy_in(cuda, images, data, stream)
    static = type(imgs)(images, True)  # the graph's input as the network's prepared images
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
    out._stream = None  # written by the graph's launches, which graph_forward orders before every read itself
    # A bound graph keeps no reference to the caller's array: it is launched only for images at the same address,
    # of the same shape and dtype, alive in the caller's hands at that call.
    return GraphForward(graph, stream, None if bound else images, out)
