"""k-means ``device_persistent`` (gpuopt's): the device loop of :mod:`.device`, the whole run in one cooperative
launch."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._exec import ExecContext, check_before_copy
from .._ext import cuda_host_module, cuda_module, launcher
from ..cuda import DeviceArray, to_device
from ..registry import Param, register
from .api import KMeansProblem
from .device import DEVICE, kmeans_args

__all__: list[str] = []

_F32, _I32 = np.dtype(np.float32), np.dtype(np.int32)

#: The longest loop record (1 + max_iter int32) a deferred run keeps on the device; longer runs wait in the call.
DEFERRED_MAX_ITER = 1 << 16


def _kmeans_persistent(ctx: ExecContext, p: KMeansProblem, **params: Any) -> tuple[Any, Any, int, np.ndarray]:
    """``device_persistent``: ``device.kmeans_device`` without the initial centres' copy. A device init (x's first k rows)
    is read by the kernel itself (``init_dev_ptr``), a host one is uploaded into the output centres (timed as a copy
    in); the launcher queues no memset or copy and reads its result from mapped host memory (kmeans_persistent.cu).
    A device result (untimed) gets a loop record on the device too (``result_dev_ptr``): the launcher then returns
    at once, and the call's result reads the record when asked (KMeansResult). A call that will be planned (gpuopt._plan, device x, init x's first rows) offers a replay:
    allocate, launch."""
    n, d = p.x.shape
    k = p.init.shape[0]
    check_before_copy(ctx.variant, (p.x, p.init), n, d, k, **params)
    run = launcher(ctx.variant)
    x_dev = ctx.device(p.x)
    if isinstance(p.init, DeviceArray):
        centroids, init_ptr = ctx.empty((k, d)), p.init.ptr
    else:
        with ctx.h2d():
            centroids, init_ptr = to_device(p.init), 0
    membership = ctx.empty((n,), np.int32)
    defer = ctx.device_result and not ctx.timing and p.max_iter <= DEFERRED_MAX_ITER
    loop = ctx.empty((1 + p.max_iter,), np.int32) if defer else None
    with ctx.kernel():
        iterations, delta = run(kmeans_args(x_dev.ptr, centroids.ptr, membership.ptr, n, d, k, p),
                                init_dev_ptr=init_ptr, result_dev_ptr=loop.ptr if defer else 0, **params)
    if ctx.planning and ctx.device_result and init_ptr == x_dev.ptr:
        threshold, max_iter, cuda = p.threshold, p.max_iter, cuda_module()
        args = cuda_host_module().KMeansArgs
        parts = (((k, d), _F32), ((n,), _I32)) + ((((1 + max_iter,), _I32),) if defer else ())
        alloc, layout = DeviceArray._alloc_parts, DeviceArray._parts(parts)  # one block

        def replay(stream: int, x: DeviceArray) -> tuple[Any, Any, int, Any]:
            previous = cuda.set_stream(stream)
            try:
                c, m, *record = alloc(cuda, layout)
                it, dl = run(args(x._ptr, c._ptr, m._ptr, n, d, k, threshold, max_iter), init_dev_ptr=x._ptr,
                             result_dev_ptr=record[0]._ptr if record else 0, **params)
            finally:
                cuda.set_stream(previous)
            return c, m, it, dl if it else record[0]
        ctx.offer_replay(replay)
    return ctx.finish(centroids), ctx.finish(membership), iterations, delta if iterations else loop


register("kmeans", "device_persistent", description="device's loop, the whole run in ONE cooperative launch "
         "(grid = the co-resident blocks): per loop each block assigns and sums its own whole chunks, each group's sum "
         "by its last block (arrival counters), one grid-wide wait, then every block closes the loop itself (the same "
         "bits everywhere) and goes on with its own centres; x and memberships stay in shared memory where a block's "
         "chunks fit; the host reads the loop count and the history once (a device x: when the result is asked for them, "
         "the call returning at once). k*D <= 1024; the same bits as device and "
         "cpu(summation='chunked')",
         params=(Param.from_kernels("kmeans/device_persistent/blocks",
                       "the grid at most (0: as many as are co-resident; larger values are clamped to that); the "
                       "result does not depend on it"),
                 Param.from_kernels("kmeans/device_persistent/x_memory",
                       "'auto': a block's x staged in shared memory once where its chunks fit, else read every loop; "
                       "'global': always read every loop")),
         **dict(DEVICE, kernel="csrc/kmeans/kmeans_persistent.cu",
                test="tests/kmeans/test_gpu_kmeans_persistent.py"))(_kmeans_persistent)
