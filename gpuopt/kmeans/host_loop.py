"""k-means with the loop driven from the host: Liao's ``seq_kmeans`` (``cpu``, the CPU reference, bit for bit) and
his CUDA port (``liao``: assignment on the GPU, centre update on the host every loop) with the CMU 18-645 report's
steps over it. The report each variant reproduces is its ``report``. Every variant returns (centroids, membership,
iterations, delta history)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _core
from .._exec import ExecContext
from .._ext import host_check, launcher
from ..registry import Param, register
from .api import KMeansProblem

__all__: list[str] = []

@register("kmeans", "cpu", description="CPU reference (C++, OpenMP assignment): Liao's seq_kmeans, bit for bit",
          report="reference", needs_cuda=False, kernel="csrc/kmeans/kmeans_cpu.cpp", test="tests/kmeans/test_kmeans.py",
          params=(Param.from_kernels("kmeans/cpu/summation",
                        "centre sums: 'liao', float32 in object order (his seq_kmeans); 'chunked', float64 by "
                        "chunks of 1024 objects (members in object order within a chunk, chunks in order), the "
                        "mean rounded once: the order the device-resident variants follow for any grid"),))
def _kmeans_cpu(ctx: ExecContext, p: KMeansProblem, *, summation: str) -> tuple[Any, Any, int, np.ndarray]:
    # Variants return (centroids, membership, iterations, delta history).
    x = ctx.host(p.x)
    with ctx.kernel():
        centroids, membership, iterations, delta = _core.kmeans(x, ctx.host(p.init), p.threshold, p.max_iter,
                                                                summation)
    return ctx.finish(centroids), ctx.finish(membership), iterations, delta


# Each step's thread counts and defaults are csrc's (kmeans_choices.hpp: kLiaoThreads, kLiaoReductionThreads).
def _threads(variant: str) -> Param:
    return Param.from_kernels(f"kmeans/{variant}/threads",
                              "threads per block of find_nearest_cluster, one object each (Liao: 128; the CMU "
                              "report: 256)")


def _reduction(variant: str) -> Param:
    return Param.from_kernels(f"kmeans/{variant}/reduction_threads",
                              "threads of compute_delta's one block (the CMU report: 512); 0: Liao's rule (the next "
                              "power of two of the partial count, at most 1024)")


_LIAO = dict(needs_cuda=True, kernel="csrc/kmeans/kmeans_liao.cu", test="tests/kmeans/test_gpu_kmeans.py")


def _kmeans_liao(ctx: ExecContext, p: KMeansProblem, **params: int) -> tuple[Any, Any, int, np.ndarray]:
    """Liao's cuda_kmeans (and the CMU report's steps over it): objects on the device, assignment and change
    count on the GPU, centre update on the host every loop (bit-identical to the "cpu" variant).

    The loop needs x on both sides: the device copy (transposed to SoA on the device) for
    the assignment and a host copy for the centre update. A device x is therefore also
    downloaded once (timed as d2h); a NumPy x is copied in (timed as h2d). The kernel
    phase is the whole loop (Liao's "computation timing"); its parts go to
    ``Timing.details``: loop_h2d_ms (centre uploads), loop_kernels_ms, loop_d2h_ms
    (membership downloads) and transpose_ms (x to SoA, once).
    """
    n, d = p.x.shape
    k = p.init.shape[0]
    # Shared-memory and block-size limits: rejected before anything is copied or run.
    host_check(ctx.variant)(n, d, k, **params)
    run = launcher(ctx.variant)
    x_dev = ctx.device(p.x)
    x_host = ctx.host(p.x)
    init = ctx.host(p.init)
    with ctx.kernel():
        centroids, membership, iterations, delta, phases = run(
            x_dev.ptr, x_host, init, p.threshold, p.max_iter, timing=ctx.timing, **params)
    ctx.details.update(phases)
    return ctx.finish(centroids), ctx.finish(membership), iterations, delta


# The CMU 18-645 report's ladder over Liao's port (its Tables 1-3), each step keeping the ones before it and
# every one bit-identical to "cpu" (csrc/kmeans/kmeans_cuda.hpp).
register("kmeans", "liao", description="Liao's CUDA port with the CMU report's fix", report="liao",
         params=(_threads("liao"),), **_LIAO)(_kmeans_liao)
register("kmeans", "liao_occupancy", description="the CMU report's occupancy step: 256 threads per "
         "find_nearest_cluster block, 512 for compute_delta", report="cmu18645",
         params=(_threads("liao_occupancy"), _reduction("liao_occupancy")), **_LIAO)(_kmeans_liao)
register("kmeans", "liao_aos", description="the CMU report's AoS step: objects and centres row-major, no transpose "
         "(each thread reads its object's coordinates in a row)", report="cmu18645",
         params=(_threads("liao_aos"), _reduction("liao_aos")), **_LIAO)(_kmeans_liao)
register("kmeans", "liao_vec", description="the CMU report's vectorised step, made explicit: AoS rows and centres "
         "read as float4 where D % 4 == 0", report="cmu18645",
         params=(_threads("liao_vec"), _reduction("liao_vec")), **_LIAO)(_kmeans_liao)
