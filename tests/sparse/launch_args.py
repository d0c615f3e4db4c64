"""The compiled launchers' arguments for tests that call them directly (shape checks before any launch)."""

from __future__ import annotations


def shape(cuda, C, H, W, M, R, S):
    return cuda.SparseConvShape(C, H, W, M, R, S)


def args(cuda, x, filters, width, y, overflow, C, H, W, M, R, S):
    """SparseConv2dArgs: device addresses (0 where a test checks that nothing is dereferenced)."""
    return cuda.SparseConv2dArgs(x, list(filters), width, y, overflow, shape(cuda, C, H, W, M, R, S))
