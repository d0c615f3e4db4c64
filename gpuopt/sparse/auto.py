"""sparse_conv2d ``auto`` (what ``variant=None`` runs on a GPU): the one-pass variant measured fastest for the shape.

``fast_sparse_input`` where its planes kernel applies (W <= 32, H <= 511 and filters up to 3x3: the rule and limits are the
kernel's, ``kernel_limits()["sparse_conv2d_planes_max_width"]``, ``["..._max_height"]``, ``["..._max_taps"]``): on the lab's layer
(H200, device-resident) 43.4 µs at round 3 against ``fast_fused`` 143 µs, and faster at every input density measured
(0% zeros: 107 against 144). Elsewhere ``fast_sparse_input`` runs its atomic kernel (253 µs on the lab's layer
where ``fast_fused`` took 144): ``fast_fused`` then (notes/sparse.md).
"""

from __future__ import annotations

from typing import Any

from .._exec import ExecContext
from .. import _core
from ..registry import register, resolve
from .api import SparseConvProblem


def auto_choice(c: int, h: int, w: int, m: int, r: int, s: int) -> str:
    """The variant ``auto`` runs for x (c, h, w) and filters (m, c, r, s) (see the module docstring): the rule is
    the launcher's own (``sparse_input_planes_apply`` in csrc/sparse/sparse_conv.hpp), asked, not restated."""
    return "fast_sparse_input" if _core.sparse_input_planes_apply(c, h, w, m, r, s) else "fast_fused"


def _run_auto(ctx: ExecContext, p: SparseConvProblem) -> Any:
    m, c, r, s = p.shape
    _, h, w = p.x.shape
    v, resolved = resolve("sparse_conv2d", auto_choice(c, h, w, m, r, s), {})
    return ctx.run(v, p, **resolved)


register("sparse_conv2d", "auto", description="picks the one-pass variant measured fastest for the shape: "
         "fast_sparse_input where its planes kernel applies (W <= 32, H <= 511, filters up to 3x3), else fast_fused "
         "(gpuopt/sparse/auto.py)", report="gpuopt", needs_cuda=True, preferred=True,
         kernel="gpuopt/sparse/auto.py", test="tests/sparse/test_gpu_sparse_fused.py", launcher=False)(_run_auto)
