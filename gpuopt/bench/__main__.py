"""Command line: ``python -m gpuopt.bench [names...] [--quick] [--out DIR] [--plot-only] [--quiet] [--list]``.

Runs the studies (default, or "all": matmul, matmul_report, conv2d, cs6235, ece408, kmeans,
sparse; opt-in studies only when named), writes ``DIR/<name>.csv`` and ``DIR/<name>.json``
and the study's figures and Markdown tables (``DIR/<name>.png``; ``cs6235_fig1.png`` ..
``fig8.png``, ``ece408_op_time.png`` and ``ece408_tile_width.png``; ``matmul_ladder.md``,
``matmul_report.md``, ``cs6235.md``, ``ece408_op_time.md``: see each study's ``outputs``),
then prints a short table per study. Without a usable GPU it runs the CPU variants at small
sizes. ``--plot-only`` redraws the figures and Markdown tables (and prints the tables)
from the JSON files already in DIR, without running anything.

Exit status: 0 when every measurement succeeded, 1 when some failed (they are recorded
with their error and listed) or a results file is missing for ``--plot-only``, 2 for
bad arguments (e.g. an unknown study name). A study that needs a GPU is skipped, with a
note, on a machine without one.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

import gpuopt

from .figures import matplotlib_available
from .results import format_metadata, metadata, read_results, write_results
from .studies import DEFAULT_STUDIES, STUDIES
from .study import RunSettings

DEFAULT_OUT = Path("benchmarks") / "results"
TINY_ENV = "GPUOPT_BENCH_TINY"


def build_parser(default_out: str | os.PathLike | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gpuopt.bench",
        description="Run gpuopt's benchmark sweeps: CSV + JSON + PNG per sweep.",
        epilog="sweeps: " + "; ".join(f"{s.name}: {s.description}{_opt_in_note(s)}" for s in STUDIES.values()),
    )
    parser.add_argument("names", nargs="*", metavar="name",
                        help=f"sweeps to run, from {{{', '.join(STUDIES)}}} (default, or 'all': "
                             f"{', '.join(DEFAULT_STUDIES)})")
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes, fewer points per figure and fewer repeats (the full set measures for "
                             "several minutes on an H200: the matmul ladder up to 8192 and the cs6235 + ece408 "
                             "figures, each about 1-3 minutes; quick: about a minute)")
    parser.add_argument("--out", default=str(default_out or DEFAULT_OUT), metavar="DIR",
                        help="folder for <name>.csv/.json/.png (default: %(default)s)")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the figures from the JSON files already in DIR; run nothing")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument("--list", action="store_true", help="list the sweeps and their variants, then exit")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the random matmul/conv inputs (default: fresh; recorded in the metadata)")
    # Hidden: the tests' tiny sizes (also GPUOPT_BENCH_TINY=1).
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    return parser


def _opt_in_note(study) -> str:
    bits = [b for b, on in (("opt-in: run only when named", study.opt_in), ("GPU only", study.gpu_only)) if on]
    return f" ({', '.join(bits)})" if bits else ""


def _parse(argv: Sequence[str] | None, default_out) -> tuple[argparse.Namespace, list[str]]:
    parser = build_parser(default_out)
    args = parser.parse_args(argv)
    # "all" (or no name) is the default set; opt-in studies run only when named.
    names = [n for name in (args.names or ["all"]) for n in (DEFAULT_STUDIES if name == "all" else [name])]
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in STUDIES]
    if unknown:
        parser.error(f"unknown sweep{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                     f"valid sweeps: {', '.join(STUDIES)}")
    if args.seed is not None and args.seed < 0:
        parser.error("--seed must be >= 0")
    return args, names


def _list() -> int:
    usable = gpuopt.cuda_available()
    print("GPU: " + ((gpuopt.device_info() or {}).get("name", "?") if usable
                     else f"none ({gpuopt.cuda_unavailable_reason()})"))
    width = max(len(s.name) for s in STUDIES.values())
    for s in STUDIES.values():
        table = gpuopt.variants(s.op)
        states = []
        for v in dict.fromkeys([*s.variant_names(), *(() if s.gpu_only else ("cpu",))]):
            if v not in table:
                states.append(f"{v} (not registered)")
            else:
                states.append(f"{v} ({'usable' if table[v].available else 'needs a GPU'})")
        print(f"{s.name:{width}s} {s.description}{_opt_in_note(s)}\n{'':{width}s} variants: {', '.join(states)}")
    return 0


def _plot(name: str, meta: dict, rows: list, out: Path, notes: list[str]) -> list[Path]:
    """The study's figure(s): ``out/<name>.png``, or several beside it (cs6235, ece408)."""
    figures = STUDIES[name].figures
    if figures is None:
        return []
    if not matplotlib_available():
        notes.append("matplotlib is not installed: no figure (pip install matplotlib, then --plot-only)")
        return []
    try:
        drawn = figures(meta, list(rows), out / f"{name}.png")
    except Exception as exc:  # noqa: BLE001 - the results are written; the figure can be redone
        notes.append(f"figure failed: {type(exc).__name__}: {exc}")
        return []
    return list(drawn) if isinstance(drawn, (list, tuple)) else [drawn]


def _extras(name: str, meta: dict, rows: list, out: Path, notes: list[str]) -> list[Path]:
    """The study's further files (Markdown tables), from its meta and rows."""
    extras = STUDIES[name].extras
    if extras is None:
        return []
    try:
        return list(extras(meta, rows, out))
    except Exception as exc:  # noqa: BLE001 - the results are written; the tables can be redone
        notes.append(f"writing the extra tables failed: {type(exc).__name__}: {exc}")
        return []


def _report(name: str, meta: dict, rows: list, paths: list[Path | None], notes: list[str]) -> str:
    lines = [f"== {name}: {STUDIES[name].title} [{(meta.get('plan') or {}).get('mode', '?')}"
             f"{', ' + meta['plan']['level'] if (meta.get('plan') or {}).get('level') not in (None, 'full') else ''}]",
             format_metadata(meta)]
    lines.append(STUDIES[name].table(rows, meta) if rows else "(no measurements)")
    for note in notes:
        lines.append(f"note: {note}")
    lines.append("files: " + ", ".join(str(p) for p in paths if p is not None))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, *, default_out: str | os.PathLike | None = None) -> int:
    args, names = _parse(argv, default_out)
    if args.list:
        return _list()

    out = Path(args.out)
    reports: list[str] = []
    status = 0

    if args.plot_only:
        for name in names:
            json_path = out / f"{name}.json"
            if not json_path.is_file():
                print(f"{name}: no results file {json_path}; run the sweep first", file=sys.stderr)
                status = 1
                continue
            meta, rows = read_results(json_path)
            notes = list(meta.get("notes") or [])
            pngs = _plot(name, meta, rows, out, notes)
            extra = _extras(name, meta, rows, out, notes)
            reports.append(_report(name, meta, rows, [json_path, *pngs, *extra], notes))
        print("\n\n".join(reports))
        return status

    gpu = gpuopt.cuda_available()
    if not gpu and not all(STUDIES[n].gpu_only for n in names):
        print(f"no usable GPU: {gpuopt.cuda_unavailable_reason()}; running the CPU variants at small sizes",
              flush=True)
    tiny = args.tiny or os.environ.get(TINY_ENV, "") not in ("", "0")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    plan = RunSettings(gpu=gpu, quick=args.quick, tiny=tiny, seed=seed, progress=not args.quiet)
    base_meta = metadata()
    for name in names:
        study = STUDIES[name]
        if study.gpu_only and not gpu:
            # Nothing to measure without a GPU: say so, write nothing, and go on.
            reports.append(f"== {name}: {study.title}\nskipped: it needs a GPU "
                           f"({gpuopt.cuda_unavailable_reason()}); nothing written")
            continue
        t0 = time.perf_counter()
        try:
            result = study.run(plan)
        except Exception:  # noqa: BLE001 - a broken study must not stop the others
            status = 1
            reports.append(f"== {name}: FAILED\n{traceback.format_exc()}")
            print(f"{name}: failed\n{traceback.format_exc()}", file=sys.stderr)
            continue
        meta: dict[str, Any] = {**base_meta, "sweep": name, "title": study.title, "description": study.description,
                                "op": study.op, "plan": plan.as_dict(), "seed": seed,
                                "variants": list(dict.fromkeys(r["variant"] for r in result.rows if "variant" in r)),
                                "command": " ".join(["python -m gpuopt.bench", *(argv if argv is not None
                                                                                 else sys.argv[1:])]),
                                "elapsed_s": round(time.perf_counter() - t0, 2), **result.meta,
                                "notes": list(result.notes)}
        csv_path, json_path = write_results(name, result.rows, meta, out, columns=study.columns)
        notes = list(result.notes)
        pngs = _plot(name, meta, result.rows, out, notes)
        extra = _extras(name, meta, result.rows, out, notes)
        if any(r.get("error") for r in result.rows):
            status = 1
        reports.append(_report(name, meta, result.rows, [csv_path, json_path, *pngs, *extra], notes))
    print("\n\n".join(reports))
    return status


if __name__ == "__main__":
    sys.exit(main())
