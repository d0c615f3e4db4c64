"""2-D convolution (``gpuopt.conv2d``) and its variants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _core
from ._validate import choice, float_array, pair
from ._exec import ExecContext, dispatch
from .registry import register

__all__ = ["conv2d", "conv2d_output_shape", "Conv2dProblem"]


@dataclass(frozen=True)
class Conv2dProblem:
    """A validated conv2d call, as every variant receives it.

    ``x`` (N, C, H, W) and ``w`` (K, C, R, S) are float32 C-contiguous, ``bias`` is
    float32 (K,) or None, ``stride`` = (u, v), ``padding`` = (ph, pw), ``activation`` is
    "none", "relu" or "tanh".
    """

    x: Any  # numpy.ndarray or DeviceArray
    w: Any
    bias: Any
    stride: tuple[int, int]
    padding: tuple[int, int]
    activation: str

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return conv2d_output_shape(self.x.shape, self.w.shape, self.stride, self.padding)


def conv2d_output_shape(x_shape, w_shape, stride=1, padding=0) -> tuple[int, int, int, int]:
    """Shape (N, K, P, Q) of ``conv2d`` output, P = (H + 2*ph - R) // u + 1, Q likewise."""
    (u, v), (ph, pw) = pair(stride, "stride", 1), pair(padding, "padding", 0)
    n, _, h, w = x_shape
    k, _, r, s = w_shape
    return n, k, (h + 2 * ph - r) // u + 1, (w + 2 * pw - s) // v + 1


def conv2d(x, w, *, stride=1, padding=0, bias=None, activation=None, variant: str | None = None, timing: bool = False,
           **params: Any):
    """2-D convolution (cross-correlation, as in cuDNN and every report) of a batch.

    ``y[n, k, p, q] = act(bias[k] + sum_{c, r, s} x[n, c, p*u - ph + r, q*v - pw + s] * w[k, c, r, s])``
    with out-of-range input positions read as zero (zero padding).

    Parameters
    ----------
    x : array_like, float, shape (N, C, H, W)
        Input batch, NCHW.
    w : array_like, float, shape (K, C, R, S)
        Filters: K output maps, C input channels, R x S taps.
    stride : int or (u, v)
        Vertical and horizontal stride, >= 1.
    padding : int or (ph, pw)
        Zero padding added on each side, >= 0.
    bias : array_like, float, shape (K,), optional
        Added to every output of map k before the activation.
    activation : None, "relu" or "tanh"
        Applied to the output (fused into the kernel where the variant supports it).
    variant : str, optional
        Implementation (see ``gpuopt.variants("conv2d")``); None picks the fastest
        available one, or "cpu" without a GPU.
    timing : bool
        Also return a :class:`gpuopt.Timing` of the call's phases (ms).
    **params
        Tunable parameters of the variant (``gpuopt.variants("conv2d")[variant].params``).

    Returns
    -------
    numpy.ndarray or DeviceArray, float32, shape (N, K, P, Q)
        P = (H + 2*ph - R) // u + 1 and Q = (W + 2*pw - S) // v + 1; a DeviceArray when
        any input is a device array. With ``timing=True``: ``(y, Timing)``.

    Raises
    ------
    TypeError
        Non-float arrays (integers, bools, objects) or a non-integer stride/padding.
    ValueError
        Wrong ndim, empty dimensions, channel mismatch, filter larger than the padded
        input, negative padding, stride < 1, bad bias shape, unknown activation,
        unknown variant or parameter.
    RuntimeError
        A CUDA variant without a usable GPU, or a CUDA error.

    Notes
    -----
    Other float dtypes are converted to float32 and non-contiguous inputs are copied;
    device arrays (``__cuda_array_interface__``) must be float32 and C-contiguous and are
    used without a copy (see :mod:`gpuopt.cuda` for the stream rules).
    """
    x = float_array(x, "x", 4, "(N, C, H, W)")
    w = float_array(w, "w", 4, "(K, C, R, S)")
    if w.shape[1] != x.shape[1]:
        raise ValueError(f"w has {w.shape[1]} input channels but x has {x.shape[1]} (w must be (K, C, R, S))")
    stride_hw = pair(stride, "stride", 1)
    pad_hw = pair(padding, "padding", 0)
    _, _, h, wd = x.shape
    _, _, r, s = w.shape
    if h + 2 * pad_hw[0] < r or wd + 2 * pad_hw[1] < s:
        raise ValueError(f"filter {r}x{s} is larger than the padded input {h + 2 * pad_hw[0]}x{wd + 2 * pad_hw[1]}")
    if bias is not None:
        bias = float_array(bias, "bias", 1, "(K,)")
        if bias.shape[0] != w.shape[0]:
            raise ValueError(f"bias must have shape ({w.shape[0]},) to match w, got {bias.shape}")
    act = choice(activation, "activation", (None, "none", "relu", "tanh")) or "none"
    return dispatch("conv2d", variant, params, timing, (x, w, bias), Conv2dProblem(x, w, bias, stride_hw, pad_hw, act))


@register("conv2d", "cpu", description="CPU reference (C++, OpenMP): direct loops, float64 accumulation",
          report="reference", needs_cuda=False)
def _conv2d_cpu(ctx: ExecContext, p: Conv2dProblem) -> np.ndarray:
    x, w = ctx.host(p.x), ctx.host(p.w)
    bias = None if p.bias is None else ctx.host(p.bias)
    with ctx.kernel():
        y = _core.conv2d(x, w, bias, p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.activation)
    return ctx.finish(y)
