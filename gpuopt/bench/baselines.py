"""The baselines the studies set gpuopt beside, set up one way everywhere: PyTorch in strict FP32 (TF32 off) and
the cuDNN algorithm gpuopt's ``cudnn`` conv2d variant runs."""

from __future__ import annotations

from typing import Any

import gpuopt

from .study import error_text

__all__ = ["strict_torch", "cudnn_algorithm"]


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
