"""conv2d by unroll-and-jam: one thread per output (or per unrolled group of outputs), loops unrolled and
jammed; the variants reproduce the CS6235 report (``report="cs6235"``).

The report's kernels (../shared/seeds/cs6235-cnn-gpu-conv-report.txt) as one templated
CUDA kernel family (csrc/conv/conv2d_cs6235.cu): a 1-D grid, each thread one output or an
unrolled group of outputs at one (p, q), the flat index mapped q fastest, then p, then k
and n (or n and k). Unlike the report's kernels every variant is correct for any shape,
stride and padding (unroll tails, no divisibility conditions), with bias and the fused
activation.

Defaults: ``block_size`` 128 everywhere, the block size the report found best over its
four configurations (Sec. 2, Fig 2: N = 1 peaks at 64-128, N = 128 at 128). Unroll
factors and loop orders as the report found best (see each parameter's doc).
"""

from __future__ import annotations

from typing import Any

from .._ext import cuda_host_module, kernel_choices, kernel_limits
from ..registry import Param, register, resolve
from .launch import run_gpu
from .problem import check_shapes

__all__ = ["cs6235_plan", "BLOCK_SIZES"]

#: Threads per block the variants accept (the report's sweep, Fig 2): csrc/conv/conv2d_choices.hpp's table.
BLOCK_SIZES = kernel_choices()["conv2d/plain/block_size"]["allowed"]


def _block_size(variant: str) -> Param:
    return Param.from_kernels(f"conv2d/{variant}/block_size",
                              "threads per block of the 1-D grid; 128: the report's best over its four configurations "
                              "(Fig 2)")


_CS = dict(report="cs6235", needs_cuda=True, kernel="csrc/conv/conv2d_cs6235.cu", test="tests/conv/test_gpu_cs6235.py")
_LIMITS = kernel_limits()

register("conv2d", "plain",
         description="one thread per output, mapping q,p,k,n (q fastest), loops c,r,s in registers: the report's "
                     "starting kernel with a tunable block size", params=(_block_size("plain"),), **_CS)(run_gpu)

register("conv2d", "reorder",
         description="plain with the thread mapping q,p,n,k instead of q,p,k,n (report Sec. 4.2, Fig 6)",
         params=(_block_size("reorder"),), **_CS)(run_gpu)

register("conv2d", "unroll_k",
         description="each thread computes `unroll` output maps at one (n, p, q): every input value loaded once "
                     "feeds them all (k unrolled and jammed into the c,r,s loops, tails for any K; Figs 3 and 5)",
         params=(_block_size("unroll_k"),
                 Param.from_kernels("conv2d/unroll_k/unroll",
                       "output maps per thread; 8: with rsc the report's best at N = 128 (Sec. 4.1)"),
                 Param.from_kernels("conv2d/unroll_k/loop_order",
                       "order of each thread's c, r, s loops; rsc (c innermost, padding checks once per tap) beat "
                       "crs in the report (Fig 5)")),
         **_CS)(run_gpu)

register("conv2d", "unroll_c",
         description="plain with the c loop unrolled by `unroll` and jammed into the r, s loops (tail for any C; "
                     "report Sec. 3.2, Fig 4)",
         params=(_block_size("unroll_c"),
                 Param.from_kernels("conv2d/unroll_c/unroll",
                       "input channels per step (0: no unrolling); 4: unrolling helped only at C = 832 (Fig 4) and "
                       "costs nothing at C < 4, where every channel runs in the tail")),
         **_CS)(run_gpu)

register("conv2d", "unroll_nk",
         description="unroll-and-jam of n and k, 4 x 4: each thread computes 4 images x 4 maps at one (p, q), "
                     "loops r,s,c (tails for any N, K; report Sec. 5, Fig 8)",
         params=(_block_size("unroll_nk"),), **_CS)(run_gpu)

register("conv2d", "shared",
         description="mapping q,p,n,k with the c loop tiled through shared memory: each block stages the filters of "
                     "the maps it spans, about block_size values per tile (report Sec. 4.2.1, Fig 7); any N, K, C",
         params=(_block_size("shared"),), **_CS)(run_gpu)

register("conv2d", "general",
         description=f"the report's switching kernel: n and k unrolled 4 x 4 when N >= "
                     f"{_LIMITS['conv2d_general_min_images']} and K >= {_LIMITS['conv2d_general_min_maps']}, else k "
                     f"and c unrolled 2 x 8 when C >= {_LIMITS['conv2d_general_min_channels']}, else k unrolled by 2; "
                     "rsc loops (Sec. 3, Fig 1)",
         params=(_block_size("general"),), **_CS)(run_gpu)

_VARIANTS = ("plain", "reorder", "unroll_k", "unroll_c", "unroll_nk", "shared", "general")


def cs6235_plan(x_shape, w_shape, stride=1, padding=0, *, variant: str = "general", **params: Any) -> dict[str, Any]:
    """What a CS6235 variant runs on a problem: the kernel the ``general`` switch picks, the
    shared variant's tile. Host logic only: needs a CUDA build, not a GPU.

    Parameters
    ----------
    x_shape : (N, C, H, W)
    w_shape : (K, C, R, S)
    stride, padding : int or pair
        As in :func:`gpuopt.conv2d`.
    variant : str
        One of the CS6235 variants ("plain", "reorder", "unroll_k", "unroll_c", "unroll_nk",
        "shared", "general").
    **params
        The variant's parameters (defaults as in ``gpuopt.variants("conv2d")[variant]``).

    Returns
    -------
    dict
        ``mapping`` ("qpkn" or "qpnk", q fastest), ``k_unroll``, ``n_unroll``, ``c_unroll``
        (1: none), ``loop_order`` ("crs" or "rsc"), ``shared`` (bool), ``tile_channels``
        and ``shared_bytes`` (shared variant: input channels per tile and bytes per block).

    Raises
    ------
    ValueError
        Bad shapes, an unknown variant or parameter, or a disallowed value.
    RuntimeError
        gpuopt was built without CUDA.
    """
    if variant not in _VARIANTS:
        raise ValueError(f"variant must be one of the CS6235 variants {list(_VARIANTS)}, got {variant!r}")
    _, resolved = resolve("conv2d", variant, params, require_device=False)
    (n, c, h, w), (k, _, r, s), (u, vv), (ph, pw) = check_shapes(x_shape, w_shape, stride, padding)
    cuda = cuda_host_module("gpuopt.conv.cs6235_plan (the CS6235 kernels)")
    return cuda.conv2d_cs6235_plan(variant, cuda.Conv2dShape(n, c, h, w, k, r, s, u, vv, ph, pw),
                                   block_size=resolved["block_size"], unroll=resolved.get("unroll", 0),
                                   loop_order=resolved.get("loop_order", "crs"))
