"""ECE408 Spring 2018 (Fashion-MNIST convolution) judged: what its text says of each optimisation step, its
TILE_WIDTH sweep and its forward, checked on the ``ece408`` and ``networks`` studies' rows. Its GPU is unnamed
(P100-class): steps are compared by ranking and ratio, not time."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from .claims import Check, Claim, Rows, judge, quoting
from .finding import Finding, g, missing
from .networks import faster_than_pytorch, network_measured

__all__ = ["OP_TIME_CLAIMS", "TILE_WIDTH_CLAIMS", "NETWORK_CLAIMS", "op_time", "tile_width", "network"]

SEED = "ece408-fashion-mnist-conv-report.txt"
_LAYERS = ("conv1", "conv2")
_STEPS = ("basic", "unroll", "unroll_constmem", "tiled", "tiled_unrolled", "tiled_channels", "tiled_corner_turn")


def _op(rows: Rows, layer: str, variant: str, b: int = 10000) -> float | None:
    for r in rows:
        if r.get("part") == "op_time" and r.get("layer") == layer and r.get("variant") == variant and \
                r.get("label") == variant and r.get("B") == b and r.get("median_ms"):
            return float(r["median_ms"])
    return None


def _fastest_of(layer: str, among: tuple[str, ...], want: str) -> Callable[[Rows], Check | None]:
    def check(rows: Rows) -> Check | None:
        t = {v: _op(rows, layer, v) for v in among}
        if any(x is None for x in t.values()):
            return None
        best = min(t, key=t.get)
        return Check(best == want, f"{layer}: fastest {best} {t[best]:.3g} ms, {want} {t[want]:.3g} ms")
    return check


def _ratio(layer: str, slow: str, fast: str, at_least: float, b: int = 10000) -> Callable[[Rows], Check | None]:
    """Holds where time(slow) / time(fast) >= at_least (at_least < 1: ``fast`` is the slower one)."""
    def check(rows: Rows) -> Check | None:
        a, c = _op(rows, layer, slow, b), _op(rows, layer, fast, b)
        if a is None or c is None:
            return None
        return Check(a / c >= at_least, f"{layer}: {fast} {a / c:.2f}x the speed of {slow} at {b:,} images")
    return check


_c = quoting(SEED)


_TILED_FASTEST = "Thus far, shared memory convolution is our fastest implementation of the forward kernel."
_SLOWDOWN = "The implementation caused a slowdown, which we expected."
_X11 = "restrict and loop unrolling combined gives us speedup of x1.1 on the default data set"

OP_TIME_CLAIMS = (
    *(_c(f"shared memory (tiled) the fastest of the first four kernels on {ly}",
         _fastest_of(ly, ("basic", "unroll", "unroll_constmem", "tiled"), "tiled"), _TILED_FASTEST, 460)
      for ly in _LAYERS),
    *(_c(f"unrolling slower than the basic kernel on {ly}", _ratio(ly, "unroll", "basic", 1.0), _SLOWDOWN, 312)
      for ly in _LAYERS),
    *(_c(f"restrict + loop unrolling about 1.1x tiled on {ly}", _ratio(ly, "tiled", "tiled_unrolled", 1.05), _X11,
         560) for ly in _LAYERS),
    *(_c(f"corner turning (Opt 8) the fastest step on {ly}", _fastest_of(ly, _STEPS, "tiled_corner_turn"),
         "Op Time: 0.107390 Op Time: 0.315025", 660) for ly in _LAYERS),
)


def _line_of(row: Mapping[str, Any]) -> str:
    """The seed line a row's report number was read from (its ``report_source`` ends "(l.N)")."""
    found = re.search(r"\(l\.[0-9-]+\)\s*$", str(row.get("report_source") or ""))
    return found.group(0)[1:-1] if found else ""


def op_time(meta: Mapping[str, Any], rows: Rows) -> Finding:
    at = [r for r in rows if r.get("part") == "op_time" and r.get("B") == 10000 and r.get("median_ms")]
    steps = [r for r in at if r.get("report_ms")]
    if not steps:
        return missing("ece408 op_time rows at 10,000 images")
    layers = sorted({r["layer"] for r in steps})
    best_report = {ly: min((r for r in steps if r["layer"] == ly), key=lambda r: r["report_ms"]) for ly in layers}
    best_ours = {ly: min((r for r in steps if r["layer"] == ly), key=lambda r: r["median_ms"]) for ly in layers}
    auto = {r["layer"]: r["median_ms"] for r in at if r.get("variant") == "auto"}
    j = judge(OP_TIME_CLAIMS, rows, "on the H200 the unrolled GEMM form (Opt 1) is fast where the report's GPU made "
                                    "it slow, and the last steps are within a few per cent of each other")
    return Finding(
        printed="; ".join(f"{ly}: fastest '{best_report[ly]['step']}' {best_report[ly]['report_ms']:.4g} ms"
                          + (f" ({_line_of(best_report[ly])})" if _line_of(best_report[ly]) else "") for ly in layers)
                + f" ({steps[0].get('report_gpu', 'the report GPU')})",
        measured="; ".join(f"{ly}: fastest report step '{best_ours[ly]['step']}' {best_ours[ly]['median_ms']:.3g} ms, "
                           f"gpuopt auto {g(auto.get(ly))} ms" for ly in layers),
        ratio="the report's fastest over the H200's fastest report step: "
              + "; ".join(f"{ly} {best_report[ly]['report_ms'] / best_ours[ly]['median_ms']:.0f}x" for ly in layers),
        verdict=j.verdict, claimed=j.claimed)


def _widths(rows: Rows, layer: str, variant: str) -> dict[int, float]:
    return {r["params"]["tile_width"]: float(r["median_ms"]) for r in rows if r.get("part") == "tile_width"
            and r.get("layer") == layer and r.get("variant") == variant and r.get("median_ms")
            and "tile_width" in (r.get("params") or {})}


def _best_width(layer: str, want: int) -> Callable[[Rows], Check | None]:
    def check(rows: Rows) -> Check | None:
        per = {v: _widths(rows, layer, v) for v in ("tiled", "tiled_unrolled")}
        per = {v: s for v, s in per.items() if s}
        if not per:
            return None
        best = {v: min(s, key=s.get) for v, s in per.items()}
        return Check(all(b == want for b in best.values()),
                     f"{layer}: best width " + ", ".join(f"{b} ({v})" for v, b in best.items()))
    return check


def _sweep_range(rows: Rows) -> Check | None:
    got = {(ly, v): sorted(_widths(rows, ly, v)) for ly in _LAYERS for v in ("tiled", "tiled_unrolled")}
    if not any(got.values()):
        return None
    want = list(range(4, 33, 4))
    return Check(all(w == want for w in got.values()), f"widths {want[0]}..{want[-1]} by 4 on "
                 f"{sum(1 for w in got.values() if w == want)} of {len(got)} (layer, kernel) pairs")


TILE_WIDTH_CLAIMS = (
    _c("the sweep: TILE_WIDTH 4 to 32 in steps of 4", _sweep_range,
       "We swept **TILE_WIDTH** from 4 to 32 in increments of 4", 716),
    _c("layer 1 fastest at TILE_WIDTH 16", _best_width("conv1", 16),
       "for Layer 1, the best performance was achieved at a **TILE_WIDTH** of 16", 724),
    _c("layer 2 fastest at TILE_WIDTH 28", _best_width("conv2", 28),
       "A width of 28 provided the best performance as opposed to 16", 724),
)


def tile_width(meta: Mapping[str, Any], rows: Rows) -> Finding:
    if not any(r.get("part") == "tile_width" for r in rows):
        return missing("ece408 tile_width rows")
    best = {}
    for ly in _LAYERS:
        for v in ("tiled", "tiled_unrolled"):
            s = _widths(rows, ly, v)
            if s:
                best[f"{ly} {v}"] = (min(s, key=s.get), s[min(s, key=s.get)])
    j = judge(TILE_WIDTH_CLAIMS, rows, "the H200's best widths differ by kernel and lie within a few per cent of the "
                                       "next ones (its shared memory and occupancy limits are not the report GPU's)")
    return Finding(
        printed="no sweep numbers; its text names the best widths (layer 1: 16, layer 2: 28; l.724)",
        measured="; ".join(f"{k}: best tile_width={w} {t:.3g} ms" for k, (w, t) in best.items()),
        ratio=None, verdict=j.verdict, claimed=j.claimed)


NETWORK_CLAIMS = (Claim("the whole network on the GPU faster than PyTorch FP32 in the same run",
                        faster_than_pytorch("fashion")),)


def network(meta: Mapping[str, Any], rows: Rows) -> Finding:
    got = network_measured(rows, "fashion")
    if got is None:
        return missing("networks fashion rows")
    j = judge(NETWORK_CLAIMS, rows)
    return Finding("no forward time of its network (only /usr/bin/time wall times of whole runs, data loading "
                   "included: l.48, l.74, l.98; the course's trained weights are not public, seeded ones run here)",
                   got[0], got[1], j.verdict, j.claimed)
