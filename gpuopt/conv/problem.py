"""A conv2d call as every variant receives it: the validated problem, and the shape rules.

``conv2d`` checks its arguments here (:func:`validate`) and hands a :class:`Conv2dProblem` to the
variant; the planning helpers (``cudnn_algorithm``, ``cs6235_plan``, ``auto_choice``, ...) check
shapes given as tuples with the same rules (:func:`check_shapes`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from .. import _core
from .._ext import kernel_limits
from ..cuda import DeviceArray
from .._validate import Buffer, activation_name, bias_vector, check_memory, float_array, integer, pair, runs_on_gpu

__all__ = ["Conv2dProblem", "conv2d_output_shape", "check_shapes", "validate", "check_sizes"]


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
    """Shape (N, K, P, Q) of ``conv2d`` output, P = (H + 2*ph - R) // u + 1, Q likewise.

    The shapes are checked as :func:`gpuopt.conv2d` checks arrays (ValueError for a filter larger than the
    padded input, ...); nothing is allocated, so a shape too large to allocate is not an error here.
    """
    x_shape, w_shape, stride_hw, pad_hw = check_shapes(x_shape, w_shape, stride, padding)
    return _output_shape(x_shape, w_shape, stride_hw, pad_hw)


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



@functools.lru_cache(maxsize=None)
def _cpu_threads() -> int:
    return max(1, int(_core.build_info()["cpu_threads"]))


def check_sizes(p: Conv2dProblem, variant: str | None) -> None:
    """ValueError naming the arguments when the output of ``p``, (N, K, P, Q) float32, with the scratch that
    ``variant`` (None: the op's default) allocates for it, is larger than the memory that would hold it
    (:func:`gpuopt._validate.check_memory`; nothing is allocated): a padding of 10**6 on an 8x8 image asks for
    2000006 x 2000006 outputs per map. Scratch counted: the CPU reference's per-thread P*Q float64 accumulators,
    and ``unroll``'s unrolled input and GEMM output of one chunk of images (at least one image)."""
    n, c, _, _, k, r, s, u, v, ph, pw = p.dims
    _, _, pp, q = out = p.output_shape
    buffers = [Buffer(lambda: f"the output y (N, K, P, Q) = {out} float32", 4 * n * k * pp * q)]
    if variant is None:
        from ..registry import default_variant

        variant = default_variant("conv2d")
    if variant == "cpu":
        threads = _cpu_threads()
        buffers.append(Buffer(lambda: f"the CPU reference's accumulators (P*Q float64 per thread, {threads} threads)",
                              8 * pp * q * threads, "host"))
    elif variant == "unroll":  # its launcher's chunk rule (conv2d_gemm.cu: unroll_chunk)
        per_image = 4 * (c * r * s + k) * pp * q
        images = min(n, max(1, kernel_limits()["conv2d_unroll_scratch_bytes"] // per_image))
        buffers.append(Buffer(lambda: f"unroll's scratch for {images} image(s) ((C*R*S + K) * P*Q float32 each)",
                              images * per_image, "device"))

    def arguments() -> str:
        shapes = f"x (N, C, H, W) = {tuple(p.x.shape)}, w (K, C, R, S) = {tuple(p.w.shape)}"
        if (u, v) != (1, 1):
            shapes += f", stride={(u, v)}"
        # Padding is what turns a small call into a huge one: named first where there is some.
        return f"padding={(ph, pw)} with {shapes}" if (ph, pw) != (0, 0) else shapes

    check_memory("conv2d", arguments, buffers, gpu=lambda: runs_on_gpu("conv2d", variant),
                 device_result=any(isinstance(a, DeviceArray) for a in (p.x, p.w, p.bias)))
