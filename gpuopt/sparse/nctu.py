"""The variants of the NCTU lab's sparse layer: the CPU reference and the lab's three CUDA kernels (dense
filters, COO, FAST), each exact in int32 with overflow reported (csrc/sparse/)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _core
from .._exec import ExecContext
from .._ext import cuda_host_module, cuda_module, host_check, launcher
from ..cuda import DeviceArray, defer_error, to_device
from ..registry import Param, register
from .api import INT16_ABS_MAX, SparseConvProblem, sums_fit_int32
from .formats import COOFilters, FASTFilters

@register("sparse_conv2d", "cpu", description="CPU reference (C++, OpenMP): dense direct conv, exact int sums, "
          "ReLU, 2x2 max pool", report="reference", needs_cuda=False, kernel="csrc/sparse/sparse_conv_cpu.cpp",
          test="tests/sparse/test_sparse.py")
def _sparse_conv_cpu(ctx: ExecContext, p: SparseConvProblem) -> np.ndarray:
    x, w = ctx.host(p.x), ctx.host(p.dense())
    with ctx.kernel():
        y = _core.sparse_conv(x, w)
    return ctx.finish(y)


# ---------------------------------------------------------------- GPU variants
_OVERFLOW_MESSAGE = "sparse_conv2d: a convolution sum does not fit in int32 (the lab's accumulator)"


#: The filter format each GPU variant reads (its launcher's arguments follow it).
_FORMAT = {"dense": "dense", "coo": "coo", "fast": "fast", "fast_fused": "fast", "fast_sparse_input": "fast",
           "fast_imma": "fast"}


def _gpu_filters(fmt: str, p: SparseConvProblem) -> tuple[list[Any], int]:
    """The filter arrays in the variant's own format (what travels to the device, unless they live there), and
    the padded slice width (0 for dense)."""
    if fmt == "dense":
        return [p.dense()], 0  # int16 (M, C, R, S): NumPy, or a device array used in place
    # COO: int16 data/row/col (M, C, width), padded with value 0 at (0, 0); FAST: their int32 codes (a padding
    # entry encodes to 0). Kept by the filters object (on the device after its to_device()).
    return p.coo().kernel_arrays(fmt)


def _neuron_lists(ctx: ExecContext, p: SparseConvProblem) -> dict[str, Any]:
    """fast_sparse_input's keywords for sparse neurons already on the device (their lists: the planes kernel alone
    is queued), with whether the host proved the int32 bound max|x| * max_m sum|w_m| (then the kernel zeroes the
    flag itself); {} otherwise (x compacted in the call)."""
    n = p.neurons
    m, c, r, s = p.shape
    if ctx.variant.name != "fast_sparse_input" or n is None or not n.on_device or \
            not _core.sparse_input_planes_apply(c, n.shape[1], n.shape[2], m, r, s):
        return {}
    ctx.details["neuron_lists"] = 1.0
    return neuron_lists(n, p.coo())


def neuron_lists(n: Any, coo: Any) -> dict[str, Any]:
    """The launcher keywords of SparseNeurons ``n`` on the device with filters ``coo``: their lists' addresses and
    whether max|x| * max_m sum|w_m| <= INT32_MAX (no sum can overflow)."""
    lists = {k: a.ptr for k, a in n.device_lists().items()}
    return dict(lists, bound_proven=sums_fit_int32(n.absmax, coo.max_map_abs_sum))


def sparse_shape(p: SparseConvProblem) -> Any:
    """The compiled module's ``SparseConvShape`` of a problem (needs a CUDA build, not a GPU)."""
    m, c, r, s = p.shape
    _, h, w = p.x.shape
    return cuda_host_module("sparse_conv2d").SparseConvShape(c, h, w, m, r, s)


def bound_proven(p: SparseConvProblem) -> bool:
    """Whether no pre-activation sum of ``p`` can overflow int32, from what the host knows at no cost: max|x|
    (SparseNeurons: their absmax; otherwise any int16, 32768) times the largest sum of |w| over one map's taps
    (COO and FAST filters keep it; dense filters are not summed per call, so not proven)."""
    wsum = getattr(p.filters, "max_map_abs_sum", None)
    if wsum is None:
        return False
    return sums_fit_int32(p.neurons.absmax if p.neurons is not None else INT16_ABS_MAX, wsum)


def _run_gpu(ctx: ExecContext, p: SparseConvProblem, **params: Any):
    """Every GPU variant: its launcher ``sparse_conv2d_<variant>(args, **params)`` (the binding rule) after its
    shape checks, ``args`` one ``SparseConv2dArgs``."""
    fmt = _FORMAT[ctx.variant.name]
    m, _, _, _ = p.shape
    _, h, w = p.x.shape
    shape = sparse_shape(p)
    host_check(ctx.variant)(shape)  # the launcher's shape checks, before any conversion or transfer
    run = launcher(ctx.variant)
    filters, width = _gpu_filters(fmt, p)
    # Everything the lab copied in is inside the h2d phase: input maps, then the filter
    # arrays of this format (1 dense array, 3 COO arrays, or 1 FAST array).
    dx = ctx.device(p.x)
    dfilters = [ctx.device(f) for f in filters]
    ctx.details["filter_arrays"] = float(len(filters))
    ctx.details["filter_bytes"] = float(sum(f.nbytes for f in dfilters))
    ctx.details["filter_bytes_sent"] = float(sum(f.nbytes for f in filters if isinstance(f, np.ndarray)))
    # Host-to-device copies this call made (input maps and filter arrays not already on the device).
    ctx.details["h2d_calls"] = float(isinstance(p.x, np.ndarray) + sum(isinstance(f, np.ndarray) for f in filters))
    ctx.details["h2d_bytes"] = float((p.x.nbytes if isinstance(p.x, np.ndarray) else 0) + ctx.details["filter_bytes_sent"])
    one_pass = fmt != ctx.variant.name  # queued; the overflow flag a device int32
    if one_pass:
        dy, flag = DeviceArray._alloc_parts(cuda_module(), _output_and_flag((m, h // 2, w // 2)))
    else:
        dy, flag = ctx.empty((m, h // 2, w // 2), np.int32), None
    args = cuda_host_module().SparseConv2dArgs(dx.ptr, [f.ptr for f in dfilters], width, dy.ptr,
                                                flag.ptr if one_pass else 0, shape)
    if one_pass:
        # NumPy results read the flag with y; device results never wait for it: the host proves it stays 0, or
        # it is read at the caller's next synchronising read (gpuopt.cuda: deferred errors).
        lists = _neuron_lists(ctx, p)
        with ctx.kernel():
            run(args, **params, **lists)
        out = ctx.finish(dy)
        if not isinstance(out, DeviceArray):  # (synchronised already: the flag costs a 4-byte copy)
            ctx.details["overflow_check"] = 2.0  # read with the result
            if int(ctx.host(flag)[0]) != 0:
                raise ValueError(_OVERFLOW_MESSAGE)
        elif bound_proven(p):
            ctx.details["overflow_check"] = 0.0  # proven on the host: nothing to read
        else:
            ctx.details["overflow_check"] = 1.0  # deferred to the caller's next synchronising read
            defer_error(out, flag, _OVERFLOW_MESSAGE)
        if ctx.planning and isinstance(out, DeviceArray) and isinstance(p.filters, (COOFilters, FASTFilters)) and \
                not lists and p.neurons is None:
            ctx.offer_replay(_replay(run, params, fmt, shape, (m, h // 2, w // 2), bound_proven(p)))
        return out
    with ctx.kernel():
        fits = run(args)  # synchronises: the kernels run, then the 4-byte overflow flag is read back
    if not fits:
        raise ValueError(_OVERFLOW_MESSAGE)
    return ctx.finish(dy)


_I32 = np.dtype(np.int32)


def _output_and_flag(shape: tuple[int, int, int]) -> tuple[int, tuple]:
    """The layout of the int32 output and the one-pass kernels' overflow flag in one pool block
    (DeviceArray._alloc_parts)."""
    return DeviceArray._parts(((shape, _I32), ((1,), _I32)))


def _replay(run: Any, params: dict[str, Any], fmt: str, shape: Any, out_shape: tuple[int, int, int],
            proven: bool) -> Any:
    """A one-pass call's plan (gpuopt._plan): allocate y and the flag, launch on ``stream``. Its key
    (``api._key``) holds what decided this call beside the shapes -- the filters' type, whether their taps fit
    int8 (auto's choice) and whether they prove the int32 bound (no flag to defer) -- so a call it replays for
    decided the same; the filters' kernel arrays are read from the call's own filters object."""
    cuda = cuda_module()
    make_args = cuda_host_module().SparseConv2dArgs
    alloc, layout = DeviceArray._alloc_parts, _output_and_flag(out_shape)

    def replay(stream: int, x: DeviceArray, filters: Any) -> DeviceArray:
        arrays, width = filters.kernel_arrays(fmt)
        previous = cuda.set_stream(stream)
        try:
            ptrs = [a._ptr if type(a) is DeviceArray else to_device(a).ptr for a in arrays]
            y, flag = alloc(cuda, layout)
            run(make_args(x._ptr, ptrs, width, y._ptr, flag._ptr, shape), **params)
        finally:
            cuda.set_stream(previous)
        if not proven:
            defer_error(y, flag, _OVERFLOW_MESSAGE)
        return y
    return replay


_GPU = dict(report="nctu", needs_cuda=True, kernel="csrc/sparse/sparse_conv.cu", test="tests/sparse/test_gpu_sparse.py")

register("sparse_conv2d", "dense", description="the lab's part I: direct-convolution kernel (one thread per output, "
         "every RxS tap of dense int16 filters) then a 2x2 max-pool kernel", **_GPU)(_run_gpu)
register("sparse_conv2d", "coo", description="COO filters (padded int16 data/row/col), one thread per output, "
         "zero inputs skipped; then a 2x2 max-pool kernel", **_GPU)(_run_gpu)
register("sparse_conv2d", "fast", description="FAST-encoded filters (one int32 value*100+row*10+col per entry, "
         "decoded on the GPU), zero inputs skipped; then a 2x2 max-pool kernel", **_GPU)(_run_gpu)
_ONE_PASS = dict(_GPU, test="tests/sparse/test_gpu_sparse_fused.py")
# The default (variant=None) is auto (gpuopt/sparse/auto.py): fast_sparse_input where its planes kernel applies, else
# fast_fused (notes/sparse.md: H200, device-resident).
register("sparse_conv2d", "fast_fused", description="FAST filters, conv + ReLU + 2x2 max pool in ONE kernel (pre-pool "
         "maps never written): a block owns 4-16 maps x a 32x32 tile, channels staged through shared memory, "
         "int32 sums where a per-block bound max|x|*sum|w| proves them exact, int64 otherwise; a cluster of `split` "
         "blocks shares the channels of one (maps, tile), partial sums added through distributed shared memory",
         params=(Param.from_kernels("sparse_conv2d/fast_fused/split", "blocks of a thread-block cluster "
                                       "summing 1/split of the channels each; 0: from the shape (8 for the lab's layer)"),
                                 Param.from_kernels("sparse_conv2d/fast_fused/kernel", "window: one 2x2 pool "
                                       "window per thread (any size); int32 / fp32: register-blocked 3x3 (a 4x4 output "
                                       "patch x 4 maps per thread, taps by a warp-uniform switch), FP32 exact while "
                                       "max|x|*sum|w| <= 2^24 (else the slow int64 path); auto: window, the fastest measured on the H200")),
         **dict(_ONE_PASS, kernel="csrc/sparse/sparse_conv_fused.cu"))(_run_gpu)
register("sparse_conv2d", "fast_sparse_input", description="FAST filters x non-zero inputs only: the input's non-zeros "
         "compacted on the device, each times each tap added into shared-memory int32 accumulators (integer "
         "atomics: exact, deterministic), then ReLU + 2x2 max pool; the pre-pool maps never written. W <= 32, H <= "
         "511 and up to 3x3: row-CSR compaction, then the planes kernel (a dependent launch) with a lane per map and "
         "one accumulator plane per tap column (bank-conflict-free); x given as SparseNeurons on the device: their "
         "lists built once, the planes kernel alone per call; other shapes: the atomic kernel of "
         "sparse_conv_scatter.cu (slower than fast_fused: auto takes fast_fused there)",
         **dict(_ONE_PASS, kernel="csrc/sparse/sparse_conv_scatter_planes.cu"))(_run_gpu)
register("sparse_conv2d", "fast_imma", description="FAST filters on the int8 tensor cores: the codes expanded to dense "
         "int8 taps and the input split into its low and high bytes on the device, an implicit GEMM (mma.sync "
         "m16n8k32, s32 sums, exact) with ReLU + 2x2 max pool in registers; every input and tap multiplied, zeros "
         "too (density-independent). W <= 32, H <= 511, up to 3x3, C <= 4096; taps outside int8: exact int64 sums "
         "(slow)", **dict(_ONE_PASS, kernel="csrc/sparse/sparse_conv_imma.cu", test="tests/sparse/test_gpu_sparse_imma.py"))(_run_gpu)
