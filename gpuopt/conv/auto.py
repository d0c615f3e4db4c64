"""conv2d ``auto``: one of gpuopt's own kernels per shape, by a heuristic or by timing.

The heuristic was read off the H200 measurements in benchmarks/results: conv2d.json, ece408.json, the
tune_conv_auto study's sweep of every candidate on the reports' eight layers, and the conv_layers study (every
unique layer of ResNet-50 at batch 32 and 1, VGG-16 at batch 16, MobileNetV2 at batch 32: each of gpuopt's kernels
timed on each layer). No rule below picks a kernel slower than the one picked before it on any of those layers
(ties within 0.5% aside);
``autotune=True`` measures instead.

Two precision classes (docs/glossary.md, "fast"). By default (``algorithms="precise"``) auto chooses among the
variants with FP32-level error: the exact-order FP32 kernels, whose sums are the reference's products in some
order, and the 3xTF32 tensor-core kernels (operands split into TF32 high and low parts, three products
accumulated in FP32: their error against float64 is at or below cuDNN FP32's on every layer of conv_layers).
``algorithms="fast"`` also allows ``winograd``, whose transforms round (about 1e-6 relative error on 5x5 layers
instead of 1e-7), the counterpart of cuDNN's "any" search. MACs below = N*P*Q*K*C*R*S.

0. 9 to 32 output maps, windows of 128 taps or more, stride 1, N*P*Q >= 65536 and images small enough to stage
   whole (C*(H+2ph)*(W+2pw) <= 16384 floats, with the filters within the shared memory):
   ``implicit_gemm_tf32x3``. Fashion conv2 (6 -> 16 maps, 150 taps): 0.91 ms against direct_fused's 1.18.
0a. 128 to 256 output maps, C >= 64, on a Hopper GPU: ``implicit_gemm_tf32x3_wgmma``, the 3xTF32 warpgroup-MMA
   product with the input windows gathered inside it (no unrolled buffer), for filters wider than 1x1 with
   N*P*Q >= 6272 and 1x1 filters with C >= 256 and N*P*Q >= 25088 (conv_layers at 7028975: VGG-16's 64 > 128 and
   128 > 128 @112, 128 > 256 and 256 > 256 @56: 0.60, 1.10, 0.57, 1.08 ms against 0.90, 1.76, 0.73, 1.41;
   ResNet-50 batch 32's layers of 128 and 256 maps in stages 2-3: 0.10-0.21 ms against 0.16-0.25).
   With 64 maps its 128-row tiles run half empty (VGG-16 64 > 64 @224: 2.30 against implicit_gemm_fast's 1.77),
   with 512 unroll_tf32x3 and pointwise_tf32x3 stay ahead, with fewer pixels (batch 1) implicit_gemm and unroll.
   In the fast class winograd keeps the stride-1 layers with outputs under 56x56 (ResNet-50 b32's 3x3/1 128 @28:
   0.17 against 0.20).
0b. 1x1 filters, no padding, C >= 128, K >= 256 and MACs >= 2**29 on a Hopper GPU: ``pointwise_tf32x3``, the
   layer as one 3xTF32 GEMM on the warpgroup MMA (ResNet-50 batch 32's 1x1 and stride-2 shortcut layers:
   0.08-0.15 ms against unroll's 0.12-0.25 and implicit_gemm's 0.90-1.01 for the strided ones; with fewer
   channels or maps its 128-wide tiles run part empty and implicit_gemm_fast wins).
0c. Filters wider than 1x1, C >= 256 or C >= 128 with K >= 256, on a Hopper GPU: ``unroll_tf32x3``, the
   unrolled input split into TF32 planes and one 3xTF32 warpgroup-MMA GEMM (VGG-16's layers from 128 > 256 @56
   on: 0.32-1.41 ms against implicit_gemm_fast's 0.55-2.05; ResNet-50 batch 32's stage 3 and 4 3x3 layers:
   0.22-0.27 ms against 0.28-0.45; at batch 1 0.22 against 0.23, ties at stage 3). With fewer channels its
   unrolled buffer costs more than the product saves (VGG-16 128 > 128 @112: 2.33 ms against 1.76). In the fast
   class winograd keeps the stride-1 layers except those with K >= 512 on 14x14 outputs or more (VGG-16's
   256 > 512 @28, 512 > 512 @28 and @14: 0.32-1.00 ms against winograd's 0.39-1.12).
0d. (fast only) stride 1, 3x3 or 5x5 filters, at least 4 input channels (with fewer, the input transforms cost
   more than the multiplies they save: MNIST conv1 and Fashion conv1 stay direct) and N*P*Q >= 65536 or MACs
   >= 2**30: ``winograd`` (m = 4). MNIST conv2, VGG-16's first 3x3 layers and ResNet-50 batch 32's stride-1 ones.
1. 1x1 filters, stride 1, no padding: with N*P*Q >= 6272 and C <= 256, ``implicit_gemm_fast`` (MobileNetV2's
   and ResNet-50's narrow 1x1 layers at batch 32: 1.1-2.7x unroll); otherwise ``unroll``, a plain GEMM (its
   im2col is a copy and the product runs on the matmul ladder's ``async`` kernel): CS6235 conf2 4.5x and conf4
   1.15x cuDNN, every 1x1 layer at batch 1.
2. Valid stride-1 3x3 or 5x5 layers with 32 maps or more (or 16 maps and windows of 150 taps and more) and
   enough output pixels (N*P*Q >= 65536): ``direct_fused``, conv2d_pool's persistent cp.async kernel unpooled
   (H200: MNIST conv1 0.41 ms, conv2 1.56 ms, against 0.60 and 1.94 before). One input channel with any number
   of maps too: Fashion conv1 (6 maps) 0.76 ms against direct_regblock's 1.06 (conv_layers, two runs).
2a. Strided layers with windows of 65 to 160 taps and 32 maps or more, the ResNet-50 stem (7x7/2, 147 taps, 64
   maps): ``implicit_gemm_fast`` (batch 32: 0.31 ms against direct_regblock's 0.44; batch 1: 0.023 against
   implicit_gemm's 0.041). Shorter strided windows stay direct (CS6235 conf3, MobileNetV2's 27-tap stem).
3. Short filter windows (C*R*S <= 160 taps) with few maps (K <= 16) or a stride above 1, and
   enough output pixels (N*P*Q >= 65536): the register-blocked direct kernel
   ``direct_regblock``. A GEMM over so few taps moves tiles more than it multiplies; with
   few maps its 32+ row tiles are mostly empty, and strided gathers slow its X tiles.
   CS6235 conf3 (27 taps, stride 2), MobileNetV2's stem.
4. Fewer than 16 output maps (small batches): GEMM tiles of 32+ rows would be mostly empty,
   so the direct shared-memory kernel ``tiled_unrolled``.
5. Few output positions (N*P*Q < 65536, e.g. one image) and little work (MACs < 2**30): ``implicit_gemm``, whose
   16x16 tiles still fill the GPU: CS6235 conf1 1.16x cuDNN, ResNet-50's layers at batch 1. With more work
   (VGG-16's and ResNet-50 batch 32's deep 3x3 layers) implicit_gemm_fast's larger tiles fill it too and run
   2.3-3.6x faster (rule 7).
6. Exactly 16 output maps, or a stride above 1, with a batch of 4+ images and N*P*Q >= 65536 (longer windows
   than rule 3): the CS6235 unroll-and-jam ``unroll_nk``.
7. Otherwise ``implicit_gemm_fast``, its tile by the number of output maps: 32x128x8 up to
   32 maps, 64x128x8 above; 64x64x8 under 16,384 output pixels (the most blocks).

Grouped and dilated layers: depthwise ones (groups = C) that ``depthwise``'s rows kernel takes (square 3x3, 5x5
and 7x7 filters, stride 1 or 2, no dilation) with at least 2**20 input elements (N*C*H*W) run on it, in both
precision classes (it sums each output's taps in order in FP32). conv_layers at 2775157: MobileNetV2 batch 32's ten
depthwise layers 1.06-2.00x PyTorch's cuDNN (14.9-75.7 us against 17.2-141; cuDNN's precise algorithms 0.99-1.83x,
the 576-channel 3x3/2 layer 16.2 against 16.0 us); ConvNeXt's 7x7 and EfficientNet's 5x5 at batch 32 2.1-2.8x and
1.8-2.2x (a probe in the same run). Smaller ones stay on cuDNN: at batch 1 the kernel ran 0.90-1.10x (MobileNetV2's
960 @7x7, 0.05M elements: 7.5 against 6.7 us; 32 @112, 0.4M: 0.97x). Every other grouped or dilated layer runs on
cuDNN, in auto's precision class (the patch kernel measured 0.53-0.79x cuDNN on MobileNetV2's layers).

With ``autotune=True`` the first call for a problem (shapes, stride, padding, bias or
not, activation) times every GPU variant of gpuopt on the call's own inputs (one warm-up
run, then the median of three event-timed runs) and caches the fastest, like cuDNN's
benchmark mode; later calls with that problem run the cached winner.
"""

from __future__ import annotations

import functools
import statistics
import threading
from typing import Any

from .. import _core, _plan
from .._exec import ExecContext
from .._ext import cuda_module, device_info
from ..registry import Param, register, resolve, variants
from .api import conv2d
from .depthwise import rows_takes
from .problem import Conv2dProblem, _general_shapes, check_shapes, conv2d_output_shape

__all__ = ["ALGORITHMS", "auto_choice", "autotune_cache", "clear_autotune_cache"]

# Not candidates: the library baseline and the reference.
_EXCLUDED = ("auto", "cpu", "cudnn")
#: The precision classes: "precise" (FP32-level error only, the default) and "fast" (also these).
ALGORITHMS = ("precise", "fast")
_FAST_ONLY = ("winograd",)
#: Multiply-adds (N*P*Q*K*C*R*S) past which a layer fills the GPU whatever its N*P*Q (rules 0d and 5).
LARGE_MACS = 2 ** 30
#: Input elements (N*C*H*W) from which a depthwise layer the rows kernel takes runs on it (else cuDNN).
DEPTHWISE_ROWS_ELEMENTS = 2 ** 20
#: Multiply-adds from which a 1x1 layer with C >= 128 and K >= 256 runs pointwise_tf32x3 (rule 0b).
POINTWISE_MACS = 2 ** 29

_cache: dict[tuple, tuple[str, dict[str, Any]]] = {}
_cache_lock = threading.Lock()


def _heuristic(x_shape, w_shape, stride, padding, algorithms="precise") -> tuple[str, dict[str, Any]]:
    n, c, h, w = x_shape
    k, _, r, s = w_shape
    _, _, p, q = conv2d_output_shape(x_shape, w_shape, stride, padding)
    ph, pw = padding
    macs, plane = n * p * q * k * c * r * s, c * (h + 2 * ph) * (w + 2 * pw)
    one_by_one = r == 1 and s == 1 and tuple(padding) == (0, 0)
    if (8 < k <= 32 and c * r * s >= 128 and n * p * q >= 65536 and tuple(stride) == (1, 1) and plane <= 16384
            and _tf32x3_stages(c, h + 2 * ph, w + 2 * pw, c * r * s, k)):
        return "implicit_gemm_tf32x3", {}
    winograd = (algorithms == "fast" and tuple(stride) == (1, 1) and r == s and r in (3, 5) and c >= 4
                and (n * p * q >= 65536 or macs >= LARGE_MACS))
    if (128 <= k <= 256 and c >= 64 and _device()[0]
            and ((r * s > 1 and n * p * q >= 6272 and not (winograd and p * q < 3136))
                 or (r * s == 1 and c >= 256 and n * p * q >= 25088))):
        return "implicit_gemm_tf32x3_wgmma", {}
    if one_by_one and c >= 128 and k >= 256 and macs >= POINTWISE_MACS and _device()[0]:
        return "pointwise_tf32x3", {}
    if (r * s > 1 and (c >= 256 or (c >= 128 and k >= 256)) and not (winograd and (k < 512 or p * q < 196))
            and _device()[0]):
        return "unroll_tf32x3", {}
    if winograd:
        return "winograd", {}
    if one_by_one and tuple(stride) == (1, 1):
        if n * p * q >= 6272 and c <= 256:
            return "implicit_gemm_fast", {"tile": _fast_tile(k, n * p * q)}
        return "unroll", {}
    strided = tuple(stride) != (1, 1)
    if not strided and tuple(padding) == (0, 0) and r == s and r in (3, 5) and n * p * q >= 65536 \
            and (k >= 32 or (k >= 16 and c * r * s >= 150) or c == 1):
        return "direct_fused", {}
    if strided and 64 < c * r * s <= 160 and k >= 32:
        return "implicit_gemm_fast", {"tile": _fast_tile(k, n * p * q)}
    if c * r * s <= 160 and (k <= 16 or strided) and n * p * q >= 65536:
        return "direct_regblock", {}
    if k < 16:
        return "tiled_unrolled", {}
    if n * p * q < 65536 and macs < LARGE_MACS:
        return "implicit_gemm", {}
    if n >= 4 and (k == 16 or strided) and n * p * q >= 65536:
        return "unroll_nk", {}
    return "implicit_gemm_fast", {"tile": _fast_tile(k, n * p * q)}


def _fast_tile(k: int, pixels: int) -> str:
    """implicit_gemm_fast's block tile: 64x64x8 (the most blocks) under 16,384 output pixels (N*P*Q), else by the
    number of output maps, 32x128x8 up to 32, 64x128x8 above (conv_layers, H200: at 6,272 pixels 64x64x8 ran
    0.024 / 0.28 ms where 64x128x8 ran 0.031 / 0.35; at 25,088 and more 64x128x8 ran 0.13-0.25 against 0.14-0.30)."""
    if pixels < 16384:
        return "64x64x8"
    return "32x128x8" if k <= 32 else "64x128x8"


def _tf32x3_stages(c: int, hp: int, wp: int, taps: int, k: int) -> bool:
    """Whether implicit_gemm_tf32x3's shared memory holds the layer (its own formula, from _core: the padded image's
    hi and lo planes, the filters' and the tap offsets) against the GPU's opt-in limit (227 KB on Hopper when no GPU
    answers)."""
    return _core.conv2d_implicit_gemm_tf32x3_shared_bytes(c, hp, wp, taps, k) <= _device()[1]


@functools.lru_cache(maxsize=None)
def _device() -> tuple[bool, int]:
    """(whether GPU 0 is a Hopper GPU, compute capability 9.0: the 3xTF32 warpgroup-MMA kernels; its opt-in shared
    memory a block, 227 KB when no GPU answers)."""
    info = device_info() or {}
    return (tuple(info.get("compute_capability") or ()) == (9, 0),
            int(info.get("shared_memory_per_block_optin_bytes") or 232448))


def _general_choice(x_shape, w_shape, stride, dilation, groups, algorithms) -> tuple[str, dict[str, Any]]:
    """Grouped or dilated layers: depthwise's rows kernel where it takes the layer and it has
    DEPTHWISE_ROWS_ELEMENTS inputs, else cuDNN in ``algorithms``' class."""
    n, c, h, w = x_shape
    if n * c * h * w >= DEPTHWISE_ROWS_ELEMENTS and rows_takes(x_shape, w_shape, stride, dilation, groups,
                                                                 _device()[1]):
        return "depthwise", {"kernel": "rows"}
    return "cudnn", {"algorithms": algorithms}


def auto_choice(x_shape, w_shape, stride=1, padding=0, algorithms="precise", *, dilation=1,
                groups=1) -> tuple[str, dict[str, Any]]:
    """The variant and parameters ``auto`` runs for this problem and precision class
    (``algorithms``: "precise" or "fast"); w_shape is (K, C / groups, R, S).

    Grouped or dilated layers: ``depthwise`` (its rows kernel) or ``cudnn``. Otherwise the autotuned winner when
    one is cached for these shapes and class (any bias/activation), else the heuristic's pick (see the module
    docstring).
    """
    if algorithms not in ALGORITHMS:
        raise ValueError(f"algorithms must be one of {ALGORITHMS}, got {algorithms!r}")
    if groups != 1 or dilation not in (1, (1, 1)):
        xs, ws, st, _, dl, g = _general_shapes(x_shape, w_shape, stride, padding, dilation, groups)
        return _general_choice(xs, ws, st, dl, g, algorithms)
    (n, c, h, w), (k, _, r, s), st, pd = check_shapes(x_shape, w_shape, stride, padding)
    with _cache_lock:
        for key, choice in _cache.items():
            if key[:4] == ((n, c, h, w), (k, c, r, s), st, pd) and key[-1] == algorithms:
                return choice[0], dict(choice[1])
    return _heuristic((n, c, h, w), (k, c, r, s), st, pd, algorithms)


def autotune_cache() -> dict[tuple, tuple[str, dict[str, Any]]]:
    """A copy of the autotuned winners: (x shape, w shape, stride, padding, bias?, activation, algorithms) ->
    (variant, params)."""
    with _cache_lock:
        return {key: (name, dict(params)) for key, (name, params) in _cache.items()}


def clear_autotune_cache() -> None:
    """Forget every autotuned winner (and the cached plans, which may run one)."""
    with _cache_lock:
        _cache.clear()
    _plan.clear()


def _time_variant(name: str, p: Conv2dProblem, dx, dw, dbias) -> float:
    """Median of three event-timed runs of ``name`` on device inputs (after one warm-up)."""
    cuda = cuda_module()
    kwargs = dict(stride=p.stride, padding=p.padding, bias=dbias, activation=p.activation, variant=name)
    conv2d(dx, dw, **kwargs)  # warm-up: first-call setup, and rejects shapes it cannot run
    times = []
    for _ in range(3):
        start, end = cuda.Event(), cuda.Event()
        start.record()
        out = conv2d(dx, dw, **kwargs)
        end.record()
        times.append(start.elapsed_ms(end))
        del out
    return statistics.median(times)


def _autotune(ctx: ExecContext, p: Conv2dProblem, algorithms: str) -> tuple[str, dict[str, Any]]:
    key = (tuple(p.x.shape), tuple(p.w.shape), p.stride, p.padding, p.bias is not None, p.activation, algorithms)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    dx, dw = ctx.device(p.x), ctx.device(p.w)
    dbias = None if p.bias is None else ctx.device(p.bias)
    timings: dict[str, float] = {}
    for name, v in variants("conv2d").items():
        if name in _EXCLUDED or not v.needs_cuda or (algorithms != "fast" and name in _FAST_ONLY):
            continue
        try:
            timings[name] = _time_variant(name, p, dx, dw, dbias)
        except ValueError:  # the variant cannot run this shape (e.g. weights over 64 KB of constant memory)
            continue
    best = min(timings, key=timings.__getitem__)
    choice = (best, {})
    with _cache_lock:
        _cache[key] = choice
    ctx.details.update({f"autotune_{name}_ms": ms for name, ms in timings.items()})
    return choice


def _run_auto(ctx: ExecContext, p: Conv2dProblem, autotune: bool, algorithms: str) -> Any:
    if not p.plain:  # groups or dilation: depthwise's rows kernel or cuDNN (the same two classes)
        name, params = _general_choice(p.x.shape, p.w.shape, p.stride, p.dilation, p.groups, algorithms)
        v, resolved = resolve("conv2d", name, params)
        return ctx.run(v, p, **resolved)
    if autotune:
        name, params = _autotune(ctx, p, algorithms)
    else:
        name, params = _heuristic(p.x.shape, p.w.shape, p.stride, p.padding, algorithms)
    v, resolved = resolve("conv2d", name, params)
    return ctx.run(v, p, **resolved)


register("conv2d", "auto",
         description="picks one of gpuopt's kernels per shape (documented heuristic from H200 runs); autotune=True "
                     "times them once per problem and caches the winner", report="gpuopt", needs_cuda=True,
         kernel="gpuopt/conv/auto.py", test="tests/conv/test_gpu_auto.py", launcher=False,
         params=(Param("autotune", False, (False, True),
                       "time every gpuopt GPU variant on the first call for a problem and cache the fastest"),
                 Param("algorithms", "precise", ALGORITHMS,
                       "precise: FP32-level error only (exact-order FP32 or 3xTF32 kernels); fast: may also pick "
                       "winograd (rounds more, ~1e-6)")))(
    _run_auto)
