"""The matmul variants, registered simple to fast: the CPU reference, the ladder of hand-written kernels
(the CMU report's steps and gpuopt's, one per csrc/matmul/ file) and cuBLAS, the baseline.

The order of registration is the ladder's one owner: :func:`ladder` and :func:`ladder_step` read it, and so
do the matmul study's tables and the kernels' header comments ("Ladder step N", checked by a test).
Tile names are "BMxBNxBK": block tile rows x columns x k-step; each is a template instantiation in
csrc/matmul/. notes/matmul.md has each step's H200 numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _core
from .._exec import ExecContext
from .._ext import cuda_host_module, cuda_module, launcher, planner
from .._plan import device_ptrs
from ..cuda import DeviceArray
from ..registry import Param, register, resolve, variants

__all__ = ["ladder", "ladder_step", "matmul_kernel_info"]

_TEST_GPU = "tests/matmul/test_gpu_matmul.py"


def _gpu(kernel: str) -> dict[str, Any]:
    return dict(needs_cuda=True, kernel=f"csrc/matmul/{kernel}", test=_TEST_GPU)


@register("matmul", "cpu", description="CPU reference (C++, OpenMP): i-k-j loops, float64 accumulation",
          report="reference", needs_cuda=False, kernel="csrc/matmul/matmul_cpu.cpp", test="tests/matmul/test_matmul.py")
def _matmul_cpu(ctx: ExecContext, a, b) -> np.ndarray:
    a, b = ctx.host(a), ctx.host(b)
    with ctx.kernel():
        c = _core.matmul(a, b)
    return ctx.finish(c)


def _kernel_args(params: dict[str, Any]) -> dict[str, Any]:
    """Registry values -> the bindings' arguments ("auto" split_k is 0 there)."""
    return {k: (0 if k == "split_k" and v == "auto" else v) for k, v in params.items()}


def _run_gpu(ctx: ExecContext, a, b, **params):
    """Every GPU variant: ``matmul_<variant>(args, **params)`` (the binding rule), ``args`` one ``MatmulArgs``."""
    run = launcher(ctx.variant)
    da, db = ctx.device(a), ctx.device(b)
    (m, k), n = da.shape, db.shape[1]
    dc = ctx.empty((m, n), np.float32)
    args = _kernel_args(params)
    with ctx.kernel():
        run(cuda_host_module().MatmulArgs(da.ptr, db.ptr, dc.ptr, m, n, k), **args)
    if getattr(ctx, "planning", False):  # (test stand-ins of the context have no plans)
        ctx.offer_replay(_replay(ctx, run, m, n, k, args))
    return ctx.finish(dc)


_F32 = np.dtype(np.float32)
_DA = DeviceArray


def _replay(ctx: ExecContext, run, m: int, n: int, k: int, args: dict[str, Any]):
    """This launch again on new inputs of the same problem (a cached plan, gpuopt._plan): one call to the
    variant's compiled LaunchPlan, which allocates the output, launches and returns the DeviceArray (or, without a
    planner, the launcher on an output allocated here)."""
    shape, nbytes = (m, n), 4 * m * n
    device_result = ctx.device_result
    cplan = planner(ctx.variant)
    if cplan is not None:
        launch = cplan(m, n, k, **args)
        launch.set_output(DeviceArray, shape, _F32, nbytes, 2)
        run_new = launch.run_new

        def replay(stream, a, b):
            if type(a) is _DA and type(b) is _DA:  # device arrays (foreign ones arrive as views): no copies
                c = run_new(a._ptr, b._ptr, 0, stream)
            else:
                keep: list = []
                c = run_new(*device_ptrs((a, b), keep, stream), 0, stream)
            return c if device_result else c.numpy()

        return replay
    cuda, alloc, matmul_args = cuda_module(), DeviceArray._alloc, cuda_host_module().MatmulArgs

    def replay_unplanned(stream, a, b):
        previous = cuda.set_stream(stream)
        try:
            keep: list = []
            pa, pb = device_ptrs((a, b), keep, stream)
            dc = alloc(cuda, shape, _F32, nbytes)
            run(matmul_args(pa, pb, dc._ptr, m, n, k), **args)
        finally:
            cuda.set_stream(previous)
        return dc if device_result else dc.numpy()

    return replay_unplanned


register("matmul", "naive", description="one thread per output, 2-D grid of 16x16 blocks (the report's fixed v0)",
         report="cmu18645", **_gpu("matmul_naive.cu"))(_run_gpu)
register("matmul", "coalesced",
         description="one thread per output, no shared memory: a warp along a row of c (coalesced) or a column (strided)",
         report="gpuopt", **_gpu("matmul_coalesced.cu"),
         params=(Param.from_kernels("matmul/coalesced/warp_layout",
                       "row: a warp reads 32 consecutive floats of b per k; column: 32 rows of a, K floats apart"),))(
    _run_gpu)
register("matmul", "shared", description="A and B tiles staged in shared memory (the report's shared-memory version)",
         report="cmu18645", **_gpu("matmul_shared.cu"),
         params=(Param.from_kernels("matmul/shared/block",
                       "tile edge: 16 (256 threads) or 32 (1024 threads), the report's occupancy experiment"),))(
    _run_gpu)
register("matmul", "tile_buffer",
         description="a 16x16 block computes tile_sz output tiles of its row stripe, reusing each A tile (report's Fig. 3)",
         report="cmu18645", **_gpu("matmul_shared.cu"),
         params=(Param.from_kernels("matmul/tile_buffer/tile_sz", "consecutive output tiles per block sharing one A tile"),))(
    _run_gpu)
register("matmul", "blocktile_1d", description="1-D register blocking: 64x64x8 block tile, 8 outputs of a column per thread",
         report="gpuopt", **_gpu("matmul_blocktile.cu"))(_run_gpu)
register("matmul", "blocktile_2d", description="2-D register blocking: 8x8 outputs per thread from register fragments",
         report="gpuopt", **_gpu("matmul_blocktile.cu"),
         params=(Param.from_kernels("matmul/blocktile_2d/tile", "block tile BMxBNxBK (8x8 per thread)"),))(_run_gpu)
register("matmul", "vectorized",
         description="2-D blocking with 16-byte loads and A^T in shared memory (float4 inner loop; scalar where unaligned)",
         report="gpuopt", **_gpu("matmul_blocktile.cu"),
         params=(Param.from_kernels("matmul/vectorized/tile", "block tile BMxBNxBK (8x8 per thread)"),))(_run_gpu)
register("matmul", "warptile",
         description="block tile -> warp tiles -> 8x8 (8x4) thread tiles, conflict-free shared memory, grouped order",
         report="gpuopt", **_gpu("matmul_warptile.cu"),
         params=(Param.from_kernels("matmul/warptile/tile", "block tile BMxBNxBK (warp and thread tiles follow)"),))(
    _run_gpu)
register("matmul", "async", description="warp-tiled kernel fed by a multi-stage cp.async pipeline into shared memory",
         report="gpuopt", **_gpu("matmul_async.cu"),
         params=(Param.from_kernels("matmul/async/tile",
                       "block tile BMxBNxBK (_k2: two k-slices); auto: per shape, by a tile-quantisation cost model"),
                 Param.from_kernels("matmul/async/stages", "k-steps in flight in shared memory (cp.async pipeline depth)"),
                 Param.from_kernels("matmul/async/split_k",
                       "blocks of a cluster sharing an output tile over k (partial tiles summed in distributed "
                       "shared memory); auto: per shape")))(_run_gpu)
register("matmul", "tf32x3",
         description="FP32 accuracy on the TF32 tensor cores: each operand split into a TF32 high part and a TF32 "
                     "remainder, three products (lo*hi + hi*lo + hi*hi) accumulated in FP32 by mma.sync; 128x128x32 "
                     "tiles fed by cp.async",
         report="gpuopt", **_gpu("matmul_tf32x3.cu"),
         params=(Param.from_kernels("matmul/tf32x3/stages", "k-steps in flight in shared memory (cp.async pipeline depth)"),
                 Param.from_kernels("matmul/tf32x3/flush_k",
                       "k summed inside the tensor cores (which round toward zero) before an FP32 round-to-nearest "
                       "add into the accumulator: smaller is closer to FFMA accuracy, larger does fewer adds"),
                 Param.from_kernels("matmul/tf32x3/split",
                       "where operands become hi + lo: 'fragment' per fragment load (3 instructions per use), "
                       "'tile' once per landed k-step into float2 shared tiles (a second barrier per k-step; "
                       "0.7x 'fragment' on the H200, notes/matmul.md)")))(
    _run_gpu)
register("matmul", "tf32x3_wgmma",
         description="tf32x3's FP32 accuracy on Hopper's warpgroup MMA (wgmma; compute capability 9.0 only): "
                     "operands split into TF32 hi and lo once before the product (B transposed), 128x128x32 tiles "
                     "in the 128-byte swizzle, two warpgroups of m64n128k8, partial sums over 32 k added in FP32",
         report="gpuopt", **_gpu("matmul_tf32x3_wgmma_sm90a.cu"))(_run_gpu)
register("matmul", "cublas", description="cuBLAS SGEMM, strict FP32 (TF32 off): the baseline",
         report="library", preferred=True, **_gpu("matmul_cublas.cu"))(_run_gpu)
register("matmul", "cublas_tf32",
         description="cuBLAS SGEMM with TF32 tensor cores allowed (CUBLAS_TF32_TENSOR_OP_MATH): TF32 accuracy "
                     "(about 1e-4 relative), the rate the 3xTF32 steps trade two thirds of for FP32 accuracy; a "
                     "speed baseline, not an FP32 result",
         report="library", tolerance=2e-3, **_gpu("matmul_cublas.cu"))(_run_gpu)



def ladder() -> tuple[str, ...]:
    """The matmul ladder, simple to fast: every GPU variant with a kernel of gpuopt's own, in
    registration order (the one owner of the order). Step k is ``ladder()[k - 1]``; cuBLAS, the
    reference, is not a step."""
    return tuple(n for n, v in variants("matmul").items() if v.needs_cuda and n not in _NO_KERNEL)


def ladder_step(variant: str) -> int:
    """The step number (1 = ``naive``) of a ladder variant; ValueError for one that is not on the ladder."""
    steps = ladder()
    if variant not in steps:
        raise ValueError(f"{variant!r} is not a step of the matmul ladder; the steps: {list(steps)}")
    return steps.index(variant) + 1


# Variants that run no kernel of gpuopt's own.
_NO_KERNEL = {"cpu": "runs on the CPU", "cublas": "runs cuBLAS's kernels", "cublas_tf32": "runs cuBLAS's kernels"}


def matmul_kernel_info(variant: str, *, shape=(4096, 4096, 4096), **params: Any) -> dict:
    """Resources of the kernel a matmul variant runs (for registers/shared-memory tables).

    Parameters
    ----------
    variant : str
        A GPU variant with a kernel of gpuopt's own (not "cpu" or "cublas").
    shape : tuple of 3 ints
        (M, N, K) of the product: it decides the instantiation where the variant picks one
        per shape (``async`` with ``tile="auto"``); 16-byte aligned operands are assumed
        (the vectorized path).
    **params
        The variant's parameters (defaults filled in, checked as for :func:`matmul`).

    Returns
    -------
    dict
        ``variant``, ``params`` (resolved), ``shape``, ``kernel`` (the instantiation, e.g.
        ``"async<128x128x16 w64x32 t8x8 s3 vecN>"``), ``threads`` (per block),
        ``registers`` (per thread), ``static_shared_bytes``, ``dynamic_shared_bytes`` (per
        block), ``local_bytes`` (per thread: stack frame and spills; 0 means no spills) and
        ``max_blocks_per_sm`` (occupancy API, with that dynamic shared memory).

    Raises
    ------
    ValueError
        Unknown variant or parameter, a variant without a kernel of gpuopt's own, or a bad
        shape.
    RuntimeError
        No usable GPU (the attributes are read from the loaded kernel).
    """
    if not isinstance(variant, str):
        raise TypeError(f"matmul_kernel_info: variant must be a string, got {type(variant).__name__}")
    table = variants("matmul")
    if variant not in table:
        raise ValueError(f"matmul_kernel_info: unknown variant {variant!r}; valid variants: {list(table)}")
    if variant in _NO_KERNEL:
        raise ValueError(f"matmul_kernel_info: variant {variant!r} {_NO_KERNEL[variant]}; it has no kernel of gpuopt's own")
    try:
        m, n, k = (int(d) for d in shape)
    except (TypeError, ValueError):
        raise ValueError(f"matmul_kernel_info: shape must be (M, N, K), got {shape!r}") from None
    if min(m, n, k) < 1:
        raise ValueError(f"matmul_kernel_info: shape must be positive, got {shape!r}")
    _, resolved = resolve("matmul", variant, params)  # RuntimeError here without a GPU
    info = dict(cuda_module().matmul_kernel_info(variant, m, n, k, **_kernel_args(resolved)))
    return {"variant": variant, "params": resolved, "shape": (m, n, k), **info}
