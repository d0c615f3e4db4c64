"""Results files and run metadata: :func:`metadata` (where and how results were produced),
:func:`format_metadata`, :func:`write_results` / :func:`read_results` (``<name>.csv`` and
``<name>.json``)."""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import socket
import subprocess
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

import gpuopt
from gpuopt._ext import cuda_available

__all__ = ["metadata", "format_metadata", "environment_line", "write_results", "read_results"]


# --------------------------------------------------------------------------- metadata


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _commit() -> str:
    """GPUOPT_COMMIT, else the short hash (+ "-dirty") of the gpuopt checkout, else "unknown"."""
    env = os.environ.get("GPUOPT_COMMIT", "").strip()
    if env:
        return env
    package = Path(gpuopt.__file__).resolve().parent
    for start in (package, Path.cwd()):
        top = _git(["rev-parse", "--show-toplevel"], start)
        if not top:
            continue
        root = Path(top)
        # Only a gpuopt checkout counts (not some other repository the cwd happens to be in).
        if not ((root / "gpuopt" / "__init__.py").is_file() and (root / "pyproject.toml").is_file()):
            continue
        head = _git(["rev-parse", "--short", "HEAD"], root)
        if not head:
            continue
        status = _git(["status", "--porcelain"], root)
        return head + ("-dirty" if status else "")
    # An installed package run outside any checkout: the commit its build recorded (gpuopt/_build.json).
    from gpuopt._compiled import build_record

    return build_record(package).get("commit") or "unknown"


def _version_str(v: Any) -> str | None:
    """CUDA-style integer version (12040 -> "12.4") as text."""
    if v is None:
        return None
    try:
        v = int(v)
    except (TypeError, ValueError):
        return str(v)
    if v <= 0:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def _lib_version_str(v: Any) -> str | None:
    """cuBLAS / cuDNN integer version as text: 130100 -> "13.1.0", 91900 -> "9.19.0", 8907 -> "8.9.7"."""
    try:
        v = int(v)
    except (TypeError, ValueError):
        return None if v is None else str(v)
    if v <= 0:
        return None
    if v >= 10000:
        return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"


def metadata() -> dict[str, Any]:
    """Where and how results were produced.

    Returns
    -------
    dict
        ``gpuopt_version``, ``commit`` (``$GPUOPT_COMMIT``, else ``git rev-parse --short
        HEAD`` of the gpuopt checkout, "-dirty" appended when ``git status --porcelain``
        is non-empty, else "unknown"), ``timestamp_utc``, ``host``, ``python``, ``numpy``,
        ``platform``, ``cpu_count``, ``build_info`` (:func:`gpuopt.build_info`), and
        ``gpu``: None without a usable GPU (``gpu_unavailable_reason`` says why), else a
        dict with ``name``, ``compute_capability`` ("9.0"), ``multiprocessors``,
        ``total_memory_bytes``, ``memory_gib``, ``l2_cache_bytes``, ``driver_version`` /
        ``runtime_version`` ("12.4"), ``cublas_version`` / ``cudnn_version`` ("13.1.0", with
        the raw ``cublas_runtime_version`` / ``cudnn_runtime_version``) and the rest of :func:`gpuopt.device_info`.
    """
    build = dict(gpuopt.build_info())
    meta: dict[str, Any] = {
        "gpuopt_version": gpuopt.__version__,
        "commit": _commit(),
        "timestamp_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "build_info": build,
        "gpu": None,
        "gpu_unavailable_reason": None,
    }
    if not cuda_available():
        meta["gpu_unavailable_reason"] = gpuopt.cuda_unavailable_reason()
        return meta
    dev = dict(gpuopt.device_info() or {})
    cc = dev.get("compute_capability")
    gpu = dict(dev)
    gpu.update({
        "name": dev.get("name"),
        "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
        "multiprocessors": dev.get("multiprocessors"),
        "total_memory_bytes": dev.get("total_memory_bytes"),
        "memory_gib": round(dev["total_memory_bytes"] / 2**30, 1) if dev.get("total_memory_bytes") else None,
        "l2_cache_bytes": dev.get("l2_cache_bytes"),
        "driver_version": _version_str(dev.get("driver_version")),
        "runtime_version": _version_str(dev.get("runtime_version")),
        "driver_version_raw": dev.get("driver_version"),
        "runtime_version_raw": dev.get("runtime_version"),
        "cublas_runtime_version": dev.get("cublas_runtime_version"),
        "cudnn_runtime_version": dev.get("cudnn_runtime_version"),
        "cublas_version": _lib_version_str(dev.get("cublas_runtime_version")),
        "cudnn_version": _lib_version_str(dev.get("cudnn_runtime_version")),
    })
    meta["gpu"] = gpu
    return meta


def environment_line() -> str:
    """This run's :func:`metadata` as :func:`format_metadata`'s one line (what the command lines print)."""
    return format_metadata(metadata())


def format_metadata(meta: Mapping[str, Any]) -> str:
    """One line: gpuopt version and commit, device (or "no GPU"), host, time."""
    gpu = meta.get("gpu")
    if gpu:
        where = (f"{gpu.get('name')} (sm_{str(gpu.get('compute_capability', '')).replace('.', '')}, "
                 f"{gpu.get('multiprocessors')} SMs, {gpu.get('memory_gib')} GiB, driver {gpu.get('driver_version')}, "
                 f"runtime {gpu.get('runtime_version')}, cuBLAS {gpu.get('cublas_version')}, "
                 f"cuDNN {gpu.get('cudnn_version')})")
    else:
        where = "no GPU (CPU only)"
    return (f"gpuopt {meta.get('gpuopt_version')} @ {meta.get('commit')} | {where} | host {meta.get('host')}, "
            f"{meta.get('cpu_count')} CPUs | Python {meta.get('python')}, NumPy {meta.get('numpy')} | "
            f"{meta.get('timestamp_utc')}")


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
