"""conv2d ``unroll_constmem``: the filter bank in constant memory, the input unrolled by index (the ECE408
Fashion-MNIST report's first step after ``basic``, ``report="ece408-fashion"``; its kernel is in
csrc/conv/conv2d_ece408.cu beside the tiled ones of :mod:`.tiled`).

Caveat a caller can see: the whole filter bank lives in the GPU's 64 KB constant memory
(``gpuopt._ext.kernel_limits()["conv2d_constant_weight_bytes"]``): larger filter banks are rejected with
ValueError, before anything is copied. The constant bank is one per process, so concurrent calls from several
host threads are serialised.
"""

from __future__ import annotations

from ..registry import register
from .launch import run_gpu

__all__: list[str] = []

register("conv2d", "unroll_constmem",
         description="unrolled weights (K x C*R*S) in constant memory times the input unrolled on the fly (each "
                     "thread gathers its column by index); filter banks over 64 KB are rejected",
         report="ece408-fashion", needs_cuda=True, kernel="csrc/conv/conv2d_ece408.cu",
         test="tests/conv/test_gpu_ece408.py")(run_gpu)
