"""conv_layers (opt-in, GPU only, torch needed): conv2d on the layers users bring. Every unique convolution layer of
ResNet-50 (batch 32 and batch 1), VGG-16 (batch 16), MobileNetV2 (batch 32: its depthwise and pointwise layers)
and the reports' eight layers; per layer, kernel time (CUDA events, L2 flushed, median) of:

* PyTorch's cuDNN (``torch.nn.functional.conv2d``, benchmark mode, TF32 off): what the user has;
* gpuopt's ``cudnn`` with its precise algorithms (the default: no FFT or Winograd, FP32-level error, the class
  ``auto``'s default is held to) and with ``algorithms="any"`` (cuDNN free to pick FFT and Winograd);
* gpuopt ``auto`` (precise: FP32-level error only) and ``auto`` with ``algorithms="fast"`` (Winograd allowed), and
  the variant each ran;
* each of gpuopt's own kernels that takes the layer (:data:`KERNELS`, at their defaults; the fastest is named);

their relative errors against a float64 reference (PyTorch's convolution in float64 on the GPU) beside cuDNN
FP32's own, and the floors: FP32 (FLOPs at :data:`FP32_PEAK`), 3xTF32 (at :data:`TF32X3_PEAK`, FP32-accurate
tensor-core products) and bytes (x, w and y once at :data:`BANDWIDTH`); the larger of FLOPs and bytes is the
layer's floor. -> conv_layers.csv/.json/.png (speed over PyTorch's cuDNN per layer, by network).
Inputs: uniform [-1, 1) float32 from torch's seeded CUDA generator, torch tensors in, as a user's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import gpuopt

from ..baselines import strict_torch
from ..conv_points import REPORT_LAYERS
from ..figures import empty_axes, finish_axes, pyplot
from ..harness import Progress, measure
from ..study import Output, RunSettings, Study, StudyResult, error_text, per_level, release_gpu_cache, repeats
from ..tables import errors_note, fmt_cell, format_table

__all__ = ["STUDY", "layers", "KERNELS"]

#: H200 peaks the floors use: FP32 FFMA (132 SMs x 128 lanes x 2 x 1.98 GHz), FP32-accurate 3xTF32 on the tensor
#: cores (a third of dense TF32's 494 TFLOP/s), HBM3e bandwidth.
FP32_PEAK, TF32X3_PEAK, BANDWIDTH = 66.9e12, 165e12, 4.8e12
#: gpuopt's own conv2d kernels timed on every layer that takes them (defaults; absent ones skipped).
KERNELS = ("implicit_gemm_fast", "direct_regblock", "direct_fused", "winograd", "implicit_gemm_tf32x3", "depthwise",
           "pointwise_tf32x3", "unroll_tf32x3", "implicit_gemm_tf32x3_wgmma")
#: measure() keywords: ~75 layers x ~11 timed calls must fit a device run of a few minutes (0.25 s a call at most).
LAYER_REPEATS: dict[Any, dict[str, Any]] = per_level(gpu_full=repeats(2, 15, 0.25, flush_l2=True),
                                                     gpu_quick=repeats(2, 10, 0.2, flush_l2=True),
                                                     tiny=repeats(0, 2, 0.05, flush_l2=True))
#: The batch cap of a run level (full runs: the networks' batches).
LAYER_BATCH_CAP: dict[Any, int | None] = per_level(gpu_full=None, gpu_quick=4, tiny=1)
LAYER_COLUMNS = ("network", "layer", "N", "C", "H", "W", "K", "R", "S", "stride", "padding", "groups", "gflop",
                 "torch_ms", "cudnn_precise_ms", "cudnn_any_ms", "auto_ms", "auto_variant", "auto_fast_ms",
                 "auto_fast_variant", "best_kernel", "best_kernel_ms", "auto_x_torch", "auto_x_cudnn_precise",
                 "auto_fast_x_torch", "best_x_torch", "torch_err", "cudnn_precise_err", "cudnn_any_err", "auto_err",
                 "auto_fast_err", "best_kernel_err", "fp32_floor_ms", "tf32x3_floor_ms", "bytes_floor_ms", "floor_ms",
                 "auto_x_floor", "kernels", "error")


def _resnet50(n: int) -> list[tuple]:
    """(name, N, C, H, W, K, R, S, stride, padding, groups) of torchvision's ResNet-50 (stride on the 3x3)."""
    out = [("stem 7x7/2", n, 3, 224, 224, 64, 7, 7, 2, 3, 1)]
    c_in, h = 64, 56
    for stage, (mid, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        stride = 1 if stage == 0 else 2
        for b in range(blocks):
            s = stride if b == 0 else 1
            h_out = h // s
            out += [(f"s{stage + 1} 1x1 {c_in}>{mid}", n, c_in, h, h, mid, 1, 1, 1, 0, 1),
                    (f"s{stage + 1} 3x3/{s} {mid}", n, mid, h, h, mid, 3, 3, s, 1, 1),
                    (f"s{stage + 1} 1x1 {mid}>{4 * mid}", n, mid, h_out, h_out, 4 * mid, 1, 1, 1, 0, 1)]
            if b == 0:
                out.append((f"s{stage + 1} shortcut/{s}", n, c_in, h, h, 4 * mid, 1, 1, s, 0, 1))
            c_in, h = 4 * mid, h_out
    return out


def _vgg16(n: int) -> list[tuple]:
    out, c, h = [], 3, 224
    for k, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(convs):
            out.append((f"3x3 {c}>{k} @{h}", n, c, h, h, k, 3, 3, 1, 1, 1))
            c = k
        h //= 2
    return out


def _mobilenet_v2(n: int) -> list[tuple]:
    out, c, h = [("stem 3x3/2", n, 3, 224, 224, 32, 3, 3, 2, 1, 1)], 32, 112
    for t, k, blocks, stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                                 (6, 160, 3, 2), (6, 320, 1, 1)):
        for b in range(blocks):
            s, e = stride if b == 0 else 1, c * t
            if t != 1:
                out.append((f"expand 1x1 {c}>{e}", n, c, h, h, e, 1, 1, 1, 0, 1))
            out.append((f"depthwise 3x3/{s} {e}", n, e, h, h, e, 3, 3, s, 1, e))
            h //= s
            out.append((f"project 1x1 {e}>{k}", n, e, h, h, k, 1, 1, 1, 0, 1))
            c = k
    out.append(("head 1x1 320>1280", n, 320, 7, 7, 1280, 1, 1, 1, 0, 1))
    return out


def layers(batch_cap: int | None = None) -> list[tuple]:
    """(network, name, N, C, H, W, K, R, S, stride, padding, groups): every unique layer of each network (the first
    name of a repeated shape kept), batches capped at ``batch_cap``."""
    nets = [("ResNet-50 b32", _resnet50(32)), ("ResNet-50 b1", _resnet50(1)), ("VGG-16 b16", _vgg16(16)),
            ("MobileNetV2 b32", _mobilenet_v2(32)),
            ("reports", [(name, *xs, ws[0], ws[2], ws[3], st, 0, 1) for name, (xs, ws, st) in REPORT_LAYERS.items()])]
    out = []
    for net, rows in nets:
        seen = set()
        for name, n, *rest in rows:
            n = min(n, batch_cap) if batch_cap else n
            if (n, *rest) not in seen:
                seen.add((n, *rest))
                out.append((net, name, n, *rest))
    return out


def floors(n: int, c: int, h: int, w: int, k: int, r: int, s: int, stride: int, padding: int,
           groups: int) -> dict[str, float]:
    """The layer's FLOPs (GFLOP) and its FP32, 3xTF32 and bytes floors in ms; floor = max(FP32 FLOPs, bytes)."""
    p, q = (h + 2 * padding - r) // stride + 1, (w + 2 * padding - s) // stride + 1
    flops = 2.0 * n * k * (c // groups) * r * s * p * q
    moved = 4.0 * (n * c * h * w + k * (c // groups) * r * s + n * k * p * q)
    out = dict(gflop=flops / 1e9, fp32_floor_ms=flops / FP32_PEAK * 1e3, tf32x3_floor_ms=flops / TF32X3_PEAK * 1e3,
               bytes_floor_ms=moved / BANDWIDTH * 1e3)
    out["floor_ms"] = max(out["fp32_floor_ms"], out["bytes_floor_ms"])
    return out


def run_conv_layers(plan: RunSettings) -> StudyResult:
    torch = strict_torch(benchmark=True)
    if torch is None:
        raise RuntimeError("conv_layers needs torch with CUDA (its baseline is PyTorch's cuDNN)")
    res = StudyResult()
    reps = plan.pick(LAYER_REPEATS)
    todo = layers(plan.pick(LAYER_BATCH_CAP))
    kernels = [k for k in KERNELS if k in gpuopt.variants("conv2d")]
    res.meta.update(inputs="uniform [-1, 1) float32, torch.Generator(cuda).manual_seed(0), torch tensors in",
                    timing=f"measure(): {reps}", reference="torch.nn.functional.conv2d in float64 on the GPU",
                    peaks=dict(fp32=FP32_PEAK, tf32x3=TF32X3_PEAK, bandwidth=BANDWIDTH), kernels=kernels,
                    baseline="torch.nn.functional.conv2d, cudnn.benchmark on, TF32 off")
    gen = torch.Generator(device="cuda").manual_seed(0)
    with Progress(len(todo), "conv_layers", enabled=plan.progress) as prog:
        for net, name, n, c, h, w, k, r, s, stride, padding, groups in todo:
            row: dict[str, Any] = dict(network=net, layer=name, N=n, C=c, H=h, W=w, K=k, R=r, S=s, stride=stride,
                                       padding=padding, groups=groups, **floors(n, c, h, w, k, r, s, stride, padding,
                                                                                groups))
            try:
                _layer(torch, gen, row, kernels, reps)
            except Exception as exc:  # noqa: BLE001 - recorded, the study goes on
                row["error"] = error_text(exc)
            res.rows.append(row)
            prog.update(f"{net} {name}")
            release_gpu_cache(plan)
            torch.cuda.empty_cache()
    return res


def _layer(torch: Any, gen: Any, row: dict[str, Any], kernels: list[str], reps: Mapping[str, Any]) -> None:
    """Time and check one layer into ``row``."""
    n, c, h, w, k, r, s = (row[key] for key in ("N", "C", "H", "W", "K", "R", "S"))
    stride, padding, groups = row["stride"], row["padding"], row["groups"]
    x = torch.rand((n, c, h, w), generator=gen, device="cuda") * 2 - 1
    wt = torch.rand((k, c // groups, r, s), generator=gen, device="cuda") * 2 - 1
    conv = torch.nn.functional.conv2d
    ref = conv(x.double(), wt.double(), stride=stride, padding=padding, groups=groups)
    ref_norm = float(ref.norm())

    def err(y: Any) -> float:
        y = y if isinstance(y, torch.Tensor) else torch.as_tensor(y, device="cuda")
        return float((y.double() - ref).norm()) / (ref_norm or 1.0)

    def ours(variant: str, **params: Any):
        return lambda: gpuopt.conv2d(x, wt, stride=stride, padding=padding, groups=groups, variant=variant, **params)

    timed = [("torch", lambda: conv(x, wt, stride=stride, padding=padding, groups=groups)),
             ("cudnn_precise", ours("cudnn")), ("cudnn_any", ours("cudnn", algorithms="any")), ("auto", ours("auto")),
             ("auto_fast", ours("auto", algorithms="fast"))]
    for key, fn in timed:
        row[f"{key}_err"] = err(fn())
        row[f"{key}_ms"] = measure(fn, device="gpu", **reps).median_ms
    row["auto_variant"] = _auto_pick(row, "precise")
    row["auto_fast_variant"] = _auto_pick(row, "fast")
    results = {}
    for kernel in kernels:
        try:
            fn = ours(kernel)
            e = err(fn())
            results[kernel] = (measure(fn, device="gpu", **reps).median_ms, e)
        except ValueError:  # the kernel does not take this layer
            continue
    row["kernels"] = {name: round(ms, 5) for name, (ms, _) in results.items()}
    if results:
        best = min(results, key=lambda name: results[name][0])
        row.update(best_kernel=best, best_kernel_ms=results[best][0], best_kernel_err=results[best][1])
    for key in ("auto", "auto_fast", "best"):
        ms = row.get(f"{key}_ms") if key != "best" else row.get("best_kernel_ms")
        row[f"{key}_x_torch"] = row["torch_ms"] / ms if ms else None
    row["auto_x_cudnn_precise"] = row["cudnn_precise_ms"] / row["auto_ms"] if row.get("auto_ms") else None
    row["auto_x_floor"] = row["auto_ms"] / row["floor_ms"] if row.get("floor_ms") else None


def _auto_pick(row: Mapping[str, Any], algorithms: str) -> str:
    """The variant auto runs for the layer (grouped ones: depthwise's rows kernel or cuDNN)."""
    xs, ws = (row["N"], row["C"], row["H"], row["W"]), (row["K"], row["C"] // row["groups"], row["R"], row["S"])
    return gpuopt.conv.auto_choice(xs, ws, row["stride"], row["padding"], algorithms, groups=row["groups"])[0]


def table_conv_layers(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    body = [[r["network"], r["layer"], fmt_cell(r.get("gflop"), ".3g"), fmt_cell(r.get("torch_ms"), ".4g"),
             fmt_cell(r.get("auto_ms"), ".4g"), r.get("auto_variant") or "-", fmt_cell(r.get("auto_x_torch"), ".2f"),
             fmt_cell(r.get("auto_x_cudnn_precise"), ".2f"),
             fmt_cell(r.get("auto_fast_x_torch"), ".2f"), r.get("best_kernel") or "-",
             fmt_cell(r.get("best_x_torch"), ".2f"), fmt_cell(r.get("floor_ms"), ".3g"),
             fmt_cell(r.get("auto_x_floor"), ".2f"), fmt_cell(r.get("torch_err"), ".1e"),
             fmt_cell(r.get("auto_err"), ".1e"), fmt_cell(r.get("auto_fast_err"), ".1e")] for r in rows]
    head = ("conv2d on real networks' layers, kernel ms (L2 flushed); x torch: PyTorch's cuDNN (benchmark, TF32 off) "
            "over ours; x precise: cuDNN's precise algorithms over auto (precise); floor: max(FP32 FLOPs, bytes); "
            "errors against float64\n")
    return head + format_table(["network", "layer", "GFLOP", "torch ms", "auto ms", "auto runs", "auto x torch",
                                "auto x precise", "fast x torch", "best kernel", "best x torch", "floor ms",
                                "auto/floor", "torch err", "auto err", "fast err"], body) + errors_note(
        [{**r, "variant": f"{r['network']} {r['layer']}"} for r in rows])


def plot_conv_layers(meta, rows, path: Path) -> Path:
    """Speed over PyTorch's cuDNN per layer (log), auto and auto-fast, networks side by side; 1 dashed."""
    plt = pyplot()
    ok = [r for r in rows if r.get("auto_x_torch") and not r.get("error")]
    fig, ax = plt.subplots(figsize=(max(9.0, 0.12 * len(ok) + 3), 4.8))
    if not ok:
        empty_axes(ax, "no successful measurements")
        return finish_axes(fig, ax, meta, "conv2d on real networks' layers", path, grid=False)
    xs = range(len(ok))
    ax.bar([x - 0.2 for x in xs], [r["auto_x_torch"] for r in ok], width=0.4, label="auto (precise)")
    ax.bar([x + 0.2 for x in xs], [r.get("auto_fast_x_torch") or math.nan for r in ok], width=0.4,
           label="auto, algorithms='fast'")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_yscale("log")
    ax.set_ylabel("x PyTorch's cuDNN (higher is faster)")
    starts = [i for i, r in enumerate(ok) if i == 0 or r["network"] != ok[i - 1]["network"]]
    ax.set_xticks(starts)
    ax.set_xticklabels([ok[i]["network"] for i in starts], rotation=20, ha="right", fontsize=8)
    for i in starts[1:]:
        ax.axvline(i - 0.5, color="grey", linewidth=0.5)
    return finish_axes(fig, ax, meta, "conv2d on real networks' layers: auto over PyTorch's cuDNN", path,
                       legend=dict(fontsize=8, loc="upper right"))


def _shown() -> tuple[str, ...]:
    """The GPU variants the study times: cudnn, auto and the kernels of :data:`KERNELS` this build has."""
    return tuple(v for v in ("cudnn", "auto") + KERNELS if v in gpuopt.variants("conv2d"))


STUDY = Study("conv_layers", "conv2d", "conv2d on real networks' layers",
              "every unique conv layer of ResNet-50 (b32, b1), VGG-16 (b16), MobileNetV2 (b32) and the reports' eight: "
              "PyTorch's cuDNN, cudnn precise and any, auto precise and fast, gpuopt's kernels, errors against "
              "float64, floors",
              _shown, LAYER_COLUMNS, run_conv_layers, table_conv_layers,
              figures=plot_conv_layers, outputs=(Output("conv_layers.png"),), opt_in=True, gpu_only=True)
