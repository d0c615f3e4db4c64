"""Run metadata: where and how a run happened (gpuopt version and commit, device, driver, CUDA runtime, cuBLAS and
cuDNN versions, host, time), as a dict (:func:`metadata`) and as the one line the command lines print
(:func:`environment_line`). Infrastructure: the op families' commands (``python -m gpuopt.kmeans``, ``python -m
gpuopt.models``) and the benchmarks (``gpuopt.bench.results``) read it from here."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import numpy as np

import gpuopt
from gpuopt._ext import cuda_available

__all__ = ["metadata", "format_metadata", "environment_line", "commit", "version_str", "lib_version_str"]


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def commit() -> str:
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


def version_str(v: Any) -> str | None:
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


def lib_version_str(v: Any) -> str | None:
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
        "commit": commit(),
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
        "driver_version": version_str(dev.get("driver_version")),
        "runtime_version": version_str(dev.get("runtime_version")),
        "driver_version_raw": dev.get("driver_version"),
        "runtime_version_raw": dev.get("runtime_version"),
        "cublas_runtime_version": dev.get("cublas_runtime_version"),
        "cudnn_runtime_version": dev.get("cudnn_runtime_version"),
        "cublas_version": lib_version_str(dev.get("cublas_runtime_version")),
        "cudnn_version": lib_version_str(dev.get("cudnn_runtime_version")),
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
