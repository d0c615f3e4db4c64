"""The baselines the studies set gpuopt beside, set up one way everywhere: PyTorch in strict FP32 (TF32 off) and
the cuDNN algorithm gpuopt's ``cudnn`` conv2d variant runs."""

from __future__ import annotations

from typing import Any

import gpuopt

from .study import error_text

__all__ = ["strict_torch", "cudnn_algorithm", "torch_lloyd", "TORCH_BLOCK_BYTES"]

#: The PyTorch Lloyd loop's N x k distance block at most: a user past it would loop over row blocks too.
TORCH_BLOCK_BYTES = 1 << 31


def strict_torch(benchmark: bool = True) -> Any:
    """torch set up as every PyTorch baseline here runs (strict FP32: TF32 off; cudnn.benchmark, unless
    ``benchmark=False``: cuDNN's fastest algorithm per shape, what a tuned PyTorch user gets), or None without
    torch or a usable GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = benchmark
    return torch


def cudnn_algorithm(x_shape, w_shape, stride, padding, algorithms="precise") -> str | None:
    """The cuDNN algorithm of the ``cudnn`` variant for this problem (None: not in this build)."""
    fn = getattr(gpuopt.conv, "cudnn_algorithm", None)
    if fn is None:
        return None
    try:
        return str(fn(tuple(x_shape), tuple(w_shape), stride, padding, algorithms))
    except Exception as exc:  # noqa: BLE001 - informational only
        return f"unknown ({error_text(exc)})"


def torch_lloyd(x: Any, k: int, iters: int) -> Any:
    """The five-line PyTorch Lloyd loop (strict FP32) on ``x``, a NumPy array or a CUDA tensor (N, D), first-k
    centres, ``iters`` loops, as a call; None without torch or a GPU. The distances go by row blocks of at most
    :data:`TORCH_BLOCK_BYTES` (one block for N x k up to 2 GiB: the five lines as written)."""
    torch = strict_torch()
    if torch is None:
        return None
    x = torch.as_tensor(x, device="cuda")
    n = x.shape[0]
    c0 = x[:k].clone()
    rows = max(1, min(n, TORCH_BLOCK_BYTES // (4 * k)))

    def nearest(c: Any) -> Any:
        cn = (c * c).sum(1)  # ||x||^2 is the same for every centre
        if rows >= n:
            return (cn - 2 * (x @ c.T)).argmin(1)
        return torch.cat([(cn - 2 * (x[i:i + rows] @ c.T)).argmin(1) for i in range(0, n, rows)])

    def run():
        c, prev = c0.clone(), torch.full((n,), -1, device="cuda", dtype=torch.int64)
        for _ in range(iters):
            m = nearest(c)
            changed = (m != prev).sum()  # the stopping rule's count (not read: every run does `iters` loops)
            counts = torch.bincount(m, minlength=k)
            sums = torch.zeros_like(c).index_add_(0, m, x)
            c = torch.where(counts[:, None] > 0, sums / counts.clamp(min=1)[:, None].to(c.dtype), c)
            prev = m
        return c, m, changed
    return run
