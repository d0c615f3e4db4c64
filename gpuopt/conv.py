"""2-D convolution (``gpuopt.conv2d``) and its variants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _core
from ._validate import choice, float_array, integer, pair
from ._exec import ExecContext, dispatch
from ._ext import cuda_module, require_cuda
from .registry import Param, register

__all__ = ["conv2d", "conv2d_output_shape", "Conv2dProblem", "cudnn_algorithm", "auto_choice", "autotune_cache",
           "clear_autotune_cache"]


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


def _gpu_conv2d(kernel: str):
    """Run function of a GPU variant whose binding ``kernel`` takes device pointers and the shape."""

    def run(ctx: ExecContext, p: Conv2dProblem, **params):
        dx, dw = ctx.device(p.x), ctx.device(p.w)
        dbias = None if p.bias is None else ctx.device(p.bias)
        n, c, h, w = dx.shape
        k, _, r, s = dw.shape
        dy = ctx.empty(p.output_shape, np.float32)
        with ctx.kernel():
            getattr(cuda_module(), kernel)(dx.ptr, dw.ptr, 0 if dbias is None else dbias.ptr, dy.ptr, n, c, h, w, k, r, s,
                                           p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.activation,
                                           **params)
        return ctx.finish(dy)

    return run


register("conv2d", "basic",
         description="one thread per output (q fastest, then p, k, n), 1-D grid of 256: the starting kernel of both "
                     "conv reports", report="ece408-fashion", needs_cuda=True)(_gpu_conv2d("conv2d_basic"))

if _core.build_info()["cudnn"]:
    register("conv2d", "cudnn",
             description="cuDNN forward, strict FP32 (TF32 off), algorithm found once per shape and cached",
             report="library", needs_cuda=True, preferred=True,
             params=(Param("algorithms", "precise", ("precise", "any"),
                           "'precise': GEMM-family and direct algorithms only (reference-level accuracy); 'any': "
                           "also FFT and Winograd, faster on some shapes, ~1e-4 relative error on 5x5 filters"),))(
        _gpu_conv2d("conv2d_cudnn"))


def _check_problem_shapes(x_shape, w_shape, stride, padding):
    """Validate shapes given as tuples (no arrays): ((N,C,H,W), (K,C,R,S), (u,v), (ph,pw)).

    The same rules as :func:`conv2d` applies to arrays; used by the planning helpers.
    """
    shapes = []
    for shape, name, layout in ((x_shape, "x_shape", "(N, C, H, W)"), (w_shape, "w_shape", "(K, C, R, S)")):
        if not isinstance(shape, (tuple, list)) or len(shape) != 4:
            raise ValueError(f"{name} must be a 4-tuple {layout}, got {shape!r}")
        shapes.append(tuple(integer(d, f"{name}[{i}]", 1) for i, d in enumerate(shape)))
    (n, c, h, w), (k, wc, r, s) = shapes
    if wc != c:
        raise ValueError(f"w_shape has {wc} input channels but x_shape has {c}")
    (u, v), (ph, pw) = pair(stride, "stride", 1), pair(padding, "padding", 0)
    if h + 2 * ph < r or w + 2 * pw < s:
        raise ValueError(f"filter {r}x{s} is larger than the padded input {h + 2 * ph}x{w + 2 * pw}")
    return (n, c, h, w), (k, c, r, s), (u, v), (ph, pw)


def cudnn_algorithm(x_shape, w_shape, stride=1, padding=0, algorithms: str = "precise") -> str:
    """Name of the cuDNN forward algorithm the ``"cudnn"`` variant uses for this problem.

    The algorithm is found (benchmarked) on the first call for a shape and cached, so this
    also warms the cache; e.g. ``"IMPLICIT_PRECOMP_GEMM"`` (the suffix of cuDNN's
    ``CUDNN_CONVOLUTION_FWD_ALGO_*`` name).

    Parameters
    ----------
    x_shape : (N, C, H, W)
    w_shape : (K, C, R, S)
    stride, padding : int or pair
        As in :func:`conv2d`.
    algorithms : "precise" or "any"
        The ``cudnn`` variant's parameter of the same name.

    Raises
    ------
    ValueError
        Shapes that :func:`conv2d` would reject.
    RuntimeError
        No usable GPU, gpuopt built without cuDNN, or a cuDNN error.
    """
    (n, c, h, w), (k, _, r, s), (u, v), (ph, pw) = _check_problem_shapes(x_shape, w_shape, stride, padding)
    if not _core.build_info()["cudnn"]:
        raise RuntimeError("gpuopt was built without cuDNN (not found at install time), so there is no cudnn variant")
    if algorithms not in ("precise", "any"):
        raise ValueError(f"algorithms must be 'precise' or 'any', got {algorithms!r}")
    return require_cuda("gpuopt.conv.cudnn_algorithm").conv2d_cudnn_algorithm(n, c, h, w, k, r, s, u, v, ph, pw,
                                                                             algorithms)


# The reports' variant families register themselves (display order: simple to fast).
from . import _conv_cs6235, _conv_ece408, _conv_gemm, _conv_direct, _conv_auto  # noqa: E402,F401
from ._conv_auto import auto_choice, autotune_cache, clear_autotune_cache  # noqa: E402,F401
