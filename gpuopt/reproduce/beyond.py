"""gpuopt's own items, beyond the reports: each judged against gpuopt's stated goals (the README's claims and the
per-call lines of notes/overhead.md), in the same run as the baseline it names (cuBLAS, cuDNN, PyTorch)."""

from __future__ import annotations

from typing import Any, Mapping

from .claims import Check, Claim, Rows, judge
from .finding import Finding, g, missing

__all__ = ["MATMUL_CLAIMS", "CONV_CLAIMS", "OVERHEAD_CLAIMS", "KMEANS_CLAIMS", "LAYERS_CLAIMS", "MAP_CLAIMS",
           "matmul_ladder", "conv_auto", "overhead", "kmeans_loop", "conv_layers", "kmeans_map"]

_IGNORED_KMEANS = ("pytorch", "predict", "stream")


def _at4096(rows: Rows) -> tuple[dict[str, float], float | None]:
    at = {r.get("label"): r["gflops"] for r in rows if r.get("n") == 4096 and r.get("gflops")}
    return at, at.get("cublas")


def _fp32_reaches_cublas(rows: Rows) -> Check | None:
    at, cublas = _at4096(rows)
    fp32 = {k: v for k, v in at.items() if k not in ("cublas", "cublas_tf32") and "tf32" not in str(k)}
    if not cublas or not fp32:
        return None
    best = max(fp32, key=fp32.get)
    return Check(fp32[best] >= 0.9 * cublas, f"{best} {fp32[best] / cublas:.2f}x cuBLAS SGEMM")


def _tf32x3_beats_cublas(rows: Rows) -> Check | None:
    at, cublas = _at4096(rows)
    x3 = {k: v for k, v in at.items() if "tf32x3" in str(k)}
    if not cublas or not x3:
        return None
    best = max(x3, key=x3.get)
    return Check(x3[best] > cublas, f"{best} {x3[best] / cublas:.2f}x cuBLAS SGEMM")


MATMUL_CLAIMS = (Claim("the FP32 (FFMA) ladder within 10% of cuBLAS SGEMM at 4096", _fp32_reaches_cublas),
           Claim("the 3xTF32 GEMM is faster than cuBLAS SGEMM at 4096", _tf32x3_beats_cublas))


def matmul_ladder(meta: Mapping[str, Any], rows: Rows) -> Finding:
    at, cublas = _at4096(rows)
    if not cublas or len(at) < 2:
        return missing("matmul rows at n = 4096")
    best = max((k for k in at if k not in ("cublas", "cublas_tf32")), key=at.get)
    j = judge(MATMUL_CLAIMS, rows)
    return Finding("(beyond the reports)", f"best {best} {at[best] / 1e3:.1f} TFLOP/s, cuBLAS "
                   f"{cublas / 1e3:.1f} TFLOP/s at 4096", f"{at[best] / cublas:.2f}x cuBLAS SGEMM (same run)",
                   j.verdict, j.claimed)


def _auto_vs(key: str, what: str):
    def check(rows: Rows) -> Check | None:
        vs = {r.get("conf"): r.get(key) for r in rows if r.get("variant") == what and r.get(key)}
        if not vs:
            return None
        low = min(vs, key=vs.get)
        return Check(vs[low] >= 1.0,
                     f"lowest {vs[low]:.2f}x ({low}), " + ", ".join(f"{c} {s:.2f}x" for c, s in vs.items()))
    return check


CONV_CLAIMS = (Claim("auto at least cuDNN's precise algorithms on every layer", _auto_vs("speedup_vs_cudnn", "auto")),
         Claim("auto with algorithms='fast' at least cuDNN with any algorithm on every layer",
               _auto_vs("speedup_vs_cudnn_any", "auto-fast")))


def conv_auto(meta: Mapping[str, Any], rows: Rows) -> Finding:
    if not any(r.get("variant") == "auto" and r.get("median_ms") for r in rows):
        return missing("conv2d auto rows")
    j = judge(CONV_CLAIMS, rows)
    vs = {r.get("conf"): r.get("speedup_vs_cudnn") for r in rows if r.get("variant") == "auto"
          and r.get("speedup_vs_cudnn")}
    low = min(vs, key=vs.get) if vs else None
    return Finding("(beyond the reports)",
                   "auto vs cuDNN precise: " + ", ".join(f"{c} {s:.2f}x" for c, s in vs.items()),
                   f"lowest {vs[low]:.2f}x cuDNN precise, same run ({low})" if low else None, j.verdict, j.claimed)


def _line(field: str, limit: float, callers: tuple[str, ...]):
    def check(rows: Rows) -> Check | None:
        mine = [r for r in rows if r.get("impl") == "gpuopt" and r.get(field) is not None
                and r.get("caller") in callers]
        if not mine:
            return None
        bad = [r for r in mine if r[field] > limit]
        worst = max(mine, key=lambda r: r[field])
        return Check(not bad, f"{len(mine) - len(bad)} of {len(mine)} rows within; worst {worst['op']} "
                              f"({worst.get('caller')}) +{worst[field]:.1f} µs")
    return check


def _small(rows: Rows) -> Rows:
    """The rows of the small problems (one a family), without the loop lines' own shapes."""
    lined = {(r.get("op"), r.get("problem")) for r in rows if r.get("line_us") not in (None, "")}
    return [r for r in rows if (r.get("op"), r.get("problem")) not in lined]


def _vs_pytorch(rows: Rows) -> Check | None:
    dev = [r for r in _small(rows) if r.get("caller") == "device" and r.get("us_per_call")]
    mine = {}
    for r in dev:
        if r.get("impl") == "gpuopt":
            mine[r["op"]] = min(mine.get(r["op"], 1e30), r["us_per_call"])
    torch = {r["op"]: r["us_per_call"] for r in dev if r.get("impl") == "pytorch"}
    both = [op for op in mine if op in torch]
    if not both:
        return None
    dearer = [op for op in both if mine[op] > torch[op]]
    return Check(not dearer, f"dearer than PyTorch's: {', '.join(dearer) or 'none'} of {len(both)} ops")


def _loop_lines(rows: Rows) -> Check | None:
    lined = [r for r in rows if r.get("line_us") not in (None, "") and r.get("us_per_call")]
    if not lined:
        return None
    bad = [r for r in lined if float(r["us_per_call"]) > float(r["line_us"])]
    return Check(not bad, "; ".join(f"{str(r['problem']).split(':')[0]} {float(r['us_per_call']):.1f} µs "
                                    f"(line {float(r['line_us']):g})" for r in lined))


OVERHEAD_CLAIMS = (Claim("a device-array call within its kernel + 8 µs", _line("over_kernel_us", 8.0, ("device",))),
             Claim("the NCTU lab layer and one k-means loop at kmeans04 in a loop within their per-call lines",
                   _loop_lines),
             Claim("a torch-tensor call within the device-array call + 2 µs",
                   _line("over_device_us", 2.0, ("torch", "torch side stream"))),
             Claim("no call dearer than PyTorch's own op on device arrays", _vs_pytorch))


def overhead(meta: Mapping[str, Any], rows: Rows) -> Finding:
    dev = [r for r in _small(rows) if r.get("caller") == "device" and r.get("us_per_call")]
    if not dev:
        return missing("overhead rows on device arrays")
    mine = {(r["op"], r["variant"]): r["us_per_call"] for r in dev if r.get("impl") == "gpuopt"}
    torch = {r["op"]: r["us_per_call"] for r in dev if r.get("impl") == "pytorch"}
    best = {op: min(v for (o, _), v in mine.items() if o == op) for op in {o for o, _ in mine}}
    j = judge(OVERHEAD_CLAIMS, rows, "the lines are µs of host time, and the device machines' hosts differ by up "
                                     "to 1.6x (notes/overhead.md)")
    return Finding("(beyond the reports)",
                   "µs per call on device arrays: " + ", ".join(f"{op} gpuopt {best[op]:.3g} / PyTorch "
                                                                 f"{g(torch.get(op))}" for op in sorted(best)),
                   "per-call time over PyTorch's (same run): "
                   + ", ".join(f"{op} {best[op] / torch[op]:.2f}x" for op in sorted(best) if torch.get(op)),
                   j.verdict, j.claimed)


def _loop_parts(rows: Rows) -> list[tuple[str, str, float, float | None]]:
    per = {(r["dataset"], r["variant"]): r.get("us_per_iter") for r in rows}
    parts = []
    for s in dict.fromkeys(r["dataset"] for r in rows):
        best = min((v for (d, v), t in per.items() if d == s and t and v not in _IGNORED_KMEANS),
                   key=lambda v: per[(s, v)], default=None)
        if best:
            parts.append((s, best, per[(s, best)], per.get((s, "pytorch"))))
    return parts


def _beats_pytorch(rows: Rows) -> Check | None:
    parts = [p for p in _loop_parts(rows) if p[3]]
    if not parts:
        return None
    return Check(all(p > t for _, _, t, p in parts), "; ".join(f"{s} {p / t:.1f}x" for s, _, t, p in parts))


def _auto_is_best(rows: Rows) -> Check | None:
    per = {(r["dataset"], r["variant"]): r.get("us_per_iter") for r in rows}
    sets = [s for s in dict.fromkeys(r["dataset"] for r in rows) if per.get((s, "auto"))]
    if not sets:
        return None
    off = []
    for s in sets:
        best = min(t for (d, v), t in per.items() if d == s and t and v not in _IGNORED_KMEANS)
        if per[(s, "auto")] > 1.10 * best:
            off.append(f"{s} {per[(s, 'auto')] / best:.2f}x the best")
    return Check(not off, "auto within 10% of the fastest variant on every set" if not off else ", ".join(off))


KMEANS_CLAIMS = (Claim("the loop on the GPU beats the PyTorch Lloyd loop on every set", _beats_pytorch),
           Claim("auto within 10% of the fastest variant on every set", _auto_is_best))


def kmeans_loop(meta: Mapping[str, Any], rows: Rows) -> Finding:
    parts = _loop_parts(rows)
    if not parts:
        return missing("kmeans_loop rows")
    j = judge(KMEANS_CLAIMS, rows)
    return Finding("(beyond the reports)",
                   "; ".join(f"{s}: {v} {t:.3g} µs/iter, PyTorch {g(p)}" for s, v, t, p in parts),
                   "; ".join(f"{s} {p / t:.1f}x faster than the PyTorch Lloyd loop (same run)"
                             for s, _, t, p in parts if p), j.verdict, j.claimed)


def _ratios(rows: Rows, base: str, mine: str, name) -> dict[str, float]:
    """The baseline's time over gpuopt's (fields ``base`` and ``mine``) per row that has both, keyed by name(row)."""
    return {name(r): r[base] / r[mine] for r in rows if r.get(base) and r.get(mine)}


def _over_torch(rows: Rows, mine: str) -> dict[str, float]:
    """PyTorch's cuDNN ms over ``mine`` (auto_ms, auto_fast_ms) per conv_layers layer, named by network."""
    return _ratios(rows, "torch_ms", mine, lambda r: f"{r.get('network')} {r.get('layer')}")


def _every_one(vs: dict[str, float], what: str) -> Check | None:
    """Whether every ratio (gpuopt over its baseline, by name) is 1x or more; the count, median and lowest."""
    if not vs:
        return None
    below = sorted((v, k) for k, v in vs.items() if v < 1.0)
    return Check(not below, f"{len(vs) - len(below)} of {len(vs)} {what} at 1x or more; median "
                            f"{_median(list(vs.values())):.2f}x" + (f"; lowest {below[0][0]:.2f}x ({below[0][1]})"
                                                                    if below else ""))


def _every_layer(mine: str):
    return lambda rows: _every_one(_over_torch(rows, mine), "layers")


def _median(values: list[float]) -> float:
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


LAYERS_CLAIMS = (Claim("auto (precise) at least PyTorch's cuDNN (benchmark mode, TF32 off) on every layer",
                       _every_layer("auto_ms")),
                 Claim("auto with algorithms='fast' at least PyTorch's cuDNN on every layer",
                       _every_layer("auto_fast_ms")))


def conv_layers(meta: Mapping[str, Any], rows: Rows) -> Finding:
    precise, fast = _over_torch(rows, "auto_ms"), _over_torch(rows, "auto_fast_ms")
    if not precise:
        return missing("conv_layers rows")
    j = judge(LAYERS_CLAIMS, rows)
    return Finding("(beyond the reports)",
                   f"{len(precise)} layers (ResNet-50 b32/b1, VGG-16 b16, MobileNetV2 b32, the reports' eight): auto "
                   f"precise at 1x or more on {sum(v >= 1 for v in precise.values())}, fast on "
                   f"{sum(v >= 1 for v in fast.values())}",
                   f"median {_median(list(precise.values())):.2f}x (precise), {_median(list(fast.values())):.2f}x "
                   "(fast) PyTorch's cuDNN, same run", j.verdict, j.claimed)


def _map_ratios(rows: Rows) -> dict[str, float]:
    """The PyTorch loop's µs over auto's per float32 kmeans_map cell: the k x D map's (N = 1M) and flash-kmeans'
    shape (8M x 128, k = 1024), named by N, D and k."""
    return _ratios([r for r in rows if r.get("dtype", "float32") == "float32"], "torch_us_per_iter", "us_per_iter",
                   lambda r: f"N={r.get('N')} D={r.get('D')} k={r.get('k')}")


def _every_cell(rows: Rows) -> Check | None:
    return _every_one(_map_ratios(rows), "cells")


def _median_cell(rows: Rows) -> Check | None:
    vs = _map_ratios(rows)
    if not vs:
        return None
    med = _median(list(vs.values()))
    return Check(med >= 3.0, f"median {med:.2f}x")


MAP_CLAIMS = (Claim("auto at least the PyTorch Lloyd loop (strict FP32) on every cell of the k x D map", _every_cell),
              Claim("auto at least 3x the PyTorch Lloyd loop at the median cell", _median_cell))


def kmeans_map(meta: Mapping[str, Any], rows: Rows) -> Finding:
    vs = _map_ratios(rows)
    if not vs:
        return missing("kmeans_map rows")
    j = judge(MAP_CLAIMS, rows)
    return Finding("(beyond the reports)",
                   f"{len(vs)} float32 cells (the k x D map at N = 1M, and 8M x 128, k = 1024): auto at 1x the PyTorch "
                   f"loop or more on {sum(v >= 1 for v in vs.values())}",
                   f"median {_median(list(vs.values())):.2f}x the PyTorch Lloyd loop, same run", j.verdict, j.claimed)
