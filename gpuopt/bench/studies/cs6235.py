"""cs6235: the CS6235 report's eight figures (general/auto vs cuDNN, block size, k and c
unrolling, crs vs rsc, thread mapping, shared memory, n,k unroll-and-jam) on conf1-conf4 ->
cs6235.csv/.json, cs6235_fig1.png .. cs6235_fig8.png, cs6235.md.

The report printed no numbers; what each figure found, its GPU and which gpuopt variant
stands for which of its kernels: notes/cs6235-report.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import gpuopt

from ..conv_points import (CONV_CHECK_ELEMS, CONV_CONFS, CONV_MAX_N, REPORT_CONV_REPEATS, ConvEntry, ConvProblem,
                           is_reference, run_points, usable_entries)
from ..figures import (X_LABELS, drawable, drawable_rows, empty_axes, finish_report_figure, grouped_bars, headroom,
                       log_if_wide, pyplot, series_label)
from ..study import Output, RunSettings, Study, StudyResult, add_note, entry_label, finite_number, per_level, row_label
from ..tables import (Section, device_short, errors_note, extras_file, ms_cell, sections_markdown, sections_text,
                      skipped_note)

__all__ = ["STUDY", "CS6235_FIGURES", "cs6235_entries", "cs6235_best_k"]


CS6235_GPU = "a K80-class card"
CS6235_GPU_NOTE = ("the report's numbers came from node kp359 of Utah's CHPC cluster (l.30); the text does not "
                   "name the GPU (K80-class per the issue)")
CS6235_SOURCE = "../shared/seeds/cs6235-cnn-gpu-conv-report.txt"
CS6235_CONFS = tuple(CONV_CONFS)
#: Block sizes of Fig 2 (the report: 32 .. 1024).
CS6235_BLOCK_SIZES: dict[Any, tuple[int, ...]] = per_level(
    gpu_full=(32, 64, 128, 256, 512, 1024), gpu_quick=(32, 128, 1024), cpu_full=(), cpu_quick=(), tiny=(64, 128))
#: k unroll factors of Figs 3 and 8 (the report: 2, 4, 8, 16).
CS6235_K_UNROLLS: dict[Any, tuple[int, ...]] = per_level(
    gpu_full=(2, 4, 8, 16), gpu_quick=(2, 8, 16), cpu_full=(), cpu_quick=(), tiny=(2, 8))
#: c unroll factors of Fig 4 (the report: 0, 2, 4, 8, 16; 0 = no unrolling).
CS6235_C_UNROLLS: dict[Any, tuple[int, ...]] = per_level(
    gpu_full=(0, 2, 4, 8, 16), gpu_quick=(0, 4, 16), cpu_full=(), cpu_quick=(), tiny=(0, 4))
#: Fig 3's block size: "These results were obtained at Blocksize = 512" (Sec. 3.1, l.58).
CS6235_FIG3_BLOCK = 512
#: Fig 5's unroll factor: the report's unroll_k8 (crs) vs unroll_k8_rsc folders (l.364).
CS6235_FIG5_UNROLL = 8

#: The report's eight figures: id, title, kind ("bars": one bar per series at each
#: configuration; "lines": a line per configuration over the swept parameter ``x``, panels
#: N=1 and N=128, cuDNN as dashed lines), configurations, the variants drawn (on a GPU;
#: what ``shown_in`` answers from) and what the report says.
CS6235_FIGURES: tuple[dict[str, Any], ...] = (
    {"figure": "fig1", "kind": "bars", "confs": CS6235_CONFS, "variants": ("general", "auto", "cudnn"),
     "title": "Fig 1: the general kernel (and auto) vs cuDNN",
     "report": "Fig 1 (Sec. 1, l.26-30): the general kernel beats cuDNN on conf1 and conf2 and approaches it on "
               "conf3."},
    {"figure": "fig2", "kind": "lines", "x": "block_size", "confs": CS6235_CONFS, "variants": ("general", "cudnn"),
     "title": "Fig 2: the general kernel at block sizes 32..1024",
     "report": "Fig 2 (Sec. 2, l.44-48): at N=1 best around block 64 or 128, then worse or flat; at N=128 steep "
               "gains up to 128, then worse; 128 best over all four configurations."},
    {"figure": "fig3", "kind": "lines", "x": "unroll", "confs": CS6235_CONFS, "variants": ("unroll_k", "cudnn"),
     "title": f"Fig 3: k unroll factors (unroll_k, crs loops, block {CS6235_FIG3_BLOCK})",
     "report": f"Fig 3 (Sec. 3.1, l.56-60, l.76): at block {CS6235_FIG3_BLOCK}, unrolling k helps at N=128 and "
               "degrades or stagnates at N=1."},
    {"figure": "fig4", "kind": "lines", "x": "unroll", "confs": CS6235_CONFS, "variants": ("unroll_c", "cudnn"),
     "title": "Fig 4: c unroll factors (unroll_c; 0 = none)",
     "report": "Fig 4 (Sec. 3.2, l.62-64, l.86): no unrolling is fastest except on conf2 (C=832), where unrolling "
               "c first helps; at C=3 it cannot help."},
    {"figure": "fig5", "kind": "bars", "confs": CS6235_CONFS, "variants": ("unroll_k",),
     "title": f"Fig 5: crs vs rsc loop order (unroll_k, unroll {CS6235_FIG5_UNROLL})",
     "report": "Fig 5 (Sec. 4.1, l.89-95): rsc beats crs on most configurations; its rsc kernels could not unroll "
               "beyond 8 (registers), yet rsc with 8 beat every crs factor on conf3 and conf4."},
    {"figure": "fig6", "kind": "bars", "confs": CS6235_CONFS, "variants": ("plain", "reorder"),
     "title": "Fig 6: thread mapping q,p,k,n (plain) vs q,p,n,k (reorder)",
     "report": "Fig 6 (Sec. 4.2, l.97-104): no specific trend, so the general kernel keeps q,p,k,n."},
    {"figure": "fig7", "kind": "bars", "confs": ("conf3", "conf4"), "variants": ("reorder", "plain", "shared"),
     "title": "Fig 7: shared memory vs plain at N=128",
     "report": "Fig 7 (Sec. 4.2.1, l.106-115): shared memory (c tiled, q,p,n,k) vs the plain kernel with the same "
               "q,p,n,k mapping: faster at C=832 (conf4), slower at C=3 (conf3); impossible at N=1 under its "
               "divisibility conditions (gpuopt's shared runs any shape)."},
    {"figure": "fig8", "kind": "bars", "confs": ("conf3", "conf4"), "variants": ("unroll_nk", "unroll_k", "cudnn"),
     "title": "Fig 8: n,k unroll-and-jam (4x4) vs the best k unroll at N=128",
     "report": "Fig 8 (Sec. 5, l.117-122): unrolling n and k by 4 each gives steep gains over the best k unroll, "
               "up to about double the improvement on conf4; used by the general kernel whenever N=128."},
)
CS6235_COLUMNS = ("figure", "panel", "conf", "N", "C", "K", "H", "W", "R", "S", "u", "v", "P", "Q", "label", "series",
                  "x_name", "x", "variant", "params", "device", "median_ms", "min_ms", "max_ms", "mean_ms", "std_ms",
                  "repeats", "gflops", "speedup_vs_cudnn", "speedup_vs_cudnn_any", "rel_err", "reference", "algorithm",
                  "spin_us", "overhead_hidden", "flush_l2", "skipped", "error")
#: The variants the cs6235 figures use (``auto`` when registered).
CS6235_VARIANTS = ("general", "auto", "unroll_k", "unroll_c", "plain", "reorder", "shared", "unroll_nk", "cudnn")


def _cs6235_panel(conf: str) -> str:
    return f"N={CONV_CONFS[conf][0]}"


def cs6235_entries(plan: RunSettings, notes: list[str]) -> dict[str, list[ConvEntry]]:
    """The entries (rows per configuration) of each figure; CPU mode: the ``cpu`` variant only."""
    if not plan.gpu:
        add_note(notes, "cs6235: no GPU, so every figure shows the cpu variant only (GPU variants not run here: "
                     + ", ".join(CS6235_VARIANTS) + ")")
        return {f["figure"]: [ConvEntry("cpu", "cpu", {}, {"series": "cpu"})] for f in CS6235_FIGURES}
    table = gpuopt.variants("conv2d")
    ref = ConvEntry("cudnn", "cudnn", {}, {"series": "cuDNN (strict FP32)"})

    def swept(variant: str, x_name: str, values: Sequence[Any], **fixed: Any) -> list[ConvEntry]:
        return [ConvEntry(entry_label(variant, {x_name: val, **fixed}), variant, {x_name: val, **fixed},
                          {"x_name": x_name, "x": val, "series": entry_label(variant, fixed)}) for val in values]

    def k_unroll(order: str, unroll: int, **fixed: Any) -> ConvEntry:
        params = {**fixed, "unroll": unroll, "loop_order": order}
        return ConvEntry(entry_label("unroll_k", params), "unroll_k", params, {"series": order})

    fig1 = [ConvEntry("general", "general", {}, {"series": "general"})]
    if "auto" in table:
        fig1.append(ConvEntry("auto", "auto", {}, {"series": "auto"}))
    else:
        add_note(notes, "cs6235 fig1: variant conv2d/auto is not registered in this build: Fig 1 shows general only")
    fig1 += [ref, ConvEntry("cudnn-any", "cudnn", {"algorithms": "any"}, {"series": "cuDNN (any algorithm)"})]
    fig5 = [k_unroll(order, CS6235_FIG5_UNROLL) for order in ("crs", "rsc")]
    plain = table.get("plain")
    if plain is not None and "loop_order" in plain.params:
        fig5 += [ConvEntry(entry_label("plain", {"loop_order": o}), "plain", {"loop_order": o},
                           {"series": f"plain {o}"}) for o in ("crs", "rsc")]
    else:
        add_note(notes, "cs6235 fig5: plain has no loop_order parameter (its loops are c,r,s), so Fig 5 compares the "
                     f"loop orders on unroll_k (unroll {CS6235_FIG5_UNROLL}) only, as the report did")
    k_factors = plan.pick(CS6235_K_UNROLLS)
    entries = {
        "fig1": fig1,
        "fig2": swept("general", "block_size", plan.pick(CS6235_BLOCK_SIZES)) + [ref],
        "fig3": swept("unroll_k", "unroll", k_factors, block_size=CS6235_FIG3_BLOCK, loop_order="crs") + [ref],
        "fig4": swept("unroll_c", "unroll", plan.pick(CS6235_C_UNROLLS)) + [ref],
        "fig5": fig5,
        "fig6": [ConvEntry("plain", "plain", {}, {"series": "plain: q,p,k,n"}),
                 ConvEntry("reorder", "reorder", {}, {"series": "reorder: q,p,n,k"})],
        "fig7": [ConvEntry("reorder", "reorder", {}, {"series": "the report's 'Plain' here: reorder (q,p,n,k)"}),
                 ConvEntry("plain", "plain", {}, {"series": "plain (q,p,k,n)"}),
                 ConvEntry("shared", "shared", {}, {"series": "shared (q,p,n,k, c tiled in shared memory)"})],
        "fig8": [ConvEntry("unroll_nk", "unroll_nk", {}, {"series": "unroll_nk (n, k unrolled 4 x 4)"})]
                + [k_unroll("rsc", f) for f in k_factors] + [ref],
    }
    return {fig: usable_entries(es, plan, notes, f"cs6235 {fig}") for fig, es in entries.items()}


def cs6235_report_meta() -> dict[str, Any]:
    return {"source": CS6235_SOURCE, "gpu": CS6235_GPU, "gpu_note": CS6235_GPU_NOTE,
            "numbers": "none: the report shows its results only as plots, which are not in the text; it printed no "
                       "number for any figure",
            "figures": [{k: f[k] for k in ("figure", "title", "kind", "confs", "report")} for f in CS6235_FIGURES]}


def run_cs6235(plan: RunSettings) -> StudyResult:
    res = StudyResult()
    reps = plan.pick(REPORT_CONV_REPEATS)
    max_n = plan.pick(CONV_MAX_N)
    entries = cs6235_entries(plan, res.notes)
    problems = {conf: ConvProblem(min(n, max_n) if max_n is not None else n, c, h, w, k, r, s, u, v)
                for conf, (n, c, k, h, w, r, s, u, v) in CONV_CONFS.items()}
    if max_n is not None:
        res.notes.append(f"batch N capped at {max_n} in this mode (the report's conf3/conf4 use N=128)")
    work = [({"figure": f["figure"], "panel": _cs6235_panel(conf), "conf": conf}, conf, e)
            for f in CS6235_FIGURES for conf in f["confs"] for e in entries[f["figure"]]]
    res.meta.update(report=cs6235_report_meta(),
                    inputs="uniform [-1, 1) float32, NCHW / KCRS, no padding, no bias, no activation, "
                           "device-resident on the GPU",
                    configurations={k: dict(zip("N C K H W R S u v".split(), v)) for k, v in CONV_CONFS.items()},
                    flops="2 N K P Q C R S", gflops="2 N K P Q C R S / median kernel time",
                    timing=f"measure(): {reps} (kernel time, ms; a point two figures share is measured once)",
                    reference=f"cuDNN strict FP32 (variant cudnn, precise algorithms) in the same run; rel_err = "
                              f"||y - y_cudnn|| / ||y_cudnn|| over the first images (at most {CONV_CHECK_ELEMS} "
                              "outputs)",
                    figures={f["figure"]: [e.label for e in entries[f["figure"]]] for f in CS6235_FIGURES})
    res.rows = run_points(plan, res, reps, work, problems, "cs6235")
    return res


def cs6235_best_k(rows: Sequence[Mapping[str, Any]], conf: str) -> Mapping[str, Any] | None:
    """Fig 8's "best k unroll" at ``conf``: the fastest unroll_k row of fig8."""
    cands = [r for r in rows if r.get("figure") == "fig8" and r.get("conf") == conf and r.get("variant") == "unroll_k"
             and finite_number(r.get("median_ms"))]
    return min(cands, key=lambda r: r["median_ms"]) if cands else None


def _cs6235_sections(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None) -> list[Section]:
    dev = device_short(meta)
    sections = []
    for f in CS6235_FIGURES:
        fr = [r for r in rows if r.get("figure") == f["figure"]]
        confs = [c for c in f["confs"] if any(r["conf"] == c for r in fr)] or list(f["confs"])
        by = {(row_label(r), r["conf"]): r for r in fr}
        body = []
        for label in dict.fromkeys(row_label(r) for r in fr):
            line = [label]
            for c in confs:
                r = by.get((label, c))
                cell = ms_cell(r)
                if r is not None and finite_number(r.get("speedup_vs_cudnn")) and not is_reference(r["variant"], r.get(
                        "params") or {}):
                    cell += f" ({r['speedup_vs_cudnn']:.2f}x)"
                line.append(cell)
            body.append(line)
        if f["figure"] == "fig8":
            line = ["best unroll_k (rsc)"]
            for c in confs:
                b = cs6235_best_k(fr, c)
                unroll = (b.get("params") or {}).get("unroll") if b is not None else None
                line.append("-" if b is None else f"{b['median_ms']:.4g} (unroll={unroll})")
            body.append(line)
        what = ("median kernel time in ms (x cuDNN strict FP32 in the same run; > 1: faster)" if dev != "CPU"
                else "median wall time in ms of the cpu variant's call (no GPU here)")
        caption = (f"CS6235 {f['title']}: {dev} {what}. The report ({CS6235_GPU}) printed no numbers for this "
                   f"figure; it found: {f['report']}")
        n_of = {r["conf"]: r.get("N") for r in fr}
        sections.append((caption, ["row", *[f"{c} (N={n_of.get(c, CONV_CONFS[c][0])})" for c in confs]], body, "l"))
    return sections


def table_cs6235(rows: list[dict[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """One table per figure: ms (and x cuDNN) per row and configuration, what the report found."""
    return sections_text(_cs6235_sections(rows, meta)) + skipped_note(rows) + errors_note(rows)


def cs6235_markdown(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """One table per figure, as Markdown."""
    return sections_markdown("conv2d: the CS6235 report's figures, reproduced", meta,
                             _cs6235_sections(rows, meta))


def _conf_tick(conf: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """An x tick: the configuration and its shape."""
    r = next((r for r in rows if r.get("conf") == conf and r.get("N") is not None), None)
    if r is None:
        return conf
    return (f"{conf}\nN{r['N']} C{r['C']} K{r['K']} {r['H']}x{r['W']}\n{r['R']}x{r['S']} stride {r['u']}")


def _cs6235_bars(plt, f: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]):
    fig, ax = plt.subplots(figsize=(10.5, 5.8))
    confs = [c for c in f["confs"] if any(r.get("conf") == c for r in rows)] or list(f["confs"])
    good = drawable_rows(rows, "median_ms")
    if f["figure"] == "fig8":
        rank = {"unroll_nk": 0, "best": 1}
        derived = [dict(r) for r in good if r.get("variant") != "unroll_k"]
        for c in confs:
            best = cs6235_best_k(good, c)
            if best is not None:
                derived.append({**best, "series": "best unroll_k (rsc loops)",
                                "add_note": f"unroll={(best.get('params') or {}).get('unroll')}", "_rank": 1})
        good = sorted(derived, key=lambda r: r.get("_rank", rank.get(r.get("variant"), 2)))
    if not good:
        empty_axes(ax, "no successful measurements")
        return fig
    series = list(dict.fromkeys(series_label(r) for r in good))
    by = {(r["conf"], series_label(r)): r for r in good}

    def label(c: str, s: str) -> str:
        r = by[(c, s)]
        text = f"{r['median_ms']:.3g}"
        if drawable(r.get("speedup_vs_cudnn")) and not is_reference(r["variant"], r.get("params") or {}):
            text += f"\n{r['speedup_vs_cudnn']:.2f}x"
        if r.get("add_note"):
            text += f"\n{r['add_note']}"
        return text

    values = grouped_bars(ax, confs, series, lambda c, s: by[(c, s)]["median_ms"] if (c, s) in by else None, label)
    log = log_if_wide(ax, values, 10)  # N=1 and N=128 side by side differ by ~100x
    headroom(ax, values, 1.35)
    ax.set_xticklabels([_conf_tick(c, rows) for c in confs], fontsize=8)
    ax.set_xlabel("configuration (no padding); bar labels: ms, and speed relative to cuDNN strict FP32 "
                  "(> 1: faster)", fontsize=8.5)
    ax.set_ylabel("median kernel time (ms" + (", log scale)" if log else ")"))
    ax.grid(True, which="major", axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def _cs6235_lines(plt, f: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]):
    import matplotlib

    fig, axes = plt.subplots(1, 2, figsize=(13.5, 5.6))
    good = drawable_rows(rows, "median_ms")
    confs = [c for c in f["confs"] if any(r.get("conf") == c for r in rows)] or list(f["confs"])
    palette = list(matplotlib.colormaps["tab10"].colors)
    color = {c: palette[i % len(palette)] for i, c in enumerate(CONV_CONFS)}
    xs = sorted({r["x"] for r in good if r.get("x") is not None})
    pos = {x: i for i, x in enumerate(xs)}

    def panel_of(c: str) -> str:
        r = next((r for r in rows if r.get("conf") == c and r.get("panel")), None)
        return str(r["panel"]) if r else f"N={CONV_CONFS[c][0]}"

    panels = list(dict.fromkeys(panel_of(c) for c in confs))
    for i, ax in enumerate(axes):
        if i >= len(panels):
            ax.axis("off")
            continue
        panel = panels[i]
        pconfs = [c for c in confs if panel_of(c) == panel]
        vals: list[float] = []
        lines = {c: sorted((r["x"], r["median_ms"]) for r in good if r["conf"] == c and r.get("x") is not None)
                 for c in pconfs}
        for c in pconfs:
            pts = lines[c]
            if pts:
                series = series_label(next(r for r in good if r["conf"] == c and r.get("x") is not None))
                ax.plot([pos[x] for x, _ in pts], [y for _, y in pts], "-o", ms=5, lw=1.6, color=color[c],
                        label=f"{c}: {series}")
                best = min(pts, key=lambda p: p[1])
                ax.plot([pos[best[0]]], [best[1]], marker="*", ms=13, color=color[c], mec="black", mew=0.6,
                        zorder=4, ls="none")
                for x, y in pts:
                    # Above the point unless another configuration's point at this x is higher (then below):
                    # the two lines' labels never meet where the lines cross; clear of the star's size.
                    above = not any(y2 > y for c2 in pconfs if c2 != c for x2, y2 in lines[c2] if x2 == x)
                    gap = 9 if (x, y) == best else 6
                    ax.annotate(f"{y:.3g}", (pos[x], y), xytext=(0, gap if above else -gap),
                                textcoords="offset points", ha="center", va="bottom" if above else "top",
                                fontsize=7, color=color[c])
                vals += [y for _, y in pts]
            for ref in (r for r in good if r["conf"] == c and r.get("x") is None):
                ax.axhline(ref["median_ms"], ls="--", lw=1.1, color=color[c], alpha=0.75,
                           label=f"{c}: {series_label(ref)} ({ref['median_ms']:.3g} ms)")
                vals.append(ref["median_ms"])
        if not vals:
            empty_axes(ax, f"no successful measurements at {panel}")
            continue
        log = log_if_wide(ax, vals, 8)
        lo, hi = min(vals), max(vals)  # room for the point labels above the highest and below the lowest
        pad = 0.12 * (hi - lo) or 0.1 * hi
        ax.set_ylim(*((lo / 1.35, hi * 1.35) if log else (lo - pad, hi + pad)))
        if xs:
            ax.set_xticks(range(len(xs)))
            ax.set_xticklabels([str(x) for x in xs])
            ax.set_xlim(-0.5, len(xs) - 0.5)
        else:
            ax.set_xticks([])
        ax.set_xlabel(X_LABELS.get(str(f.get("x")), str(f.get("x"))) + ("" if xs else " (not swept here)"))
        ax.set_ylabel("median kernel time (ms" + (", log scale" if log else "") + ")")
        ax.set_title(f"({'ab'[i]}) {panel}: {', '.join(pconfs)}  (star: fastest)", fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
        # Under the axes: inside, the legend always lands on a line or on a cuDNN reference line.
        ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    return fig


def plot_cs6235(meta, rows, path: Path) -> list[Path]:
    """One PNG per figure of the CS6235 report: ``<stem>_fig1.png`` .. ``<stem>_fig8.png`` beside ``path``."""
    plt = pyplot()
    dev = device_short(meta)
    out = []
    for f in CS6235_FIGURES:
        fr = [r for r in rows if r.get("figure") == f["figure"]]
        fig = _cs6235_lines(plt, f, fr) if f["kind"] == "lines" else _cs6235_bars(plt, f, fr)
        note = (f"Report: {CS6235_GPU} ({CS6235_GPU_NOTE}). It printed no numbers for this figure (its plots are "
                f"not in the text); what it found: {f['report']}")
        title = f"CS6235 {f['title']}: {dev}, median kernel time (lower is better)"
        out.append(finish_report_figure(fig, meta, title, note, path.with_name(f"{path.stem}_{f['figure']}.png")))
    return out


extras_cs6235 = extras_file("cs6235.md", cs6235_markdown)

STUDY = Study("cs6235", "conv2d", "conv2d: the CS6235 report's eight figures",
              "Figs 1-8 of the CS6235 report on conf1-conf4 (general/auto vs cuDNN, block size, k and c "
              "unrolling, crs vs rsc, thread mapping, shared memory, n,k unroll-and-jam): kernel ms -> "
              "cs6235_fig1..8.png, cs6235.md",
              CS6235_VARIANTS, CS6235_COLUMNS, run_cs6235, table_cs6235, extras_cs6235, plot_cs6235,
              outputs=(*(Output(f"cs6235_{f['figure']}.png", f["variants"]) for f in CS6235_FIGURES),
                       Output("cs6235.md")))
