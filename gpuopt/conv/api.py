"""The public ``gpuopt.conv2d``: argument checks, then the variant's run function."""

from __future__ import annotations

from typing import Any

from .._exec import dispatch
from .problem import validate

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
        unknown variant or parameter.
    RuntimeError
        A CUDA variant without a usable GPU, or a CUDA error.

    Notes
    -----
    Other float dtypes are converted to float32 and non-contiguous inputs are copied;
    device arrays (``__cuda_array_interface__``) must be float32 and C-contiguous and are
    used without a copy (see :mod:`gpuopt.cuda` for the stream rules).
    """
    p = validate(x, w, stride, padding, bias, activation)
    return dispatch("conv2d", variant, params, timing, (p.x, p.w, p.bias), p)
