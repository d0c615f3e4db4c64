"""The items of the reproduction report: every figure and table of the five reports (and gpuopt's own studies),
each with what its report printed, what the results here measured, the ratio and a one-line verdict.

An item names the study that regenerates it and the files it shows; its ``finding(meta, rows)`` reads that study's
results rows (the committed H200 run, or this machine's) and returns a :class:`Finding`. Report numbers are the
studies' own (``report_ms`` in the rows, the report tables in the study modules), never copied here twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

__all__ = ["Item", "Finding", "ITEMS", "REPORT_TITLES"]

Rows = Sequence[Mapping[str, Any]]

#: The five reports, in the order the reproduction report shows them (keys of gpuopt.registry.REPORTS).
REPORT_TITLES = {
    "ece408-fashion": "ECE408 Spring 2018: Fashion-MNIST convolution (its GPU unnamed: P100-class)",
    "cs6235": "CS6235: a CNN layer on the GPU (eight figures, K80-class card)",
    "ece408-mnist": "ECE408 Fall 2016: the MNIST CNN end to end (Tesla K80)",
    "cmu18645": "CMU 18-645: k-means and matrix multiply (GeForce GTX 480)",
    "nctu": "NCTU 2016: sparse COO / FAST convolution lab",
    "gpuopt": "Beyond the reports: gpuopt against the libraries and PyTorch",
}


@dataclass(frozen=True)
class Finding:
    """What the results show for one item."""

    printed: str            # what the report printed (numbers and its GPU), or that it printed none
    measured: str           # what was measured here (numbers); device, commit and date come from the meta
    ratio: str | None       # the report's number over ours (or ours over a baseline), where one applies
    verdict: str            # one line: reproduced / differs, and why


@dataclass(frozen=True)
class Item:
    """One figure or table of a report."""

    report: str                       # REPORT_TITLES key
    title: str                        # e.g. "Tables 1-3: computation time of the four versions"
    study: str | None                 # the gpuopt.bench study that regenerates it (None: not built yet)
    files: tuple[str, ...]            # its figures and tables among the study's outputs
    finding: Callable[[Mapping[str, Any], Rows], Finding]


def _g(x: float | None, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def _missing(what: str) -> Finding:
    return Finding("-", f"not in these results ({what})", None, "not measured here")


# ----------------------------------------------------------------------------------------------- ECE408 Fashion

def _op_time(meta, rows: Rows) -> Finding:
    at = [r for r in rows if r.get("part") == "op_time" and r.get("B") == 10000 and r.get("median_ms")]
    steps = [r for r in at if r.get("report_ms")]
    if not steps:
        return _missing("ece408 op_time rows at 10,000 images")
    layers = sorted({r["layer"] for r in steps})
    best_report = {ly: min((r for r in steps if r["layer"] == ly), key=lambda r: r["report_ms"]) for ly in layers}
    best_ours = {ly: min((r for r in steps if r["layer"] == ly), key=lambda r: r["median_ms"]) for ly in layers}
    auto = {r["layer"]: r["median_ms"] for r in at if r.get("variant") == "auto"}
    same = [ly for ly in layers if best_report[ly]["step"] == best_ours[ly]["step"]]
    return Finding(
        printed="; ".join(f"{ly}: fastest '{best_report[ly]['step']}' {best_report[ly]['report_ms']:.4g} ms"
                          for ly in layers) + f" ({steps[0].get('report_gpu', 'the report GPU')})",
        measured="; ".join(f"{ly}: fastest report step '{best_ours[ly]['step']}' {best_ours[ly]['median_ms']:.3g} ms, "
                           f"gpuopt auto {_g(auto.get(ly))} ms" for ly in layers),
        ratio="the report's fastest over the H200's fastest report step: "
              + "; ".join(f"{ly} {best_report[ly]['report_ms'] / best_ours[ly]['median_ms']:.0f}x" for ly in layers),
        verdict=(f"the report's fastest step is also the fastest here for {len(same)} of {len(layers)} layers"
                 + ("" if len(same) == len(layers) else " (the H200 ranks its steps differently: see the table)")))


def _tile_width(meta, rows: Rows) -> Finding:
    tw = [r for r in rows if r.get("part") == "tile_width" and r.get("median_ms") and "tile_width=" in r["label"]]
    if not tw:
        return _missing("ece408 tile_width rows")
    best = {}
    for r in tw:
        if r["layer"] not in best or r["median_ms"] < best[r["layer"]]["median_ms"]:
            best[r["layer"]] = r
    return Finding(
        printed="TILE_WIDTH chosen by sweeping tile sizes (the report's Op Time table uses its best)",
        measured="; ".join(f"{ly}: best {r['label']} {r['median_ms']:.3g} ms" for ly, r in sorted(best.items())),
        ratio=None,
        verdict="the sweep is reproduced on the H200; its best tile width is read from the figure")


def _network(network: str, reference: str) -> Callable[[Mapping[str, Any], Rows], Finding]:
    def finding(meta, rows: Rows) -> Finding:
        net = {r.get("stage"): r for r in rows if r.get("kind") == "network" and r.get("network") == network}
        fast, torch = net.get("fast"), net.get("pytorch")
        if not fast:
            return _missing(f"networks {network} rows")
        acc = fast.get("accuracy")
        measured = (f"fast stage {_g(fast.get('device_ms'))} ms device-resident, {_g(fast.get('numpy_ms'))} ms NumPy "
                    f"in/out; PyTorch {_g((torch or {}).get('device_ms'))} / {_g((torch or {}).get('numpy_ms'))} ms"
                    + (f"; accuracy {acc}" if acc is not None else ""))
        ratio = (f"{torch['device_ms'] / fast['device_ms']:.2f}x faster than PyTorch FP32 (device-resident, same run)"
                 if torch and torch.get("device_ms") and fast.get("device_ms") else None)
        return Finding(reference, measured, ratio,
                       "whole network on the GPU, faster than PyTorch FP32 in the same run" if ratio
                       and torch["device_ms"] > fast["device_ms"] else "see the table")
    return finding


# ----------------------------------------------------------------------------------------------------- CS6235

def _cs6235_figure(n: int) -> Callable[[Mapping[str, Any], Rows], Finding]:
    def finding(meta, rows: Rows) -> Finding:
        fig = [r for r in rows if r.get("figure") == f"fig{n}" and r.get("speedup_vs_cudnn")]
        if not fig:
            return _missing(f"cs6235 figure {n} rows")
        best = max(fig, key=lambda r: r["speedup_vs_cudnn"])
        worst = min(fig, key=lambda r: r["speedup_vs_cudnn"])

        def at(r):
            return f"{r['speedup_vs_cudnn']:.2f}x ({r['label']}, {r.get('conf') or r.get('panel') or ''})"
        return Finding(
            printed="no numbers (figures only; what each figure claims: notes/cs6235-report.md)",
            measured=f"{len(fig)} points; cuDNN's time over this one from {at(worst)} to {at(best)}",
            ratio=None,
            verdict="the figure's comparison is redrawn on the H200; read its trend against the report's text")
    return finding


# -------------------------------------------------------------------------------------------- ECE408 MNIST

def _mnist_tables(meta, rows: Rows) -> Finding:
    stages = ("serial", "basic", "optimized", "hybrid")
    layer = [r for r in rows if r.get("kind") == "layer" and r.get("network") == "mnist"]
    tot = {s: (sum(r["report_ms"] for r in layer if r["stage"] == s and r.get("report_ms")),
               sum(r.get("kernel_ms") or 0.0 for r in layer if r["stage"] == s and r.get("report_ms")))
           for s in stages}
    if not any(ours for _, ours in tot.values()):
        return _missing("networks mnist layer rows")
    order_report = sorted(stages, key=lambda s: -tot[s][0])
    order_ours = sorted(stages, key=lambda s: -tot[s][1])
    return Finding(
        printed="per-layer totals (K80): " + ", ".join(f"{s} {tot[s][0] / 1e3:.4g} s" for s in stages),
        measured="H200: " + ", ".join(f"{s} {tot[s][1]:.4g} ms" for s in stages),
        ratio="the K80's per-layer total over the H200's: "
              + ", ".join(f"{s} {tot[s][0] / tot[s][1]:.0f}x" for s in stages if tot[s][1]),
        verdict=("stages rank as in the report (" + " > ".join(order_report) + ")" if order_report == order_ours
                 else "stages rank differently on the H200: report " + " > ".join(order_report) + ", here "
                 + " > ".join(order_ours)))


# ------------------------------------------------------------------------------------------------ CMU 18-645

def _kmeans_tables(meta, rows: Rows) -> Finding:
    from gpuopt.bench.studies.kmeans import KMEANS_REPORT_SETS, KMEANS_REPORT_TABLES

    by = {(r["dataset"], r["variant"]): r.get("computation_ms") for r in rows}
    table = KMEANS_REPORT_TABLES["Table 3"]
    ours = {v: [by.get((s, v)) for s in KMEANS_REPORT_SETS] for v in (*table, "device")}
    if any(x is None for x in ours["liao"]):
        return _missing("kmeans rows of the liao ladder on kmeans01-04")
    total = {v: sum(x) for v, x in ours.items() if all(y is not None for y in x)}
    report_total = {v: sum(x) for v, x in table.items()}
    best = min((v for v in table if v in total), key=lambda v: total[v])
    return Finding(
        printed=f"Table 3 totals (GTX 480): original {report_total['liao']:.4f} s -> vectorised "
                f"{report_total['liao_vec']:.4f} s ({report_total['liao'] / report_total['liao_vec']:.2f}x)",
        measured=", ".join(f"{v} {total[v]:.3g} ms" for v in total),
        ratio=f"over the original version (liao) in the same run: ladder {total['liao'] / total[best]:.2f}x at "
              f"best; device {total['liao'] / total['device']:.1f}x" if "device" in total else None,
        verdict="differs: on the H200 the host loop (memberships down, centres on the CPU) dominates and the "
                "report's kernel-side steps do not move it; the loop on the GPU (device) does")


def _matmul_table4(meta, rows: Rows) -> Finding:
    from gpuopt.bench.studies.matmul_report import REPORT_TABLES

    at = {r.get("report_version"): r for r in rows if r.get("n") == 1000 and r.get("report_version")}
    if not at:
        return _missing("matmul_report rows at n = 1000")
    printed = {row["version"]: row["gflops"][-1] for t in REPORT_TABLES for row in t["rows"]}
    order = ["Original Version", "Memory Shared Version", "Scheduling Throughput Maximized Version", "TILE_SZ = 2",
             "TILE_SZ = 4"]
    ours = {v: at[v].get("gflops") for v in order if v in at}
    steps_up = sum(1 for a, b in zip(order, order[1:]) if a in ours and b in ours and ours[b] > ours[a])
    return Finding(
        printed="GFLOP/s at 1000 (GTX 480): " + ", ".join(f"{v} {printed[v]:.4g}" for v in order if v in printed),
        measured="H200: " + ", ".join(f"{v} {_g(ours.get(v), '.4g')}" for v in order),
        ratio="H200 GFLOP/s over the GTX 480's: "
              + ", ".join(f"{v} {ours[v] / printed[v]:.0f}x" for v in order if ours.get(v) and printed.get(v)),
        verdict=f"{steps_up} of {len(order) - 1} steps help on the H200 as on the GTX 480" if steps_up < len(order) - 1
        else "every step helps on the H200 as on the GTX 480")


# ------------------------------------------------------------------------------------------------------ NCTU

def _nctu_table(meta, rows: Rows) -> Finding:
    by = {r.get("variant"): r for r in rows}
    if "fast" not in by or not by["fast"].get("kernel_ms"):
        return _missing("sparse rows")
    sparse = [v for v in by if v and v not in ("cpu",) and not str(v).startswith("cudnn") and by[v].get("kernel_ms")]
    measured = ", ".join(f"{v} kernel {_g(by[v].get('kernel_ms'))} ms / total {_g(by[v].get('total_ms'))} ms"
                         for v in [*sparse, "cpu"] if v in by)
    fastest = min(sparse, key=lambda v: by[v]["kernel_ms"])
    dense = min((r.get("resident_kernel_ms") for v, r in by.items() if str(v).startswith("cudnn")
                 and r.get("resident_kernel_ms")), default=None)
    resident = by[fastest].get("resident_kernel_ms")
    if dense and resident:
        measured += (f"; device-resident: {fastest} {resident * 1e3:.3g} µs against cuDNN's dense FP32 layer "
                     f"{dense * 1e3:.3g} µs ({dense / resident:.2f}x)")
    return Finding(
        printed="CPU 17160.6 ms / COO 123.628 ms (138.8x), CPU 16438.6 ms / FAST 105.128 ms (156.4x), transfers "
                "included (the lab's filters are not public: generated filters of the same sparsity run here)",
        measured=measured, ratio=None,
        verdict=f"exact against the CPU; fastest kernel here: {fastest}"
                + ("" if fastest != "dense" else " (the sparse formats do not beat dense here)")
                + ("" if not (dense and resident) else
                   "; beats cuDNN's dense layer" if resident < dense else "; slower than cuDNN's dense layer"))


def _nctu_density(meta, rows: Rows) -> Finding:
    cells = [r for r in rows if r.get("ratio")]
    if not cells:
        return _missing("sparse_density cells")
    wins = [r for r in cells if r["ratio"] < 1.0]
    best = min(cells, key=lambda r: r["ratio"])
    nominal = (0.05, 0.2, 0.5, 1.0)  # the study's rows (the real neurons: about 20%)
    near = lambda d: min(nominal, key=lambda n: abs(n - d))  # noqa: E731
    dens = sorted({near(r["input_density"]) for r in cells})
    edge = {d: max((r["nnz_per_slice"] for r in wins if near(r["input_density"]) == d), default=0) for d in dens}
    return Finding("(none: the lab measured one density)",
                   f"best sparse variant over cuDNN's dense FP32 layer, filter non-zeros per slice 1..9 x input "
                   f"density {', '.join(f'{d:g}' for d in dens)}: sparse faster in {len(wins)} of {len(cells)} cells; "
                   f"best {best['ratio']:.2f}x the dense time ({best['best_variant']}, {best['nnz_per_slice']} per "
                   f"slice, density {best['input_density']:.2f})",
                   "sparse over dense time, same run (< 1: sparse faster)",
                   "sparse pays up to " + ", ".join(f"{n} non-zeros per slice at density {d:g}"
                                                    for d, n in edge.items()) + " (0: never)")


# ----------------------------------------------------------------------------------------------- beyond

def _matmul_ladder(meta, rows: Rows) -> Finding:
    at = [r for r in rows if r.get("n") == 4096 and r.get("gflops")]
    cublas = next((r for r in at if r.get("variant") == "cublas"), None)
    mine = [r for r in at if r.get("variant") not in ("cublas", "cublas_tf32")]
    if not cublas or not mine:
        return _missing("matmul rows at n = 4096")
    best = max(mine, key=lambda r: r["gflops"])
    return Finding("(beyond the reports)", f"best {best['label']} {best['gflops'] / 1e3:.1f} TFLOP/s, cuBLAS "
                   f"{cublas['gflops'] / 1e3:.1f} TFLOP/s at 4096",
                   f"{best['gflops'] / cublas['gflops']:.2f}x cuBLAS SGEMM (same run)",
                   "the ladder reaches cuBLAS SGEMM (FP32)" if best["gflops"] >= 0.98 * cublas["gflops"]
                   else "below cuBLAS SGEMM")


def _conv_auto(meta, rows: Rows) -> Finding:
    auto = {r.get("conf"): r for r in rows if r.get("variant") == "auto" and r.get("median_ms")}
    if not auto:
        return _missing("conv2d auto rows")
    vs = {c: r.get("speedup_vs_cudnn") for c, r in auto.items() if r.get("speedup_vs_cudnn")}
    low = min(vs, key=vs.get) if vs else None
    fast = {r.get("conf"): r.get("speedup_vs_cudnn_any") for r in rows
            if r.get("variant") == "auto-fast" and r.get("speedup_vs_cudnn_any")}
    return Finding("(beyond the reports)",
                   "auto vs cuDNN precise: " + ", ".join(f"{c} {s:.2f}x" for c, s in vs.items())
                   + ("; auto (algorithms='fast') vs cuDNN any: " + ", ".join(f"{c} {s:.2f}x" for c, s in fast.items())
                      if fast else ""),
                   f"lowest {vs[low]:.2f}x cuDNN precise, same run ({low})" if low else None,
                   "auto beats cuDNN's precise algorithms on every layer" if vs and min(vs.values()) >= 1.0
                   else "below cuDNN on some layers (notes/ece408-reports.md)")


def _overhead(meta, rows: Rows) -> Finding:
    dev = [r for r in rows if r.get("caller") == "device" and r.get("us_per_call")]
    if not dev:
        return _missing("overhead rows on device arrays")
    mine = {(r["op"], r["variant"]): r["us_per_call"] for r in dev if r.get("impl") == "gpuopt"}
    torch = {r["op"]: r["us_per_call"] for r in dev if r.get("impl") == "pytorch"}
    best = {op: min(v for (o, _), v in mine.items() if o == op) for op in {o for o, _ in mine}}
    return Finding("(beyond the reports)",
                   "µs per call on device arrays: " + ", ".join(f"{op} gpuopt {best[op]:.3g} / PyTorch "
                                                                 f"{_g(torch.get(op))}" for op in sorted(best)),
                   "per-call time over PyTorch's (same run): "
                   + ", ".join(f"{op} {best[op] / torch[op]:.2f}x" for op in sorted(best) if torch.get(op)),
                   "calls cost more than PyTorch's (notes/overhead.md)" if any(best[o] > torch.get(o, 1e9) for o in best)
                   else "calls no dearer than PyTorch's")


def _kmeans_loop(meta, rows: Rows) -> Finding:
    per = {(r["dataset"], r["variant"]): r.get("us_per_iter") for r in rows}
    sets = list(dict.fromkeys(r["dataset"] for r in rows))
    parts = []
    for s in sets:
        best = min((v for (d, v), t in per.items() if d == s and t and v not in ("pytorch", "predict", "stream")),
                   key=lambda v: per[(s, v)], default=None)
        if best:
            parts.append((s, best, per[(s, best)], per.get((s, "pytorch"))))
    if not parts:
        return _missing("kmeans_loop rows")
    return Finding("(beyond the reports)",
                   "; ".join(f"{s}: {v} {t:.3g} µs/iter, PyTorch {_g(p)}" for s, v, t, p in parts),
                   "; ".join(f"{s} {p / t:.1f}x faster than the PyTorch Lloyd loop (same run)"
                             for s, _, t, p in parts if p),
                   "the loop on the GPU beats the PyTorch Lloyd loop on every set measured"
                   if all(p and p > t for _, _, t, p in parts) else "see the table")


ITEMS: tuple[Item, ...] = (
    Item("ece408-fashion", "Op Time table: every optimisation at 10 / 100 / 10,000 images", "ece408",
         ("ece408_op_time.png", "ece408_op_time.md"), _op_time),
    Item("ece408-fashion", "TILE_WIDTH sweep", "ece408", ("ece408_tile_width.png",), _tile_width),
    Item("ece408-fashion", "The network forward (seeded weights: the course's are not public)", "networks",
         ("networks.png", "networks.md"),
         _network("fashion", "the course's forward time of its network (trained weights not public)")),
    *(Item("cs6235", f"Figure {n}", "cs6235", (f"cs6235_fig{n}.png", "cs6235.md"), _cs6235_figure(n))
      for n in range(1, 9)),
    Item("ece408-mnist", "Tables 2-5: per-layer time of every stage", "networks", ("networks.md",), _mnist_tables),
    Item("ece408-mnist", "The whole network: time and accuracy (10,000 test images)", "networks",
         ("networks.png", "networks.md"),
         _network("mnist", "the final hybrid stage: 1.13 s on a Tesla K80; accuracy 0.8722 on 10,000 images")),
    Item("cmu18645", "k-means Tables 1-3: computation time of the four versions", "kmeans",
         ("kmeans_report.md", "kmeans.png"), _kmeans_tables),
    Item("cmu18645", "matmul Table 4 (shared memory, scheduling, TILE_SZ)", "matmul_report",
         ("matmul_report.png", "matmul_report.md"), _matmul_table4),
    Item("nctu", "COO / FAST / dense / CPU table", "sparse", ("sparse_report.md", "sparse.png"), _nctu_table),
    Item("nctu", "Density map (time against filter and input density)", "sparse_density", ("sparse_density.png",),
         _nctu_density),
    Item("gpuopt", "The matmul ladder against cuBLAS", "matmul", ("matmul.png", "matmul_ladder.md"), _matmul_ladder),
    Item("gpuopt", "conv2d auto against cuDNN's precise algorithms", "conv2d", ("conv2d.png",), _conv_auto),
    Item("gpuopt", "The cost of one call", "overhead", ("overhead.png",), _overhead),
    Item("gpuopt", "k-means: the loop per iteration against PyTorch", "kmeans_loop", ("kmeans_loop.png",),
         _kmeans_loop),
)
