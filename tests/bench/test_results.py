"""Run metadata and results files: metadata(), format_metadata(), write_results() / read_results()."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import gpuopt
from gpuopt import bench
from gpuopt import _runinfo
from gpuopt.bench import results


def test_metadata_keys(monkeypatch):
    monkeypatch.delenv("GPUOPT_COMMIT", raising=False)
    meta = bench.metadata()
    for key in ("gpuopt_version", "commit", "timestamp_utc", "host", "python", "numpy", "build_info", "gpu"):
        assert key in meta, key
    assert meta["gpuopt_version"] == gpuopt.__version__
    assert meta["numpy"] == np.__version__
    assert meta["timestamp_utc"].endswith("Z")
    assert meta["build_info"]["version"] == gpuopt.__version__
    assert isinstance(meta["commit"], str) and meta["commit"]
    if gpuopt.cuda_available():
        gpu = meta["gpu"]
        for key in ("name", "compute_capability", "multiprocessors", "total_memory_bytes", "driver_version",
                    "runtime_version", "cublas_runtime_version", "cudnn_runtime_version"):
            assert key in gpu, key
    else:
        assert meta["gpu"] is None and meta["gpu_unavailable_reason"]
    json.dumps(results._jsonable(meta))  # serialisable
    assert "gpuopt" in bench.format_metadata(meta)
    monkeypatch.setenv("GPUOPT_COMMIT", "deadbee")
    assert bench.metadata()["commit"] == "deadbee"


def test_lib_version_strings():
    assert _runinfo.lib_version_str(130100) == "13.1.0"
    assert _runinfo.lib_version_str(91900) == "9.19.0"
    assert _runinfo.lib_version_str(8907) == "8.9.7"
    assert _runinfo.lib_version_str(None) is None
    assert _runinfo.version_str(12040) == "12.4"


def test_write_results_round_trip(tmp_path):
    rows = [{"n": 128, "variant": "cpu", "median_ms": 1.5, "ok": True, "details": {"a": 1.0}, "error": None},
            {"n": 256, "variant": "naive", "median_ms": float("nan"), "ok": False, "extra": np.float32(2.5),
             "error": "RuntimeError: boom"}]
    meta = {"sweep": "demo", "gpu": None, "shape": (1, 2), "seed": np.int64(7)}
    csv_path, json_path = bench.write_results("demo", rows, meta, tmp_path / "sub",
                                              columns=["variant", "n", "median_ms"])
    assert csv_path == tmp_path / "sub" / "demo.csv" and json_path == tmp_path / "sub" / "demo.json"
    with open(csv_path, newline="") as fh:
        table = list(csv.reader(fh))
    assert table[0] == ["variant", "n", "median_ms", "ok", "details", "error", "extra"]  # stable order
    assert table[1] == ["cpu", "128", "1.5", "true", '{"a": 1.0}', "", ""]
    assert table[2] == ["naive", "256", "", "false", "", "RuntimeError: boom", "2.5"]
    data = json.loads(json_path.read_text())
    assert data["meta"] == {"sweep": "demo", "gpu": None, "shape": [1, 2], "seed": 7}
    assert data["rows"][0]["details"] == {"a": 1.0} and data["rows"][1]["median_ms"] is None
    meta2, rows2 = bench.read_results(json_path)
    assert meta2["sweep"] == "demo" and rows2[1]["extra"] == 2.5
    with pytest.raises(ValueError):
        bench.write_results("../x", rows, meta, tmp_path)
