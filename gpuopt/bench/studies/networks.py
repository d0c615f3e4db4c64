"""networks: the reports' CNNs end to end (gpuopt.models) -> networks.csv/.json/.md/.png.

* **Tables 2-5 of the ECE408 MNIST report** regenerated on this GPU: every stage's per-layer time for
  10,000 images (each op's kernel time by CUDA events, its copies apart), the report's K80 times beside.
* **Whole-network time** for 10, 100 and 10,000 images, every stage of both networks: NumPy images in to
  NumPy predictions out (wall clock), and for ``fast`` also device-resident (CUDA events, L2 flushed);
  the same network in PyTorch (strict FP32, TF32 off) measured in the same run when torch is importable.
  Correctness beside each: accuracy on the real MNIST test set, predictions against ``serial``.
* **The layer ops at the network's shapes**: every GPU variant of each layer op on the MNIST layers'
  tensors (10,000 images, device-resident), against its floor (bytes over bandwidth, FLOPs over peak); the
  fused conv layers beside what a user would run instead: cuDNN (precise algorithms, and any algorithm) with
  the pool after it, and PyTorch (strict FP32, cudnn.benchmark) when torch is importable.

The MNIST network is the trained ECE408 model when the data folder has it (else seeded random weights,
said in the notes); the Fashion network always has seeded random weights and synthetic images (its trained
weights and images are not public).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

import gpuopt
from gpuopt import datasets, nn

from ..baselines import strict_torch
from ..figures import empty_axes, finish_figure, pyplot
from ..floors import dram_bandwidth, fp32_peak
from ..harness import Progress, measure
from ..results import format_metadata
from ..study import CALL_REPEATS, Output, RunSettings, Study, StudyResult, add_note, error_text, per_level
from ..tables import fmt_cell, format_table, md_table

__all__ = ["STUDY"]

NETWORK_IMAGES: dict[Any, tuple[int, ...]] = per_level(
    gpu_full=(10, 100, 10000), gpu_quick=(10, 100, 10000), cpu_full=(10, 100), cpu_quick=(10,), tiny=(6,))
#: The batch the per-layer tables (the report's Tables 2-5) are measured on.
TABLE_IMAGES = 10000
FASHION_SEED = 0
LAYER_OPS = ("relu", "tanh", "max_pool2d", "avg_pool2d", "fully_connected", "argmax", "softmax", "conv2d_pool")
NETWORKS_COLUMNS = ("kind", "network", "stage", "images", "input", "layer", "op", "variant", "shape", "kernel_ms",
                    "h2d_ms", "d2h_ms", "report_ms", "numpy_ms", "numpy_uint8_ms", "device_ms", "device_uint8_ms",
                    "floor_ms", "accuracy", "match_serial", "logits_rel_diff", "repeats", "error")


def _stage_pairs() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(op, variants) every stage of every network runs: what the tables show."""
    from gpuopt.models import STAGES

    pairs: dict[str, list[str]] = {}
    for table in STAGES.values():
        for stage in table.values():
            for step in (*stage.steps, *stage.heads.values()):
                pairs.setdefault(step.op, [])
                if step.variant not in pairs[step.op]:
                    pairs[step.op].append(step.variant)
    return tuple((op, tuple(v)) for op, v in pairs.items())


def _op_pairs() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(op, GPU variants) of the layer ops: what the layer-op table measures."""
    return tuple((op, tuple(n for n, v in gpuopt.variants(op).items() if v.needs_cuda)) for op in LAYER_OPS
                 if op in gpuopt.ops())


# ----------------------------------------------------------------------------------------------- the nets


def _mnist(notes: list[str], meta: dict[str, Any], plan: RunSettings):
    from gpuopt.models import MnistCNN

    try:
        net = MnistCNN.from_file()
        images, labels = datasets.load_mnist("t10k")
        meta["mnist"] = "the trained ECE408 Fall 2016 model (model.hdf5) on the real MNIST test set (t10k)"
    except (FileNotFoundError, ImportError, ValueError) as exc:
        net = MnistCNN.random(seed=0)
        images = np.random.default_rng(0).integers(0, 256, (10000, 28, 28), dtype=np.uint8)
        labels = None
        meta["mnist"] = "seeded random weights (MnistCNN.random(0)) on random images: the model or MNIST not found"
        add_note(notes, f"MNIST model or test set not found ({str(exc).splitlines()[0][:120]}): random weights and images")
    return net, images, labels


def _fashion(meta: dict[str, Any]):
    from gpuopt.models import FashionCNN, synthetic_images

    meta["fashion"] = (f"seeded random weights (FashionCNN.random({FASHION_SEED})) on synthetic_images(n, "
                       f"{FASHION_SEED}): the course's trained weights and images are not public")
    return FashionCNN.random(seed=FASHION_SEED), synthetic_images(10000, FASHION_SEED), None


def _torch_net(name: str, net) -> Callable[[Any], Any] | None:
    """The same network in PyTorch (strict FP32: TF32 off), images (N, 1, S, S) float32 on the GPU -> classes."""
    torch = strict_torch()
    if torch is None:
        return None
    F = torch.nn.functional
    w = {k: torch.as_tensor(np.ascontiguousarray(v), device="cuda") for k, v in net.weights.items()}
    if name == "mnist":  # fc1 in gpuopt's NCHW-flatten row order (the network permuted it at load)
        def run(x):
            y = F.avg_pool2d(F.relu(F.conv2d(x, w["conv1"])), 2)
            y = F.avg_pool2d(F.relu(F.conv2d(y, w["conv2"])), 2)
            y = F.relu(y.flatten(1) @ w["fc1"])
            return (y @ w["fc2"]).argmax(1)
    else:
        def run(x):
            y = F.max_pool2d(torch.tanh(F.conv2d(x, w["conv1"])), 2)
            y = F.conv2d(y, w["conv2"]).flatten(1)
            y = torch.tanh(y @ w["fc1"] + w["fc1_bias"])
            return (y @ w["fc2"] + w["fc2_bias"]).argmax(1)
    return run


# ----------------------------------------------------------------------------------------------- measuring


def _median_wall(fn: Callable[[], Any], reps: Mapping[str, Any]) -> tuple[float, int, Any]:
    for _ in range(reps["warmup"]):
        fn()
    walls, out, started = [], None, time.perf_counter()
    for _ in range(reps["repeat"]):
        t0 = time.perf_counter()
        out = fn()
        walls.append((time.perf_counter() - t0) * 1e3)
        if time.perf_counter() - started > reps["max_time_s"]:
            break
    return float(np.median(walls)), len(walls), out


def _network_rows(name: str, net, images: np.ndarray, labels, plan: RunSettings, res: StudyResult,
                  prog: Progress) -> None:
    reps = plan.pick(CALL_REPEATS)
    sizes = plan.pick(NETWORK_IMAGES)
    stage_names = [s for s in net.stages if plan.gpu or s == "serial"]
    serial: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for n in sizes:
        x8 = np.ascontiguousarray(images[:n])
        xf = x8.astype(np.float32) / np.float32(255)
        logits_ref = net.forward(xf, variant="serial")
        serial[n] = (logits_ref, logits_ref.argmax(1))
        for stage in stage_names:
            row: dict[str, Any] = dict(kind="network", network=name, stage=stage, variant=stage, images=n,
                                       input="numpy")
            try:
                one = dict(reps, repeat=1, warmup=0) if stage == "serial" and n > 1000 else reps
                row["numpy_ms"], row["repeats"], pred = _median_wall(lambda: net.predict(xf, variant=stage), one)
                row["numpy_uint8_ms"], _, pred8 = _median_wall(lambda: net.predict(x8, variant=stage), one)
                logits = net.forward(xf, variant=stage)
                row["match_serial"] = bool(np.array_equal(pred, serial[n][1]) and np.array_equal(pred8, serial[n][1]))
                scale = float(np.abs(logits_ref).max()) or 1.0
                row["logits_rel_diff"] = float(np.abs(logits.astype(np.float64) - logits_ref).max() / scale)
                if labels is not None:
                    row["accuracy"] = float(np.mean(pred == labels[:n]))
                if stage in ("fast", "winograd") and plan.gpu:  # the device-resident stages
                    dxf, dx8 = gpuopt.to_device(xf), gpuopt.to_device(x8)
                    row["device_ms"] = measure(lambda: net.predict(dxf, variant=stage), warmup=reps["warmup"],
                                               repeat=reps["repeat"], flush_l2=True).median_ms
                    row["device_uint8_ms"] = measure(lambda: net.predict(dx8, variant=stage), warmup=reps["warmup"],
                                                     repeat=reps["repeat"], flush_l2=True).median_ms
                if n == max(sizes) and (n == TABLE_IMAGES or plan.tiny or not plan.gpu):
                    _, t = net.predict(xf, variant=stage, timing=True)
                    steps = net.stages[stage]
                    report = {s.name: s.report_ms for s in (*steps.steps, *steps.heads.values())}
                    for layer in t.layers:
                        res.rows.append(dict(kind="layer", network=name, stage=stage, images=n, layer=layer.name,
                                             op=layer.op, variant=layer.variant, kernel_ms=layer.kernel_ms,
                                             h2d_ms=layer.h2d_ms, d2h_ms=layer.d2h_ms,
                                             report_ms=report.get(layer.name)))
            except Exception as exc:  # noqa: BLE001
                row["error"] = error_text(exc)
                add_note(res.notes, f"{name}/{stage} on {n} images: {row['error']}")
            res.rows.append(row)
            prog.update(f"{name} {stage} {n}")
        run = _torch_net(name, net) if plan.gpu else None
        if run is not None:
            import torch

            row = dict(kind="network", network=name, stage="pytorch", variant="pytorch", images=n, input="numpy")
            try:
                side = xf.shape[-1]
                def numpy_fn():
                    return run(torch.from_numpy(xf.reshape(n, 1, side, side)).cuda()).cpu().numpy()
                row["numpy_ms"], row["repeats"], pred = _median_wall(numpy_fn, reps)
                row["match_serial"] = bool(np.array_equal(pred, serial[n][1]))
                if labels is not None:
                    row["accuracy"] = float(np.mean(pred == labels[:n]))
                dx = torch.from_numpy(xf.reshape(n, 1, side, side)).cuda()
                row["device_ms"] = measure(lambda: run(dx), warmup=reps["warmup"], repeat=reps["repeat"],
                                           flush_l2=True).median_ms
            except Exception as exc:  # noqa: BLE001
                row["error"] = error_text(exc)
            res.rows.append(row)
            prog.update(f"{name} pytorch {n}")


def _conv_pool_baselines(x: Any, w: Any, activation: str = "relu", pool: str = "avg") -> dict[str, Callable[[], Any]]:
    """What a user would run instead of conv2d_pool for conv -> activation -> 2x2 pool: cuDNN (gpuopt's wrapper,
    activation fused; its precise algorithms and any algorithm) then gpuopt's coalesced pool, and PyTorch (strict
    FP32, cudnn.benchmark) when it is importable."""
    pool_op = nn.avg_pool2d if pool == "avg" else nn.max_pool2d

    def cudnn(algorithms: str) -> Callable[[], Any]:
        return lambda: pool_op(gpuopt.conv2d(x, w, activation=activation, variant="cudnn", algorithms=algorithms), 2,
                               variant="coalesced")

    out = {f"cudnn precise + {pool}_pool2d": cudnn("precise"), f"cudnn any + {pool}_pool2d": cudnn("any")}
    torch = strict_torch()
    if torch is not None:
        F = torch.nn.functional
        xt, wt = torch.as_tensor(x, device="cuda"), torch.as_tensor(w, device="cuda")
        act = F.relu if activation == "relu" else torch.tanh
        pool_fn = F.avg_pool2d if pool == "avg" else F.max_pool2d
        out[f"pytorch (F.conv2d, {activation}, {pool}_pool2d)"] = lambda: pool_fn(act(F.conv2d(xt, wt)), 2)
    return out


def _op_cases(net, images=None) -> list[tuple[str, str, Callable[[str], Any], float, float,
                                             dict[str, Callable[[], Any]]]]:
    """(op, shape label, fn(variant) -> result, bytes moved, FLOPs, baselines: name -> fn()) on the MNIST layers'
    tensors (and Fashion conv1, the other first layer); with ``images`` (uint8, N x 28 x 28) also conv2 on conv1's
    real output, whose zeros zero_skip skips (random input has none)."""
    rng = np.random.default_rng(1)
    n = TABLE_IMAGES
    d = gpuopt.to_device
    act = d(rng.standard_normal((n, 32, 24, 24), dtype=np.float32))
    x1 = d(rng.random((n, 1, 28, 28), dtype=np.float32))
    x2 = d(rng.random((n, 32, 12, 12), dtype=np.float32))
    x1_u8 = d(rng.integers(0, 256, (n, 1, 28, 28), dtype=np.uint8))  # the stages' raw pixels
    xf_u8 = d(rng.integers(0, 256, (n, 1, 64, 64), dtype=np.uint8))  # Fashion conv1 (1 -> 6, 64x64), tanh + max
    from gpuopt.models import FashionCNN

    wf = d(FashionCNN.random(seed=FASHION_SEED).weights["conv1"])  # the network rows' Fashion filters
    f1 = d(rng.standard_normal((n, 1024), dtype=np.float32))
    f2 = d(rng.standard_normal((n, 128), dtype=np.float32))
    lg = d(rng.standard_normal((n, 10), dtype=np.float32))
    w = {k: d(v) for k, v in net.weights.items()}
    b = 4.0
    a = n * 32 * 24 * 24
    real = []
    if images is not None:
        x2r = nn.conv2d_pool(d(np.ascontiguousarray(images[:n]).reshape(-1, 1, 28, 28)), w["conv1"], activation="relu",
                             pool="avg", input_divisor=255.0, variant="direct_smallc")
        zeros = float(np.mean(x2r.numpy() == 0))
        real = [("conv2d_pool", f"conv2 on conv1's output of the real images ({zeros:.1%} zeros): "
                 "(10000, 32, 12, 12) * (64, 32, 5, 5), ReLU, 2x2 avg",
                 lambda v: nn.conv2d_pool(x2r, w["conv2"], activation="relu", pool="avg", variant=v),
                 (n * 32 * 144 + n * 64 * 16) * b, 2.0 * n * 64 * 64 * 800, _conv_pool_baselines(x2r, w["conv2"]))]
    return real + [
        ("relu", "(10000, 32, 24, 24)", lambda v: nn.relu(act, variant=v), 2 * a * b, 0.0, {}),
        ("tanh", "(10000, 32, 24, 24)", lambda v: nn.tanh(act, variant=v), 2 * a * b, 0.0, {}),
        ("max_pool2d", "(10000, 32, 24, 24), 2x2", lambda v: nn.max_pool2d(act, 2, variant=v), 1.25 * a * b, 0.0, {}),
        ("avg_pool2d", "(10000, 32, 24, 24), 2x2", lambda v: nn.avg_pool2d(act, 2, variant=v), 1.25 * a * b, 0.0, {}),
        ("fully_connected", "fc1: (10000, 1024) @ (1024, 128), ReLU",
         lambda v: nn.fully_connected(f1, w["fc1"], activation="relu", variant=v), (n * 1152 + 1024 * 128) * b,
         2.0 * n * 1024 * 128, {}),
        ("fully_connected", "fc2: (10000, 128) @ (128, 10)", lambda v: nn.fully_connected(f2, w["fc2"], variant=v),
         (n * 138 + 1280) * b, 2.0 * n * 1280, {}),
        ("argmax", "(10000, 10)", lambda v: nn.argmax(lg, variant=v), n * 10 * b + n * 8, 0.0, {}),
        ("softmax", "(10000, 10)", lambda v: nn.softmax(lg, variant=v), 2 * n * 10 * b, 0.0, {}),
        ("conv2d_pool", "conv1: (10000, 1, 28, 28) * (32, 1, 5, 5), ReLU, 2x2 avg",
         lambda v: nn.conv2d_pool(x1, w["conv1"], activation="relu", pool="avg", variant=v),
         (n * 784 + n * 32 * 144) * b, 2.0 * n * 32 * 576 * 25, _conv_pool_baselines(x1, w["conv1"])),
        ("conv2d_pool", "conv1 uint8 / 255: (10000, 1, 28, 28) * (32, 1, 5, 5), ReLU, 2x2 avg",
         lambda v: nn.conv2d_pool(x1_u8, w["conv1"], activation="relu", pool="avg", input_divisor=255.0, variant=v),
         n * 784 + n * 32 * 144 * b, 2.0 * n * 32 * 576 * 25, {}),
        ("conv2d_pool", "Fashion conv1 uint8 / 255: (10000, 1, 64, 64) * (6, 1, 5, 5), tanh, 2x2 max",
         lambda v: nn.conv2d_pool(xf_u8, wf, activation="tanh", pool="max", input_divisor=255.0, variant=v),
         n * 4096 + n * 6 * 900 * b, 2.0 * n * 6 * 3600 * 25,
         _conv_pool_baselines(d(rng.random((n, 1, 64, 64), dtype=np.float32)), wf, "tanh", "max")),
        ("conv2d_pool", "conv2: (10000, 32, 12, 12) * (64, 32, 5, 5), ReLU, 2x2 avg",
         lambda v: nn.conv2d_pool(x2, w["conv2"], activation="relu", pool="avg", variant=v),
         (n * 32 * 144 + n * 64 * 16) * b, 2.0 * n * 64 * 64 * 800,
         {**_conv_pool_baselines(x2, w["conv2"]),  # winograd's auto is the resident-V 3xTF32 block here; beside it
          "winograd products=fma (chunked FFMA block)":  # the block it replaced (notes/winograd.md)
          lambda: nn.conv2d_pool(x2, w["conv2"], activation="relu", pool="avg", variant="winograd", products="fma")}),
    ]


def _op_rows(net, plan: RunSettings, res: StudyResult, prog: Progress, images=None) -> None:
    reps = plan.pick(CALL_REPEATS)
    gpu = gpuopt.device_info() or {}
    gflops, formula = fp32_peak(gpu)
    flops_peak, bw = (gflops or 0.0) * 1e9, dram_bandwidth(gpu)
    res.meta["floor"] = (f"floor = max(bytes / {bw / 1e12:.2f} TB/s (2 x DRAM clock x bus width), FLOPs / FP32 peak "
                         f"{formula})")
    for op, shape, fn, nbytes, flops, baselines in _op_cases(net, images):
        floor = max(nbytes / bw if bw else 0.0, flops / flops_peak if flops_peak else 0.0) * 1e3
        calls = {variant: (lambda variant=variant: fn(variant))
                 for variant, v in gpuopt.variants(op).items() if v.needs_cuda}
        for variant, call in {**calls, **baselines}.items():
            if variant in calls and not _runs(call):
                continue  # a shape-limited variant (direct_smallc on conv2) refuses the layer up front
            row = dict(kind="op", op=op, variant=variant, shape=shape, images=TABLE_IMAGES, floor_ms=floor)
            try:
                stats = measure(call, warmup=reps["warmup"], repeat=reps["repeat"], flush_l2=True)
                row["kernel_ms"], row["repeats"] = stats.median_ms, stats.repeats
            except Exception as exc:  # noqa: BLE001
                row["error"] = error_text(exc)
            res.rows.append(row)
            prog.update(f"{op} {variant}")


def _runs(call: Callable[[], Any]) -> bool:
    """False when the call is refused with a ValueError (the variant's limits), before anything is measured."""
    try:
        call()
    except ValueError:
        return False
    return True


def run_networks(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    res.meta["timing"] = ("numpy_ms: wall time of predict() from NumPy images to NumPy classes (float32 images in "
                          "[0, 1]; numpy_uint8_ms: raw uint8 pixels), median; device_ms: CUDA events on device-"
                          "resident images, L2 flushed, median; layer rows: each op's kernel time (CUDA events) and "
                          "its copies, from one timing=True call")
    mnist, fashion = _mnist(res.notes, res.meta, plan), _fashion(res.meta)
    sizes = plan.pick(NETWORK_IMAGES)
    stages = sum(len(n[0].stages) + 1 for n in (mnist, fashion)) * len(sizes)
    # fully_connected runs on two layers, conv2d_pool on four; three of the conv layers have up to 3 baselines each,
    # conv2 one more (winograd's FFMA block)
    layers = {"fully_connected": 2, "conv2d_pool": 5}
    ops = sum(len(v) * layers.get(op, 1) for op, v in _op_pairs()) + 12 if plan.gpu else 0
    with Progress(stages + ops, "networks", enabled=plan.progress) as prog:
        for name, (net, images, labels) in (("mnist", mnist), ("fashion", fashion)):
            _network_rows(name, net, images, labels, plan, res, prog)
        if plan.gpu and not plan.tiny:
            _op_rows(mnist[0], plan, res, prog, mnist[1])
    if plan.gpu and not any(r.get("stage") == "pytorch" for r in res.rows):
        add_note(res.notes, "PyTorch not importable (or no CUDA in it): no PyTorch baseline in this run")
    return res


# ----------------------------------------------------------------------------------------------- tables


def _rows(rows, **match) -> list[Mapping[str, Any]]:
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def _sections(meta: Mapping[str, Any], rows: list[Mapping[str, Any]]) -> list[tuple[str, list[str], list[list[str]]]]:
    from gpuopt.models import STAGES
    from gpuopt.models.stages import REPORT_SETTING

    out = []
    for name in ("mnist", "fashion"):
        for stage, st in STAGES[name].items():
            layer_rows = _rows(rows, kind="layer", network=name, stage=stage)
            if not layer_rows:
                continue
            body = []
            for r in layer_rows:
                k80 = r.get("report_ms")
                same_batch = r["images"] == TABLE_IMAGES  # the reports' times are for 10,000 images
                speed = fmt_cell(k80 / r["kernel_ms"], ".3g") if k80 and r.get("kernel_ms") and same_batch else "-"
                body.append([r["layer"], f"{r['op']}/{r['variant']}", fmt_cell(r.get("kernel_ms"), ".4g"),
                             fmt_cell(r.get("h2d_ms"), ".4g"), fmt_cell(r.get("d2h_ms"), ".4g"), fmt_cell(k80, ".4g"),
                             speed])
            total = sum(r.get("kernel_ms") or 0.0 for r in layer_rows)
            body.append(["sum of the kernels", "", fmt_cell(total, ".4g"), "", "", fmt_cell(st.report_total_ms, ".4g"),
                         ""])
            caption = (f"{name} '{stage}' ({st.table}), {layer_rows[0]['images']:,} images: kernel ms per layer "
                       f"(CUDA events), copies apart; report ms: {REPORT_SETTING[name]}")
            out.append((caption, ["layer", "op/variant", "kernel ms", "h2d ms", "d2h ms", "report ms",
                                  "report / here"], body))
        net_rows = _rows(rows, kind="network", network=name)
        if net_rows:
            torch_dev = {r["images"]: r.get("device_ms") for r in net_rows if r["stage"] == "pytorch"}
            torch_np = {r["images"]: r.get("numpy_ms") for r in net_rows if r["stage"] == "pytorch"}
            body = []
            for r in net_rows:
                dev = r.get("device_ms")
                vs = fmt_cell(torch_dev.get(r["images"]) / dev, ".3g") if dev and torch_dev.get(r["images"]) else "-"
                vs_np = (fmt_cell(torch_np.get(r["images"]) / r["numpy_ms"], ".3g")
                         if r.get("numpy_ms") and torch_np.get(r["images"]) and r["stage"] != "pytorch" else "-")
                body.append([r["stage"], f"{r['images']:,}", fmt_cell(r.get("numpy_ms"), ".4g"),
                             fmt_cell(r.get("numpy_uint8_ms"), ".4g"), vs_np, fmt_cell(dev, ".4g"),
                             fmt_cell(r.get("device_uint8_ms"), ".4g"), vs, fmt_cell(r.get("accuracy"), ".4f"),
                             fmt_cell(r.get("match_serial")), fmt_cell(r.get("logits_rel_diff"), ".2g"),
                             "failed" if r.get("error") else ""])
            out.append((f"{name}: whole network, predict(): NumPy in/out wall ms (float32, uint8 images), device-"
                        f"resident ms (CUDA events), 'x PyTorch': PyTorch's time over this one (same run, strict "
                        f"FP32, cudnn.benchmark); accuracy, predictions equal to serial, max |logits - serial| / "
                        f"max |serial|",
                        ["stage", "images", "numpy ms", "uint8 ms", "x PyTorch (numpy)", "device ms",
                         "device uint8 ms", "x PyTorch (device)", "accuracy", "= serial", "logit diff", ""], body))
    op_rows = _rows(rows, kind="op")
    if op_rows:
        body = [[r["op"], r["variant"], r["shape"], fmt_cell(r.get("kernel_ms"), ".4g"),
                 fmt_cell(r.get("floor_ms"), ".3g"),
                 fmt_cell(r["floor_ms"] / r["kernel_ms"] * 100, ".3g") if r.get("kernel_ms") else "failed"]
                for r in op_rows]
        out.append((f"The layer ops at the MNIST network's shapes, device-resident, L2 flushed; "
                    f"{meta.get('floor', '')}",
                    ["op", "variant", "tensors", "kernel ms", "floor ms", "% of floor"], body))
    return out


def table_networks(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """Tables 2-5 per stage, the whole networks against PyTorch, the layer ops against their floors."""
    import textwrap

    return "\n\n".join(textwrap.fill(c, 120) + "\n" + format_table(h, b) for c, h, b in _sections(meta or {}, rows))


def markdown_networks(meta: Mapping[str, Any], rows: list[dict[str, Any]]) -> str:
    """The same tables as Markdown."""
    lines = ["### The reports' networks end to end", "", f"Measured with {format_metadata(meta)}.", "",
             f"MNIST: {meta.get('mnist', '')}. Fashion: {meta.get('fashion', '')}.", ""]
    for caption, headers, body in _sections(meta, rows):
        lines += [caption + ".", "", md_table(headers, body), ""]
    return "\n".join(lines)


def extras_networks(meta: Mapping[str, Any], rows: list[dict[str, Any]], out_dir: Any) -> list[Path]:
    path = Path(out_dir) / "networks.md"
    path.write_text(markdown_networks(meta, rows), encoding="utf-8")
    return [path]


#: The GPU of each network's report (its whole-run times are drawn beside this run's).
REPORT_GPU = {"mnist": "Tesla K80", "fashion": "a P100-class card"}


def _report_totals(name: str) -> dict[str, float]:
    """Stage -> the report's printed whole-run time (ms, 10,000 images) of network ``name``."""
    from gpuopt.models import STAGES

    return {stage: st.report_total_ms for stage, st in STAGES[name].items() if st.report_total_ms}


def plot_networks(meta, rows, path: Path) -> Path:
    """Per network: whole-forward time against images, one line per stage (NumPy in/out), fast and PyTorch
    device-resident dashed; log-log."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    # One colour per stage in both panels (the Fashion network has no hybrid stage).
    order = list(dict.fromkeys(r["stage"] for r in _rows(rows, kind="network") if r.get("numpy_ms")))
    colour = {stage: f"C{i}" for i, stage in enumerate(order)}
    for ax, name in zip(axes, ("mnist", "fashion")):
        net_rows = [r for r in _rows(rows, kind="network", network=name) if r.get("numpy_ms")]
        if not net_rows:
            empty_axes(ax, "no successful measurements")
            continue
        for stage in dict.fromkeys(r["stage"] for r in net_rows):
            rs = sorted(_rows(net_rows, stage=stage), key=lambda r: r["images"])
            line, = ax.plot([r["images"] for r in rs], [r["numpy_ms"] for r in rs], marker="o",
                            color=colour[stage], label=f"{stage} (NumPy in/out)")
            dev = [r for r in rs if r.get("device_ms")]
            if dev:
                ax.plot([r["images"] for r in dev], [r["device_ms"] for r in dev], marker="s", linestyle="--",
                        color=line.get_color(), label=f"{stage} (device-resident)")
        printed = _report_totals(name)
        for stage, ms in printed.items():  # the report's whole-run times: open stars at its batch
            ax.plot([TABLE_IMAGES], [ms], marker="*", ms=14, mfc="white", mec=colour.get(stage, "black"), mew=1.5,
                    ls="none", label=f"{stage}: the report's whole run ({REPORT_GPU[name]}, {ms / 1e3:.4g} s)")
            ax.annotate(f"report {ms / 1e3:.4g} s", (TABLE_IMAGES, ms), xytext=(-10, 0), textcoords="offset points",
                        ha="right", va="center", fontsize=7.5, color=colour.get(stage, "black"))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("images per call")
        ax.set_ylabel("ms per call (median)")
        ax.set_title({"mnist": "ECE408 MNIST network (trained model)" if "trained" in meta.get("mnist", "")
                      else "ECE408 MNIST network", "fashion": "ECE408 Fashion network (random weights)"}[name]
                     + ("" if printed else "\nits report printed no whole-network time (its convolutions: "
                        "ece408_op_time.png)"), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return finish_figure(fig, meta, "The reports' networks end to end: time per forward pass (predict), every stage, "
                         "with the report's whole-run times where it printed them", path)


STUDY = Study("networks", "conv2d_pool", "The reports' CNNs end to end",
              "the ECE408 MNIST and Fashion networks, every stage: Tables 2-5 per layer, whole network vs PyTorch, "
              "the layer ops against their floors", ("fused",), NETWORKS_COLUMNS, run_networks, table_networks,
              extras=extras_networks, figures=plot_networks,
              outputs=(Output("networks.png", variants=(), ops=_stage_pairs()),
                       Output("networks.md", variants=("fused",), ops=(*_stage_pairs(), *_op_pairs()))),
              gpu_only=False)
