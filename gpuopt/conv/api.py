"""The public ``gpuopt.conv2d``: argument checks, then the variant's run function."""

from __future__ import annotations

from typing import Any

from .. import _plan
from .._exec import dispatch, dispatch_planned
from ..registry import default_variant, variants
from .problem import Conv2dProblem, check_sizes, validate

__all__ = ["conv2d"]


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
    key = None
    if timing is False:  # the plan cache (gpuopt._plan): a problem seen before skips the checks and the resolve
        try:
            kx, hx = _plan.arg_key(x)
            kw, hw = _plan.arg_key(w)
            kb, hb = _plan.arg_key(bias)
            if not (activation is None or type(activation) is str) or not (variant is None or type(variant) is str):
                raise _plan.Uncacheable
            key = ("conv2d", kx, kw, kb, _plan.scalar_key(stride), _plan.scalar_key(padding), activation, variant,
                   _plan.params_key(params), _plan.device_key())
            plan = _plan.lookup(key)
        except (_plan.Uncacheable, TypeError):  # TypeError: an unhashable value, rejected the long way
            key = plan = None
        if plan is not None:
            return plan.run(hx, hw, hb)
    p = validate(x, w, stride, padding, bias, activation)
    if variant is None and not params:  # (parameters name the registry default's: it stays the one that runs)
        variant = default_for(p)
    check_sizes(p, variant)
    if key is None:
        return dispatch("conv2d", variant, params, timing, (p.x, p.w, p.bias), p)
    stride_hw, pad_hw, act = p.stride, p.padding, p.activation
    return dispatch_planned(key, "conv2d", variant, params, (p.x, p.w, p.bias), (p,),
                            lambda x, w, bias: (Conv2dProblem(x, w, bias, stride_hw, pad_hw, act),))


#: Below this many multiply-adds a convolution is a few microseconds of GPU work, and cuDNN's own host time per
#: call (cudnnConvolutionForward: 34.5 us per call against implicit_gemm's 18.9 on the H200 host, overhead study)
#: is most of what the caller waits for: ``variant=None`` then runs gpuopt's implicit_gemm (16x16 tiles).
TINY_MACS = 1 << 20
_TINY_VARIANT = "implicit_gemm"


def default_for(p: Conv2dProblem) -> str:
    """The variant ``conv2d(..., variant=None)`` runs for this problem: the registry's default
    (:func:`gpuopt.registry.default_variant`), except cuDNN on tiny problems (:data:`TINY_MACS`)."""
    name = default_variant("conv2d")
    if name != "cudnn" or _TINY_VARIANT not in variants("conv2d"):
        return name
    n, c, _, _, k, r, s = p.dims[:7]
    _, _, pp, q = p.output_shape
    return _TINY_VARIANT if n * k * pp * q * c * r * s <= TINY_MACS else name
