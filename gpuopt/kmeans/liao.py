"""The k-means variants: Liao's ``seq_kmeans`` (the CPU reference, bit for bit) and his CUDA port with the CMU
18-645 report's fix. Every variant returns (centroids, membership, iterations, delta history)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _core
from .._exec import ExecContext, check_before_copy
from .._ext import cuda_module, host_check, launcher
from ..cuda import DeviceArray, to_device
from ..registry import Param, register
from .api import KMeansProblem

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


_POWERS = (32, 64, 128, 256, 512, 1024)


def _threads(default: int) -> Param:
    return Param("threads", default, _POWERS,
                 "threads per block of find_nearest_cluster, one object each (Liao: 128; the CMU report: 256)")


_REDUCTION = Param("reduction_threads", 512, (0, *_POWERS),
                   "threads of compute_delta's one block (the CMU report: 512); 0: Liao's rule (the next power of "
                   "two of the partial count, at most 1024)")
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
         params=(_threads(128),), **_LIAO)(_kmeans_liao)
register("kmeans", "liao_occupancy", description="the CMU report's occupancy step: 256 threads per "
         "find_nearest_cluster block, 512 for compute_delta", report="cmu18645", params=(_threads(256), _REDUCTION),
         **_LIAO)(_kmeans_liao)
register("kmeans", "liao_aos", description="the CMU report's AoS step: objects and centres row-major, no transpose "
         "(each thread reads its object's coordinates in a row)", report="cmu18645",
         params=(_threads(256), _REDUCTION), **_LIAO)(_kmeans_liao)
register("kmeans", "liao_vec", description="the CMU report's vectorised step, made explicit: AoS rows and centres "
         "read as float4 where D % 4 == 0", report="cmu18645", params=(_threads(256), _REDUCTION), **_LIAO)(
    _kmeans_liao)


_BLOCKS = Param("blocks", 0, (0, 1, 2, 3, 8, 64, 1024),
                "assign_and_sum blocks (0: as many as are resident at once); the result does not depend on it")
_DEVICE = dict(report="gpuopt", needs_cuda=True, kernel="csrc/kmeans/kmeans_device.cu",
               test="tests/kmeans/test_gpu_kmeans.py")


def _initial_centroids(ctx: ExecContext, p: KMeansProblem) -> DeviceArray:
    """The initial centres on the device, the loop's working copy: a device init (x's first k rows) is copied
    on the device, no host round trip; a host one is uploaded (timed as a copy in)."""
    if isinstance(p.init, DeviceArray):
        return p.init.copy()
    with ctx.h2d():
        return to_device(p.init)


def _kmeans_device(ctx: ExecContext, p: KMeansProblem, **params: Any) -> tuple[Any, Any, int, np.ndarray]:
    """The loop on the GPU (``device``, ``device_fused``, ``device_gemm``, ``device_tiled``): centres and memberships
    stay on the device; the launcher reads the stop flag and the delta history once per batch of ``loops_per_sync``
    loops."""
    n, d = p.x.shape
    k = p.init.shape[0]
    host_check(ctx.variant)(n, d, k, **params)
    run = launcher(ctx.variant)
    x_dev = ctx.device(p.x)
    centroids = _initial_centroids(ctx, p)
    membership = ctx.empty((n,), np.int32)
    with ctx.kernel():
        iterations, delta = run(x_dev.ptr, centroids.ptr, membership.ptr, n, d, k, p.threshold, p.max_iter, **params)
    return ctx.finish(centroids), ctx.finish(membership), iterations, delta


def _kmeans_persistent(ctx: ExecContext, p: KMeansProblem, **params: Any) -> tuple[Any, Any, int, np.ndarray]:
    """``device_persistent``: ``_kmeans_device`` without the initial centres' copy. A device init (x's first k rows)
    is read by the kernel itself (``init_dev_ptr``), a host one is uploaded into the output centres (timed as a copy
    in); the launcher queues no memset or copy and reads its result from mapped host memory (kmeans_persistent.cu).
    A call that will be planned (gpuopt._plan, device x, init x's first rows) offers a replay: allocate, launch."""
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
    with ctx.kernel():
        iterations, delta = run(x_dev.ptr, centroids.ptr, membership.ptr, n, d, k, p.threshold, p.max_iter,
                                init_dev_ptr=init_ptr, **params)
    if ctx.planning and ctx.device_result and init_ptr == x_dev.ptr:
        threshold, max_iter, alloc, cuda = p.threshold, p.max_iter, DeviceArray._alloc, cuda_module()
        f32, i32 = np.dtype(np.float32), np.dtype(np.int32)

        def replay(x: DeviceArray) -> tuple[Any, Any, int, np.ndarray]:
            c, m = alloc(cuda, (k, d), f32, 4 * k * d), alloc(cuda, (n,), i32, 4 * n)
            it, dl = run(x._ptr, c._ptr, m._ptr, n, d, k, threshold, max_iter, init_dev_ptr=x._ptr, **params)
            return c, m, it, dl
        ctx.offer_replay(replay)
    return ctx.finish(centroids), ctx.finish(membership), iterations, delta


register("kmeans", "device", description="the whole loop on the GPU for k*D <= 1024: one pass assigns (Liao's "
         "distance) and sums each chunk of 1024 objects (float64 over the fixed tree of summation='chunked'), a "
         "warp per centre coordinate finishes the loop (a second kernel); the stop flag read once per batch of "
         "loops; equal to cpu(summation='chunked') bit for bit",
         params=(Param("loops_per_sync", 8, (1, 2, 4, 8, 16, 32),
                       "loops queued before the host reads the stop flag (later ones return at once)"), _BLOCKS),
         **_DEVICE)(_kmeans_device)
register("kmeans", "device_fused", description="device with the finish fused: the last assign_and_sum block to "
         "finish closes the loop (group/chunk tree, new centres, delta, stop flag), one launch a loop; the same bits "
         "as device and cpu(summation='chunked')",
         params=(Param("loops_per_sync", 16, (1, 2, 4, 8, 16, 32, 64),
                       "loops queued before the host reads the stop flag and the delta history (later ones return "
                       "at once)"), _BLOCKS),
         **_DEVICE)(_kmeans_device)
register("kmeans", "device_persistent", description="device's loop, the whole run in ONE cooperative launch "
         "(grid = the co-resident blocks): per loop each block assigns and sums its own whole chunks, each group's sum "
         "by its last block (arrival counters), one grid-wide wait, then every block closes the loop itself (the same "
         "bits everywhere) and goes on with its own centres; x and memberships stay in shared memory where a block's "
         "chunks fit; the host reads the loop count and the history once. k*D <= 1024; the same bits as device and "
         "cpu(summation='chunked')",
         params=(Param("blocks", 0, (0, 1, 2, 3, 8, 64, 132, 264, 1024),
                       "the grid at most (0: as many as are co-resident; larger values are clamped to that); the "
                       "result does not depend on it"),
                 Param.from_kernels("kmeans/device_persistent/x_memory",
                       "'auto': a block's x staged in shared memory once where its chunks fit, else read every loop; "
                       "'global': always read every loop")),
         **dict(_DEVICE, kernel="csrc/kmeans/kmeans_persistent.cu",
                test="tests/kmeans/test_gpu_kmeans_persistent.py"))(_kmeans_persistent)
register("kmeans", "device_gemm", description="device for k*D <= 4096: the nearest centre by the dot form "
         "||c||^2 - 2 x.c (one FMA a centre coordinate), Liao's distances recomputed where the form's rounding bound "
         "cannot separate the two nearest: Liao's memberships; sums and finish as device; the same bits as device and "
         "cpu(summation='chunked')",
         params=(Param("loops_per_sync", 8, (1, 2, 4, 8, 16, 32),
                       "loops queued before the host reads the stop flag (later ones return at once)"), _BLOCKS),
         **_DEVICE)(_kmeans_device)

register("kmeans", "device_tiled", description="device_gemm with its two halves rebuilt: the dot form as a "
         "register-tiled SGEMM (256 points x all k centres a block, a 4 x 8 points x centres tile a thread, float4 "
         "shared-memory loads) with a row-argmin epilogue (Liao's distance for the candidates where the form's "
         "rounding bound cannot separate the two nearest, such points queued and run a tile's worth at once: Liao's "
         "memberships), then the chunk sums from a stable sort "
         "of each chunk's memberships (work by members, not k*D per leaf); finish as device; any k*D (past 4096 "
         "centre coordinates the centres are streamed through shared memory in blocks; D > 128: Liao's distance a "
         "thread a point), k <= 8192; the screen's products in FP32 FMAs or on the tensor cores in 3xTF32 (a warp 32 "
         "points x 32 centres of m16n8k8 mma.sync, with its own rounding bound for the near-tie test); the same bits as "
         "device_gemm and cpu(summation='chunked')",
         params=(Param("loops_per_sync", 8, (1, 2, 4, 8, 16, 32),
                       "loops queued before the host reads the stop flag (later ones return at once)"), _BLOCKS,
                 Param.from_kernels("kmeans/device_tiled/products",
                       "the screen's dot products: 'tf32x3' on the tensor cores (split operands, three mma products), "
                       "'ffma' FP32 FMAs, 'auto' by shape (kmeans_tiled.cu's resolve); memberships Liao's either way")),
         **dict(_DEVICE, kernel="csrc/kmeans/kmeans_tiled.cu"))(_kmeans_device)


#: chunk_points the registry lists: 0 (a slab of 256 MiB of points) or whole groups of the summation tree (32,768
#: objects) times a power of two; the launcher takes any positive multiple of 32,768.
STREAM_CHUNKS = (0, *(32_768 << i for i in range(10)))


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
    centroids = _initial_centroids(ctx, p)
    membership = ctx.empty((n,), np.int32)
    with ctx.kernel():
        iterations, delta, _path = run(x_ptr, centroids.ptr, membership.ptr, n, d, k, p.threshold, p.max_iter,
                                       **params)
    return ctx.finish(centroids), ctx.finish(membership), iterations, delta


register("kmeans", "stream", description="device's loop over points that stay in host memory: each loop streams "
         "them through a few device slabs (copies on their own stream overlapped with the previous slab's "
         "assign-and-sum; slabs of whole 32,768-object groups, the group total carried in order), memberships and "
         "centres on the device; the same bits as device, device_gemm and cpu(summation='chunked')",
         params=(Param("chunk_points", 0, STREAM_CHUNKS, "objects a slab (a multiple of 32,768); 0: 256 MiB of "
                       "points a slab"),
                 Param("buffers", 3, (2, 3, 4), "device slabs: copies run up to buffers - 1 slabs ahead"),
                 Param.from_kernels("kmeans/stream/host_memory",
                       "pageable x: 'register' page-locks it in place for the call; 'staged' copies each slab "
                       "through pinned buffers allocated once per call"),
                 Param.from_kernels("kmeans/stream/assign",
                       "the assignment kernel: 'liao' device's (k*D <= 1024), 'dot' device_gemm's (k*D <= 4096), "
                       "'auto' liao where it fits")),
         report="gpuopt", needs_cuda=True, kernel="csrc/kmeans/kmeans_stream.cu",
         test="tests/kmeans/test_gpu_kmeans_stream.py")(_kmeans_stream)
