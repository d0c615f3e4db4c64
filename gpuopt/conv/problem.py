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

__all__ = ["Conv2dProblem", "DEPTHWISE", "GROUPED_DILATED", "conv2d_output_shape", "check_shapes", "validate", "check_sizes",
           "check_general"]

#: The variants that take groups > 1 and dilation > 1 (the rest raise ValueError naming these): the CPU reference,
#: cuDNN, and ``auto``, which hands such a call to cuDNN; ``variant=None`` runs cuDNN on a GPU, else the CPU.
GROUPED_DILATED = ("cpu", "cudnn", "auto")
#: The variants that take depthwise layers only (groups = C, any dilation): gpuopt's depthwise kernel.
DEPTHWISE = ("depthwise",)


@dataclass(frozen=True)
class Conv2dProblem:
    """A validated conv2d call, as every variant receives it.

    ``x`` (N, C, H, W) and ``w`` (K, C / groups, R, S) are float32 C-contiguous, ``bias`` is
    float32 (K,) or None, ``stride`` = (u, v), ``padding`` = (ph, pw), ``activation`` is
    "none", "relu" or "tanh", ``dilation`` = (dh, dw), ``groups`` divides C and K.
    """

    x: Any  # numpy.ndarray or DeviceArray
    w: Any
    bias: Any
    stride: tuple[int, int]
    padding: tuple[int, int]
    activation: str
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return _output_shape(self.x.shape, self.w.shape, self.stride, self.padding, self.dilation)

    @property
    def plain(self) -> bool:
        """No dilation and one group: what every variant takes (:data:`GROUPED_DILATED` names the others')."""
        return self.groups == 1 and self.dilation == (1, 1)

    @property
    def dims(self) -> tuple[int, ...]:
        """(N, C, H, W, K, R, S, u, v, ph, pw): the problem in the reports' names (a plain one's: see
        :attr:`plain`)."""
        n, c, h, w = self.x.shape
        k, _, r, s = self.w.shape
        return (n, c, h, w, k, r, s, *self.stride, *self.padding)


def conv2d_output_shape(x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1) -> tuple[int, int, int, int]:
    """Shape (N, K, P, Q) of ``conv2d`` output, P = (H + 2*ph - ((R - 1)*dh + 1)) // u + 1, Q likewise.

    The shapes are checked as :func:`gpuopt.conv2d` checks arrays (ValueError for a filter larger than the
    padded input, ...); nothing is allocated, so a shape too large to allocate is not an error here.
    """
    x_shape, w_shape, stride_hw, pad_hw, dil_hw, _ = _general_shapes(x_shape, w_shape, stride, padding, dilation,
                                                                      groups)
    return _output_shape(x_shape, w_shape, stride_hw, pad_hw, dil_hw)


def _output_shape(x_shape, w_shape, stride: tuple[int, int], padding: tuple[int, int],
                  dilation: tuple[int, int] = (1, 1)) -> tuple[int, int, int, int]:
    (u, v), (ph, pw), (dh, dw) = stride, padding, dilation
    n, _, h, w = x_shape
    k, _, r, s = w_shape
    return n, k, (h + 2 * ph - (r - 1) * dh - 1) // u + 1, (w + 2 * pw - (s - 1) * dw - 1) // v + 1


def _check_window(h: int, w: int, r: int, s: int, ph: int, pw: int, dh: int = 1, dw: int = 1) -> None:
    rs, ss = (r - 1) * dh + 1, (s - 1) * dw + 1
    if h + 2 * ph < rs or w + 2 * pw < ss:
        dilated = f" (dilated by {(dh, dw)}: {rs}x{ss})" if (dh, dw) != (1, 1) else ""
        raise ValueError(f"filter {r}x{s}{dilated} is larger than the padded input {h + 2 * ph}x{w + 2 * pw}")


def _check_groups(c: int, k: int, wc: int, groups: int, what: str, x_name: str) -> None:
    """w's channels against x's and groups: ValueError naming them (``what``/``x_name``: the arguments' names)."""
    if groups == 1:
        if wc != c:
            raise ValueError(f"{what} has {wc} input channels but {x_name} has {c} ({what} must be (K, C, R, S))")
        return
    if c % groups or k % groups:
        raise ValueError(f"groups={groups} must divide both C={c} ({x_name}'s channels) and K={k} ({what}'s maps)")
    if wc * groups != c:
        raise ValueError(f"{what} has {wc} input channels but {x_name} has {c} and groups={groups}: {what} must be "
                         f"(K, C / groups, R, S) with C / groups = {c // groups} channels")


def validate(x, w, stride, padding, bias, activation, dilation=1, groups=1) -> Conv2dProblem:
    """The :func:`gpuopt.conv2d` argument rules (see its docstring), as a :class:`Conv2dProblem`."""
    x = float_array(x, "x", 4, "(N, C, H, W)")
    w = float_array(w, "w", 4, "(K, C / groups, R, S)")
    groups = 1 if groups == 1 and type(groups) is int else integer(groups, "groups", 1)
    _check_groups(x.shape[1], w.shape[0], w.shape[1], groups, "w", "x")
    stride_hw = pair(stride, "stride", 1)
    pad_hw = pair(padding, "padding", 0)
    dil_hw = (1, 1) if dilation == 1 and type(dilation) is int else pair(dilation, "dilation", 1)
    _check_window(x.shape[2], x.shape[3], w.shape[2], w.shape[3], *pad_hw, *dil_hw)
    return Conv2dProblem(x, w, bias_vector(bias, w.shape[0], "(K,)"), stride_hw, pad_hw, activation_name(activation),
                         dil_hw, groups)


def check_shapes(x_shape, w_shape, stride, padding):
    """Validate shapes given as tuples (no arrays): ((N,C,H,W), (K,C,R,S), (u,v), (ph,pw)).

    The same rules as :func:`gpuopt.conv2d` applies to arrays; used by the planning helpers (of plain
    convolutions: one group, no dilation).
    """
    x_shape, w_shape, stride_hw, pad_hw, _, _ = _general_shapes(x_shape, w_shape, stride, padding, 1, 1)
    return x_shape, w_shape, stride_hw, pad_hw


def _general_shapes(x_shape, w_shape, stride, padding, dilation, groups):
    """:func:`check_shapes` with dilation and groups: (..., (dh, dw), groups)."""
    shapes = []
    for shape, name, layout in ((x_shape, "x_shape", "(N, C, H, W)"), (w_shape, "w_shape", "(K, C, R, S)")):
        if not isinstance(shape, (tuple, list)) or len(shape) != 4:
            raise ValueError(f"{name} must be a 4-tuple {layout}, got {shape!r}")
        shapes.append(tuple(integer(d, f"{name}[{i}]", 1) for i, d in enumerate(shape)))
    (n, c, h, w), (k, wc, r, s) = shapes
    groups = integer(groups, "groups", 1)
    _check_groups(c, k, wc, groups, "w_shape", "x_shape")
    (u, v), (ph, pw) = pair(stride, "stride", 1), pair(padding, "padding", 0)
    dh, dw = pair(dilation, "dilation", 1)
    _check_window(h, w, r, s, ph, pw, dh, dw)
    return (n, c, h, w), (k, wc, r, s), (u, v), (ph, pw), (dh, dw), groups



@functools.lru_cache(maxsize=None)
def _cpu_threads() -> int:
    return max(1, int(_core.build_info()["cpu_threads"]))


def check_general(p: Conv2dProblem, variant: str) -> None:
    """ValueError, before anything is copied, where ``variant`` does not take ``p``'s groups or dilation."""
    if variant in DEPTHWISE:
        c = p.x.shape[1]
        if p.groups != c:
            raise ValueError(f"conv2d/{variant} takes depthwise layers only, groups = C (each input channel its own "
                             f"K / C filters; any stride, padding and dilation); got groups={p.groups} with C={c}")
        return
    if not p.plain and variant not in GROUPED_DILATED:
        asked = ", ".join(f"{n}={v}" for n, v, one in (("groups", p.groups, 1), ("dilation", p.dilation, (1, 1)))
                          if v != one)
        raise ValueError(f"conv2d/{variant} takes groups=1 and dilation=1 only (got {asked}); groups and dilation "
                         f"run on variant={' or '.join(map(repr, GROUPED_DILATED))} so far, depthwise layers "
                         f"(groups = C) also on {' or '.join(map(repr, DEPTHWISE))}")
    if not p.plain and variant in ("cudnn", "auto") and not _core.build_info()["cudnn"]:
        raise ValueError(f"conv2d/{variant}: groups and dilation run on cuDNN, and gpuopt was built without it; "
                         f"use variant='cpu'")


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
