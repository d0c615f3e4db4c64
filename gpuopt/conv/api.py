"""The public ``gpuopt.conv2d``: argument checks, then the variant's run function."""

from __future__ import annotations

from typing import Any

from .. import _plan
from .._exec import Op
from ..registry import default_variant, variants
from .problem import GROUPED_DILATED, Conv2dProblem, check_general, check_sizes, validate

__all__ = ["conv2d"]


def conv2d(x, w, *, stride=1, padding=0, bias=None, activation=None, variant: str | None = None, timing: bool = False,
           stream: Any = None, dilation=1, groups=1, **params: Any):
    """2-D convolution (cross-correlation, as in cuDNN and every report) of a batch.

    ``y[n, k, p, q] = act(bias[k] + sum_{c, r, s} x[n, g*C/G + c, p*u - ph + r*dh, q*v - pw + s*dw] * w[k, c, r, s])``
    with g = k // (K/G) the group of map k (G = ``groups``; one group: every channel) and out-of-range input
    positions read as zero (zero padding).

    Parameters
    ----------
    x : array_like, float, shape (N, C, H, W)
        Input batch, NCHW.
    w : array_like, float, shape (K, C / groups, R, S)
        Filters: K output maps, C / groups input channels each, R x S taps.
    stride : int or (u, v)
        Vertical and horizontal stride, >= 1.
    padding : int or (ph, pw)
        Zero padding added on each side, >= 0.
    dilation : int or (dh, dw)
        Spacing between filter taps on the input, >= 1 (a dilated filter spans (R - 1)*dh + 1 rows).
    groups : int
        Channel groups, dividing C and K: map k reads only its group's C / groups channels (groups = C:
        depthwise). ``cpu``, ``cudnn`` and ``auto`` take any groups and dilation, ``depthwise`` depthwise layers
        (groups = C), the others neither (ValueError naming the variant). ``auto`` runs depthwise layers of
        3x3, 5x5 and 7x7 filters at stride 1 or 2 with 2**20 inputs or more on ``depthwise``'s rows kernel and
        every other grouped or dilated layer on cuDNN; ``variant=None`` runs cuDNN on a GPU.
    bias : array_like, float, shape (K,), optional
        Added to every output of map k before the activation.
    activation : None, "relu" or "tanh"
        Applied to the output (fused into the kernel where the variant supports it).
    variant : str, optional
        Implementation (see ``gpuopt.variants("conv2d")``); None picks the fastest
        available one, or "cpu" without a GPU.
    timing : bool
        Also return a :class:`gpuopt.Timing` of the call's phases (ms).
    stream : optional
        The stream to run on: a ``cudaStream_t`` handle (int), ``torch.cuda.Stream``, CuPy stream, or anything
        with ``cuda_stream``/``ptr``/``__cuda_stream__``. Default: the first device input's stream (PyTorch's
        or CuPy's current stream for their arrays), else the legacy default stream (:mod:`gpuopt.cuda`).
    **params
        Tunable parameters of the variant (``gpuopt.variants("conv2d")[variant].params``).

    Returns
    -------
    numpy.ndarray or DeviceArray, float32, shape (N, K, P, Q)
        P = (H + 2*ph - (R - 1)*dh - 1) // u + 1 and Q = (W + 2*pw - (S - 1)*dw - 1) // v + 1; a DeviceArray
        when any input is a device array. With ``timing=True``: ``(y, Timing)``.

    Raises
    ------
    TypeError
        Non-float arrays (integers, bools, objects) or a non-integer stride/padding.
    ValueError
        Wrong ndim, empty dimensions, channel mismatch, groups not dividing C and K, filter (dilated) larger
        than the padded input, negative padding, stride < 1, dilation < 1, groups or dilation on a variant that
        does not take them, bad bias shape, unknown activation,
        unknown variant or parameter; an output (with the chosen variant's scratch) larger than
        the memory that would hold it, e.g. from a huge padding (the message names the arguments
        and the bytes; nothing is allocated).
    RuntimeError
        A CUDA variant without a usable GPU, or a CUDA error.

    Notes
    -----
    Other float dtypes are converted to float32 and non-contiguous inputs are copied;
    device arrays (``__cuda_array_interface__``) must be float32 and C-contiguous and are
    used without a copy (see :mod:`gpuopt.cuda` for the stream rules).
    """
    return _OP(variant, timing, params, x, w, stride, padding, bias, activation, dilation, groups, stream=stream)


def _key(x, w, stride, padding, bias, activation, dilation, groups):
    kx, hx = _plan.arg_key(x)
    kw, hw = _plan.arg_key(w)
    kb, hb = _plan.arg_key(bias)
    if not (activation is None or type(activation) is str):
        raise _plan.Uncacheable
    return (kx, kw, kb, _plan.scalar_key(stride), _plan.scalar_key(padding), activation, _plan.scalar_key(dilation),
            _plan.scalar_key(groups)), (hx, hw, hb)


def _validate(x, w, stride, padding, bias, activation, dilation, groups):
    p = validate(x, w, stride, padding, bias, activation, dilation, groups)
    return (p.x, p.w, p.bias), (p,)


def _rebuild(p: Conv2dProblem):
    stride, padding, act, dilation, groups = p.stride, p.padding, p.activation, p.dilation, p.groups
    return lambda x, w, bias: (Conv2dProblem(x, w, bias, stride, padding, act, dilation, groups),)


#: Below this many multiply-adds a convolution is a few microseconds of GPU work, and cuDNN's own host time per
#: call (cudnnConvolutionForward: 34.5 us per call against implicit_gemm's 18.9 on the H200 host, overhead study)
#: is most of what the caller waits for: ``variant=None`` then runs gpuopt's implicit_gemm (16x16 tiles).
TINY_MACS = 1 << 20
_TINY_VARIANT = "implicit_gemm"


def default_for(p: Conv2dProblem) -> str:
    """The variant ``conv2d(..., variant=None)`` runs for this problem: the registry's default
    (:func:`gpuopt.registry.default_variant`), except cuDNN on tiny problems (:data:`TINY_MACS`), and the first of
    :data:`~gpuopt.conv.problem.GROUPED_DILATED` for groups or dilation: cuDNN on a GPU, else the CPU."""
    name = default_variant("conv2d")
    if not p.plain:
        return name if name in GROUPED_DILATED else "cudnn" if "cudnn" in variants("conv2d") else "cpu"
    if name != "cudnn" or _TINY_VARIANT not in variants("conv2d"):
        return name
    n, c, _, _, k, r, s = p.dims[:7]
    _, _, pp, q = p.output_shape
    return _TINY_VARIANT if n * k * pp * q * c * r * s <= TINY_MACS else name


def _check(variant: str, p: Conv2dProblem) -> None:
    check_general(p, variant)
    check_sizes(p, variant)


_OP = Op("conv2d", _validate, key=_key, rebuild=_rebuild, default=default_for, check=_check)
