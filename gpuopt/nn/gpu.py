"""The GPU variants of the layer ops (csrc/nn/*.cu), registered after each op's CPU reference, simple to fast.

They follow the ECE408 MNIST report (../shared/seeds/ece408-mnist-cnn-report.txt, Tables 3-5) and go past it
where gpuopt has something faster:

* ``relu``, ``tanh``: ``cuda``, a grid-stride kernel with 16-byte loads and stores (4-byte ones where the input
  is an offset view that is not 16-byte aligned). relu keeps NaN and matches the reference bit for bit.
* ``max_pool2d``, ``avg_pool2d``: ``basic`` (the report's first kernel: consecutive threads on consecutive
  planes, so a warp's loads are H*W floats apart, the uncoalesced access the report fixed; the output is its
  own accumulator) and ``coalesced`` (the fix: consecutive threads on consecutive output columns, a register
  accumulator, one write). Both match the reference bit for bit (same window order, same float operations).
* ``fully_connected``: ``basic`` (one thread per output, all from global memory), ``tiled`` (the report's 16x16
  shared-memory tiles, bias and activation in the epilogue), ``matmul`` (gpuopt's matmul ladder's fastest own
  kernel, ``async``, then a bias + activation pass) and ``cublas`` (strict FP32 SGEMM + the same pass).
  ``matmul`` and ``cublas`` reject sizes their GEMMs cannot index (``check.fully_connected_<variant>``) before
  anything is copied.
* ``argmax``: ``basic`` (one thread per row, the report's), ``warp`` (4 to 32 lanes per row, several rows per
  warp for short rows, a shuffle reduction of (value, index)) and ``streams`` (the report's final design: two
  halves on two CUDA streams, each half's indices copied to pinned host memory while the other half runs).
  ``streams`` only has something to overlap when the result goes back to NumPy: given a device array it runs
  the ``warp`` kernel on the call's stream and returns a DeviceArray. With ``timing=True`` its copy back is inside
  ``kernel_ms`` (overlapping it is the point) and ``d2h_ms`` is 0.
* ``softmax``: ``cuda``, a lane group (or a block, for rows past 4096) per row: max, sum of exp, write.

Empty arrays are rejected by the public ops (ValueError), as for conv2d.
"""

from __future__ import annotations

import numpy as np

from .._exec import ExecContext, check_before_copy
from .._ext import launcher
from ..registry import register

__all__: list[str] = []

_TEST = "tests/nn/test_gpu_nn.py"


def _gpu(kernel: str, report: str) -> dict:
    return dict(report=report, needs_cuda=True, kernel=f"csrc/nn/{kernel}", test=_TEST)


def _run_activation(ctx: ExecContext, x):
    run = launcher(ctx.variant)
    dx = ctx.device(x)
    dy = ctx.empty(dx.shape, np.float32)
    with ctx.kernel():
        run(dx.ptr, dy.ptr, dx.size)
    size = dx.size
    ctx.offer_launch(lambda x, y: run(x._ptr, y._ptr, size), (x,), (dy,), plan=(size,))
    return ctx.finish(dy)


def _run_pool(ctx: ExecContext, x, size: int):
    run = launcher(ctx.variant)
    dx = ctx.device(x)
    *lead, h, w = dx.shape
    planes = int(np.prod(lead, dtype=np.int64))  # 1 for a 2-D input
    dy = ctx.empty((*lead, h // size, w // size), np.float32)
    with ctx.kernel():
        run(dx.ptr, dy.ptr, planes, h, w, size)
    ctx.offer_launch(lambda x, y: run(x._ptr, y._ptr, planes, h, w, size), (x,), (dy,), plan=(planes, h, w, size))
    return ctx.finish(dy)


def _run_fully_connected(ctx: ExecContext, x, w, bias, activation: str):
    (n, i), o = x.shape, w.shape[1]
    check_before_copy(ctx.variant, (x, w, bias), n, i, o)
    run = launcher(ctx.variant)
    dx, dw = ctx.device(x), ctx.device(w)
    db = None if bias is None else ctx.device(bias)
    dy = ctx.empty((n, o), np.float32)
    with ctx.kernel():
        run(dx.ptr, dw.ptr, 0 if db is None else db.ptr, dy.ptr, n, i, o, activation)
    ctx.offer_launch(lambda x, w, b, y: run(x._ptr, w._ptr, 0 if b is None else b._ptr, y._ptr, n, i, o, activation),
                     (x, w, bias), (dy,), plan=(n, i, o, activation))
    return ctx.finish(dy)


def _run_argmax(ctx: ExecContext, x):
    rows, cols = x.shape
    check_before_copy(ctx.variant, (x,), rows, cols)
    run = launcher(ctx.variant)
    dx = ctx.device(x)
    out = ctx.empty((rows,), np.int64)
    with ctx.kernel():
        run(dx.ptr, out.ptr, rows, cols)
    ctx.offer_launch(lambda x, y: run(x._ptr, y._ptr, rows, cols), (x,), (out,), plan=(rows, cols))
    return ctx.finish(out)


def _run_argmax_streams(ctx: ExecContext, x):
    """NumPy wanted back: the launcher fills a NumPy array through its pinned buffer (the copy overlaps the second
    half's kernel). A device array wanted back: no host copy to overlap, the indices stay on the device."""
    rows, cols = x.shape
    check_before_copy(ctx.variant, (x,), rows, cols)
    run = launcher(ctx.variant)
    dx = ctx.device(x)
    out = ctx.empty((rows,), np.int64)
    host = None if ctx.device_result else np.empty(rows, np.int64)
    with ctx.kernel():
        run(dx.ptr, out.ptr, host, rows, cols)
    ctx.offer_launch(lambda x, y: run(x._ptr, y._ptr, None, rows, cols), (x,), (out,), plan=(rows, cols))
    return ctx.finish(out if host is None else host)


def _run_softmax(ctx: ExecContext, x):
    rows, cols = x.shape
    check_before_copy(ctx.variant, (x,), rows, cols)
    run = launcher(ctx.variant)
    dx = ctx.device(x)
    dy = ctx.empty((rows, cols), np.float32)
    with ctx.kernel():
        run(dx.ptr, dy.ptr, rows, cols)
    ctx.offer_launch(lambda x, y: run(x._ptr, y._ptr, rows, cols), (x,), (dy,), plan=(rows, cols))
    return ctx.finish(dy)


# ------------------------------------------------------------------------------------------- elementwise
for _op in ("relu", "tanh"):
    register(_op, "cuda", description="grid-stride, 16-byte loads and stores (4-byte where the input is not 16-byte "
                                      "aligned)", preferred=True, **_gpu("nn_elementwise.cu", "gpuopt"))(_run_activation)

# ------------------------------------------------------------------------------------------- pooling
for _op in ("max_pool2d", "avg_pool2d"):
    register(_op, "basic",
             description="one thread per output, consecutive threads on consecutive planes (uncoalesced: a warp's "
                         "loads H*W floats apart), the output as accumulator (report Table 3)",
             **_gpu("nn_pool.cu", "ece408-mnist"))(_run_pool)
    register(_op, "coalesced",
             description="consecutive threads on consecutive output columns, window in a register, one write "
                         "(the report's coalesced average pool)",
             preferred=True, **_gpu("nn_pool.cu", "ece408-mnist"))(_run_pool)

# ------------------------------------------------------------------------------------------- fully connected
register("fully_connected", "basic",
         description="one thread per output, every operand from global memory (report Table 3)",
         **_gpu("nn_fully_connected.cu", "ece408-mnist"))(_run_fully_connected)
register("fully_connected", "tiled",
         description="the report's 16x16 shared-memory tiled multiply, bias and activation in its epilogue",
         **_gpu("nn_fully_connected.cu", "ece408-mnist"))(_run_fully_connected)
register("fully_connected", "matmul",
         description="gpuopt's matmul ladder's async kernel (tile and split-k auto), then a bias + activation pass",
         preferred=True, **_gpu("nn_fully_connected.cu", "gpuopt"))(_run_fully_connected)
register("fully_connected", "cublas",
         description="cuBLAS SGEMM, strict FP32 (TF32 off), then a bias + activation pass: the baseline",
         **_gpu("nn_fully_connected.cu", "library"))(_run_fully_connected)

# ------------------------------------------------------------------------------------------- argmax
register("argmax", "basic", description="one thread per row, the reference's loop (the report's kernel)",
         **_gpu("nn_argmax.cu", "ece408-mnist"))(_run_argmax)
register("argmax", "warp",
         description="4-32 lanes per row (several rows per warp for short rows), shuffle reduction of (value, index)",
         preferred=True, **_gpu("nn_argmax.cu", "gpuopt"))(_run_argmax)
register("argmax", "streams",
         description="two halves on two streams, each copied to pinned memory while the other runs (the report's "
                     "final design; device-array input: the warp kernel on the call's stream)",
         **_gpu("nn_argmax.cu", "ece408-mnist"))(_run_argmax_streams)

# ------------------------------------------------------------------------------------------- softmax
register("softmax", "cuda", description="a lane group (a block for long rows) per row: max, sum of exp, write",
         preferred=True, **_gpu("nn_softmax.cu", "gpuopt"))(_run_softmax)
