"""A conv2d call as every variant receives it: the validated problem, and the shape rules.

``conv2d`` checks its arguments here (:func:`validate`) and hands a :class:`Conv2dProblem` to the
variant; the planning helpers (``cudnn_algorithm``, ``cs6235_plan``, ``auto_choice``, ...) check
shapes given as tuples with the same rules (:func:`check_shapes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._validate import activation_name, bias_vector, float_array, integer, pair

__all__ = ["Conv2dProblem", "conv2d_output_shape", "check_shapes", "validate"]


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
        return _output_shape(self.x.shape, self.w.shape, self.stride, self.padding)

    @property
    def dims(self) -> tuple[int, ...]:
        """(N, C, H, W, K, R, S, u, v, ph, pw): the problem in the reports' names."""
        n, c, h, w = self.x.shape
        k, _, r, s = self.w.shape
        return (n, c, h, w, k, r, s, *self.stride, *self.padding)


def conv2d_output_shape(x_shape, w_shape, stride=1, padding=0) -> tuple[int, int, int, int]:
    """Shape (N, K, P, Q) of ``conv2d`` output, P = (H + 2*ph - R) // u + 1, Q likewise."""
    return _output_shape(x_shape, w_shape, pair(stride, "stride", 1), pair(padding, "padding", 0))


def _output_shape(x_shape, w_shape, stride: tuple[int, int], padding: tuple[int, int]) -> tuple[int, int, int, int]:
    (u, v), (ph, pw) = stride, padding
    n, _, h, w = x_shape
    k, _, r, s = w_shape
    return n, k, (h + 2 * ph - r) // u + 1, (w + 2 * pw - s) // v + 1


def _check_window(h: int, w: int, r: int, s: int, ph: int, pw: int) -> None:
    if h + 2 * ph < r or w + 2 * pw < s:
        raise ValueError(f"filter {r}x{s} is larger than the padded input {h + 2 * ph}x{w + 2 * pw}")


def validate(x, w, stride, padding, bias, activation) -> Conv2dProblem:
    """The :func:`gpuopt.conv2d` argument rules (see its docstring), as a :class:`Conv2dProblem`."""
    x = float_array(x, "x", 4, "(N, C, H, W)")
    w = float_array(w, "w", 4, "(K, C, R, S)")
    if w.shape[1] != x.shape[1]:
        raise ValueError(f"w has {w.shape[1]} input channels but x has {x.shape[1]} (w must be (K, C, R, S))")
    stride_hw = pair(stride, "stride", 1)
    pad_hw = pair(padding, "padding", 0)
    _check_window(x.shape[2], x.shape[3], w.shape[2], w.shape[3], *pad_hw)
    return Conv2dProblem(x, w, bias_vector(bias, w.shape[0], "(K,)"), stride_hw, pad_hw, activation_name(activation))


def check_shapes(x_shape, w_shape, stride, padding):
    """Validate shapes given as tuples (no arrays): ((N,C,H,W), (K,C,R,S), (u,v), (ph,pw)).

    The same rules as :func:`gpuopt.conv2d` applies to arrays; used by the planning helpers.
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
    _check_window(h, w, r, s, ph, pw)
    return (n, c, h, w), (k, c, r, s), (u, v), (ph, pw)
