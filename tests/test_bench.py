"""The benchmark harness (gpuopt.bench): timing, metadata, results files, CLI, figures."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import gpuopt
from gpuopt import bench
from gpuopt.bench import sweeps
from gpuopt.bench.__main__ import main

SWEEP_NAMES = ["matmul", "conv2d", "kmeans", "sparse"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- measure


def test_measure_cpu_stats_are_sane():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.002)

    s = bench.measure(fn, warmup=2, repeat=7, device="cpu")
    assert len(calls) == 9  # warm-up calls are made but not recorded
    assert s.repeats == 7 and len(s.samples) == 7 and s.device == "cpu"
    assert s.min_ms <= s.median_ms <= s.max_ms
    assert s.min_ms <= s.mean_ms <= s.max_ms
    assert s.std_ms >= 0
    assert s.min_ms >= 1.9  # it slept 2 ms each time
    assert s.median_ms == pytest.approx(float(np.median(s.samples)))
    assert s.overhead_hidden and s.spin_us is None
    row = s.row("t_")
    assert row["t_median_ms"] == s.median_ms and row["t_repeats"] == 7


def test_measure_repeat_min_and_max_time():
    fast = bench.measure(lambda: None, warmup=0, repeat=3, min_time_s=0.001, device="cpu")
    assert fast.repeats >= 3  # min_time_s keeps going past repeat for tiny work (bounded)
    assert fast.repeats <= 300
    slow = bench.measure(lambda: time.sleep(0.01), warmup=0, repeat=1000, max_time_s=0.05, device="cpu")
    assert 1 <= slow.repeats < 20  # the time budget stops it early
    one = bench.measure(lambda: time.sleep(0.01), warmup=0, repeat=5, max_time_s=0.0, device="cpu")
    assert one.repeats == 1  # at least one sample


def test_measure_rejects_bad_arguments():
    with pytest.raises(ValueError, match="repeat"):
        bench.measure(lambda: None, repeat=0, device="cpu")
    with pytest.raises(ValueError, match="warmup"):
        bench.measure(lambda: None, warmup=-1, device="cpu")
    with pytest.raises(ValueError, match="device"):
        bench.measure(lambda: None, device="tpu")
    with pytest.raises(TypeError):
        bench.measure(42, device="cpu")


@pytest.mark.skipif(gpuopt.cuda_available(), reason="checks the behaviour without a GPU")
def test_measure_without_gpu():
    assert bench.measure(lambda: None, warmup=0, repeat=2).device == "cpu"  # the default falls back
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        bench.measure(lambda: None, device="gpu")


def test_stats_from_samples_and_median_timing():
    s = bench.Stats.from_samples([3.0, 1.0, 2.0])
    assert (s.median_ms, s.min_ms, s.max_ms, s.mean_ms, s.repeats) == (2.0, 1.0, 3.0, 2.0, 3)
    assert s.std_ms == pytest.approx(1.0)
    with pytest.raises(ValueError):
        bench.Stats.from_samples([])
    ts = [gpuopt.Timing(1.0, 10.0, 0.5, "gpu", {"loop_h2d_ms": 0.1}),
          gpuopt.Timing(3.0, 12.0, 0.5, "gpu", {"loop_h2d_ms": 0.3}),
          gpuopt.Timing(2.0, 11.0, 1.5, "gpu", {})]
    m = bench.median_timing(ts)
    assert m["h2d_ms"] == 2.0 and m["kernel_ms"] == 11.0 and m["d2h_ms"] == 0.5
    assert m["total_ms"] == 14.5 and m["transfer_ms"] == 3.5  # medians of the per-run sums
    assert m["details"] == {"loop_h2d_ms": pytest.approx(0.2)} and m["timing_device"] == "gpu"


# --------------------------------------------------------------------------- metadata, files


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
    json.dumps(bench._jsonable(meta))  # serialisable
    assert "gpuopt" in bench.format_metadata(meta)
    monkeypatch.setenv("GPUOPT_COMMIT", "deadbee")
    assert bench.metadata()["commit"] == "deadbee"


def test_lib_version_strings():
    assert bench._lib_version_str(130100) == "13.1.0"
    assert bench._lib_version_str(91900) == "9.19.0"
    assert bench._lib_version_str(8907) == "8.9.7"
    assert bench._lib_version_str(None) is None
    assert bench._version_str(12040) == "12.4"


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


def test_progress_counter_lines():
    buf = io.StringIO()
    with bench.Progress(3, "demo", stream=buf) as p:
        for i in range(3):
            p.update(f"step{i}")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3 and lines[-1].startswith("[demo] 3/3 step2") and "ETA" in lines[0]
    quiet = io.StringIO()
    with bench.Progress(3, "demo", enabled=False, stream=quiet) as p:
        p.update()
    assert quiet.getvalue() == ""


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def data_env(monkeypatch):
    """Point the sweeps at the real data when this checkout has it (else they skip it, with a note)."""
    root = gpuopt.datasets.data_dir(required=False)
    if root is not None:
        monkeypatch.setenv("GPUOPT_DATA_DIR", str(root))
    return root


def test_cli_quick_tiny_runs_every_sweep_and_replots(tmp_path, capsys, data_env):
    pytest.importorskip("matplotlib")
    out = tmp_path / "results"
    rc = main(["--quick", "--tiny", "--quiet", "--seed", "3", "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    if not gpuopt.cuda_available():
        assert printed.count("no usable GPU:") == 1 and "running the CPU variants at small sizes" in printed
    for name in SWEEP_NAMES:
        assert f"== {name}" in printed
        with open(out / f"{name}.csv", newline="") as fh:
            header = next(csv.reader(fh))
            n_rows = sum(1 for _ in fh)
        assert header[: len(sweeps.SWEEPS[name].columns)] == list(sweeps.SWEEPS[name].columns)
        assert n_rows >= 1
        meta, rows = bench.read_results(out / f"{name}.json")
        assert meta["sweep"] == name and meta["seed"] == 3 and meta["plan"]["tiny"] is True
        assert "commit" in meta and "gpu" in meta and isinstance(meta["notes"], list)
        assert len(rows) == n_rows and not any(r.get("error") for r in rows)
        assert (out / f"{name}.png").read_bytes()[:8] == PNG_MAGIC
    # What each sweep measured, in CPU mode at least the cpu variant.
    _, mm = bench.read_results(out / "matmul.json")
    assert {r["n"] for r in mm} == {32, 64} and all(r["gflops"] > 0 for r in mm)
    checked = [r["rel_err"] for r in mm if r.get("rel_err") is not None]
    assert checked and all(e < 1e-5 for e in checked)
    _, cv = bench.read_results(out / "conv2d.json")
    assert [r["conf"] for r in cv if r["variant"] == cv[0]["variant"]] == ["conf1", "conf2", "conf3", "conf4"]
    assert all(r["gflops"] > 0 and r["P"] == (r["H"] - r["R"]) // r["u"] + 1 for r in cv)
    km_meta, km = bench.read_results(out / "kmeans.json")
    assert km_meta["k"] == 3 and km_meta["threshold"] == 0.001
    assert {r["dataset"] for r in km} >= set(gpuopt.datasets.KMEANS_SHAPES)
    if data_env is not None and (data_env / "kmeans_liao" / "color17695.bin").is_file():
        assert {"color17695", "edge17695", "texture17695"} <= {r["dataset"] for r in km}
    assert all(r["iterations"] >= 1 and r["computation_ms"] > 0 and r["kernel_ms"] > 0 for r in km)
    sp_meta, sp = bench.read_results(out / "sparse.json")
    assert "generated filters, one non-zero per 3x3 slice; the lab's filters are not public" in sp_meta["filters"]
    cpu = next(r for r in sp if r["variant"] == "cpu")
    assert cpu["total_ms"] == pytest.approx(cpu["kernel_ms"] + cpu["transfer_ms"], rel=0.5, abs=1.0)
    assert all(r["exact_vs_cpu"] for r in sp if r["variant"] != "cpu")

    # --plot-only redraws every figure from the JSON alone.
    for name in SWEEP_NAMES:
        (out / f"{name}.png").unlink()
    (out / "matmul.csv").unlink()  # not needed for plotting
    assert main(["--plot-only", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for name in SWEEP_NAMES:
        assert (out / f"{name}.png").read_bytes()[:8] == PNG_MAGIC
        assert f"== {name}" in printed


def test_cli_plot_only_missing_results(tmp_path, capsys):
    assert main(["kmeans", "--plot-only", "--out", str(tmp_path)]) == 1
    assert "no results file" in capsys.readouterr().err


def test_cli_unknown_sweep_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gpuopt.bench", "matmul", "fft", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert "unknown sweep 'fft'" in proc.stderr
    assert "valid sweeps: matmul, conv2d, kmeans, sparse" in proc.stderr
    assert not list(tmp_path.iterdir())  # nothing ran


def test_benchmark_script_runs_from_repo_root(tmp_path, data_env):
    # benchmarks/sparse.py next to gpuopt/: the script must import the installed package.
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, os.path.join("benchmarks", "sparse.py"), "--tiny", "--quiet", "--out",
                           str(tmp_path)], capture_output=True, text=True, cwd=repo, env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "== sparse" in proc.stdout and (tmp_path / "sparse.json").is_file()
    assert not (tmp_path / "matmul.json").exists()


def test_cli_list(capsys):
    assert main(["--list"]) == 0
    printed = capsys.readouterr().out
    for name in SWEEP_NAMES:
        assert name in printed
    assert "cublas" in printed and "cpu (usable)" in printed


def test_sweeps_skip_missing_variants(monkeypatch):
    # A variant another engineer has not registered yet is skipped with a note.
    notes: list[str] = []
    plan = sweeps.Plan(gpu=True, tiny=True)
    monkeypatch.setattr(gpuopt.registry.Variant, "available", property(lambda self: True))
    chosen = sweeps._select("conv2d", ("no_such_variant", "cpu"), plan, notes)
    assert chosen == ["cpu"]
    assert any("no_such_variant" in n and "not registered" in n for n in notes)


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_measure_gpu_matmul_hides_launch_overhead(rng):
    a = gpuopt.to_device(rng.random((1024, 1024), dtype=np.float32))
    s = bench.measure(lambda: gpuopt.matmul(a, a, variant="naive"), warmup=2, repeat=10)
    assert s.device == "gpu" and s.repeats == 10 and s.median_ms > 0 and s.overhead_hidden
    assert s.min_ms <= s.median_ms <= s.max_ms

    tiny = gpuopt.to_device(rng.random((8, 8), dtype=np.float32))
    quick = bench.measure(lambda: gpuopt.matmul(tiny, tiny, variant="naive"), warmup=3, repeat=20)
    assert quick.overhead_hidden and quick.median_ms < 0.1, quick  # a few microseconds of kernel

    # The host sleeps 2 ms inside fn before queuing the kernel: without the spin the events
    # would measure >= 2 ms; with it they bracket the kernel only (the spin grows to cover it).
    def slow_host():
        time.sleep(0.002)
        return gpuopt.matmul(tiny, tiny, variant="naive")

    hidden = bench.measure(slow_host, warmup=2, repeat=10)
    assert hidden.spin_us >= 2000 and hidden.overhead_hidden
    assert hidden.median_ms < 0.5, hidden

    flushed = bench.measure(lambda: gpuopt.matmul(a, a, variant="cublas"), warmup=1, repeat=5, flush_l2=True)
    assert flushed.median_ms > 0 and math.isfinite(flushed.median_ms)
