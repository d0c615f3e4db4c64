"""The stages: which op and variant runs each layer of each network, in one table.

A **stage** is one of the reports' implementations of a whole network, by the one name the API, the CLI,
the tests (and a benchmark study) use (``variant=`` of :meth:`~gpuopt.models.MnistCNN.forward`):

========== ======================================================================================
mnist      ``serial`` (Table 2), ``basic`` (Table 3), ``optimized`` (Table 4), ``hybrid`` (Table 5,
           the report's final design), ``fast`` (gpuopt's fastest strict-FP32 forward),
           ``winograd`` (gpuopt's fast-algorithm stage: conv2 by fused Winograd F(4x4, 5x5))
fashion    ``serial`` (Milestone 2), ``basic`` (Milestone 3), ``optimized`` (the report's final
           convolution), ``fast``, ``winograd``
========== ======================================================================================

Each stage is a list of :class:`Step` (one op call each, named as the report's table names the row) and
its *heads*, the steps that :meth:`predict` (``"predict"``: argmax) or :meth:`proba` (``"proba"``:
softmax) add after the logits. ``resident`` stages keep activations on the device between layers and
copy only the result back; the others hand NumPy arrays from layer to layer, so every op copies its
input and weights in and its output back, as the reports' code did.

The MNIST report's numbers (``report_ms``) are its Tables 2-5: 10,000 images on a Tesla K80, in ms.
The Fashion report printed MXNet's "Op Time" of its two convolutions only (10,000 images, its GPU not
named); ``report_ms`` holds those.

Choices the reports leave open, and why:

* MNIST ``hybrid`` (Table 5) runs conv2 as ``implicit_gemm``, not ``unroll``. The report tried unrolling
  twice: first with explicit unrolled matrices, one image at a time, which "added 200ms" and "should not
  be considered"; then "accessing the corresponding inputs directly from the input pointer according to
  their indices instead of obtaining the specific matrices" with its 16x16 tiled matrix multiply, which
  beat the tiled convolution on conv2 but not on conv1, hence "a hybrid model". That second kernel is
  gpuopt's ``implicit_gemm`` (registered for this report, ``tile=16``: the report's TILE_WIDTH), with the
  ReLU fused as Table 5 has no "Rectified Linear Unit 4D (2)" row. ``unroll`` is the Fashion report's
  explicit im2col feeding gpuopt's fastest GEMM. (The ``ece408`` benchmark study shows Table 5's conv2
  time next to ``unroll``.)
* MNIST ``basic``, ``optimized`` and ``hybrid`` copy every layer's input in and its output out (NumPy
  between the ops). The report refactored its code to "the straightforward order of cudaMalloc,
  cudaMemcpy [host to device], kernel call, cudaMemcpy [device to host], and cudaFree" per kernel function
  and never says its final design changed that; its Table 5 times are NVVP kernel times, which the
  ``kernel_ms`` column measures in the same way. Only ``fast`` keeps the activations on the device.
* Fashion ``optimized``: the report's final kernel is Optimization 8 (corner turning, built on the tiled
  kernel with ``__restrict__`` and unrolled filter loops), the fastest Op Times it printed, at the
  TILE_WIDTHs Optimization 9 found best (16 for layer 1, 28 for layer 2): ``tiled_corner_turn``. The
  report replaced only the convolutions (MXNet ran the other layers), so the other steps stay as in
  ``basic`` and the stage differs from it in the convolutions alone.
* ``fast`` for Fashion runs conv2 with ``conv2d`` ``auto`` (gpuopt's per-shape choice), since no fused
  pool follows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from ..registry import ops, variants

__all__ = ["Step", "Stage", "STAGES", "REPORT_SETTING", "stages", "cpu_stages", "get_stage", "missing"]

#: What the reports' times (``Step.report_ms``) measured, per network.
REPORT_SETTING = {
    "mnist": "ECE408 MNIST report, 10,000 images on a Tesla K80 (GPU rows: NVVP kernel times; serial rows: whole "
             "function times)",
    "fashion": "ECE408 Fashion-MNIST report, 10,000 images, MXNet 'Op Time' of the two convolutions",
}


@dataclass(frozen=True)
class Step:
    """One op call of a stage.

    Attributes
    ----------
    name : str
        The row's name, as the report's table names it ("Convolution Forward Valid (1)").
    op, variant : str
        The gpuopt op (``gpuopt.ops()``) and its variant.
    params : Mapping[str, Any]
        Fixed keyword arguments of the op (``activation``, ``size``, ``tile_width``, ``pool`` ...).
    w, bias : str or None
        Names of the network's weight arrays passed as ``w=`` and ``bias=``.
    flatten : bool
        Reshape the input to (N, features) first (C-order of NCHW: no copy).
    raw_input : bool
        The op takes uint8 images and ``input_divisor`` (``conv2d_pool``): uint8 pixels are divided
        by 255 on the device, float32 ones by 1.
    report_ms : float or None
        The report's time of this row (see the module docstring), ms.
    """

    name: str
    op: str
    variant: str
    params: Mapping[str, Any] = field(default_factory=dict)
    w: str | None = None
    bias: str | None = None
    flatten: bool = False
    raw_input: bool = False
    report_ms: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @property
    def gpu(self) -> bool:
        """Whether the step's variant runs on the GPU (the registry's word; an op or variant this build does not
        register counts as GPU unless it is named "cpu", the name of every CPU reference of gpuopt)."""
        v = variants(self.op).get(self.variant) if self.op in ops() else None
        return v.needs_cuda if v is not None else self.variant != "cpu"


@dataclass(frozen=True)
class Stage:
    """One implementation of a whole network (see the module docstring).

    ``table`` names what it reproduces; ``report`` is a key of ``gpuopt.registry.REPORTS``;
    ``report_total_ms`` the report's whole-run time where it printed one.
    """

    network: str
    name: str
    description: str
    report: str
    table: str
    resident: bool
    steps: tuple[Step, ...]
    heads: Mapping[str, Step]
    report_total_ms: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "heads", MappingProxyType(dict(self.heads)))

    @property
    def gpu(self) -> bool:
        return any(s.gpu for s in (*self.steps, *self.heads.values()))

    def chain(self, head: str | None = None) -> tuple[Step, ...]:
        """The steps run for the logits (``head=None``) or for ``"predict"`` / ``"proba"``."""
        if head is None:
            return self.steps
        if head not in self.heads:
            raise ValueError(f"{self.network} stage {self.name!r} has no {head!r} head; it has {list(self.heads)}")
        return (*self.steps, self.heads[head])


def _s(name, op, variant, report_ms=None, **kw) -> Step:
    return Step(name, op, variant, report_ms=report_ms, **kw)


_CONV = "conv2d"
_FC = "fully_connected"
_POOL2 = {"size": 2}
_RELU = {"activation": "relu"}
_MNIST_POOL = {"activation": "relu", "pool": "avg", "pool_size": 2}
_FASHION_POOL = {"activation": "tanh", "pool": "max", "pool_size": 2}


def _unfused(conv: str, relu: str, pool: str, fc: str, argmax: str,
             ms: tuple[float, ...]) -> tuple[tuple[Step, ...], dict[str, Step]]:
    """Steps and heads of the MNIST forward with every layer its own call (Tables 2 and 3): the variant of
    each kind of layer, and the report's time of each row in order (the ten rows, Arg Max last)."""
    steps = (
        _s("Convolution Forward Valid (1)", _CONV, conv, ms[0], w="conv1"),
        _s("Rectified Linear Unit 4D (1)", "relu", relu, ms[1]),
        _s("Average Pool (1)", "avg_pool2d", pool, ms[2], params=_POOL2),
        _s("Convolution Forward Valid (2)", _CONV, conv, ms[3], w="conv2"),
        _s("Rectified Linear Unit 4D (2)", "relu", relu, ms[4]),
        _s("Average Pool (2)", "avg_pool2d", pool, ms[5], params=_POOL2),
        _s("Fully Forward (1)", _FC, fc, ms[6], w="fc1", flatten=True),
        _s("Rectified Linear Unit 2D", "relu", relu, ms[7]),
        _s("Fully Forward (2)", _FC, fc, ms[8], w="fc2"))
    return steps, {"predict": _s("Arg Max", "argmax", argmax, ms[9])}


def _with_step(stage: Stage, name: str, description: str, index: int, step: Step) -> Stage:
    """``stage`` under another name with step ``index`` replaced (a stage that differs from another by one layer)."""
    return replace(stage, name=name, description=description,
                   steps=stage.steps[:index] + (step,) + stage.steps[index + 1:])


def _mnist() -> dict[str, Stage]:
    k80 = "ece408-mnist"
    table = {
        "serial": Stage("mnist", "serial", "CPU forward: every layer's C++ reference ('cpu' variant)", "reference",
                        "Table 2: Running Time of Serial Functions", False,
                        *_unfused("cpu", "cpu", "cpu", "cpu", "cpu",
                                  (382006.0, 2990.0, 10690.0, 798785.0, 833.0, 2478.0, 20115.0, 18.0, 171.0, 2.0)),
                        report_total_ms=1219000.0),
        "basic": Stage("mnist", "basic", "one basic kernel per layer (one thread per output), every layer its own "
                       "call with NumPy in and out (host round trips per layer, as the report's code)", k80,
                       "Table 3: Basic Parallelization Running Time", False,
                       *_unfused("basic", "cuda", "basic", "basic", "basic",
                                 (11523.0, 48.694, 437.946, 78431.0, 44.006, 370.836, 450.335, 0.19302, 7.889,
                                  0.339771))),
        "optimized": Stage("mnist", "optimized", "shared-memory tiled convolutions with the ReLU fused (TILE_WIDTH "
                           "16), coalesced average pools, 16x16 tiled fully-forward, one ReLU kernel (fc1), argmax "
                           "split over two streams; host round trips per layer", k80,
                           "Table 4: Optimized Parallel Running Time", False, (
                               _s("Convolution Forward Valid (1)", _CONV, "tiled", 374.624, w="conv1", params=_RELU),
                               _s("Average Pool (1)", "avg_pool2d", "coalesced", 202.355, params=_POOL2),
                               _s("Convolution Forward Valid (2)", _CONV, "tiled", 2002.0, w="conv2", params=_RELU),
                               _s("Average Pool (2)", "avg_pool2d", "coalesced", 36.9, params=_POOL2),
                               _s("Fully Forward (1)", _FC, "tiled", 13.815, w="fc1", flatten=True),
                               _s("Rectified Linear Unit", "relu", "cuda", 0.089589),
                               _s("Fully Forward (2)", _FC, "tiled", 0.22182, w="fc2")),
                           {"predict": _s("Arg Max (stream 1 + stream 2)", "argmax", "streams", 0.036191)}),
        "hybrid": Stage("mnist", "hybrid", "the report's final design: conv1 tiled (ReLU fused), conv2 as a "
                        "matrix multiply that reads its unrolled input by index (implicit GEMM, 16x16 tiles, ReLU "
                        "fused), coalesced pools, tiled fully-forward, one ReLU kernel, two-stream argmax; host "
                        "round trips per layer, as the report's final code", k80,
                        "Table 5: Runtime Comparison Between Serial and Optimized Parallel Implementations", False, (
                            _s("Tiled Convolution Forward Valid", _CONV, "tiled", 383.423, w="conv1", params=_RELU),
                            _s("Average Pool (1)", "avg_pool2d", "coalesced", 55.349, params=_POOL2),
                            _s("Unrolled Convolution Reduction", _CONV, "implicit_gemm", 1057.0, w="conv2",
                               params={"activation": "relu", "tile": 16}),
                            _s("Average Pool (2)", "avg_pool2d", "coalesced", 12.741, params=_POOL2),
                            _s("Fully Forward (1)", _FC, "tiled", 13.877, w="fc1", flatten=True),
                            _s("Rectified Linear", "relu", "cuda", 0.08949),
                            _s("Fully Forward (2)", _FC, "tiled", 0.222202, w="fc2")),
                        {"predict": _s("Arg Max 1 + 2", "argmax", "streams", 0.036479)}, report_total_ms=1130.0),
        "fast": Stage("mnist", "fast", "gpuopt's fastest strict-FP32 forward: device-resident, weights uploaded "
                      "once per network; each convolution + ReLU + 2x2 average pool in one kernel (conv1 by the "
                      "first-layer kernel direct_smallc, uint8 pixels scaled on the device; conv2 by zero_skip, which "
                      "skips the zeros of conv1's ReLU'd output and gives fused's bits), fully "
                      "connected on gpuopt's GEMM with the ReLU fused, warp argmax; only the result is copied back",
                      "gpuopt", "none: gpuopt's own stage, beyond the report", True, (
                          _s("Convolution + ReLU + Average Pool (1)", "conv2d_pool", "direct_smallc", w="conv1",
                             params=_MNIST_POOL, raw_input=True),
                          _s("Convolution + ReLU + Average Pool (2)", "conv2d_pool", "zero_skip", w="conv2",
                             params=_MNIST_POOL),
                          _s("Fully Forward (1) + ReLU", _FC, "matmul", w="fc1", flatten=True, params=_RELU),
                          _s("Fully Forward (2)", _FC, "matmul", w="fc2")),
                      {"predict": _s("Arg Max", "argmax", "warp")}),
    }
    table["winograd"] = _with_step(
        table["fast"], "winograd", "gpuopt's fast-algorithm stage: 'fast' with conv2 + ReLU + 2x2 average pool by "
        "fused Winograd F(4x4, 5x5) (6.25x fewer multiplies; transforms that round, ~1e-6 relative); conv1 (one input "
        "channel, where Winograd does not pay) as in 'fast'", 1,
        _s("Winograd Convolution + ReLU + Average Pool (2)", "conv2d_pool", "winograd", w="conv2", params=_MNIST_POOL))
    return table


def _fashion() -> dict[str, Stage]:
    def chain(conv1, conv2, tanh, pool, fc, softmax, argmax, ms=(None, None), params=({}, {})):
        return (
            _s("Convolution (1)", _CONV, conv1, ms[0], w="conv1", params=params[0]),
            _s("Tanh (1)", "tanh", tanh),
            _s("Max Pool", "max_pool2d", pool, params=_POOL2),
            _s("Convolution (2)", _CONV, conv2, ms[1], w="conv2", params=params[1]),
            _s("Fully Connected (1)", _FC, fc, w="fc1", bias="fc1_bias", flatten=True),
            _s("Tanh (2)", "tanh", tanh),
            _s("Fully Connected (2)", _FC, fc, w="fc2", bias="fc2_bias"),
        ), {"proba": _s("Softmax", "softmax", softmax), "predict": _s("Arg Max", "argmax", argmax)}

    fashion = "ece408-fashion"
    serial, serial_heads = chain("cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", ms=(7463.296, 25670.930))
    basic, basic_heads = chain("basic", "basic", "cuda", "basic", "basic", "cuda", "basic", ms=(203.084, 508.383))
    opt, opt_heads = chain("tiled_corner_turn", "tiled_corner_turn", "cuda", "basic", "basic", "cuda", "basic",
                           ms=(107.390, 315.025), params=({"tile_width": 16}, {"tile_width": 28}))
    table = {
        "serial": Stage("fashion", "serial", "CPU forward: every layer's C++ reference ('cpu' variant)", "reference",
                        "Milestone 2 (m2.1.py): sequential CPU convolutions, 'Op Time'", False, serial, serial_heads),
        "basic": Stage("fashion", "basic", "both convolutions by the basic kernel (one thread per output), the "
                       "other layers by gpuopt's basic GPU ops; NumPy in and out per layer", fashion,
                       "Milestone 3 (m3.1.py): basic forward kernel, 'Op Time'", False, basic, basic_heads),
        "optimized": Stage("fashion", "optimized", "the report's final convolution: shared-memory tiling with "
                           "__restrict__, unrolled filter loops and corner-turned filter loads (Opt 8, the fastest it "
                           "printed), at Opt 9's best TILE_WIDTH per layer (16, 28); the other layers as 'basic' "
                           "(the report changed only the convolutions)", fashion,
                           "Optimization 8 (corner turning) at Optimization 9's TILE_WIDTHs, 'Op Time'", False,
                           opt, opt_heads),
        "fast": Stage("fashion", "fast", "gpuopt's fastest strict-FP32 forward: device-resident, weights uploaded "
                      "once per network; conv1 + tanh + 2x2 max pool in one kernel (the first-layer kernel "
                      "direct_smallc, uint8 pixels scaled on the device), conv2 by conv2d 'auto', fully connected on "
                      "gpuopt's GEMM with bias and tanh fused",
                      "gpuopt", "none: gpuopt's own stage, beyond the report", True, (
                          _s("Convolution + Tanh + Max Pool (1)", "conv2d_pool", "direct_smallc", w="conv1",
                             params=_FASHION_POOL, raw_input=True),
                          _s("Convolution (2)", _CONV, "auto", w="conv2"),
                          _s("Fully Connected (1) + Tanh", _FC, "matmul", w="fc1", bias="fc1_bias", flatten=True,
                             params={"activation": "tanh"}),
                          _s("Fully Connected (2)", _FC, "matmul", w="fc2", bias="fc2_bias")),
                      {"proba": _s("Softmax", "softmax", "cuda"), "predict": _s("Arg Max", "argmax", "warp")}),
    }
    table["winograd"] = _with_step(
        table["fast"], "winograd", "'fast' with conv2 by conv2d 'winograd' (fused F(4x4, 5x5); transforms that "
        "round, ~1e-6 relative); conv1 (one input channel) as in 'fast'", 1,
        _s("Winograd Convolution (2)", _CONV, "winograd", w="conv2"))
    return table


#: network -> stage name -> :class:`Stage`, simple to fast.
STAGES: Mapping[str, Mapping[str, Stage]] = MappingProxyType(
    {"mnist": MappingProxyType(_mnist()), "fashion": MappingProxyType(_fashion())})

def stages(network: str) -> Mapping[str, Stage]:
    """The stages of ``network`` ("mnist" or "fashion") by name, simple to fast."""
    if network not in STAGES:
        raise ValueError(f"unknown network {network!r}; networks: {list(STAGES)}")
    return STAGES[network]


def cpu_stages(network: str) -> list[str]:
    """The stages of ``network`` that run on the CPU alone (no step needs a GPU): what a message about a
    missing GPU points to."""
    return [name for name, stage in stages(network).items() if not stage.gpu]


def get_stage(network: str, name: str) -> Stage:
    """Stage ``name`` of ``network``; ValueError naming the valid stages."""
    table = stages(network)
    if not isinstance(name, str):
        raise TypeError(f"variant must be a stage name (str), got {type(name).__name__}")
    if name not in table:
        raise ValueError(f"{network}: unknown stage {name!r}; stages: {list(table)}")
    return table[name]


def missing(stage: Stage, head: str | None = None) -> list[str]:
    """The ``op/variant`` names of ``stage`` (with ``head``; every head when ``head`` is ``"*"``) that this build
    of gpuopt does not register."""
    steps = (*stage.steps, *stage.heads.values()) if head == "*" else stage.chain(head)
    registered = set(ops())
    out = []
    for s in steps:
        if s.op not in registered or s.variant not in variants(s.op):
            name = f"{s.op}/{s.variant}"
            if name not in out:
                out.append(name)
    return out
