"""k-means with the whole loop on the device (gpuopt's, ``report="gpuopt"``): ``device`` (assign-and-sum, then a
finishing kernel) and ``device_fused`` (the finish fused into the last block). Centres and memberships stay on the
device; the host reads the stop flag once per batch of loops. :mod:`.persistent`, :mod:`.gemm` and :mod:`.stream`
build on the loop and the helpers here."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._exec import ExecContext
from .._ext import cuda_host_module, host_check, launcher
from ..cuda import DeviceArray, to_device
from ..registry import Param, register
from .api import KMeansProblem

__all__: list[str] = []


def blocks(variant: str) -> Param:
    """The ``blocks`` parameter of a device-loop variant (values and default: csrc/kmeans/kmeans_choices.hpp)."""
    return Param.from_kernels(f"kmeans/{variant}/blocks", "assign_and_sum blocks (0: as many as are resident at "
                              "once); the result does not depend on it")


def loops_per_sync(variant: str) -> Param:
    """The stop flag's batching of the host-synchronised device loops (device, device_gemm, device_tiled; values
    and default: csrc/kmeans/kmeans_choices.hpp)."""
    return Param.from_kernels(f"kmeans/{variant}/loops_per_sync",
                              "loops queued before the host reads the stop flag (later ones return at once)")


#: The device-loop variants' registration facts.
DEVICE = dict(report="gpuopt", needs_cuda=True, kernel="csrc/kmeans/kmeans_device.cu",
              test="tests/kmeans/test_gpu_kmeans.py")


def kmeans_args(x: int, centroids: int, membership: int, n: int, d: int, k: int, p: KMeansProblem) -> Any:
    """The loop launchers' one ``KMeansArgs``: the addresses of x, the centres and the memberships, the sizes and
    ``p``'s stop rule."""
    return cuda_host_module("kmeans").KMeansArgs(x, centroids, membership, n, d, k, p.threshold, p.max_iter)


def initial_centroids(ctx: ExecContext, p: KMeansProblem) -> DeviceArray:
    """The initial centres on the device, the loop's working copy: a device init (x's first k rows) is copied
    on the device, no host round trip; a host one is uploaded (timed as a copy in)."""
    if isinstance(p.init, DeviceArray):
        return p.init.copy()
    with ctx.h2d():
        return to_device(p.init)


def kmeans_device(ctx: ExecContext, p: KMeansProblem, **params: Any) -> tuple[Any, Any, int, np.ndarray]:
    """The loop on the GPU (``device``, ``device_fused``, ``device_gemm``, ``device_tiled``): centres and memberships
    stay on the device; the launcher reads the stop flag and the delta history once per batch of ``loops_per_sync``
    loops."""
    n, d = p.x.shape
    k = p.init.shape[0]
    host_check(ctx.variant)(n, d, k, **params)
    run = launcher(ctx.variant)
    x_dev = ctx.device(p.x)
    centroids = initial_centroids(ctx, p)
    membership = ctx.empty((n,), np.int32)
    with ctx.kernel():
        iterations, delta = run(kmeans_args(x_dev.ptr, centroids.ptr, membership.ptr, n, d, k, p), **params)
    return ctx.finish(centroids), ctx.finish(membership), iterations, delta


register("kmeans", "device", description="the whole loop on the GPU for k*D <= 1024: one pass assigns (Liao's "
         "distance) and sums each chunk of 1024 objects (float64 over the fixed tree of summation='chunked'), a "
         "warp per centre coordinate finishes the loop (a second kernel); the stop flag read once per batch of "
         "loops; equal to cpu(summation='chunked') bit for bit",
         params=(loops_per_sync("device"), blocks("device")),
         **DEVICE)(kmeans_device)
register("kmeans", "device_fused", description="device with the finish fused: the last assign_and_sum block to "
         "finish closes the loop (group/chunk tree, new centres, delta, stop flag), one launch a loop; the same bits "
         "as device and cpu(summation='chunked')",
         params=(Param.from_kernels("kmeans/device_fused/loops_per_sync",
                       "loops queued before the host reads the stop flag and the delta history (later ones return "
                       "at once)"), blocks("device_fused")),
         **DEVICE)(kmeans_device)
