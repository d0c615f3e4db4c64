"""``python -m gpuopt reproduce``: every figure and table of the five reports, and one reproduction report.

On a machine with a usable GPU it runs the studies behind the selected items (``gpuopt.bench``; a study whose
results in ``--out`` already come from this commit and mode is not run again, so an interrupted run continues);
without one it copies the committed H200 results (``--results``; by default the checkout's ``benchmarks/results``
or the copy installed with the package, :func:`find_results`) and redraws their figures and tables, and every page says so. Then it writes ``reproduction.md`` (the
PNGs beside it) and ``reproduction.html`` (one self-contained page) with, per item of :data:`items.ITEMS`: what
the report printed, what was measured here (device, commit, date), the ratio, the figure and a verdict computed
from the report's claims (:mod:`.claims`), and overview tables at the top.
"""

from __future__ import annotations

import argparse
import base64
import html
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from .items import ITEMS, REPORT_TITLES, Finding, Item

__all__ = ["main", "ITEMS", "REPORT_TITLES", "DEFAULT_RESULTS", "PACKAGED_RESULTS", "find_results",
           "results_candidates", "summary", "show", "write_report", "studies_for"]

_PACKAGE = Path(__file__).resolve().parents[1]

#: The committed results of a source checkout (the package sits in <repo>/gpuopt).
DEFAULT_RESULTS = _PACKAGE.parent / "benchmarks" / "results"

#: The same results as installed with the package (CMakeLists.txt copies them into the wheel).
PACKAGED_RESULTS = _PACKAGE / "_results"

#: Where else to look for the committed results (a folder of one's own).
RESULTS_ENV = "GPUOPT_RESULTS_DIR"


def results_candidates() -> list[Path]:
    """Where :func:`find_results` looks, in order: ``$GPUOPT_RESULTS_DIR`` when set, the source checkout's
    ``benchmarks/results`` when this package is a checkout's, and the copy installed with the package."""
    env = os.environ.get(RESULTS_ENV)
    found = [Path(env)] if env else []
    if (_PACKAGE.parent / "pyproject.toml").is_file():  # a checkout, not site-packages
        found.append(DEFAULT_RESULTS)
    return found + [PACKAGED_RESULTS]


def find_results() -> Path | None:
    """The committed H200 results (see :func:`results_candidates`); None when none of those folders exists."""
    for path in results_candidates():
        if path.is_dir():
            return path
    return None


def summary(report: str, results: str | os.PathLike | None = None) -> str:
    """One report's items as text, from the committed results (or ``results``): what the report printed, what the
    H200 showed, the ratio and the verdict (the notebooks print this)."""
    folder = Path(results) if results is not None else find_results()
    if report not in REPORT_TITLES:
        raise ValueError(f"report must be one of {list(REPORT_TITLES)}, got {report!r}")
    if folder is None:
        return f"no committed results found (looked in {', '.join(map(str, results_candidates()))})"
    lines = [REPORT_TITLES[report]]
    for item, finding, meta in _findings([i for i in ITEMS if i.report == report], folder):
        lines += [f"- {item.title}", f"    report:  {finding.printed}",
                  *([f"    claims:  {finding.claimed}"] if finding.claimed else []),
                  f"    here:    {finding.measured} ({_source_line(meta, 'the committed run')})",
                  f"    ratio:   {finding.ratio or '-'}", f"    verdict: {finding.verdict}"]
    return "\n".join(lines)


def show(name: str, results: str | os.PathLike | None = None) -> Path | None:
    """Show one committed figure or table (``name``: a file the studies write, e.g. ``"cs6235_fig1.png"`` or
    ``"cs6235.md"``): a PNG inline under Jupyter (its path printed elsewhere), a table printed. Returns its path, or
    None after printing ``<name>: not found`` and where it was looked for."""
    folder = Path(results) if results is not None else find_results()
    path = folder / name if folder is not None else None
    if path is None or not path.is_file():
        where = folder if folder is not None else ", ".join(map(str, results_candidates()))
        print(f"{name}: not found in {where}")
        return None
    if name.endswith(".png"):
        try:
            from IPython import get_ipython
            from IPython.display import Image, display
        except ImportError:
            get_ipython = None
        if get_ipython is not None and get_ipython() is not None:
            display(Image(filename=str(path)))
        else:
            print(f"figure: {path}")
    else:
        print(path.read_text(encoding="utf-8"))
    return path


def studies_for(items: Sequence[Item]) -> list[str]:
    """The studies behind ``items``, in the order the items name them."""
    return list(dict.fromkeys(i.study for i in items if i.study))


def _selected(only: Sequence[str] | None) -> list[Item]:
    return [i for i in ITEMS if not only or i.report in only]


def _read(out: Path, study: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    from gpuopt.bench.results import read_results

    path = out / f"{study}.json"
    return read_results(path) if path.is_file() else None


def _done_here(out: Path, study: str, commit: str, quick: bool) -> bool:
    """Whether ``out`` already holds this study's results measured at this commit in this mode (resume)."""
    got = _read(out, study)
    if got is None:
        return False
    meta = got[0]
    return (meta.get("commit") == commit and bool(meta.get("plan", {}).get("quick")) == quick
            and meta.get("plan", {}).get("mode") == "gpu")


def _estimate_s(results: Path, study: str) -> float | None:
    """Seconds the committed H200 run of ``study`` took (its meta's elapsed_s), for the progress estimate."""
    got = _read(results, study)
    return None if got is None else got[0].get("elapsed_s")


def _measure(studies: list[str], out: Path, results: Path, quick: bool, quiet: bool) -> int:
    from gpuopt.bench.__main__ import main as bench_main
    from gpuopt.bench.results import metadata

    commit = str(metadata().get("commit"))
    status = 0
    todo = [s for s in studies if not _done_here(out, s, commit, quick)]
    for s in studies:
        if s not in todo:
            print(f"[reproduce] {s}: results of commit {commit} already in {out}; not run again", flush=True)
    left = {s: _estimate_s(results, s) or 60.0 for s in todo}
    started = time.perf_counter()
    for i, s in enumerate(todo, 1):
        remaining = sum(left[t] for t in todo[i - 1:])
        print(f"[reproduce] {i}/{len(todo)} {s} (about {left[s]:.0f} s on the H200; about {remaining / 60:.1f} min "
              f"left; {time.perf_counter() - started:.0f} s so far)", flush=True)
        status |= bench_main([s, "--out", str(out), *(["--quick"] if quick else []), *(["--quiet"] if quiet else [])])
    return status


def _redraw(studies: list[str], out: Path, results: Path) -> int:
    from gpuopt.bench.__main__ import main as bench_main

    status = 0
    present = []
    for s in studies:
        src = results / f"{s}.json"
        if not src.is_file():
            print(f"[reproduce] {s}: no committed results in {results}", file=sys.stderr)
            status = 1
            continue
        for suffix in (".json", ".csv"):
            if (results / f"{s}{suffix}").is_file():
                shutil.copyfile(results / f"{s}{suffix}", out / f"{s}{suffix}")
        present.append(s)
    if present:
        status |= bench_main([*present, "--plot-only", "--out", str(out)])
    return status


def _source_line(meta: Mapping[str, Any] | None, how: str) -> str:
    if not meta:
        return "no results"
    gpu = (meta.get("gpu") or {}).get("name") or "no GPU"
    return f"{gpu}, commit {meta.get('commit')}, {(meta.get('timestamp_utc') or '')[:10]}: {how}"


def _findings(items: Sequence[Item], out: Path) -> list[tuple[Item, Finding, dict[str, Any] | None]]:
    found = []
    for item in items:
        got = _read(out, item.study) if item.study else None
        meta, rows = got if got else (None, [])
        try:
            finding = item.finding(meta or {}, rows)
        except Exception as exc:  # noqa: BLE001  (a result file of another layout must not stop the report)
            finding = Finding("-", f"could not be read: {type(exc).__name__}: {exc}", None, "not measured here")
        found.append((item, finding, meta))
    return found


#: Report names in the overview tables.
_SHORT = {"ece408-fashion": "ECE408 Fashion", "cs6235": "CS6235", "ece408-mnist": "ECE408 MNIST",
          "cmu18645": "CMU 18-645", "nctu": "NCTU", "gpuopt": "gpuopt"}


def write_report(items: Sequence[Item], out: Path, *, measured_here: bool, note: str = "",
                 link_prefix: str = "") -> tuple[Path, Path]:
    """``out/reproduction.md`` and ``out/reproduction.html`` from the results already in ``out``; the Markdown
    links its figures and tables as ``link_prefix + name`` (e.g. ``../benchmarks/results/`` for docs/)."""
    found = _findings(items, out)
    head = "# gpuopt: the five reports reproduced"
    where = ("Measured on this machine's GPU." if measured_here else
             "Redrawn from the committed H200 results: nothing was measured on this machine" + (f" ({note})" if note
                                                                                              else "") + ".")
    md = [head, "", where, "", "Each item: what the report printed, what the results here show (device, commit, "
          "date), the ratio and a verdict computed from the report's claims (gpuopt/reproduce/claims.py: **agrees**, "
          "**partly agrees** with how many claims hold, or **differs**, then the evidence); its figure and table "
          "beside. Numbers of different GPUs are compared by ranking and ratio, not time.", ""]
    body_html = [f"<h1>{html.escape(head[2:])}</h1>", f"<p><b>{html.escape(where)}</b></p>"]
    for title, mine in (("The reports' items", [f for f in found if f[0].report != "gpuopt"]),
                        ("Beyond the reports: gpuopt against the libraries and PyTorch",
                         [f for f in found if f[0].report == "gpuopt"])):
        header = ("report", "item", "what was claimed", "what was measured", "verdict")
        rows = [(_SHORT.get(item.report, item.report), item.title, finding.claimed or finding.printed,
                 finding.measured, finding.verdict.split(":")[0]) for item, finding, _ in mine]
        md += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        md += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows] + [""]
        body_html.append(f"<h2>{html.escape(title)}</h2><table><tr>" + "".join(f"<th>{h}</th>" for h in header)
                         + "</tr>" + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                                             for row in rows) + "</table>")
    for report in REPORT_TITLES:
        mine = [f for f in found if f[0].report == report]
        if not mine:
            continue
        md += [f"## {REPORT_TITLES[report]}", ""]
        body_html.append(f"<h2>{html.escape(REPORT_TITLES[report])}</h2>")
        for item, finding, meta in mine:
            source = _source_line(meta, "measured by this run" if measured_here else "the committed run, redrawn here")
            lines = [("Report", finding.printed), *([("Claims", finding.claimed)] if finding.claimed else []),
                     ("Here", f"{finding.measured} ({source})"), ("Ratio", finding.ratio or "-"),
                     ("Verdict", finding.verdict)]
            md += [f"### {item.title}", ""] + [f"- **{k}:** {v}" for k, v in lines] + [""]
            body_html.append(f"<h3>{html.escape(item.title)}</h3><ul>" + "".join(
                f"<li><b>{k}:</b> {html.escape(v)}</li>" for k, v in lines) + "</ul>")
            if not measured_here:
                body_html.append("<p><i>Redrawn from the committed H200 results.</i></p>")
            for name in item.files:
                path = out / name
                if not path.is_file():
                    md.append(f"({name}: not written)")
                    continue
                if name.endswith(".png"):
                    md += [f"![{item.title}]({link_prefix}{name})", ""]
                    data = base64.b64encode(path.read_bytes()).decode("ascii")
                    body_html.append(f'<img alt="{html.escape(item.title)}" src="data:image/png;base64,{data}">')
                else:
                    md += [f"Table: [{name}]({link_prefix}{name})", ""]
                    body_html.append(_markdown_tables_html(path.read_text(encoding="utf-8")))
    md_path, html_path = out / "reproduction.md", out / "reproduction.html"
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")
    style = ("body{font-family:sans-serif;max-width:70em;margin:auto}img{max-width:100%}"
             "table{border-collapse:collapse;font-size:85%}td,th{border:1px solid #bbb;padding:2px 6px}")
    html_path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>gpuopt reproduction</title>"
                         f"<style>{style}</style></head><body>{''.join(body_html)}</body></html>\n", encoding="utf-8")
    return md_path, html_path


def _markdown_tables_html(text: str) -> str:
    """The pipe tables, headings and paragraphs of a study's Markdown file as HTML (enough for those files)."""
    out, table = [], []

    def flush():
        if table:
            rows = [r for r in table if not set(r.replace("|", "").strip()) <= set("-: ")]
            cells = [[html.escape(c.strip()) for c in r.strip().strip("|").split(" | ")] for r in rows]
            tag = ["th"] + ["td"] * len(cells)
            out.append("<table>" + "".join("<tr>" + "".join(f"<{tag[i]}>{c}</{tag[i]}>" for c in row) + "</tr>"
                                           for i, row in enumerate(cells)) + "</table>")
            table.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        if line.startswith("#"):
            out.append(f"<h4>{html.escape(line.lstrip('#').strip())}</h4>")
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
    flush()
    return "".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    import gpuopt

    parser = argparse.ArgumentParser(prog="python -m gpuopt reproduce", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="reproduction", metavar="DIR",
                        help="folder for the results, figures, tables and the report (default: %(default)s)")
    parser.add_argument("--only", nargs="+", choices=list(REPORT_TITLES), metavar="REPORT",
                        help=f"only these reports' items, from {{{', '.join(REPORT_TITLES)}}}")
    parser.add_argument("--quick", action="store_true", help="with a GPU: the studies' quick sizes")
    parser.add_argument("--redraw", action="store_true", help="redraw the committed results even with a GPU")
    parser.add_argument("--results", default=None, metavar="DIR",
                        help="the committed H200 results to redraw (default: $GPUOPT_RESULTS_DIR, the checkout's "
                             "benchmarks/results, or the copy installed with gpuopt)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines from the studies")
    parser.add_argument("--link-prefix", default="", metavar="PREFIX",
                        help="prefix of the figure and table links in reproduction.md (docs/reproduction.md is "
                             "written with ../benchmarks/results/)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    results = Path(args.results) if args.results is not None else find_results()
    items = _selected(args.only)
    studies = studies_for(items)
    measure = gpuopt.cuda_available() and not args.redraw
    note = "" if measure else ("--redraw" if args.redraw else gpuopt.cuda_unavailable_reason())
    if not measure and (results is None or not results.is_dir()):  # before anything is written
        looked = [results] if results is not None else results_candidates()
        print(f"[reproduce] no committed results in {', '.join(map(str, looked))}: pass --results DIR, a folder "
              "holding the studies' .json files (a source checkout's benchmarks/results)", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    if measure:  # the committed run's elapsed times give the progress estimate, when there is one
        status = _measure(studies, out, results or out, args.quick, args.quiet)
    else:
        print(f"[reproduce] redrawing the committed results from {results} ({note})", flush=True)
        status = _redraw(studies, out, results)
    md_path, html_path = write_report(items, out, measured_here=measure, note=note, link_prefix=args.link_prefix)
    print(f"[reproduce] {len(items)} items -> {md_path}, {html_path}")
    return status

