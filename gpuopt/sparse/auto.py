"""sparse_conv2d ``auto`` (what ``variant=None`` runs on a GPU): the one-pass variant measured fastest for the shape.

``fast_imma`` (int8 tensor cores, round 5) where it applies (the planes kernel's shapes, W <= 32, H <= 511, filters up
to 3x3, and C <= 4096: ``_core.sparse_imma_apply``) and every tap fits int8 (``taps_fit_int8`` of the filters; else
its kernel would take the slow exact int64 path): the lab's layer 22.1 µs on the H200, device-resident, at every input
density (``fast_sparse_input`` 41.1 µs at its 80% zeros, 27 µs at 99%; notes/sparse.md, round 5); then ``fast_sparse_input`` where its planes kernel applies (the
rule and limits are the kernel's, ``kernel_limits()["sparse_conv2d_planes_max_width"]``, ``["..._max_height"]``,
``["..._max_taps"]``): on the lab's layer (H200, device-resident) 41.0 µs against ``fast_fused`` 143 µs, and faster
at every input density measured. Elsewhere ``fast_sparse_input`` runs its atomic kernel (253 µs on the lab's layer
where ``fast_fused`` took 144): ``fast_fused`` then (notes/sparse.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._exec import ExecContext
from .. import _core
from ..registry import register, resolve
from .api import SparseConvProblem
from .formats import COOFilters, FASTFilters


def auto_choice(c: int, h: int, w: int, m: int, r: int, s: int, taps_fit_int8: bool = True) -> str:
    """The variant ``auto`` runs for x (c, h, w) and filters (m, c, r, s) (see the module docstring): the rules are
    the launchers' own (``sparse_imma_apply``, ``sparse_input_planes_apply`` in csrc/sparse/sparse_conv.hpp), asked,
    not restated."""
    if taps_fit_int8 and _core.sparse_imma_apply(c, h, w, m, r, s):
        return "fast_imma"
    return "fast_sparse_input" if _core.sparse_input_planes_apply(c, h, w, m, r, s) else "fast_fused"


def filters_fit_int8(p: SparseConvProblem) -> bool:
    """Whether every tap of the problem's filters is in -128..127 (host side: cached on COO/FAST objects)."""
    if isinstance(p.filters, (COOFilters, FASTFilters)):
        return p.filters.taps_fit_int8
    if isinstance(p.filters, np.ndarray):
        return bool(p.filters.size == 0 or (p.filters.min() >= -128 and p.filters.max() <= 127))
    return p.coo().taps_fit_int8  # dense device filters: converted to COO by the variant anyway


def _run_auto(ctx: ExecContext, p: SparseConvProblem) -> Any:
    m, c, r, s = p.shape
    _, h, w = p.x.shape
    v, resolved = resolve("sparse_conv2d", auto_choice(c, h, w, m, r, s, filters_fit_int8(p)), {})
    return ctx.run(v, p, **resolved)


register("sparse_conv2d", "auto", description="picks the one-pass variant measured fastest for the shape: "
         "fast_imma where it applies (W <= 32, H <= 511, filters up to 3x3, C <= 4096) and the taps fit int8, else "
         "fast_sparse_input where its planes kernel applies, else fast_fused (gpuopt/sparse/auto.py)",
         report="gpuopt", needs_cuda=True, preferred=True,
         kernel="gpuopt/sparse/auto.py", test="tests/sparse/test_gpu_sparse_fused.py", launcher=False)(_run_auto)
