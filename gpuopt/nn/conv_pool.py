"""``conv2d_pool``: a whole convolutional layer, valid convolution + bias + activation + pooling.

The ECE408 MNIST report fuses ReLU into its tiled convolution so the check costs no kernel of its own;
``fused`` goes further and pools in the same pass, so the layer's unpooled output never goes to memory
(csrc/nn/conv2d_pool.cu). ``direct_smallc`` is a kernel for first layers (few input channels, C*R*S <= 100):
whole images staged once, each thread's 4x4 output patch's input kept in registers and reused for every map
(csrc/nn/conv2d_pool_smallc.cu). ``winograd`` is the same layer through conv2d's fused Winograd kernel
(csrc/conv/conv2d_winograd.cu) with the pool applied to each m x m output tile in registers: a fast algorithm
(transforms that round, ~1e-6 relative on 5x5 layers), float32 input only. ``zero_skip`` computes the layer by
scattering its input so zero values cost a warp-uniform test and no FMAs, with ``fused``'s bits
(csrc/nn/conv2d_pool_skip.cu): for ReLU'd inputs such as MNIST's conv2. ``cpu`` is the composed reference:
conv2d's CPU reference, then pool2d's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _core, _plan
from .._exec import ExecContext, Op, check_before_copy
from .._ext import cuda_host_module, launcher
from .._validate import (Buffer, _as_array, _check_shape, _device_array, activation_name, bias_vector, check_memory,
                         choice, float_array, integer, real, runs_on_gpu)
from ..cuda import DeviceArray, is_device_array
from ..registry import Param, default_variant, register

__all__ = ["conv2d_pool"]

_POOLS = ("max", "avg")


@dataclass(frozen=True)
class ConvPoolProblem:
    """A validated conv2d_pool call: arrays as given (NumPy or DeviceArray), the shape, the options."""

    x: Any
    w: Any
    bias: Any
    activation: str
    pool: str
    pool_size: int
    input_divisor: float

    @property
    def dims(self) -> tuple[int, ...]:
        """(N, C, H, W, K, R, S, pool_size), the launcher's shape."""
        n, c, h, w = self.x.shape
        k, _, r, s = self.w.shape
        return (n, c, h, w, k, r, s, self.pool_size)

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        n, _, h, w, k, r, s, size = self.dims
        return (n, k, (h - r + 1) // size, (w - s + 1) // size)


def _input(x: Any) -> Any:
    """x as float32 or uint8 (N, C, H, W), NumPy or DeviceArray."""
    layout = "(N, C, H, W)"
    if is_device_array(x):
        from ..cuda import as_device_array

        dtype = as_device_array(x, "x").dtype
        return _device_array(x, "x", 4, layout, np.uint8 if dtype == np.uint8 else np.float32)
    arr = _as_array(x, "x")
    if arr.dtype == np.uint8:
        _check_shape(arr, "x", 4, layout)
        return np.ascontiguousarray(arr)
    return float_array(arr, "x", 4, layout)


def conv2d_pool(x, w, bias=None, *, activation: str = "none", pool: str = "max", pool_size: int = 2,
                input_divisor: float = 1.0, variant: str | None = None, timing: bool = False, stream: Any = None,
                **params: Any):
    """``pool(act(conv2d(x, w) + bias))``: valid, stride-1 convolution, then non-overlapping pooling.

    Parameters
    ----------
    x : float32 (N, C, H, W), or uint8 (N, C, H, W) raw pixels divided by ``input_divisor`` as they are
        read (e.g. 255.0 for MNIST images to [0, 1], rounded as NumPy's float32 division). NumPy or a
        device array.
    w : float (K, C, R, S) filters; bias : float (K,), optional.
    activation : "none", "relu" or "tanh", applied before pooling.
    pool : "max" or "avg"; pool_size : window side and stride (the ``fused`` kernel: 2, or 1 for the layer
        unpooled, which is conv2d's ``direct_fused``).

    stream : optional
        The stream to run on: a ``cudaStream_t`` handle (int), ``torch.cuda.Stream``, CuPy stream, or anything
        with ``cuda_stream``/``ptr``/``__cuda_stream__``. Default: the first device input's stream (PyTorch's
        or CuPy's current stream for their arrays), else the legacy default stream (:mod:`gpuopt.cuda`).

    Returns
    -------
    float32 (N, K, (H - R + 1) // pool_size, (W - S + 1) // pool_size): trailing convolution rows and
    columns that do not fill a window are dropped, as in ``max_pool2d``. NumPy for NumPy callers, a
    DeviceArray when any input is on the device; ``(out, Timing)`` with ``timing=True``.
    """
    return _OP(variant, timing, params, x, w, bias, activation, pool, pool_size, input_divisor, stream=stream)


def _validate(x, w, bias, activation, pool, pool_size, input_divisor):
    x = _input(x)
    w = float_array(w, "w", 4, "(K, C, R, S)")
    if w.shape[1] != x.shape[1]:
        raise ValueError(f"w must have C = {x.shape[1]} input channels (x is {tuple(x.shape)}), got w {tuple(w.shape)}")
    bias = bias_vector(bias, w.shape[0], "(K,)")
    activation = activation_name(activation)
    pool = choice(pool, "pool", _POOLS)
    pool_size = integer(pool_size, "pool_size", 1)
    input_divisor = real(input_divisor, "input_divisor")
    if input_divisor <= 0:
        raise ValueError(f"input_divisor must be > 0, got {input_divisor}")
    if x.dtype != np.uint8 and input_divisor != 1.0:
        raise ValueError("input_divisor applies to uint8 images only; scale float32 input yourself or pass "
                         "input_divisor=1.0")
    _, _, h, wd = x.shape
    r, s = w.shape[2:]
    if h - r + 1 < pool_size or wd - s + 1 < pool_size:
        raise ValueError(f"the convolution output ({h - r + 1}x{wd - s + 1} for a {h}x{wd} input and {r}x{s} filters) "
                         f"does not fill one {pool_size}x{pool_size} pooling window")
    return (x, w, bias), (ConvPoolProblem(x, w, bias, activation, pool, pool_size, input_divisor),)


def _key(x, w, bias, activation, pool, pool_size, input_divisor):
    """The plan key: the arrays' keys and every scalar with its type (a float divisor included)."""
    if not ((activation is None or type(activation) is str) and type(pool) is str and type(input_divisor) in
            (int, float)):
        raise _plan.Uncacheable
    (kx, hx), (kw, hw), (kb, hb) = _plan.arg_key(x), _plan.arg_key(w), _plan.arg_key(bias)
    return (kx, kw, kb, activation, pool, _plan.scalar_key(pool_size), type(input_divisor), input_divisor), (hx, hw, hb)


def _rebuild(p: ConvPoolProblem):
    rest = (p.activation, p.pool, p.pool_size, p.input_divisor)
    return lambda x, w, bias: (ConvPoolProblem(x, w, bias, *rest),)


def check_sizes(p: ConvPoolProblem, variant: str | None) -> None:
    """ValueError naming the arguments when the pooled output of ``p`` (N, K, P, Q) float32, with what
    ``variant`` (None: the op's default) allocates on the way, is larger than the memory that would hold it
    (:func:`gpuopt._validate.check_memory`; nothing is allocated). The CPU reference (``cpu``) makes the
    unpooled convolution output (N, K, H - R + 1, W - S + 1) float32 first, and a float32 copy of uint8 images;
    the GPU variants store only the pooled output."""
    n, c, h, w, k, r, s, size = p.dims
    out = p.output_shape
    buffers = [Buffer(lambda: f"the output (N, K, P, Q) = {out} float32", 4 * out[0] * out[1] * out[2] * out[3])]
    if (default_variant("conv2d_pool") if variant is None else variant) == "cpu":
        buffers.append(Buffer(lambda: f"the unpooled convolution (N, K, H - R + 1, W - S + 1) = ({n}, {k}, "
                              f"{h - r + 1}, {w - s + 1}) float32", 4 * n * k * (h - r + 1) * (w - s + 1), "host"))
        if p.x.dtype == np.uint8:
            buffers.append(Buffer(lambda: f"x (N, C, H, W) = {tuple(p.x.shape)} as float32", 4 * n * c * h * w,
                                  "host"))
    check_memory("conv2d_pool", lambda: f"x (N, C, H, W) = {tuple(p.x.shape)}, w (K, C, R, S) = {tuple(p.w.shape)} "
                 f"and pool_size={size}", buffers, gpu=lambda: runs_on_gpu("conv2d_pool", variant),
                 device_result=any(isinstance(a, DeviceArray) for a in (p.x, p.w, p.bias)))


_OP = Op("conv2d_pool", _validate, check=lambda variant, p: check_sizes(p, variant), key=_key, rebuild=_rebuild)


@register("conv2d_pool", "cpu", description="CPU reference: conv2d's CPU reference (float64 accumulation), then "
          "pool2d's", report="reference", needs_cuda=False, kernel="csrc/nn/nn_cpu.cpp",
          test="tests/nn/test_conv_pool.py")
def _conv2d_pool_cpu(ctx: ExecContext, p: ConvPoolProblem) -> Any:
    x, w = ctx.host(p.x), ctx.host(p.w)
    bias = None if p.bias is None else ctx.host(p.bias)
    with ctx.kernel():
        if x.dtype == np.uint8:
            x = x.astype(np.float32) / np.float32(p.input_divisor)
        y = _core.conv2d(x, w, bias, 1, 1, 0, 0, p.activation)
        out = _core.pool2d(y, p.pool_size, p.pool)
    return ctx.finish(out)


@register("conv2d_pool", "fused", description="one kernel per layer: implicit-GEMM direct convolution (2x4 outputs x "
          "8 channels per thread, 4 for first layers), bias, activation and 2x2 pooling in registers; only pooled "
          "outputs are stored; "
          "uint8 input scaled as it is loaded (3x3 and 5x5 filters)", report="gpuopt", needs_cuda=True,
          preferred=True, kernel="csrc/nn/conv2d_pool.cu", test="tests/nn/test_gpu_conv_pool.py",
          params=(Param.from_kernels("conv2d_pool/fused/channels_per_block",
                        "output channels a block computes (8 per thread); 0 picks per shape (all of them, up to 64)"),
                  Param.from_kernels("conv2d_pool/fused/images",
                        "images a block computes at once; 0 picks per shape (about 256 threads a block)"),
                  Param.from_kernels("conv2d_pool/fused/channels_per_thread",
                        "output channels of a thread's 2x4 register tile; 0 picks per shape (4 when C*R*S <= 32)")))
def _conv2d_pool_fused(ctx: ExecContext, p: ConvPoolProblem, **launch: int) -> Any:
    return _run_gpu(ctx, p, **launch)


@register("conv2d_pool", "direct_smallc", description="first layers (C*R*S <= 100 taps a map): a block stages "
          "whole images and its maps' filters in shared memory once; a thread keeps the input of a 4x4 output patch in "
          "registers (reused for every map when C = 1) and reads weights by broadcast 16-byte loads; bias, activation "
          "and 2x2 pooling in registers; uint8 input scaled as it is staged (3x3 and 5x5 filters)", report="gpuopt",
          needs_cuda=True, kernel="csrc/nn/conv2d_pool_smallc.cu", test="tests/nn/test_gpu_conv_pool_smallc.py",
          params=(Param.from_kernels("conv2d_pool/direct_smallc/images",
                        "images a block stages; 0 picks per shape (the fewest idle lanes, up to 256 threads)"),
                  Param.from_kernels("conv2d_pool/direct_smallc/maps",
                        "output maps a block computes; 0 picks per shape (K split evenly into groups of <= 32)")))
def _conv2d_pool_direct_smallc(ctx: ExecContext, p: ConvPoolProblem, **launch: int) -> Any:
    return _run_gpu(ctx, p, **launch)


@register("conv2d_pool", "winograd", description="fused Winograd F(m x m, r x r) convolution (conv2d's winograd "
          "kernel), bias, activation and 2x2 pooling of each m x m output tile in registers; only pooled outputs "
          "are stored; float32 input, 3x3 and 5x5 filters, pool_size 2", report="gpuopt", needs_cuda=True,
          kernel="csrc/conv/conv2d_winograd.cu", test="tests/nn/test_gpu_conv_pool_winograd.py",
          params=(Param.from_kernels("conv2d_pool/winograd/m",
                                     "output tile side, even so 2x2 windows never cross tiles (auto: 4)"),
                  Param.from_kernels("conv2d_pool/winograd/products",
                        "per-point products: FFMA, or 3xTF32 mma on the tensor cores (FP32-level error; F(4x4, 5x5) "
                        "only; with C <= 32 the block that keeps V for every channel and runs all maps, MNIST conv2); "
                        "auto: tf32x3 for F(4x4, 5x5) with C <= 32 and K > 16, else fma")))
def _conv2d_pool_winograd(ctx: ExecContext, p: ConvPoolProblem, *, m, products) -> Any:
    if p.x.dtype == np.uint8:
        raise ValueError("x: conv2d_pool variant 'winograd' takes float32 images (uint8 ones: variant 'fused')")
    return _run_gpu(ctx, p, m=0 if m == "auto" else m, products=products)


@register("conv2d_pool", "zero_skip", description="the layer computed by scattering its input: a warp per (image, 4 "
          "output rows), lanes the output maps, each input value tested once for the whole warp and, where not zero, "
          "added into every output it reaches; the same bits as fused (finite weights), zeros cost no FMAs (a ReLU'd, "
          "pooled input such as MNIST's conv2 is 57% zeros); the filter bank resident in shared memory (persistent "
          "12-warp blocks), input rows double-buffered by cp.async; float32 input, (H, W, R, S) = (12, 12, 5, 5) or "
          "(8, 12, 5, 5), K <= 64, pool_size 2, filters that fit shared memory (C <= 34 at K > 32, 69 at K <= 32 on "
          "an H200)", report="gpuopt", needs_cuda=True, kernel="csrc/nn/conv2d_pool_skip.cu",
          test="tests/nn/test_gpu_conv_pool_skip.py")
def _conv2d_pool_zero_skip(ctx: ExecContext, p: ConvPoolProblem) -> Any:
    return _run_gpu(ctx, p)  # uint8 input: ValueError from the launcher, before the launch


def _run_gpu(ctx: ExecContext, p: ConvPoolProblem, **launch: Any) -> Any:
    """Run ``ctx.variant``'s launcher (the binding rule), ``conv2d_pool_<variant>(args, **launch)`` with one
    ``ConvPoolArgs``, with its launcher-ready parameters."""
    check_before_copy(ctx.variant, (p.x, p.w, p.bias), p.dims, **launch)
    run = launcher(ctx.variant)
    dx, dw = ctx.device(p.x), ctx.device(p.w)
    dbias = None if p.bias is None else ctx.device(p.bias)
    dy = ctx.empty(p.output_shape, np.float32)
    args = cuda_host_module().ConvPoolArgs(dx.ptr, np.dtype(dx.dtype).name, p.input_divisor, dw.ptr,
                                           0 if dbias is None else dbias.ptr, dy.ptr, p.dims, p.activation, p.pool)
    with ctx.kernel():
        run(args, **launch)
    make_args, dtype, rest = cuda_host_module().ConvPoolArgs, np.dtype(dx.dtype).name, (p.dims, p.activation, p.pool)
    divisor = p.input_divisor
    ctx.offer_launch(lambda x, w, b, y: run(make_args(x._ptr, dtype, divisor, w._ptr, 0 if b is None else b._ptr,
                                                      y._ptr, *rest), **launch), (p.x, p.w, p.bias), (dy,),
                     plan=(dtype, divisor, *rest), params=launch)
    return ctx.finish(dy)


def _binding_shape(x_shape, w_shape, pool_size) -> tuple[int, ...]:
    """(N, C, H, W, K, R, S, pool_size): the shape tuple the plan bindings take."""
    n, c, h, w = (int(v) for v in x_shape)
    k, _, r, s = (int(v) for v in w_shape)
    return n, c, h, w, k, r, s, int(pool_size)


def conv2d_pool_plan(x_shape, w_shape, pool_size: int = 2, *, channels_per_block: int = 0, images: int = 0,
                     channels_per_thread: int = 0) -> dict[str, int]:
    """The launch ``fused`` makes for x (N, C, H, W) and w (K, C, R, S) shapes: block tile, images and
    channels per block, input channels per shared-memory chunk, threads, shared bytes, blocks (host only;
    ValueError for a shape it cannot run)."""
    return dict(cuda_host_module("conv2d_pool").conv2d_pool_plan(_binding_shape(x_shape, w_shape, pool_size),
                                                                  channels_per_block=channels_per_block, images=images,
                                                                  channels_per_thread=channels_per_thread))


def conv2d_pool_smallc_plan(x_shape, w_shape, pool_size: int = 2, *, images: int = 0, maps: int = 0) -> dict[str, int]:
    """The launch ``direct_smallc`` makes for x (N, C, H, W) and w (K, C, R, S) shapes: images and maps per block,
    4x4 patches an image, threads, the staged plane, shared bytes, blocks (host only; ValueError for a shape it
    cannot run)."""
    return dict(cuda_host_module("conv2d_pool").conv2d_pool_smallc_plan(_binding_shape(x_shape, w_shape, pool_size),
                                                                        images=images, maps=maps))
