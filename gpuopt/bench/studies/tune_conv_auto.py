"""tune_conv_auto (opt-in, GPU only): the sweep behind conv2d ``auto``'s heuristic
(gpuopt/conv/auto.py). gpuopt's candidate kernels and their parameters against cuDNN
(strict FP32, its algorithm named) on the eight layers auto is held to: CS6235 conf1-4 and
the ECE408 Fashion-MNIST and MNIST layers at 10,000 images. L2 flushed before every run;
median of up to 15 event-timed runs -> tune_conv_auto.csv/.json and tune_conv_auto.log (per
layer the six fastest and where auto's pick ranks; the printed table).

Not in the default set: ``python benchmarks/run_all.py tune_conv_auto``. Without a GPU the
command line skips it with a note. ``GPUOPT_TUNE_LAYERS=conf3,mnist_conv1`` runs those
layers only (default: all of :data:`LAYERS`). ``--quick`` changes nothing here.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

import gpuopt

from ..baselines import cudnn_algorithm
from ..conv_points import REPORT_LAYERS
from ..harness import Progress, measure
from ..results import format_metadata
from ..study import (Output, RunSettings, Study, StudyResult, entry_label, error_text, finite_number, per_level,
                     release_gpu_cache, repeats)
from ..tables import extras_file

__all__ = ["STUDY", "LAYERS", "LAYERS_ENV", "candidates"]

#: name: (x shape, w shape, stride): the reports' eight layers (conv_points.REPORT_LAYERS).
LAYERS = REPORT_LAYERS
#: The environment variable naming the layers to run (comma-separated; default: all).
LAYERS_ENV = "GPUOPT_TUNE_LAYERS"
#: The variants of :func:`candidates`.
TUNE_VARIANTS = ("cudnn", "unroll", "unroll_nk", "general", "tiled_unrolled", "implicit_gemm", "implicit_gemm_fast",
                 "direct_regblock")
#: measure() keywords (GPU only; quick = full; tiny: the tests).
TUNE_REPEATS: dict[Any, dict[str, Any]] = per_level(gpu_full=repeats(3, 15, 0.5, flush_l2=True),
    gpu_quick=repeats(3, 15, 0.5, flush_l2=True), tiny=repeats(0, 2, 0.05, flush_l2=True))
#: Fastest candidates listed per layer.
TOP = 6
TUNE_COLUMNS = ("layer", "N", "C", "H", "W", "K", "R", "S", "stride", "label", "variant", "params", "device",
                "median_ms", "min_ms", "max_ms", "mean_ms", "std_ms", "repeats", "speedup_vs_cudnn", "rank",
                "auto_pick", "algorithm", "spin_us", "overhead_hidden", "flush_l2", "skipped", "error")


def candidates() -> list[tuple[str, dict[str, Any]]]:
    """(variant, params) of every candidate, in the order measured: cuDNN, then auto's kernels
    at the parameter values worth telling apart."""
    table = gpuopt.variants("conv2d")
    out = [("cudnn", {}), ("unroll", {}), ("unroll_nk", {}), ("general", {}), ("tiled_unrolled", {}),
           ("implicit_gemm", {"tile": 16}), ("implicit_gemm", {"tile": 32})]
    out += [("implicit_gemm_fast", {"tile": t}) for t in table["implicit_gemm_fast"].params["tile"].allowed]
    out += [("direct_regblock", {})]  # its defaults ("auto"), what auto runs
    out += [("direct_regblock", {"k_tile": k, "pixels": p}) for k in (8, 16) for p in (1, 2, 4)]
    return out


def _layer_names() -> list[str]:
    """The layers to run: ``$GPUOPT_TUNE_LAYERS`` (checked), else all."""
    names = [n.strip() for n in os.environ.get(LAYERS_ENV, "").split(",") if n.strip()] or list(LAYERS)
    unknown = [n for n in names if n not in LAYERS]
    if unknown:
        raise ValueError(f"{LAYERS_ENV}: unknown layer(s) {', '.join(unknown)}; the layers: {', '.join(LAYERS)}")
    return names


def _resolved_label(variant: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The candidate's label with every parameter resolved (defaults filled in), and those parameters."""
    v = gpuopt.variants("conv2d")[variant]  # the variants this study compares (not the registry's internals)
    full = {**v.defaults(), **{k: v.params[k].check(value, f"conv2d/{variant}") for k, value in params.items()}}
    return entry_label(variant, full), full


def run_tune_conv_auto(plan: RunSettings) -> StudyResult:
    if not plan.gpu:
        raise RuntimeError("tune_conv_auto needs a GPU (it times GPU kernels only)")
    res = StudyResult()
    reps = plan.pick(TUNE_REPEATS)
    names = _layer_names()
    cands = candidates()
    rng = np.random.default_rng(0)  # the same inputs in every run
    res.meta.update(layers={}, layers_env=LAYERS_ENV, candidates=[entry_label(v, p) for v, p in cands],
                    inputs="uniform [-1, 1) float32 (seed 0), NCHW / KCRS, no padding, device-resident",
                    timing=f"measure(): {reps}", auto="gpuopt.conv.auto_choice(x shape, w shape, stride)")
    with Progress(len(names) * len(cands), "tune_conv_auto", enabled=plan.progress) as prog:
        for name in names:
            xs, ws, stride = LAYERS[name]
            dx = gpuopt.to_device(rng.uniform(-1, 1, xs).astype(np.float32))
            dw = gpuopt.to_device(rng.uniform(-1, 1, ws).astype(np.float32))
            shape = dict(zip("NCHW", xs), K=ws[0], R=ws[2], S=ws[3], stride=stride)
            rows = []
            for variant, params in cands:
                row: dict[str, Any] = {"layer": name, **shape, "label": entry_label(variant, params),
                                       "variant": variant, "params": dict(params), "device": "gpu",
                                       "flush_l2": bool(reps.get("flush_l2"))}
                try:
                    row["label"], row["params"] = _resolved_label(variant, params)
                    fn = lambda x=dx, w=dw, v=variant, p=row["params"]: gpuopt.conv2d(  # noqa: E731
                        x, w, stride=stride, variant=v, **p)
                    st = measure(fn, device="gpu", **reps)
                    row.update(st.row(), spin_us=st.spin_us, overhead_hidden=st.overhead_hidden)
                except ValueError as exc:  # the variant rejects the shape (or is not in this build)
                    row["skipped"] = error_text(exc)
                except Exception as exc:  # noqa: BLE001 - recorded, the study goes on
                    row["error"] = error_text(exc)
                    res.notes.append(f"tune_conv_auto {name} {row['label']}: {row['error']}")
                if variant == "cudnn":
                    row["algorithm"] = cudnn_algorithm(xs, ws, stride, 0)
                rows.append(row)
                prog.update(f"{name} {row['label']}")
            pick = _resolved_label(*gpuopt.conv.auto_choice(xs, ws, stride))[0]
            _rank(rows, pick)
            res.meta["layers"][name] = {
                "x": xs, "w": ws, "stride": stride, "auto_pick": pick,
                "cudnn_algorithm": next((r.get("algorithm") for r in rows if r["variant"] == "cudnn"), None),
                "median_ms": {r["label"]: r.get("median_ms") if r.get("median_ms") is not None
                              else f"rejected: {r.get('skipped') or r.get('error')}"[:120] for r in rows}}
            res.rows.extend(rows)
            del dx, dw
            release_gpu_cache(plan)
    return res


def _rank(rows: Sequence[dict[str, Any]], pick: str) -> None:
    """Rank the measured rows of one layer (1 = fastest), their speed-up over cuDNN, auto's pick."""
    cudnn = next((finite_number(r.get("median_ms")) for r in rows if r["variant"] == "cudnn"), None)
    ranked = sorted((r["median_ms"], r["label"]) for r in rows if finite_number(r.get("median_ms")))
    rank = {label: i + 1 for i, (_, label) in enumerate(ranked)}
    for r in rows:
        r["auto_pick"] = r["label"] == pick
        if r["label"] in rank:
            r["rank"] = rank[r["label"]]
            if cudnn:
                r["speedup_vs_cudnn"] = cudnn / r["median_ms"]


def table_tune_conv_auto(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """Per layer: cuDNN's time and algorithm, auto's pick and its rank, the six fastest."""
    layers = (meta or {}).get("layers") or {}
    lines = []
    for name in dict.fromkeys(r["layer"] for r in rows):
        lr = [r for r in rows if r["layer"] == name]
        cudnn = next((r for r in lr if r["variant"] == "cudnn"), {})
        t_cudnn = finite_number(cudnn.get("median_ms"))
        pick = (layers.get(name) or {}).get("auto_pick")
        picked = next((r for r in lr if r["label"] == pick), None)
        pick_ms = None if picked is None else picked.get("median_ms") if picked.get("median_ms") is not None \
            else f"rejected: {picked.get('skipped') or picked.get('error')}"[:120]
        lines.append(f"{name}: cuDNN " + (f"{t_cudnn:.4f}" if t_cudnn else "-") + f" ms ({cudnn.get('algorithm')}); "
                     f"auto picks {pick}: {pick_ms} ms, rank {picked.get('rank', '-') if picked else '-'}")
        for r in sorted((r for r in lr if r.get("rank")), key=lambda r: r["rank"])[:TOP]:
            lines.append(f"   {r['label']:<45} {r['median_ms']:.4f} ms   x cuDNN "
                         + (f"{r['speedup_vs_cudnn']:.2f}" if r.get("speedup_vs_cudnn") else "-"))
    return "\n".join(lines)


def tune_log(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """The run line and the table, as the sweep's log."""
    return format_metadata(meta) + "\n" + table_tune_conv_auto(list(rows), meta) + "\n"


STUDY = Study("tune_conv_auto", "conv2d", "conv2d auto: every candidate kernel and parameter vs cuDNN",
              "every candidate of conv2d auto at its parameter values vs cuDNN strict FP32 on CS6235 conf1-4 and the "
              f"ECE408 Fashion-MNIST / MNIST layers at 10000 images ({LAYERS_ENV}=name,... for some): the six "
              "fastest per layer and the rank of auto's pick -> tune_conv_auto.log",
              TUNE_VARIANTS, TUNE_COLUMNS, run_tune_conv_auto, table_tune_conv_auto,
              extras_file("tune_conv_auto.log", tune_log), outputs=(Output("tune_conv_auto.log"),),
              opt_in=True, gpu_only=True)
