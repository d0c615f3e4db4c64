"""overhead: what one call costs a user, beside the kernel -> overhead.csv/.json/.png.

The cost of a cheap call: on small problems the kernel runs for microseconds, and the Python around it is what a
user sees. For one small problem of every op family (conv2d, matmul, conv2d_pool, the layer ops relu, softmax and
fully_connected, the NCTU sparse layer, one k-means loop), each called the way users call it -- gpuopt's own
device arrays, PyTorch CUDA tensors (on PyTorch's default stream, and inside ``torch.cuda.stream(s)`` on a side
stream, where gpuopt runs on ``s``), and NumPy arrays in and out -- this measures the host wall time per call
(``calls`` back-to-back calls, then one synchronise, divided by ``calls``; the median of ``batches``), beside the
same computation in PyTorch on the same inputs where PyTorch has it, with CUDA events around the same batches (the
device timeline) and, for gpuopt on device arrays, one call's device time alone (its enqueue hidden behind a spin
kernel): the per-call lines read wall - kernel on device arrays and torch tensors - device arrays. gpuopt's rows are its default
(``variant=None``) and, for conv2d and matmul, its best own kernel; repeated calls run through gpuopt's plan cache
(gpuopt._plan), as a user's loop would. Without a GPU only the NumPy path of the CPU references runs (and says so).
TF32 is off for PyTorch.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

import gpuopt
import gpuopt.nn

from ..baselines import strict_torch
from ..figures import empty_axes, finish_axes, grouped_bars, headroom, pyplot
from ..harness import Progress
from ..study import Output, RunSettings, Study, StudyResult, error_text, per_level
from ..tables import errors_note, fmt_cell, format_table

__all__ = ["STUDY"]

OVERHEAD_COLUMNS = ("op", "problem", "caller", "impl", "variant", "us_per_call", "us_min", "us_max", "event_us",
                    "kernel_us", "kernel_hidden", "over_kernel_us", "over_device_us", "line_us", "calls", "batches",
                    "error")
#: What the performance lines allow beside the kernel, and a torch tensor beside a DeviceArray (µs a call).
OVER_KERNEL_LIMIT_US = 8.0
OVER_DEVICE_LIMIT_US = 2.0


@dataclass(frozen=True)
class OverheadOp:
    """One op of the study: its small problem, the gpuopt variants timed (None: the default), its inputs
    (``make(rng)``: NumPy arrays, or objects passed as they are), the gpuopt call on them and PyTorch's own (None:
    PyTorch has no such op)."""

    op: str
    problem: str
    variants: tuple[str | None, ...]
    make: Callable[[np.random.Generator], tuple]
    call: Callable[..., Any]
    torch_call: Callable[..., Any] | None = None
    #: the callers timed (NumPy in and out left out where the copies would be the whole story)
    callers: tuple[str, ...] = ("device", "torch", "torch side stream", "numpy")
    #: a line on the device-array call itself (µs a call), where the issue sets one for this problem
    line_us: float | None = None


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.random(shape, dtype=np.float32)


def _sparse_inputs(rng: np.random.Generator) -> tuple:
    from ...sparse import FASTFilters

    x = rng.integers(0, 100, (4, 16, 16)).astype(np.int16)
    x[x < 60] = 0  # ~60 % zeros, as a ReLU'd layer
    w = rng.integers(-3, 4, (8, 4, 3, 3)).astype(np.int16)
    fast = FASTFilters.from_dense(w)
    if gpuopt.cuda_available():
        fast.to_device()  # the filters stay on the device, as in the lab's loop
    return x, fast


def _nctu_layer(rng: np.random.Generator) -> tuple:
    """The NCTU lab's layer: its 512 x 32 x 32 neurons (inNeu.txt where the data set is installed, else the synthetic
    ones of the sparse study), 512 FAST filter maps on the device (the sparse study's filters)."""
    from ... import datasets
    from ...sparse import FASTFilters

    try:
        x = datasets.read_nctu_neurons_txt()
    except (FileNotFoundError, OSError):
        x = datasets.make_nctu_neurons(512, 32, 32, seed=0)
    fast = FASTFilters.from_dense(datasets.make_nctu_filters(512, 512, seed=1))
    if gpuopt.cuda_available():
        fast.to_device()
    return x, fast


def _f(torch: Any) -> Any:
    return torch.nn.functional


OVERHEAD_OPS = (
    OverheadOp("conv2d", "x 1x1x8x8, w 1x1x3x3", (None, "implicit_gemm"),
               lambda rng: (_f32(rng, 1, 1, 8, 8), _f32(rng, 1, 1, 3, 3)), gpuopt.conv2d,
               lambda torch, x, w: _f(torch).conv2d(x, w)),
    OverheadOp("matmul", "16x16 @ 16x16", (None, "async"), lambda rng: (_f32(rng, 16, 16), _f32(rng, 16, 16)),
               gpuopt.matmul, lambda torch, a, b: a @ b),
    OverheadOp("conv2d_pool", "x 1x1x12x12, w 2x1x5x5, ReLU, 2x2 avg", (None,),
               lambda rng: (_f32(rng, 1, 1, 12, 12), _f32(rng, 2, 1, 5, 5)),
               lambda x, w, **kw: gpuopt.nn.conv2d_pool(x, w, activation="relu", pool="avg", **kw),
               lambda torch, x, w: _f(torch).avg_pool2d(torch.relu(_f(torch).conv2d(x, w)), 2)),
    OverheadOp("relu", "64x64", (None,), lambda rng: (_f32(rng, 64, 64),), lambda x, **kw: gpuopt.nn.relu(x, **kw),
               lambda torch, x: torch.relu(x)),
    OverheadOp("softmax", "16x10", (None,), lambda rng: (_f32(rng, 16, 10),), lambda x, **kw: gpuopt.nn.softmax(x, **kw),
               lambda torch, x: torch.softmax(x, 1)),
    OverheadOp("fully_connected", "16x64 @ 64x10, ReLU", (None,), lambda rng: (_f32(rng, 16, 64), _f32(rng, 64, 10)),
               lambda x, w, **kw: gpuopt.nn.fully_connected(x, w, activation="relu", **kw),
               lambda torch, x, w: torch.relu(x @ w)),
    OverheadOp("sparse_conv2d", "x 4x16x16 int16, FAST filters 8x4x3x3 on the device", (None,), _sparse_inputs,
               gpuopt.sparse_conv2d),
    OverheadOp("kmeans", "4096x8, k 3, one loop", (None,), lambda rng: (_f32(rng, 4096, 8),),
               lambda x, **kw: gpuopt.kmeans(x, 3, max_iter=1, **kw)),
    # The two loop lines, at their own shapes (device-resident operands; no NumPy rows: the copies of 15.6 MB
    # or 1 MB would be the whole call).
    OverheadOp("kmeans", "kmeans04: 488,565x8, k 3, one loop", (None,), lambda rng: (_f32(rng, 488_565, 8),),
               lambda x, **kw: gpuopt.kmeans(x, 3, max_iter=1, **kw), callers=("device", "torch"), line_us=25.0),
    OverheadOp("sparse_conv2d", "NCTU lab layer: 512x32x32, 512 FAST filter maps on the device", (None,),
               _nctu_layer, gpuopt.sparse_conv2d, callers=("device", "torch"), line_us=30.0),
)
OVERHEAD_CALLERS = ("device", "torch", "torch side stream", "numpy")
# Calls per batch and batches per plan.
OVERHEAD_REPEATS: dict[Any, tuple[int, int]] = per_level(gpu_full=(3000, 7), gpu_quick=(1000, 3), cpu_full=(1000, 5),
    cpu_quick=(300, 3), tiny=(20, 2))
#: measure()'s warm-up and recorded runs of the kernel time (GPU only).
KERNEL_REPEATS: dict[Any, tuple[int, int]] = per_level(gpu_full=(20, 200), gpu_quick=(10, 50), cpu_full=(1, 1),
    cpu_quick=(1, 1), tiny=(2, 5))


def _per_call_us(fn: Callable[[], Any], sync: Callable[[], None], calls: int, batches: int,
                 around: Callable[[], Any] = contextlib.nullcontext,
                 stream: Callable[[], int] | None = None) -> tuple[list[float], list[float]]:
    """(host wall µs a call, CUDA-event µs a call) of each batch: ``calls`` calls then ``sync()``; the events are
    recorded on ``stream()`` (the stream the calls run on, asked inside ``around``) around the calls (none without
    ``stream``)."""
    walls, events = [], []
    cuda = gpuopt._ext.cuda_module() if stream is not None else None
    with around():  # (a stream context: entered once, not per call)
        fn()
        sync()
        handle = stream() if stream is not None else 0
        for _ in range(batches):
            if cuda is not None:
                start, end = cuda.Event(), cuda.Event()
                start.record(handle)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            if cuda is not None:
                end.record(handle)
            sync()
            walls.append((time.perf_counter() - t0) / calls * 1e6)
            if cuda is not None:
                events.append(float(start.elapsed_ms(end)) * 1e3 / calls)
    return walls, events


def _kernel_us(fn: Callable[[], Any], plan: RunSettings) -> tuple[float, bool]:
    """The device time of one call on device arrays, the host's enqueue hidden behind a spin kernel (the harness's
    protocol): (µs, hidden). Not hidden where the call waits for the GPU itself (k-means reads its stop rule): then
    the time runs from the call's start to its return."""
    from ..harness import measure

    warmup, repeat = plan.pick(KERNEL_REPEATS)
    st = measure(fn, warmup=warmup, repeat=repeat)
    return st.median_ms * 1e3, st.overhead_hidden


def _inputs(op: str, rng: np.random.Generator) -> tuple:
    return next(o for o in OVERHEAD_OPS if o.op == op).make(rng)


def _torch():
    """PyTorch as the baselines run it (strict FP32), without cuDNN's benchmark mode (the study's calls are tiny)."""
    return strict_torch(benchmark=False)


def _default(op: str, *args: Any) -> str:
    """The variant ``variant=None`` runs for these inputs (the op's shape-aware default, or the registry's)."""
    if op == "conv2d":
        from ...conv.api import default_for
        from ...conv.problem import validate

        return default_for(validate(args[0], args[1], 1, 0, None, None))
    if op == "matmul":
        from ...matmul import default_for as matmul_default

        return matmul_default(args[0].shape, args[1].shape)
    from ...registry import default_variant

    return default_variant(op)


def _convert(args: tuple, to: Callable[[np.ndarray], Any]) -> tuple:
    return tuple(to(a) if isinstance(a, np.ndarray) else a for a in args)


def _cases(o: OverheadOp, args: tuple, plan: RunSettings, notes: list[str]):
    """(caller, impl, variant, fn, sync, around, stream) for every way this op is timed here (stream: the events'
    stream getter, None without a GPU)."""
    if not plan.gpu:
        notes.append(f"{o.op}: no GPU here, only the CPU reference from NumPy is timed")
        yield "numpy", "gpuopt", "cpu", (lambda: o.call(*args, variant="cpu")), (lambda: None), contextlib.nullcontext, \
            None
        return
    sync, none, legacy = gpuopt.synchronize, contextlib.nullcontext, (lambda: 0)
    dev = _convert(args, gpuopt.to_device)
    torch = _torch()
    tens = side = current = None
    if torch is not None:
        tens = _convert(args, lambda a: torch.as_tensor(a, device="cuda"))
        stream = torch.cuda.Stream()
        side = lambda: torch.cuda.stream(stream)  # noqa: E731
        current = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731
    for v in o.variants:
        name = v or f"default ({_default(o.op, *args)})"
        yield "device", "gpuopt", name, (lambda v=v: o.call(*dev, variant=v)), sync, none, legacy
        if torch is not None:
            if "torch" in o.callers:
                yield "torch", "gpuopt", name, (lambda v=v: o.call(*tens, variant=v)), sync, none, current
            if "torch side stream" in o.callers:
                yield "torch side stream", "gpuopt", name, (lambda v=v: o.call(*tens, variant=v)), sync, side, current
        if "numpy" in o.callers:
            yield "numpy", "gpuopt", name, (lambda v=v: o.call(*args, variant=v)), sync, none, legacy
    if torch is None:
        notes.append("torch with CUDA is not importable: no PyTorch rows")
        return
    if o.torch_call is None:
        return
    tsync = torch.cuda.synchronize
    yield "device", "pytorch", "pytorch", (lambda: o.torch_call(torch, *tens)), tsync, none, current
    yield "torch", "pytorch", "pytorch", (lambda: o.torch_call(torch, *tens)), tsync, none, current
    yield "torch side stream", "pytorch", "pytorch", (lambda: o.torch_call(torch, *tens)), tsync, side, current
    yield "numpy", "pytorch", "pytorch", \
        (lambda: o.torch_call(torch, *_convert(args, lambda a: torch.from_numpy(a).cuda())).cpu().numpy()), tsync, \
        none, current


def run_overhead(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    calls, batches = plan.pick(OVERHEAD_REPEATS)
    rng = np.random.default_rng(plan.seed)
    res.meta.update(calls=calls, batches=batches,
                    us_per_call="host wall time of `calls` back-to-back calls then one synchronise, divided by "
                                "`calls`; median (min, max) over `batches`")
    res.meta.update(event_us="CUDA events on the calls' stream around the same batches, divided by `calls`: the "
                             "device timeline (equal to the wall time where the host is the bottleneck)",
                    kernel_us="gpuopt on device arrays: one call's device time with its enqueue hidden behind a spin "
                              "kernel (gpuopt.bench.measure; kernel_hidden false where the call waits for the GPU "
                              "itself, k-means' stop rule: then start to return)",
                    over_kernel_us=f"us_per_call - kernel_us of the same op and variant (line: <= "
                                   f"{OVER_KERNEL_LIMIT_US:g} µs on device arrays)",
                    over_device_us=f"us_per_call - the device row's, same op, variant and implementation (line for "
                                   f"torch tensors: <= {OVER_DEVICE_LIMIT_US:g} µs)")
    cases = [(o, case) for o in OVERHEAD_OPS if o.callers == OVERHEAD_CALLERS or plan.gpu
             for case in _cases(o, o.make(rng), plan, res.notes)]
    kernels: dict[tuple[str, str, str], tuple[float, bool]] = {}
    device_us: dict[tuple[str, str, str, str], float] = {}
    with Progress(len(cases), "overhead", enabled=plan.progress) as prog:
        for o, (caller, impl, variant, fn, sync, around, stream) in cases:
            op, problem = o.op, o.problem
            row: dict[str, Any] = dict(op=op, problem=problem, caller=caller, impl=impl, variant=variant,
                                       calls=calls, batches=batches)
            if o.line_us is not None and caller == "device" and impl == "gpuopt":
                row["line_us"] = o.line_us
            try:
                us, ev = _per_call_us(fn, sync, calls, batches, around, stream)
                row.update(us_per_call=float(np.median(us)), us_min=min(us), us_max=max(us))
                if ev:
                    row["event_us"] = float(np.median(ev))
                if plan.gpu and impl == "gpuopt" and caller == "device":
                    kernels[(op, problem, variant)] = _kernel_us(fn, plan)
                if caller == "device":
                    device_us[(op, problem, variant, impl)] = row["us_per_call"]
                if (op, problem, variant) in kernels and impl == "gpuopt":
                    k, hidden = kernels[(op, problem, variant)]
                    row.update(kernel_us=k, kernel_hidden=hidden, over_kernel_us=row["us_per_call"] - k)
                if (op, problem, variant, impl) in device_us and caller != "device":
                    row["over_device_us"] = row["us_per_call"] - device_us[(op, problem, variant, impl)]
            except Exception as exc:  # noqa: BLE001
                row["error"] = error_text(exc)
            res.rows.append(row)
            prog.update(f"{op} {caller} {variant}")
    return res


def table_overhead(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """Per op and caller: µs per call of each implementation, its events and kernel, PyTorch's over gpuopt's; then
    the performance lines (wall - kernel on device arrays, torch tensors against device arrays)."""
    torch_us = {(r["op"], r.get("problem"), r["caller"]): r.get("us_per_call") for r in rows if r["impl"] == "pytorch"}
    body = []
    for r in rows:
        ref = torch_us.get((r["op"], r.get("problem"), r["caller"]))
        ratio = ref / r["us_per_call"] if ref and r.get("us_per_call") and r["impl"] != "pytorch" else None
        kernel = fmt_cell(r.get("kernel_us"), ".3g") + ("*" if r.get("kernel_hidden") in (False, "False", "false") else "")
        body.append([r["op"], r["caller"], r["impl"], r["variant"], fmt_cell(r.get("us_per_call"), ".3g"),
                     fmt_cell(r.get("us_min"), ".3g"), fmt_cell(r.get("us_max"), ".3g"),
                     fmt_cell(r.get("event_us"), ".3g"), kernel, fmt_cell(r.get("over_kernel_us"), ".2g"),
                     fmt_cell(r.get("over_device_us"), ".2g"), fmt_cell(ratio, ".2f")])
    text = ("host wall time per call (µs); events: CUDA events around the same calls; kernel: one call's device time, "
            "its enqueue hidden (* the call waits for the GPU: start to return); - kernel: µs/call minus the kernel; "
            "- device: minus the same call on device arrays; 'x PyTorch' = PyTorch's time over this one, same caller, "
            "same run\n"
            + format_table(["op", "caller", "impl", "variant", "µs/call", "min", "max", "events", "kernel", "- kernel",
                            "- device", "x PyTorch"], body)
            + errors_note(rows))
    lines = _lines(rows)
    return text + ("\n" + "\n".join(lines) if lines else "")


def _lines(rows: list[dict[str, Any]]) -> list[str]:
    """The per-call performance lines, judged row by row (gpuopt's defaults and best variants)."""
    out = []
    for r in rows:
        if r.get("line_us") not in (None, "") and r.get("us_per_call") is not None:
            line, us = float(r["line_us"]), float(r["us_per_call"])
            out.append(f"{r['op']} {r['problem']}, device arrays in a loop <= {line:g} µs a call: {us:.1f} µs "
                       f"({'met' if us <= line else 'missed'})")
    over = [r for r in rows if r["impl"] == "gpuopt" and r["caller"] == "device" and r.get("over_kernel_us") is not None]
    if over:
        bad = [f"{r['op']} {r['variant']} +{r['over_kernel_us']:.1f}" for r in over
               if r["over_kernel_us"] > OVER_KERNEL_LIMIT_US]
        out.append(f"device arrays, wall <= kernel + {OVER_KERNEL_LIMIT_US:g} µs: {len(over) - len(bad)} of "
                   f"{len(over)} rows" + (f"; over: {', '.join(bad)}" if bad else ""))
    tens = [r for r in rows if r["impl"] == "gpuopt" and r["caller"].startswith("torch")
            and r.get("over_device_us") is not None]
    if tens:
        bad = [f"{r['op']} {r['variant']} ({r['caller']}) +{r['over_device_us']:.1f}" for r in tens
               if r["over_device_us"] > OVER_DEVICE_LIMIT_US]
        out.append(f"torch tensors, wall <= device arrays + {OVER_DEVICE_LIMIT_US:g} µs: {len(tens) - len(bad)} of "
                   f"{len(tens)} rows" + (f"; over: {', '.join(bad)}" if bad else ""))
    return out


def plot_overhead(meta, rows, path: Path) -> Path:
    """µs per call by op and caller: a bar per implementation (PyTorch beside gpuopt's variants)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(20, 6))
    good = [r for r in rows if r.get("us_per_call")]
    if not good:
        empty_axes(ax, "no successful measurements")
        return finish_axes(fig, ax, meta, "Cost of one call", path)
    problems_of: dict[str, set] = {}
    for r in good:
        problems_of.setdefault(r["op"], set()).add(r.get("problem"))

    def group(r: dict[str, Any]) -> str:  # an op timed on several problems: each named (before its ':' or ',')
        p = str(r.get("problem"))
        short = p.split(":")[0] if ":" in p else p.split(",")[0]
        return f"{r['op'] if len(problems_of[r['op']]) == 1 else r['op'] + ' ' + short}\n{r['caller']}"

    groups = list(dict.fromkeys(group(r) for r in good))
    series = list(dict.fromkeys(r["variant"] for r in good))
    by = {(group(r), r["variant"]): r["us_per_call"] for r in good}
    values = grouped_bars(ax, groups, series, lambda g, s: by.get((g, s)), lambda g, s: f"{by[(g, s)]:.0f}",
                          compact=True)
    headroom(ax, values)
    ax.set_xlabel("op and how it is called (device: gpuopt device arrays; torch: CUDA tensors, on PyTorch's "
                  "default or a side stream; numpy: NumPy in and out)")
    ax.set_ylabel("host wall time per call (µs, median)")
    problems = "; ".join(f"{o.op} {o.problem}" for o in OVERHEAD_OPS[:2])
    return finish_axes(fig, ax, meta, f"Cost of one call on a small problem of every family ({problems}, ...): "
                       "gpuopt vs PyTorch, host µs per call", path, legend=dict(title="implementation / variant", title_fontsize=8))


def _variants() -> tuple[str, ...]:
    return tuple(v for o in OVERHEAD_OPS for v in o.variants if v)


STUDY = Study("overhead", "matmul", "The cost of one call",
              "per-call host time of every op family on small problems from device arrays, PyTorch tensors (default "
              "and side stream) and NumPy, beside PyTorch", _variants, OVERHEAD_COLUMNS, run_overhead, table_overhead,
              figures=plot_overhead,
              outputs=(Output("overhead.png", variants=("async",), ops=(("conv2d", ("implicit_gemm",)),)),))
