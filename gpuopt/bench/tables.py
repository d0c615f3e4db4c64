"""Text and Markdown tables shared by the studies: cell formats, fixed-width tables,
captioned sections, the error and not-applicable lists, and the table files they write."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .results import format_metadata
from .study import finite_number, row_label

__all__ = ["Section", "fmt_cell", "gflops_cell", "format_table", "errors_note", "md_table", "device_short",
           "skipped_note", "ms_cell", "sections_text", "sections_markdown", "extras_file"]

#: A captioned table: (caption, headers, body, alignment of the leading columns).
Section = tuple[str, Sequence[str], Sequence[Sequence[str]], str]


def fmt_cell(value: Any, spec: str = ".3g") -> str:
    """A cell: None/NaN "-", booleans "yes"/"NO", floats with ``spec``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return format(value, spec)
    return str(value)


def gflops_cell(value: Any) -> str:
    """A GFLOP/s cell: 4 significant digits (small values keep theirs)."""
    v = finite_number(value)
    if v is None:
        return "-"
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"


def format_table(headers: Sequence[str], body: Sequence[Sequence[Any]], align: str = "") -> str:
    """A plain fixed-width text table (values already formatted or formatted with ``fmt_cell``).

    ``align``: one letter per leading column, ``l`` (left) or ``r`` (right); the rest right.
    """
    cells = [[str(h) for h in headers]] + [[c if isinstance(c, str) else fmt_cell(c) for c in row] for row in body]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    just = [(align[i] if i < len(align) else "r") for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) if j == "l" else c.rjust(w) for c, w, j in zip(r, widths, just)).rstrip()
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def errors_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """The failed rows, listed under a table."""
    def where(r: Mapping[str, Any]) -> str:
        key = next((k for k in ("n", "conf", "dataset") if k in r), None)
        return f" @ {key}={r[key]}" if key else ""

    bad = [f"  {row_label(r)}{where(r)}: {r['error']}" for r in rows if r.get("error")]
    return ("\nerrors:\n" + "\n".join(bad)) if bad else ""


def md_table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A Markdown table (``|`` in cells escaped)."""
    def cell(c: Any) -> str:
        return str(c).replace("|", "\\|")

    out = ["| " + " | ".join(cell(h) for h in headers) + " |",
           "| " + " | ".join("---" for _ in headers) + " |"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in body]
    return "\n".join(out)


def device_short(meta: Mapping[str, Any] | None) -> str:
    """The run's device for captions and legends: "H200" (vendor dropped), or "CPU"."""
    gpu = (meta or {}).get("gpu")
    if not gpu:
        return "CPU"
    return str(gpu.get("name") or "GPU").replace("NVIDIA ", "")


def skipped_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows a variant rejected up front (shape limits), listed under a table."""
    def where(r: Mapping[str, Any]) -> str:
        bits = [f"{k}={r[k]}" for k in ("figure", "part", "conf", "layer", "B") if r.get(k) is not None]
        return f" @ {' '.join(bits)}" if bits else ""

    seen = list(dict.fromkeys(f"  {row_label(r)}{where(r)}: {r['skipped']}" for r in rows if r.get("skipped")))
    return ("\nnot applicable (the variant rejects the shape up front):\n" + "\n".join(seen)) if seen else ""


def ms_cell(row: Mapping[str, Any] | None) -> str:
    """A time cell: the median ms, "n/a" (the variant rejects the shape), "failed" or "-"."""
    if row is None:
        return "-"
    if row.get("skipped"):
        return "n/a"
    if row.get("error"):
        return "failed"
    return fmt_cell(finite_number(row.get("median_ms")), ".4g")


def sections_text(sections: Sequence[Section]) -> str:
    """Captioned tables as text (captions wrapped at 120 columns)."""
    return "\n\n".join(textwrap.fill(caption, 120, break_on_hyphens=False) + "\n" + format_table(headers, body, align)
                       for caption, headers, body, align in sections)


def sections_markdown(title: str, meta: Mapping[str, Any], sections: Sequence[Section]) -> str:
    """Captioned tables as Markdown, under a title and where they were measured."""
    lines = [f"### {title}", "", f"Measured with {format_metadata(meta)}.", ""]
    for caption, headers, body, _ in sections:
        lines += [caption.rstrip(".") + ".", "", md_table(headers, body), ""]
    return "\n".join(lines)


def extras_file(file: str, render: Callable[[Mapping[str, Any], Sequence[Mapping[str, Any]]], str]
                ) -> Callable[..., list[Path]]:
    """A study's ``extras``: write ``<out_dir>/<file>`` from ``render(meta, rows)``."""

    def extras(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], out_dir: Any) -> list[Path]:
        path = Path(out_dir) / file
        path.write_text(render(meta, rows), encoding="utf-8")
        return [path]

    extras.__doc__ = f"``<out>/{file}``: {(render.__doc__ or '').strip()}"
    return extras
