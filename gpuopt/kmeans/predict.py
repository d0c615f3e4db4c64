"""``gpuopt.kmeans_predict``: the cluster of new points for given centres (Liao's assignment step alone)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _core
from .._exec import ExecContext, dispatch
from .._ext import host_check, launcher
from .._validate import float_array
from ..registry import register

__all__ = ["kmeans_predict"]


@dataclass(frozen=True)
class PredictProblem:
    """A validated kmeans_predict call: x (N, D) and centroids (k, D), float32."""

    x: Any  # numpy.ndarray or DeviceArray
    centroids: Any


def kmeans_predict(x, centroids, *, variant: str | None = None, timing: bool = False, stream: Any = None, **params: Any):
    """The nearest centre of every object, as :func:`gpuopt.kmeans` assigns them.

    Distances are squared Euclidean in float32, summed over coordinates in order, ties to the lower centre index
    (Liao's ``find_nearest_cluster``): ``kmeans_predict(x, init)`` is the membership of ``kmeans``' first loop.

    Parameters
    ----------
    x : array_like float (N, D), or a device array
    centroids : array_like float (k, D), or a device array (e.g. ``kmeans(...).centroids``)

    stream : optional
        The stream to run on: a ``cudaStream_t`` handle (int), ``torch.cuda.Stream``, CuPy stream, or anything
        with ``cuda_stream``/``ptr``/``__cuda_stream__``. Default: the first device input's stream (PyTorch's
        or CuPy's current stream for their arrays), else the legacy default stream (:mod:`gpuopt.cuda`).

    Returns
    -------
    int32 (N,): NumPy, or a DeviceArray when an input is on the device; ``(membership, Timing)`` with
    ``timing=True``.

    Raises
    ------
    TypeError
        Non-float arrays.
    ValueError
        Wrong shapes, D differing between x and centroids, non-finite values (NumPy inputs).
    """
    x = float_array(x, "x", 2, "(N, D)")
    centroids = float_array(centroids, "centroids", 2, "(k, D)")
    if centroids.shape[1] != x.shape[1]:
        raise ValueError(f"centroids must have D = {x.shape[1]} coordinates as x {tuple(x.shape)}, got "
                         f"{tuple(centroids.shape)}")
    for a, name in ((x, "x"), (centroids, "centroids")):
        if isinstance(a, np.ndarray) and not np.isfinite(a).all():
            raise ValueError(f"{name} must contain only finite values (NaN/inf found)")
    return dispatch("kmeans_predict", variant, params, timing, (x, centroids), PredictProblem(x, centroids), stream=stream)


@register("kmeans_predict", "cpu", description="CPU reference (C++, OpenMP over objects): Liao's assignment step",
          report="reference", needs_cuda=False, kernel="csrc/kmeans/kmeans_cpu.cpp", test="tests/kmeans/test_kmeans.py")
def _predict_cpu(ctx: ExecContext, p: PredictProblem) -> Any:
    x, c = ctx.host(p.x), ctx.host(p.centroids)
    with ctx.kernel():
        membership = _core.kmeans_predict(x, c)
    return ctx.finish(membership)


@register("kmeans_predict", "device", description="one thread per object, the centres through shared memory in "
          "index order: Liao's distance and ties, equal to cpu", report="gpuopt", needs_cuda=True, preferred=True,
          kernel="csrc/kmeans/kmeans_device.cu", test="tests/kmeans/test_gpu_kmeans.py")
def _predict_device(ctx: ExecContext, p: PredictProblem) -> Any:
    n, d = p.x.shape
    k = p.centroids.shape[0]
    host_check(ctx.variant)(n, d, k)
    x, c = ctx.device(p.x), ctx.device(p.centroids)
    membership = ctx.empty((n,), np.int32)
    with ctx.kernel():
        launcher(ctx.variant)(x.ptr, c.ptr, membership.ptr, n, d, k)
    return ctx.finish(membership)
