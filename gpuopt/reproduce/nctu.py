"""The NCTU 2016 sparse-convolution lab judged: its COO and FAST results and what its notes say of them, checked on
the ``sparse`` study's rows (the lab's layer, generated filters of its sparsity: its own are not public), and its
premise -- skipping the zeros pays -- on the ``sparse_density`` study's map."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .claims import Check, Rows, judge, quoting
from .finding import Finding, g, missing

__all__ = ["TABLE_CLAIMS", "DENSITY_CLAIMS", "table", "density"]

SEED = "nctu-sparse-coo-fast-conv-notes.txt"


def _by(rows: Rows) -> dict[str, Mapping[str, Any]]:
    return {r.get("variant"): r for r in rows}


def _less(field: str, a: str, b: str) -> Callable[[Rows], tuple[bool, str] | None]:
    def part(rows: Rows):
        by = _by(rows)
        x, y = (by.get(a) or {}).get(field), (by.get(b) or {}).get(field)
        if x is None or y is None:
            return None
        return x < y, f"{field.replace('_ms', '')} {a} {x:.3g} ms, {b} {y:.3g} ms"
    return part


def _all(*parts: Callable[[Rows], tuple[bool, str] | None]) -> Callable[[Rows], Check | None]:
    def check(rows: Rows) -> Check | None:
        got = [p(rows) for p in parts]
        if any(x is None for x in got):
            return None
        return Check(all(ok for ok, _ in got), "; ".join(why for _, why in got))
    return check


def _beats_cpu(variant: str) -> Callable[[Rows], Check | None]:
    def check(rows: Rows) -> Check | None:
        s = (_by(rows).get(variant) or {}).get("speedup_vs_cpu")
        if s is None:
            return None
        return Check(s > 1.0, f"{variant} {s:.1f}x the CPU reference, transfers included")
    return check


def _fast_speedup_higher(rows: Rows) -> Check | None:
    by = _by(rows)
    f, c = (by.get("fast") or {}).get("speedup_vs_cpu"), (by.get("coo") or {}).get("speedup_vs_cpu")
    if f is None or c is None:
        return None
    return Check(f > c, f"FAST {f:.1f}x, COO {c:.1f}x the CPU (156.4x against 138.8x in the lab)")


_c = quoting(SEED)


TABLE_CLAIMS = (
    _c("COO on the GPU faster than the CPU (138.8x in the lab)", _beats_cpu("coo"), "Speedup: 138.808", 49),
    _c("FAST's speedup over the CPU above COO's (156.4x in the lab)", _fast_speedup_higher, "Speedup: 156.368", 97),
    _c("FAST beats COO on both the transfer and the kernel",
       _all(_less("h2d_ms", "fast", "coo"), _less("kernel_ms", "fast", "coo")),
       "FAST在資料傳輸與kernel運算的效能都比COO的效果來的好", 15),
    _c("COO's transfer longer than the dense original's (four arrays)",
       _all(_less("h2d_ms", "dense", "coo")),
       "因此資料傳輸的時間就會比原本的多出許多", 52),
)


def table(meta: Mapping[str, Any], rows: Rows) -> Finding:
    by = _by(rows)
    if "fast" not in by or not by["fast"].get("kernel_ms"):
        return missing("sparse rows")
    sparse = [v for v in by if v and v not in ("cpu",) and not str(v).startswith("cudnn") and by[v].get("kernel_ms")]
    measured = ", ".join(f"{v} kernel {g(by[v].get('kernel_ms'))} ms / total {g(by[v].get('total_ms'))} ms"
                         for v in [*sparse, "cpu"] if v in by)
    fastest = min(sparse, key=lambda v: by[v]["kernel_ms"])
    dense = min((r.get("resident_kernel_ms") for v, r in by.items() if str(v).startswith("cudnn")
                 and r.get("resident_kernel_ms")), default=None)
    resident = by[fastest].get("resident_kernel_ms")
    if dense and resident:
        measured += (f"; device-resident: {fastest} {resident * 1e3:.3g} µs against cuDNN's dense FP32 layer "
                     f"{dense * 1e3:.3g} µs ({dense / resident:.2f}x)")
    j = judge(TABLE_CLAIMS, rows, "the generated filters' COO arrays (one non-zero a 3x3 slice) are smaller than the "
                                  "dense int16 filters, so COO sends fewer bytes here in more copies")
    return Finding(
        printed="CPU 17160.6 ms / COO 123.628 ms, speedup 138.808 (l.46-49); CPU 16438.6 ms / FAST 105.128 ms, speedup "
                "156.368 (l.94-97); transfers included (the lab's filters are not public: generated filters of the "
                "same sparsity run here)",
        measured=measured, ratio=None, verdict=j.verdict, claimed=j.claimed)


def _sparse_pays_at_the_labs_point(rows: Rows) -> Check | None:
    cells = [r for r in rows if r.get("ratio") and r.get("nnz_per_slice") == 1]
    if not cells:
        return None
    wins = [r for r in cells if r["ratio"] < 1.0]
    best = min(cells, key=lambda r: r["ratio"])
    return Check(len(wins) == len(cells), f"sparse faster than cuDNN's dense layer in {len(wins)} of {len(cells)} "
                 f"cells at one non-zero a slice (best {best['ratio']:.2f}x the dense time)")


DENSITY_CLAIMS = (
    _c("skipping the zero taps pays at the lab's point (one non-zero a 3x3 slice: 512 of 512x3x3 multiplies)",
       _sparse_pays_at_the_labs_point, "每個thread不需要做512x3x3次,只要做512次即可", 43),
)


def density(meta: Mapping[str, Any], rows: Rows) -> Finding:
    cells = [r for r in rows if r.get("ratio")]
    if not cells:
        return missing("sparse_density cells")
    wins = [r for r in cells if r["ratio"] < 1.0]
    best = min(cells, key=lambda r: r["ratio"])
    nominal = (0.05, 0.2, 0.5, 1.0)  # the study's rows (the real neurons: about 20%)
    near = lambda d: min(nominal, key=lambda n: abs(n - d))  # noqa: E731
    dens = sorted({near(r["input_density"]) for r in cells})
    edge = {d: max((r["nnz_per_slice"] for r in wins if near(r["input_density"]) == d), default=0) for d in dens}

    def skip_edge(than: Callable[[Mapping[str, Any]], float | None]) -> dict[float, int]:
        """By input density, the most filter non-zeros a slice at which the zero-skipping kernel
        (fast_sparse_input) is still faster than ``than(cell)``."""
        return {d: max((r["nnz_per_slice"] for r in cells if near(r["input_density"]) == d and r.get("zero_skip_ms")
                        and than(r) and r["zero_skip_ms"] < than(r)), default=0) for d in dens}
    vs_dense = skip_edge(lambda r: r.get("cudnn_ms"))
    vs_imma = skip_edge(lambda r: (r.get("details") or {}).get("fast_imma"))
    j = judge(DENSITY_CLAIMS, rows)
    return Finding("(one density: the lab measured its own layer only)",
                   f"best sparse variant over cuDNN's dense FP32 layer, filter non-zeros per slice 1..9 x input "
                   f"density {', '.join(f'{d:g}' for d in dens)}: sparse faster in {len(wins)} of {len(cells)} cells; "
                   f"best {best['ratio']:.2f}x the dense time ({best['best_variant']}, {best['nnz_per_slice']} per "
                   f"slice, density {best['input_density']:.2f}); the most filter non-zeros a slice at which a sparse "
                   "variant still beats dense, by input density: "
                   + ", ".join(f"{d:g}: {n if n else 'none'}" for d, n in edge.items())
                   + "; the zero-skipping kernel (fast_sparse_input) pays against cuDNN up to "
                   + ", ".join(f"{n if n else 'none'} at {d:g}" for d, n in vs_dense.items())
                   + " non-zeros a slice, against the dense-work int8 kernel (fast_imma) up to "
                   + ", ".join(f"{n if n else 'none'} at {d:g}" for d, n in vs_imma.items()),
                   "sparse over dense time, same run (< 1: sparse faster)", j.verdict, j.claimed)
