"""Results files and run metadata: :func:`write_results` / :func:`read_results` (``<name>.csv`` and
``<name>.json``); :func:`metadata` (where and how results were produced), :func:`format_metadata` and
:func:`environment_line` come from the infrastructure module ``gpuopt._runinfo``, which the op families'
commands read too."""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from gpuopt._runinfo import environment_line, format_metadata, metadata

__all__ = ["metadata", "format_metadata", "environment_line", "write_results", "read_results"]


# --------------------------------------------------------------------------- results files


def _jsonable(value: Any) -> Any:
    """Plain JSON values: NumPy scalars/arrays unwrapped, tuples as lists, NaN/inf as None."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "__dataclass_fields__"):
        return _jsonable(asdict(value))
    return str(value)


def _csv_cell(value: Any) -> str:
    value = _jsonable(value)
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def write_results(name: str, rows: list[dict], meta: Mapping[str, Any], out_dir: str | os.PathLike,
                  *, columns: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Write ``<out_dir>/<name>.csv`` and ``<out_dir>/<name>.json``.

    The CSV has one row per measurement; its columns are ``columns`` (when given) then
    every other key in order of first appearance, so the order is stable for a sweep.
    Empty cells are None/NaN; dict and list cells are JSON text; booleans are
    ``true``/``false``. The JSON is ``{"meta": meta, "rows": rows}`` (NaN/inf as null).

    Returns
    -------
    (csv_path, json_path)
    """
    if not isinstance(name, str) or not name or any(c in name for c in "/\\"):
        raise ValueError(f"name must be a plain file stem, got {name!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cols = list(dict.fromkeys([*(columns or ()), *(k for row in rows for k in row)]))
    csv_path, json_path = out / f"{name}.csv", out / f"{name}.json"
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(cols)
        for row in rows:
            writer.writerow([_csv_cell(row.get(c)) for c in cols])
    payload = {"meta": _jsonable(dict(meta)), "rows": [_jsonable(dict(r)) for r in rows]}
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    tmp.replace(json_path)
    return csv_path, json_path


def read_results(json_path: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(meta, rows) of a JSON file written by :func:`write_results`."""
    data = json.loads(Path(json_path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "meta" not in data or "rows" not in data:
        raise ValueError(f"{json_path}: not a gpuopt.bench results file (expected 'meta' and 'rows')")
    return data["meta"], data["rows"]
