"""overhead: what one call costs a user, beside the kernel -> overhead.csv/.json/.png.

The cost of a cheap call: on small problems the kernel runs for microseconds, and the Python around it is what a
user sees. For conv2d (1x1x8x8 by a 3x3 filter) and matmul (16x16), each called the way users call it --
gpuopt's own device arrays, PyTorch CUDA tensors handed over by ``__cuda_array_interface__``, and NumPy arrays
in and out -- this measures the host wall time per call (``calls`` back-to-back calls, then one synchronise,
divided by ``calls``; the median of ``batches``), beside the same computation in PyTorch on the same inputs. gpuopt's
rows are its default (``variant=None``: on these tiny problems its own kernel, not the library's, whose host time
per call is most of the cost) and its best own kernel, each on every caller; repeated calls run through gpuopt's
plan cache (gpuopt._plan), as a user's loop would.
Without a GPU only the NumPy path of the CPU references runs (and says so). TF32 is off for PyTorch.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

import gpuopt

from ..baselines import strict_torch
from ..figures import empty_axes, finish_axes, grouped_bars, headroom, pyplot
from ..harness import Progress
from ..study import Output, RunSettings, Study, StudyResult, error_text, per_level
from ..tables import errors_note, fmt_cell, format_table

__all__ = ["STUDY"]

OVERHEAD_COLUMNS = ("op", "problem", "caller", "impl", "variant", "us_per_call", "us_min", "us_max", "calls",
                    "batches", "error")
#: (op, problem label, gpuopt variants timed: the default and one of gpuopt's own kernels)
OVERHEAD_OPS = (("conv2d", "x 1x1x8x8, w 1x1x3x3", (None, "implicit_gemm")),
                ("matmul", "16x16 @ 16x16", (None, "async")))
OVERHEAD_CALLERS = ("device", "torch", "numpy")
# Calls per batch and batches per plan.
OVERHEAD_REPEATS: dict[Any, tuple[int, int]] = per_level(gpu_full=(3000, 7), gpu_quick=(1000, 3), cpu_full=(1000, 5),
    cpu_quick=(300, 3), tiny=(20, 2))


def _per_call_us(fn: Callable[[], Any], sync: Callable[[], None], calls: int, batches: int) -> list[float]:
    fn()
    sync()
    out = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return out


def _inputs(op: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if op == "conv2d":
        return rng.random((1, 1, 8, 8), dtype=np.float32), rng.random((1, 1, 3, 3), dtype=np.float32)
    return rng.random((16, 16), dtype=np.float32), rng.random((16, 16), dtype=np.float32)


def _torch():
    """PyTorch as the baselines run it (strict FP32), without cuDNN's benchmark mode (the study's calls are tiny)."""
    return strict_torch(benchmark=False)


def _default(op: str, a: np.ndarray, b: np.ndarray) -> str:
    """The variant ``variant=None`` runs for these inputs (the op's shape-aware default)."""
    if op == "conv2d":
        from ...conv.api import default_for
        from ...conv.problem import validate

        return default_for(validate(a, b, 1, 0, None, None))
    from ...matmul import default_for as matmul_default

    return matmul_default(a.shape, b.shape)


def _cases(op: str, a: np.ndarray, b: np.ndarray, plan: RunSettings, notes: list[str]):
    """(caller, impl, variant, fn, sync) for every way this op is timed here."""
    fn = getattr(gpuopt, op)
    if not plan.gpu:
        notes.append(f"{op}: no GPU here, only the CPU reference from NumPy is timed")
        yield "numpy", "gpuopt", "cpu", (lambda: fn(a, b, variant="cpu")), (lambda: None)
        return
    sync = gpuopt.synchronize
    da, db = gpuopt.to_device(a), gpuopt.to_device(b)
    torch = _torch()
    ta = tb = None
    if torch is not None:
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    for _, _, variants in [o for o in OVERHEAD_OPS if o[0] == op]:
        for v in variants:
            name = v or f"default ({_default(op, a, b)})"
            yield "device", "gpuopt", name, (lambda v=v: fn(da, db, variant=v)), sync
            if torch is not None:
                yield "torch", "gpuopt", name, (lambda v=v: fn(ta, tb, variant=v)), sync
            yield "numpy", "gpuopt", name, (lambda v=v: fn(a, b, variant=v)), sync
    if torch is None:
        notes.append("torch with CUDA is not importable: no PyTorch rows")
        return
    F = torch.nn.functional
    call = (lambda x, y: F.conv2d(x, y)) if op == "conv2d" else (lambda x, y: x @ y)
    tsync = torch.cuda.synchronize
    yield "device", "pytorch", "pytorch", (lambda: call(ta, tb)), tsync
    yield "torch", "pytorch", "pytorch", (lambda: call(ta, tb)), tsync
    yield "numpy", "pytorch", "pytorch", \
        (lambda: call(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()).cpu().numpy()), tsync


def run_overhead(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    calls, batches = plan.pick(OVERHEAD_REPEATS)
    rng = np.random.default_rng(plan.seed)
    res.meta.update(calls=calls, batches=batches,
                    us_per_call="host wall time of `calls` back-to-back calls then one synchronise, divided by "
                                "`calls`; median (min, max) over `batches`")
    work = [(op, problem, *_inputs(op, rng)) for op, problem, _ in OVERHEAD_OPS]
    cases = [(op, problem, case) for op, problem, a, b in work for case in _cases(op, a, b, plan, res.notes)]
    with Progress(len(cases), "overhead", enabled=plan.progress) as prog:
        for op, problem, (caller, impl, variant, fn, sync) in cases:
            row: dict[str, Any] = dict(op=op, problem=problem, caller=caller, impl=impl, variant=variant,
                                       calls=calls, batches=batches)
            try:
                us = _per_call_us(fn, sync, calls, batches)
                row.update(us_per_call=float(np.median(us)), us_min=min(us), us_max=max(us))
            except Exception as exc:  # noqa: BLE001
                row["error"] = error_text(exc)
            res.rows.append(row)
            prog.update(f"{op} {caller} {variant}")
    return res


def table_overhead(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """Per op and caller: µs per call of each implementation, and PyTorch's over gpuopt's."""
    torch_us = {(r["op"], r["caller"]): r.get("us_per_call") for r in rows if r["impl"] == "pytorch"}
    body = []
    for r in rows:
        ref = torch_us.get((r["op"], r["caller"]))
        ratio = ref / r["us_per_call"] if ref and r.get("us_per_call") and r["impl"] != "pytorch" else None
        body.append([r["op"], r["caller"], r["impl"], r["variant"], fmt_cell(r.get("us_per_call"), ".3g"),
                     fmt_cell(r.get("us_min"), ".3g"), fmt_cell(r.get("us_max"), ".3g"), fmt_cell(ratio, ".2f")])
    return ("host wall time per call (µs); 'x PyTorch' = PyTorch's time over this one, same caller, same run\n"
            + format_table(["op", "caller", "impl", "variant", "µs/call", "min", "max", "x PyTorch"], body)
            + errors_note(rows))


def plot_overhead(meta, rows, path: Path) -> Path:
    """µs per call by op and caller: a bar per implementation (PyTorch beside gpuopt's variants)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 5.5))
    good = [r for r in rows if r.get("us_per_call")]
    if not good:
        empty_axes(ax, "no successful measurements")
        return finish_axes(fig, ax, meta, "Cost of one call", path)
    groups = list(dict.fromkeys(f"{r['op']}\n{r['caller']}" for r in good))
    series = list(dict.fromkeys(r["variant"] for r in good))
    by = {(f"{r['op']}\n{r['caller']}", r["variant"]): r["us_per_call"] for r in good}
    values = grouped_bars(ax, groups, series, lambda g, s: by.get((g, s)), lambda g, s: f"{by[(g, s)]:.0f}",
                          compact=True)
    headroom(ax, values)
    ax.set_xlabel("op and how it is called (device: gpuopt device arrays; torch: CUDA tensors; numpy: NumPy in "
                  "and out)")
    ax.set_ylabel("host wall time per call (µs, median)")
    problems = "; ".join(f"{op} {problem}" for op, problem, _ in OVERHEAD_OPS)
    return finish_axes(fig, ax, meta, f"Cost of one call on a tiny problem ({problems}): gpuopt vs PyTorch, "
                       "host µs per call", path, legend=dict(title="implementation / variant", title_fontsize=8))


def _variants() -> tuple[str, ...]:
    return tuple(v for _, _, vs in OVERHEAD_OPS for v in vs if v)


STUDY = Study("overhead", "matmul", "The cost of one call",
              "per-call host time of conv2d and matmul on tiny problems from device arrays, PyTorch tensors and "
              "NumPy, beside PyTorch", _variants, OVERHEAD_COLUMNS, run_overhead, table_overhead,
              figures=plot_overhead,
              outputs=(Output("overhead.png", variants=("async",), ops=(("conv2d", ("implicit_gemm",)),)),))
