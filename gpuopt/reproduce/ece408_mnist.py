"""ECE408 Fall 2016 (the MNIST CNN end to end, Tesla K80) judged: its stages' per-layer tables (Tables 2-5), what
its text says of each step, and its final network, checked on the ``networks`` study's rows. Compared by ranking
and ratio (a K80 against the H200)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .claims import Check, Claim, Rows, judge, quoting
from .finding import Finding, missing
from .networks import faster_than_pytorch, network_measured, network_rows

__all__ = ["TABLE_CLAIMS", "NETWORK_CLAIMS", "tables", "network"]

SEED = "ece408-mnist-cnn-report.txt"
_STAGES = ("serial", "basic", "optimized", "hybrid")


def _layers(rows: Rows) -> list[Mapping[str, Any]]:
    return [r for r in rows if r.get("kind") == "layer" and r.get("network") == "mnist" and r.get("report_ms")]


def _totals(rows: Rows) -> dict[str, tuple[float, float]]:
    """Per stage: (the report's per-layer total in ms, the H200's), over the layers the report timed."""
    layer = _layers(rows)
    return {s: (sum(r["report_ms"] for r in layer if r["stage"] == s),
                sum(r.get("kernel_ms") or 0.0 for r in layer if r["stage"] == s)) for s in _STAGES}


def _step(before: str, after: str) -> Callable[[Rows], Check | None]:
    def check(rows: Rows) -> Check | None:
        t = _totals(rows)
        if not t[before][1] or not t[after][1]:
            return None
        return Check(t[after][1] < t[before][1], f"per-layer total {after} {t[before][1] / t[after][1]:.2f}x "
                                                 f"{before} (K80: {t[before][0] / t[after][0]:.2f}x)")
    return check


def _conv_step(rows: Rows) -> Check | None:
    conv = {s: sum(r.get("kernel_ms") or 0.0 for r in _layers(rows) if r["stage"] == s and r.get("op") == "conv2d")
            for s in ("basic", "optimized")}
    if not all(conv.values()):
        return None
    return Check(conv["optimized"] < conv["basic"], f"convolutions {conv['basic']:.3g} -> {conv['optimized']:.3g} ms")


def _conv2_dominates(rows: Rows) -> Check | None:
    opt = [r for r in _layers(rows) if r["stage"] == "optimized"]
    total = sum(r.get("kernel_ms") or 0.0 for r in opt)
    conv2 = sum(r.get("kernel_ms") or 0.0 for r in opt if r.get("layer") == "Convolution Forward Valid (2)")
    if not total or not conv2:
        return None
    return Check(conv2 > 0.5 * total, f"the second convolution {100 * conv2 / total:.1f}% of the optimized stage")


_c = quoting(SEED)


TABLE_CLAIMS = (
    _c("the basic GPU stage faster than serial", _step("serial", "basic"),
       "Convolution Forward Valid (2) 78.431 s", 79),
    _c("the tiled convolutions (optimized stage) faster than basic's", _conv_step,
       "The tiled convolution reduced the program runtime from ~8 seconds to ~2.5 seconds.", 107),
    _c("the optimized stage faster than basic", _step("basic", "optimized"),
       "Convolution Forward Valid (2) 2.002 s", 120),
    _c("the second convolution most of the optimized stage's time (89.7% there)", _conv2_dominates,
       "89.7% of the computations being performed were from the second convolution layer", 128),
    _c("the hybrid stage (unrolled convolution reduction) faster than optimized", _step("optimized", "hybrid"),
       "This method has reduced our runtime by about 600ms.", 134),
)


def tables(meta: Mapping[str, Any], rows: Rows) -> Finding:
    tot = _totals(rows)
    if not any(ours for _, ours in tot.values()):
        return missing("networks mnist layer rows")
    j = judge(TABLE_CLAIMS, rows)
    return Finding(
        printed="Tables 2-5's per-layer times (K80; l.56-164), summed here over the layers timed: "
                + ", ".join(f"{s} {tot[s][0] / 1e3:.4g} s" for s in _STAGES),
        measured="H200: " + ", ".join(f"{s} {tot[s][1]:.4g} ms" for s in _STAGES),
        ratio="the K80's per-layer total over the H200's: "
              + ", ".join(f"{s} {tot[s][0] / tot[s][1]:.0f}x" for s in _STAGES if tot[s][1]),
        verdict=j.verdict, claimed=j.claimed)


def _hybrid_fastest(rows: Rows) -> Check | None:
    net = network_rows(rows, "mnist")
    t = {s: (net.get(s) or {}).get("numpy_ms") for s in _STAGES}
    if any(x is None for x in t.values()):
        return None
    best = min(t, key=t.get)
    return Check(best == "hybrid", f"fastest whole run of the report's stages: {best} {t[best]:.4g} ms "
                                   f"(hybrid {t['hybrid']:.4g})")


def _accuracy(rows: Rows) -> Check | None:
    fast = network_rows(rows, "mnist").get("fast")
    if not fast or fast.get("accuracy") is None or fast.get("images") != 10000:
        return None
    return Check(abs(fast["accuracy"] - 0.8722) < 5e-5, f"accuracy {fast['accuracy']} on 10,000 images")


NETWORK_CLAIMS = (
    _c("its final (hybrid) version the fastest of its stages (1.13 s on the K80)", _hybrid_fastest,
       "The final version of our project gave us an approximate runtime of 1.13 seconds.", 144),
    Claim("the whole network on the GPU faster than PyTorch FP32 in the same run", faster_than_pytorch("mnist")),
    Claim("accuracy 0.8722 on the 10,000 t10k images (the trained model's, ../shared/data/README.md l.17; the report "
          "printed none)", _accuracy),
)


def network(meta: Mapping[str, Any], rows: Rows) -> Finding:
    got = network_measured(rows, "mnist")
    if got is None:
        return missing("networks mnist rows")
    j = judge(NETWORK_CLAIMS, rows, "on the H200 the hybrid stage's extra unrolling pass costs what its GEMM saves "
                                    "on a whole run, NumPy in and out")
    return Finding("the final (hybrid) version: about 1.13 s on a Tesla K80 (l.144; its Table 5 rows add up to "
                   "1.52 s); no accuracy", got[0], got[1], j.verdict, j.claimed)
