"""k-means ``stream`` (gpuopt's): the device loop over points that stay in host memory, streamed through device
slabs every loop."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._exec import ExecContext
from .._ext import host_check, launcher
from ..cuda import DeviceArray
from ..registry import Param, register
from .api import KMeansProblem
from .device import initial_centroids, kmeans_args

__all__ = ["STREAM_CHUNKS"]

_CHUNK_POINTS = Param.from_kernels("kmeans/stream/chunk_points",
                                   "objects a slab (a multiple of 32,768); 0: 256 MiB of points a slab")
#: chunk_points the registry lists: csrc/kmeans/kmeans_choices.hpp's kStreamChunkPoints (0, or whole groups of the
#: summation tree times a power of two), read, not listed again; the launcher takes any multiple of 32,768.
STREAM_CHUNKS = _CHUNK_POINTS.allowed


def _kmeans_stream(ctx: ExecContext, p: KMeansProblem, *, chunk_points: int, buffers: int, host_memory: str,
                   assign: str) -> tuple[Any, Any, int, np.ndarray]:
    """``stream``: the points stay where they are and every loop streams them through ``buffers`` device slabs
    of ``chunk_points`` objects (copies on a stream of their own, overlapped with the previous slab's kernels);
    centres and memberships stay on the device (4 bytes an object), so N is bounded by host memory and by
    device memory / 4 bytes. A float32 C-contiguous NumPy x is used in place: page-locked for the call
    (``cudaHostRegister``, no copy; memory already pinned is used as it is); only another dtype or layout is
    copied first (gpuopt's input rules), and that copy is page-locked. ``host_memory="staged"`` (or a refused
    registration) copies each slab through pinned staging buffers allocated once per call instead. A device x
    is streamed from device memory. Equal to ``device`` (and ``cpu(summation="chunked")``) bit for bit for any
    chunk_points: every slab holds whole groups of the summation tree. The launcher's third result says which
    path x took ("device", "pinned", "registered" or "staged")."""
    n, d = p.x.shape
    k = p.init.shape[0]
    params = dict(chunk_points=chunk_points, buffers=buffers, host_memory=host_memory, assign=assign)
    host_check(ctx.variant)(n, d, k, **params)
    run = launcher(ctx.variant)
    x = p.x  # NumPy (float32, C-contiguous: api.kmeans's input rules) or a DeviceArray: never copied here
    x_ptr = x.ptr if isinstance(x, DeviceArray) else x.ctypes.data
    centroids = initial_centroids(ctx, p)
    membership = ctx.empty((n,), np.int32)
    with ctx.kernel():
        iterations, delta, _path = run(kmeans_args(x_ptr, centroids.ptr, membership.ptr, n, d, k, p), **params)
    return ctx.finish(centroids), ctx.finish(membership), iterations, delta


register("kmeans", "stream", description="device's loop over points that stay in host memory: each loop streams "
         "them through a few device slabs (copies on their own stream overlapped with the previous slab's "
         "assign-and-sum; slabs of whole 32,768-object groups, the group total carried in order), memberships and "
         "centres on the device; the same bits as device, device_gemm and cpu(summation='chunked')",
         params=(_CHUNK_POINTS,
                 Param.from_kernels("kmeans/stream/buffers",
                       "device slabs: copies run up to buffers - 1 slabs ahead"),
                 Param.from_kernels("kmeans/stream/host_memory",
                       "pageable x: 'register' page-locks it in place for the call; 'staged' copies each slab "
                       "through pinned buffers allocated once per call"),
                 Param.from_kernels("kmeans/stream/assign",
                       "the assignment kernel: 'liao' device's (k*D <= 1024), 'dot' device_gemm's (k*D <= 4096), "
                       "'auto' liao where it fits")),
         report="gpuopt", needs_cuda=True, kernel="csrc/kmeans/kmeans_stream.cu",
         test="tests/kmeans/test_gpu_kmeans_stream.py")(_kmeans_stream)
