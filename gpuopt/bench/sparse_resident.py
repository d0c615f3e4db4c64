"""The NCTU sparse layer on device-resident operands, as the sparse and sparse_density studies time it: the input
maps per plan, the one-pass variants and their extra rows, cuDNN's dense layer beside them, and one layer's kernel
time."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

import gpuopt

from .harness import measure
from .study import per_level, repeats

__all__ = ["SPARSE_MAPS", "ONE_PASS", "FUSED_KERNEL_ROWS", "SPARSE_NEURONS_ROW", "CUDNN_ROWS", "RESIDENT_REPEATS",
           "resident_layer", "time_resident"]

#: Input maps C = filters M per plan (the lab: 512).
SPARSE_MAPS: dict[Any, int] = per_level(gpu_full=512, gpu_quick=512, cpu_full=512, cpu_quick=512, tiny=32)
#: The variants that only queue their work (no host round trip): timed again on device-resident operands.
ONE_PASS = ("fast_fused", "fast_sparse_input", "fast_imma")
#: fast_fused's other kernels (its default, kernel="auto", is the window kernel), timed on device-resident
#: operands only: the same one-pass variant, so rows of their own.
FUSED_KERNEL_ROWS = {"fast_fused[int32]": "int32", "fast_fused[fp32]": "fp32"}
#: fast_sparse_input on sparse neurons (gpuopt.sparse.SparseNeurons, lists built on the device once: the compaction
#: is the encoding step, not counted): the planes kernel alone, timed on device-resident operands only.
SPARSE_NEURONS_ROW = "fast_sparse_input[sparse neurons]"
#: cuDNN's dense FP32 layer (conv + ReLU, then gpuopt's 2x2 max pool) on float32 copies: the baseline to beat.
CUDNN_ROWS = {"cudnn_fp32_precise": "precise", "cudnn_fp32_any": "any"}
#: measure() keywords of the device-resident kernel times (L2 flushed before every run, as the conv studies).
RESIDENT_REPEATS: dict[Any, dict[str, Any]] = per_level(
    gpu_full=repeats(5, 50, 1.0, flush_l2=True), gpu_quick=repeats(2, 10, 0.3, flush_l2=True),
    tiny=repeats(1, 2, 0.1, flush_l2=True))


def resident_layer(name: str, x, w) -> tuple[Callable[[], Any], Callable[[], np.ndarray]]:
    """(queue one layer, fetch its pooled result as NumPy) on device-resident operands: a one-pass variant's
    launcher on FAST codes already on the device, or cuDNN's dense FP32 conv + ReLU + max pool."""
    from gpuopt._ext import cuda_host_module, launcher
    from gpuopt.sparse import FASTFilters

    m, c, r, s = w.shape
    if name == "auto":  # the default: the launcher of the variant it picks for this shape (and these taps)
        from gpuopt.sparse.auto import auto_choice

        name = auto_choice(c, x.shape[1], x.shape[2], m, r, s, FASTFilters.from_dense(w).taps_fit_int8)
    dx = gpuopt.to_device(np.ascontiguousarray(x))
    if name in CUDNN_ROWS:
        fx, fw = gpuopt.to_device(x.astype(np.float32)[None]), gpuopt.to_device(w.astype(np.float32))
        out: list[Any] = [None]

        def dense():
            y = gpuopt.conv2d(fx, fw, padding=(r // 2, s // 2), activation="relu", variant="cudnn",
                              algorithms=CUDNN_ROWS[name])
            out[0] = gpuopt.nn.max_pool2d(y, 2)
            return out[0]
        return dense, lambda: out[0].numpy()[0]
    fast = FASTFilters.from_dense(w).to_device(("fast",))
    (codes,), width = fast.kernel_arrays("fast")
    dy = gpuopt.DeviceArray.empty((m, x.shape[1] // 2, x.shape[2] // 2), np.int32)
    flag = gpuopt.DeviceArray.empty((1,), np.int32)
    kernel = FUSED_KERNEL_ROWS.get(name)
    lists: dict[str, Any] = {}
    if name == SPARSE_NEURONS_ROW:  # the lists built once, here (untimed): the call queues the planes kernel alone
        from gpuopt.sparse import SparseNeurons
        from gpuopt.sparse.nctu import neuron_lists

        neurons = SparseNeurons.from_dense(x).to_device()
        dx, lists, name = neurons.dense, neuron_lists(neurons, fast.to_coo()), "fast_sparse_input"
    variant = gpuopt.variants("sparse_conv2d")["fast_fused" if kernel else name]
    launch = launcher(variant)
    extra = variant.defaults()  # the registry's (fast_fused: split 0, i.e. from the shape, and kernel 'auto')
    if kernel:
        extra["kernel"] = kernel
    cuda = cuda_host_module()
    args = cuda.SparseConv2dArgs(dx.ptr, [codes.ptr], width, dy.ptr, flag.ptr,
                                 cuda.SparseConvShape(c, x.shape[1], x.shape[2], m, r, s))
    def run() -> None:
        launch(args, **extra, **lists)

    run.keep = (dx, codes, dy, flag)  # type: ignore[attr-defined]  # args' addresses stay valid while run lives
    return run, lambda: dy.numpy()


def time_resident(name: str, x, w, reps: Mapping[str, Any]) -> tuple[float, np.ndarray]:
    """Median kernel time (ms, CUDA events, L2 flushed) of ``name`` on device-resident operands, and its result."""
    fn, result = resident_layer(name, x, w)
    stats = measure(fn, device="gpu", **reps)
    return stats.median_ms, result()
