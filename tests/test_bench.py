"""The benchmark harness (gpuopt.bench): timing, metadata, results files, CLI, figures."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import gpuopt
from gpuopt import bench
from gpuopt.bench import results, sweeps
from gpuopt.bench.__main__ import main

SWEEP_NAMES = ["matmul", "matmul_report", "conv2d", "cs6235", "ece408", "kmeans", "sparse"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: The figures of the sweeps that draw more than <name>.png.
FIGURES = {"cs6235": [f"cs6235_fig{i}.png" for i in range(1, 9)],
           "ece408": ["ece408_op_time.png", "ece408_tile_width.png"]}


def figures(name):
    return FIGURES.get(name, [f"{name}.png"])


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
    json.dumps(results._jsonable(meta))  # serialisable
    assert "gpuopt" in bench.format_metadata(meta)
    monkeypatch.setenv("GPUOPT_COMMIT", "deadbee")
    assert bench.metadata()["commit"] == "deadbee"


def test_lib_version_strings():
    assert results._lib_version_str(130100) == "13.1.0"
    assert results._lib_version_str(91900) == "9.19.0"
    assert results._lib_version_str(8907) == "8.9.7"
    assert results._lib_version_str(None) is None
    assert results._version_str(12040) == "12.4"


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
        for png in figures(name):
            assert (out / png).read_bytes()[:8] == PNG_MAGIC, png
    # What each sweep measured, in CPU mode at least the cpu variant.
    _, mm = bench.read_results(out / "matmul.json")
    assert {r["n"] for r in mm} == {32, 64} and all(r["gflops"] > 0 for r in mm)
    checked = [r["rel_err"] for r in mm if r.get("rel_err") is not None]
    assert checked and all(e < 1e-5 for e in checked)
    assert "| step | kernel | GFLOP/s | % cuBLAS |" in (out / "matmul_ladder.md").read_text()
    _, mr = bench.read_results(out / "matmul_report.json")
    assert [r["n"] for r in mr if r["label"] == mr[0]["label"]] == list(sweeps.REPORT_SIZES["tiny"])
    assert all(r["check_ok"] and r["max_rel_err"] < 1e-3 for r in mr)
    _, cv = bench.read_results(out / "conv2d.json")
    assert [r["conf"] for r in cv if r["variant"] == cv[0]["variant"]] == ["conf1", "conf2", "conf3", "conf4"]
    assert all(r["P"] == (r["H"] - r["R"]) // r["u"] + 1 for r in cv)
    assert all(r["gflops"] > 0 for r in cv if not r.get("skipped"))  # skipped: a shape the variant rejects
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

    # The report sweeps (CPU mode: the cpu variant on every figure / table); the reports' numbers in the tables.
    cpu_only = not gpuopt.cuda_available()
    cs_meta, cs = bench.read_results(out / "cs6235.json")
    assert {r["figure"] for r in cs} == {f["figure"] for f in sweeps.CS6235_FIGURES}
    assert all(r["median_ms"] > 0 for r in cs if not r.get("skipped"))
    assert all(r["variant"] == "cpu" for r in cs) == cpu_only
    assert {r["conf"] for r in cs if r["figure"] == "fig7"} == {"conf3", "conf4"}
    assert cs_meta["report"]["gpu"] == "a K80-class card" and "no number" in cs_meta["report"]["numbers"]
    assert "printed no numbers for this figure" in (out / "cs6235.md").read_text()
    ec_meta, ec = bench.read_results(out / "ece408.json")
    assert {r["part"] for r in ec} == {"op_time", "tile_width", "mnist"}
    assert all(r["variant"] == "cpu" for r in ec) == cpu_only
    assert all(r["gflops"] > 0 and r["B"] == 10 for r in ec if not r.get("skipped"))
    m2 = next(r for r in ec if r["part"] == "op_time" and r["layer"] == "conv2")
    assert m2["report_ms"] == 25.613 and m2["report_gpu"] == "a P100-class card" and "l.132" in m2["report_source"]
    md = (out / "ece408_op_time.md").read_text()
    _assert_ece408_numbers(md)
    checked = [r for r in cs + ec if r.get("rel_err") is not None and r["label"] != "cudnn-any"]
    assert all(r["rel_err"] < 1e-4 for r in checked), [(r["label"], r["rel_err"]) for r in checked
                                                        if r["rel_err"] >= 1e-4]
    assert checked or cpu_only  # on a GPU every variant is checked against cuDNN
    assert ec_meta["report"]["op_times"]["tiled"]["times"]["10000"]["conv2_s"] == 0.387863

    # --plot-only redraws every figure from the JSON alone.
    for name in SWEEP_NAMES:
        for png in figures(name):
            (out / png).unlink()
    (out / "matmul.csv").unlink()  # not needed for plotting
    (out / "matmul_ladder.md").unlink()
    (out / "ece408_op_time.md").unlink()
    assert main(["--plot-only", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for name in SWEEP_NAMES:
        for png in figures(name):
            assert (out / png).read_bytes()[:8] == PNG_MAGIC, png
        assert f"== {name}" in printed
    assert (out / "matmul_ladder.md").is_file()  # redrawn from the JSON too
    assert (out / "ece408_op_time.md").read_text() == md


def test_cli_plot_only_missing_results(tmp_path, capsys):
    assert main(["kmeans", "--plot-only", "--out", str(tmp_path)]) == 1
    assert "no results file" in capsys.readouterr().err


def test_cli_unknown_sweep_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gpuopt.bench", "matmul", "fft", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert "unknown sweep 'fft'" in proc.stderr
    assert "valid sweeps: matmul, matmul_report, conv2d, cs6235, ece408, kmeans, sparse" in proc.stderr
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
    assert "matmul_report" in printed and "naive" in printed.split("matmul_report", 1)[1]
    cs = printed.split("\ncs6235", 1)[1].split("\nece408", 1)[0]
    assert "general (" in cs and "unroll_nk (" in cs and "cudnn" in cs
    ec = printed.split("\nece408", 1)[1].split("\nkmeans", 1)[0]
    assert "tiled_corner_turn (" in ec and "implicit_gemm" in ec and "basic (" in ec
    assert "unroll_constmem (" in printed.split("\nconv2d", 1)[1].split("\ncs6235", 1)[0]  # every conv2d variant


def test_sweeps_skip_missing_variants(monkeypatch):
    # A variant another engineer has not registered yet is skipped with a note.
    notes: list[str] = []
    plan = sweeps.Plan(gpu=True, tiny=True)
    monkeypatch.setattr(gpuopt.registry.Variant, "available", property(lambda self: True))
    chosen = sweeps._select("conv2d", ("no_such_variant", "cpu"), plan, notes)
    assert chosen == ["cpu"]
    assert any("no_such_variant" in n and "not registered" in n for n in notes)


# --------------------------------------------------------------------------- matmul: the report, the ladder

H200 = {"name": "NVIDIA H200", "compute_capability": (9, 0), "multiprocessors": 132, "clock_rate_khz": 1980000}


def test_report_numbers_transcribed():
    # Every printed row: five cases, and its "total" is their sum (as the report's column).
    versions = {v for v, _, _ in sweeps.REPORT_VERSIONS}
    assert sweeps.REPORT_CASES == (8, 10, 32, 33, 1000)
    seen = []
    for t in sweeps.REPORT_TABLES:
        for r in t["rows"]:
            assert r["version"] in versions and len(r["gflops"]) == 5
            if r["total"] is not None:
                assert sum(r["gflops"]) == pytest.approx(r["total"], rel=5e-4), (t["id"], r["version"])
            seen.append((t["id"], r["version"]))
    assert len(seen) == 8 and ("T4c", "TILE_SZ = 4") in seen
    t4a = sweeps.REPORT_TABLES[1]["rows"][0]
    assert t4a["version"] == "Original Version" and t4a["gflops"][4] == 63.6513
    # The cases' reading: n = 8, 10, 32, 33 all imply one fixed ~0.24 ms per call.
    for t in sweeps.REPORT_TABLES:
        for r in t["rows"]:
            ms = [sweeps.report_flops(n) / (g * 1e6) for n, g in zip(sweeps.REPORT_CASES[:4], r["gflops"][:4])]
            assert all(0.23 < m < 0.29 for m in ms), (t["id"], r["version"], ms)
    labels = dict((v, lb) for v, lb, _ in sweeps.REPORT_VERSIONS)
    assert labels["Memory Shared Version"] == "shared block=32"
    assert labels["Scheduling Throughput Maximized Version"] == "shared block=16"
    assert labels["TILE_SZ = 2"] == "tile_buffer tile_sz=2" and labels["Original Version"] == "naive"


def test_report_gflops_formula():
    assert sweeps.report_flops(1000) == 1999 * 1000 * 1000
    assert sweeps.report_gflops(1000, 1.0) == pytest.approx(1999.0)  # 1.999e9 flop in 1 ms
    assert sweeps.report_gflops(8, 0.24) == pytest.approx(960 / 0.24e6)  # the report's case 1 at 0.24 ms
    assert sweeps.report_gflops(1, 1e-6) == pytest.approx(1.0)


def test_fp32_peak():
    peak, text = sweeps.fp32_peak(H200)
    assert peak == pytest.approx(2 * 132 * 128 * 1.98e9 / 1e9) and 66_000 < peak < 68_000
    assert "132 SMs" in text and "128 FP32 lanes" in text
    assert sweeps.fp32_peak({**H200, "compute_capability": "9.0"})[0] == peak  # meta["gpu"] spells it "9.0"
    a100 = {"multiprocessors": 108, "clock_rate_khz": 1410000, "compute_capability": "8.0"}
    assert sweeps.fp32_peak(a100)[0] == pytest.approx(19_491.84)  # 64 lanes per SM on an A100
    assert sweeps.fp32_peak(None)[0] is None and sweeps.fp32_peak({"name": "x"})[0] is None


def _ladder_rows():
    rows = []
    for n, scale in ((1024, 0.5), (4096, 1.0)):
        for label, variant, g, info in (("naive", "naive", 5000.0, dict(registers=30, static_shared_bytes=0,
                                                                         local_bytes=0, threads=256)),
                                        ("shared block=16", "shared", 10000.0, dict(registers=40,
                                                                                     static_shared_bytes=2048,
                                                                                     dynamic_shared_bytes=0,
                                                                                     local_bytes=8, threads=256,
                                                                                     max_blocks_per_sm=8,
                                                                                     kernel="shared<16>")),
                                        ("cublas", "cublas", 50000.0, {})):
            rows.append({"n": n, "label": label, "variant": variant, "gflops": g * scale, "median_ms": 1.0, **info})
    rows.append({"n": 4096, "label": "broken", "variant": "broken", "error": "RuntimeError: boom"})
    return rows


def test_matmul_ladder_table(tmp_path):
    rows = _ladder_rows()
    meta = {"gpu": {**H200, "compute_capability": "9.0"}, "gpuopt_version": "0", "commit": "abc"}
    peak = sweeps.fp32_peak(H200)[0]
    n, steps = sweeps.matmul_ladder(rows, meta)
    assert n == 4096
    assert [s["step"] for s in steps] == [1, 2, 3, "ref"]
    naive, shared, broken, cublas = steps
    assert naive["pct_cublas"] == pytest.approx(10.0) and shared["pct_cublas"] == pytest.approx(20.0)
    assert cublas["pct_cublas"] == pytest.approx(100.0)
    assert naive["pct_peak"] == pytest.approx(100 * 5000 / peak) and cublas["pct_peak"] == pytest.approx(
        100 * 50000 / peak)
    assert shared["x_prev"] == pytest.approx(2.0) and naive["x_prev"] is None
    assert shared["registers"] == 40 and shared["local_bytes"] == 8 and broken["gflops"] is None
    assert sweeps.matmul_ladder(rows, meta, n=1024)[1][0]["pct_cublas"] == pytest.approx(10.0)
    no4096 = [r for r in rows if r["n"] == 1024]
    assert sweeps.matmul_ladder(no4096, meta)[0] == 1024  # the largest measured size instead
    # A recorded peak wins over the device's numbers.
    assert sweeps.matmul_ladder(rows, {**meta, "fp32_peak_gflops": 100000.0})[1][0]["pct_peak"] == pytest.approx(5.0)

    text = sweeps.table_matmul(rows, meta)
    assert "ladder at n = 4096" in text and "66.9 TFLOP/s" in text and "boom" in text
    [md] = sweeps.extras_matmul(meta, rows, tmp_path)
    assert md == tmp_path / "matmul_ladder.md"
    lines = md.read_text().splitlines()
    assert lines[0] == "### matmul ladder at n = 4096"
    assert "| 1 | naive | 5000 | 10.0% | 7.5% | - | 30 | 0 | 0 | 256 | - | - |" in lines
    assert "| 2 | shared block=16 | 10000 | 20.0% | 14.9% | 2.00x | 40 | 2048 | 8 | 256 | 8 | shared<16> |" in lines
    assert "| ref | cublas | 50000 | 100.0% | 74.7% | - | - | - | - | - | - | - |" in lines
    assert "| 3 | broken | failed |" in md.read_text()


@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU-like registry and device on any machine: the matmul sweeps' GPU path, run on NumPy.

    Variants naive, cublas (registered second), shared (block 16/32), tile_buffer (tile_sz
    1/2/4), coalesced (warp_layout row/column) and a 'warptile' that is 1% off; to_device is
    the identity and measure() times on the CPU.
    """
    from gpuopt.registry import Param, Variant

    def v(name, *params):
        return Variant("matmul", name, f"fake {name}", "gpuopt", True, {p.name: p for p in params})

    table = {"cpu": Variant("matmul", "cpu", "cpu", "reference", False), "naive": v("naive"), "cublas": v("cublas"),
             "shared": v("shared", Param("block", 16, (16, 32))),
             "tile_buffer": v("tile_buffer", Param("tile_sz", 1, (1, 2, 4))),
             "coalesced": v("coalesced", Param("warp_layout", "row", ("row", "column"))), "warptile": v("warptile")}
    calls = []

    def fake_matmul(a, b, *, variant=None, **params):
        calls.append((variant, tuple(sorted(params.items()))))
        spec = table[variant]
        assert set(params) <= set(spec.params)
        c = (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)
        return c * np.float32(1.01) if variant == "warptile" else c

    def kernel_info(variant, *, shape=(4096, 4096, 4096), **params):  # gpuopt.matmul's signature
        calls.append(("kernel_info", variant, tuple(shape)))
        n = shape[0]
        if variant == "cublas":
            raise ValueError("cublas is not one of gpuopt's kernels")
        return {"registers": 32 + params.get("tile_sz", 0), "static_shared_bytes": 4 * 2 * params.get("block", 0) ** 2,
                "dynamic_shared_bytes": 0, "local_bytes": 0, "threads": 256, "max_blocks_per_sm": 8,
                "kernel": f"{variant}<{n}>", "variant": variant}

    real_measure = sweeps.measure
    monkeypatch.setattr(gpuopt, "variants", lambda op=None: table)
    monkeypatch.setattr(gpuopt.registry.Variant, "available", property(lambda self: True))
    monkeypatch.setattr(gpuopt, "matmul", fake_matmul)
    monkeypatch.setattr(gpuopt, "to_device", lambda x: x)
    monkeypatch.setattr(gpuopt, "device_info", lambda: dict(H200))
    monkeypatch.setattr(sweeps, "measure", lambda fn, device=None, **kw: real_measure(fn, device="cpu", **kw))
    import importlib

    monkeypatch.setattr(importlib.import_module("gpuopt.matmul"), "matmul_kernel_info", kernel_info, raising=False)
    return calls


def test_matmul_sweeps_gpu_path(fake_gpu, tmp_path):
    plan = sweeps.Plan(gpu=True, tiny=True, progress=False)
    res = sweeps.SWEEPS["matmul"].run(plan)
    labels = ["naive", "shared block=32", "shared block=16", "tile_buffer tile_sz=1", "tile_buffer tile_sz=2",
              "tile_buffer tile_sz=4", "coalesced warp_layout=column", "coalesced warp_layout=row", "warptile",
              "cublas"]
    assert [r["label"] for r in res.rows if r["n"] == 32] == labels  # registration order, cuBLAS last
    assert ("shared", (("block", 32),)) in fake_gpu and ("tile_buffer", (("tile_sz", 4),)) in fake_gpu
    assert any("not registered" in n and "blocktile_2d" in n for n in res.notes)
    by = {(r["n"], r["label"]): r for r in res.rows}
    assert by[(64, "cublas")]["pct_cublas"] == pytest.approx(100.0) and "rel_err" not in by[(64, "cublas")]
    r = by[(64, "naive")]
    assert r["pct_cublas"] == pytest.approx(100 * r["gflops"] / by[(64, "cublas")]["gflops"])
    assert r["pct_peak"] == pytest.approx(100 * r["gflops"] / sweeps.fp32_peak(H200)[0])
    assert r["reference"] == "cublas" and r["rel_err"] < 1e-6 and by[(64, "warptile")]["rel_err"] > 1e-3
    assert by[(64, "shared block=32")]["static_shared_bytes"] == 8192 and by[(64, "tile_buffer tile_sz=2")][
        "registers"] == 34
    assert by[(64, "cublas")].get("registers") is None and by[(32, "naive")].get("registers") is None
    assert ("kernel_info", "naive", (64, 64, 64)) in fake_gpu  # at the ladder's size (tiny: the largest)
    assert by[(64, "warptile")]["kernel"] == "warptile<64>"
    assert ("coalesced", (("warp_layout", "column"),)) in fake_gpu
    assert res.meta["fp32_peak_gflops"] == pytest.approx(sweeps.fp32_peak(H200)[0])

    rep = sweeps.SWEEPS["matmul_report"].run(plan)
    assert not any("not measured" in n for n in rep.notes if "Memory Shared" in n)
    by = {(r["n"], r["label"]): r for r in rep.rows}
    r = by[(8, "shared block=16")]
    assert r["case"] == 1 and r["report_version"] == "Scheduling Throughput Maximized Version"
    assert r["gflops"] == pytest.approx(sweeps.report_gflops(8, r["median_ms"]))
    assert r["call_gflops"] == pytest.approx(sweeps.report_gflops(8, r["call_median_ms"])) and r["check_ok"]
    assert by[(5, "naive")]["case"] is None
    bad = by[(33, "warptile")]  # 1% off: fails the report's 1e-3 check, recorded as an error
    assert bad["check_ok"] is False and bad["max_rel_err"] == pytest.approx(0.01, rel=1e-3)
    assert ">= 0.001" in bad["error"]
    text = sweeps.table_matmul_report(rep.rows, {"gpu": H200})
    assert "H200 kernel" in text and "H200 whole call" in text and "GTX 480 [T4c]" in text and "206.939" in text


def test_matmul_report_cli_and_plot_only(tmp_path, capsys):
    # CPU mode, tiny sizes: files, the report's numbers in the table and the meta, --plot-only.
    pytest.importorskip("matplotlib")
    out = tmp_path / "res"
    assert main(["matmul_report", "--tiny", "--quiet", "--seed", "5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "(2n-1)*n^2 / t" in printed and "GTX 480" in printed
    for t in sweeps.REPORT_TABLES:  # every number the report printed is in the table
        for r in t["rows"]:
            for g in r["gflops"]:
                assert repr(g) in printed, g
    with open(out / "matmul_report.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0])[: len(sweeps.REPORT_COLUMNS)] == list(sweeps.REPORT_COLUMNS)
    meta, rows = bench.read_results(out / "matmul_report.json")
    assert meta["report"]["cases"] == {"case 1": 8, "case 2": 10, "case 3": 32, "case 4": 33, "case 5": 1000}
    assert meta["report"]["tables"][3]["rows"][2]["gflops"][4] == 206.939 and "GTX 480" in meta["report"]["gpu"]
    for r in rows:
        assert r["gflops"] == pytest.approx((2 * r["n"] - 1) * r["n"] ** 2 / (r["median_ms"] * 1e6))
        assert r["check_ok"] and r["max_rel_err"] < 1e-3
    assert (out / "matmul_report.png").read_bytes()[:8] == PNG_MAGIC
    assert "| GTX 480 [T4a] | 0.00402569 |" in (out / "matmul_report.md").read_text()
    for f in ("matmul_report.png", "matmul_report.md", "matmul_report.csv"):
        (out / f).unlink()
    assert main(["matmul_report", "--plot-only", "--out", str(out)]) == 0
    assert (out / "matmul_report.png").read_bytes()[:8] == PNG_MAGIC and (out / "matmul_report.md").is_file()
    assert "GTX 480 [T4c]" in capsys.readouterr().out


def test_plot_only_gpu_like_results(tmp_path, capsys):
    # Figures and tables of GPU results (written by hand here) redraw on a machine without one.
    pytest.importorskip("matplotlib")
    meta = {"gpu": {**H200, "compute_capability": "9.0"}, "plan": {"mode": "gpu", "level": "full"},
            "gpuopt_version": "0", "commit": "abc"}
    rows = _ladder_rows()
    bench.write_results("matmul", rows, {**meta, "sweep": "matmul"}, tmp_path, columns=sweeps.MATMUL_COLUMNS)
    rrows = []
    for n in sweeps.REPORT_SIZES[("gpu", "full")]:
        for label, variant in (("naive", "naive"), ("shared block=32", "shared"), ("cublas", "cublas")):
            ms = 0.005 + n**3 / 1e9
            rrows.append({"n": n, "label": label, "variant": variant, "median_ms": ms,
                          "gflops": sweeps.report_gflops(n, ms), "call_gflops": sweeps.report_gflops(n, ms + 0.05),
                          "max_rel_err": 1e-7, "repeats": 30})
    bench.write_results("matmul_report", rrows, {**meta, "sweep": "matmul_report"}, tmp_path)
    assert main(["matmul", "matmul_report", "--plot-only", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "H200 whole call" in printed and "Memory Shared Version (shared block=32)" in printed
    assert re.search(r"TILE_SZ = 2 \(tile_buffer tile_sz=2\) +H200: not measured", printed)
    for f in ("matmul.png", "matmul_report.png"):
        assert (tmp_path / f).read_bytes()[:8] == PNG_MAGIC
    assert "| 2 | shared block=16 | 10000 | 20.0% |" in (tmp_path / "matmul_ladder.md").read_text()


# --------------------------------------------------------------------------- conv2d: CS6235 figures, ECE408 tables


def _assert_ece408_numbers(text):
    """Every Op Time the ECE408 Fashion-MNIST report printed (as ms) and the MNIST report's times are in ``text``."""
    for variant, entry in sweeps.ECE408_OP_TIMES.items():
        for b, (t1, t2, _) in entry["times"].items():
            for s in (t1, t2):
                assert sweeps.ms_text(s) in text, (variant, b, s)
    for variant, layer, ms, tag, _ in sweeps.ECE408_MNIST_TIMES:
        assert f"{ms:g} [{tag}]" in text, (variant, layer, ms)


def test_ece408_report_numbers_transcribed():
    ops = sweeps.ECE408_OP_TIMES
    assert list(ops) == ["cpu", "basic", "unroll", "unroll_constmem", "tiled", "tiled_unrolled", "tiled_channels",
                         "tiled_corner_turn"]
    assert all(set(e["times"]) == {10, 100, 10000} for e in ops.values())  # 8 steps x 3 sizes x 2 layers
    assert ops["basic"]["times"][10000][:2] == (0.203084, 0.508383)
    assert ops["tiled_corner_turn"]["times"][10][:2] == (0.000143, 0.000414)
    assert ops["unroll_constmem"]["times"][100] == (0.005859, 0.009528, 356)
    # Op Times are seconds: the 10,000-image runs take ~75-135x the 100-image ones, 100 images ~6-10x 10 images;
    # layer 2 (6 -> 16 maps) always takes longer than layer 1.
    for v, e in ops.items():
        t = e["times"]
        for layer in (0, 1):
            assert 70 < t[10000][layer] / t[100][layer] < 140, v
            assert 3 < t[100][layer] / t[10][layer] < 11, v
        assert all(t[b][1] > t[b][0] for b in t), v
    assert sweeps.ms_text(0.203084) == "203.084" and sweeps.ms_text(7.463296) == "7463.296"
    assert sweeps.ms_text(0.000259) == "0.259" and sweeps.ms_text(25.670930) == "25670.93"
    ms, where = sweeps.ece408_report_ms("tiled", "conv2", 10000)
    assert ms == 387.863 and "l.414" in where and "0.387863" in where
    assert sweeps.ece408_report_ms("cudnn", "conv1", 10) == (None, None)
    assert sweeps.ece408_report_ms("basic", "conv1", 1000) == (None, None)
    mnist = {(v, lay, tag): ms for v, lay, ms, tag, _ in sweeps.ECE408_MNIST_TIMES}
    assert mnist[("tiled", "mnist_conv1", "T4")] == 374.624 and mnist[("unroll", "mnist_conv2", "T5")] == 1057.0
    assert mnist[("cpu", "mnist_conv2", "T2")] == 798785.0 and len(mnist) == 8
    # The layers (shared/data/README.md): conv1 64x64 -> 60x60, pooled to 30x30 for conv2 -> 26x26 (16x26x26 = 10816).
    assert sweeps.ECE408_LAYERS == {"conv1": (1, 64, 64, 6, 5, 5), "conv2": (6, 30, 30, 16, 5, 5)}
    assert sweeps.MNIST_LAYERS == {"mnist_conv1": (1, 28, 28, 32, 5, 5), "mnist_conv2": (32, 12, 12, 64, 5, 5)}
    assert sweeps.ECE408_GPU == "a P100-class card" and sweeps.ECE408_MNIST_GPU == "Tesla K80"
    assert sweeps.CS6235_GPU == "a K80-class card" and "kp359" in sweeps.CS6235_GPU_NOTE


def test_cs6235_figure_specs():
    figs = {f["figure"]: f for f in sweeps.CS6235_FIGURES}
    assert list(figs) == [f"fig{i}" for i in range(1, 9)]
    assert figs["fig7"]["confs"] == figs["fig8"]["confs"] == ("conf3", "conf4")
    assert all(figs[f]["kind"] == "lines" for f in ("fig2", "fig3", "fig4"))
    assert sweeps.CS6235_BLOCK_SIZES[("gpu", "full")] == (32, 64, 128, 256, 512, 1024)
    assert sweeps.CS6235_K_UNROLLS[("gpu", "full")] == (2, 4, 8, 16)
    assert sweeps.CS6235_C_UNROLLS[("gpu", "full")] == (0, 2, 4, 8, 16)
    assert all(sweeps.REPORT_CONV_REPEATS[("gpu", lv)]["flush_l2"] for lv in ("full", "quick"))
    assert sweeps.CS6235_FIG3_BLOCK == 512 and sweeps.ECE408_TILE_WIDTHS[("gpu", "full")] == tuple(range(4, 33, 4))
    for f in figs.values():
        assert f["report"].startswith(f"Fig {f['figure'][3:]} (Sec.")


def _fake_conv_table():
    """The build's conv2d variants, plus stand-ins for the ones another engineer is adding."""
    from gpuopt.registry import Param, Variant

    table = dict(gpuopt.variants("conv2d"))

    def v(name, *params):
        return Variant("conv2d", name, f"fake {name}", "gpuopt", True, {p.name: p for p in params})

    for name in ("unroll", "implicit_gemm", "implicit_gemm_fast", "auto"):
        table.setdefault(name, v(name))
    table.setdefault("cudnn", v("cudnn", Param("algorithms", "precise", ("precise", "any"))))
    return table


@pytest.fixture
def fake_conv_gpu(monkeypatch):
    """conv2d's GPU path on NumPy: every variant computes with the cpu variant (unroll_c unroll=4 1% off,
    unroll_constmem rejects filter banks over 64 KB as the real one does); measure() times on the CPU."""
    table = _fake_conv_table()
    real_conv2d, real_measure = gpuopt.conv2d, sweeps.measure
    calls = []

    def fake_conv2d(x, w, *, stride=1, padding=0, variant=None, **params):
        spec = table[variant]
        for key, value in params.items():
            spec.params[key].check(value, f"conv2d/{variant}")
        if variant == "unroll_constmem" and np.asarray(w).nbytes > 65536:
            raise ValueError("conv2d/unroll_constmem: the filter bank does not fit the 64 KB constant memory")
        calls.append((variant, tuple(np.shape(x)), tuple(sorted(params.items()))))
        y = real_conv2d(x, w, stride=stride, padding=padding, variant="cpu")
        return y * np.float32(1.01) if variant == "unroll_c" and params.get("unroll") == 4 else y

    monkeypatch.setattr(gpuopt, "variants", lambda op=None: table)
    monkeypatch.setattr(gpuopt.registry.Variant, "available", property(lambda self: True))
    monkeypatch.setattr(gpuopt, "conv2d", fake_conv2d)
    monkeypatch.setattr(gpuopt, "to_device", lambda x: x)
    monkeypatch.setattr(gpuopt.conv, "cudnn_algorithm", lambda *a, **k: "IMPLICIT_PRECOMP_GEMM")
    monkeypatch.setattr(sweeps, "measure", lambda fn, device=None, **kw: real_measure(fn, device="cpu", **kw))
    return calls


def test_cs6235_gpu_path(fake_conv_gpu):
    res = sweeps.SWEEPS["cs6235"].run(sweeps.Plan(gpu=True, tiny=True, progress=False, seed=1))
    rows = res.rows
    assert not any(r.get("error") for r in rows)
    fig = lambda f, conf="conf1": [r for r in rows if r["figure"] == f and r["conf"] == conf]  # noqa: E731
    assert [r["label"] for r in fig("fig1")] == ["general", "auto", "cudnn", "cudnn-any"]
    assert [(r["label"], r.get("x")) for r in fig("fig2")] == [("general block_size=64", 64),
                                                           ("general block_size=128", 128), ("cudnn", None)]
    assert [r["params"] for r in fig("fig3")][0] == {"block_size": 512, "unroll": 2, "loop_order": "crs"}
    assert [r["series"] for r in fig("fig5")] == ["crs", "rsc"]
    assert [r["variant"] for r in fig("fig7", "conf4")] == ["reorder", "plain", "shared"] and not fig("fig7")
    assert [r["label"] for r in fig("fig8", "conf3")] == ["unroll_nk", "unroll_k unroll=2 loop_order=rsc",
                                                          "unroll_k unroll=8 loop_order=rsc", "cudnn"]
    assert {r["panel"] for r in rows if r["conf"] in ("conf3", "conf4")} == {"N=128"}
    # A point two figures share is measured once: general at its default block size 128 (figs 1 and 2).
    assert ("general", (("block_size", 128),)) not in {(v, p) for v, _, p in fake_conv_gpu}
    assert ("general", (("block_size", 64),)) in {(v, p) for v, _, p in fake_conv_gpu}
    by = {(r["figure"], r["conf"], r["label"]): r for r in rows}
    assert by[("fig2", "conf2", "general block_size=128")]["median_ms"] == by[("fig1", "conf2", "general")][
        "median_ms"]
    for conf in sweeps.CONV_CONFS:
        ref = by[("fig1", conf, "cudnn")]
        assert ref["speedup_vs_cudnn"] == pytest.approx(1.0) and ref.get("rel_err") is None
        assert ref["algorithm"] == "IMPLICIT_PRECOMP_GEMM" and ref["device"] == "gpu"
        assert by[("fig1", conf, "general")]["rel_err"] < 1e-6 and by[("fig1", conf, "general")]["reference"] == "cudnn"
        assert by[("fig4", conf, "unroll_c unroll=4")]["rel_err"] == pytest.approx(0.01, rel=1e-3)  # caught
    assert any("plain has no loop_order" in n for n in res.notes)
    text = sweeps.table_cs6235(rows, {"gpu": H200})
    assert "CS6235 Fig 8" in text and "best unroll_k (rsc)" in text and "H200 median kernel time" in text
    assert "printed no numbers for this figure" in text


def test_ece408_gpu_path(fake_conv_gpu):
    res = sweeps.SWEEPS["ece408"].run(sweeps.Plan(gpu=True, tiny=True, progress=False, seed=2))
    rows = res.rows
    assert not any(r.get("error") for r in rows)
    op = [r for r in rows if r["part"] == "op_time" and r["layer"] == "conv1"]
    assert [r["label"] for r in op] == [lb for lb, *_ in sweeps.ECE408_STEPS]  # cpu too: B=10 <= 100
    by = {(r["part"], r["layer"], r["label"]): r for r in rows}
    cpu = by[("op_time", "conv2", "cpu")]
    assert cpu["device"] == "cpu" and cpu["report_ms"] == 25.613 and cpu["rel_err"] < 1e-6
    tiled = by[("op_time", "conv1", "tiled")]
    assert tiled["report_ms"] == 0.163 and tiled["report_gpu"] == "a P100-class card" and tiled["device"] == "gpu"
    assert tiled["params"] == {"tile_width": 16} and tiled["gflops"] == pytest.approx(
        2 * 10 * 6 * 60 * 60 * 25 / (tiled["median_ms"] * 1e6))
    assert by[("op_time", "conv1", "cudnn-any")].get("report_ms") is None
    # MNIST conv2's filter bank (64x32x5x5 floats = 200 KB) does not fit constant memory: not applicable, no error.
    skipped = by[("mnist", "mnist_conv2", "unroll_constmem")]
    assert "64 KB" in skipped["skipped"] and not skipped.get("error") and skipped.get("median_ms") is None
    assert by[("mnist", "mnist_conv1", "unroll_constmem")]["median_ms"] > 0
    tw = [r for r in rows if r["part"] == "tile_width" and r["layer"] == "conv2"]
    assert [(r["variant"], r.get("x")) for r in tw] == [("tiled", 8), ("tiled", 16), ("tiled_unrolled", 8),
                                                    ("tiled_unrolled", 16), ("cudnn", None)]
    text = sweeps.table_ece408(rows, {"gpu": H200})
    assert "B=10: H200 ms" in text and "B=10: report ms" in text and "not applicable" in text
    _assert_ece408_numbers(text)


def test_conv2d_sweep_runs_every_gpu_variant(fake_conv_gpu):
    res = sweeps.SWEEPS["conv2d"].run(sweeps.Plan(gpu=True, tiny=True, progress=False))
    table = gpuopt.variants("conv2d")
    expected = [n for n, v in table.items() if v.needs_cuda and n != "cudnn"] + ["cudnn", "cudnn-any"]
    assert [r["variant"] for r in res.rows if r["conf"] == "conf1"] == expected
    assert {"implicit_gemm", "tiled_corner_turn", "general"} <= set(expected)
    by = {(r["conf"], r["variant"]): r for r in res.rows}
    assert "64 KB" in by[("conf2", "unroll_constmem")]["skipped"] and not by[("conf2", "unroll_constmem")].get("error")
    assert by[("conf1", "unroll_constmem")]["median_ms"] > 0 and by[("conf1", "cudnn")]["speedup_vs_cudnn"] == 1.0
    text = sweeps.table_conv2d(res.rows)
    assert "not applicable" in text and "unroll_constmem @ conf=conf2" in text


class _ModelPoints(sweeps._ConvPoints):
    """Synthetic H200-like kernel times (no data, nothing run): for the tables and figures at full size."""

    RATE = {"basic": 2500, "unroll": 1800, "unroll_constmem": 2000, "tiled": 4500, "tiled_unrolled": 5200,
            "tiled_channels": 4800, "tiled_corner_turn": 5400, "implicit_gemm": 9000, "implicit_gemm_fast": 21000,
            "direct_regblock": 24000, "auto": 24000, "cudnn": 15000, "cpu": 15, "general": 6000, "plain": 2500, "reorder": 2400,
            "unroll_k": 4000, "unroll_c": 2500, "unroll_nk": 9000, "shared": 3000}
    BLOCK = {32: 1.7, 64: 1.1, 128: 1.0, 256: 1.05, 512: 1.25, 1024: 1.6}

    def load(self, key, prob):
        self.key, self.problem = key, prob

    def release(self):
        pass

    def measure(self, e):
        ck = self.cache_key(self.key, e)
        if ck not in self.cache:
            prob, params = self.problem, self.full_params(e)
            gpu = e.variant != "cpu"
            out = {"params": params, "device": "gpu" if gpu else "cpu", "flush_l2": gpu}
            if e.variant == "unroll_constmem" and 4 * prob.k * prob.c * prob.r * prob.s > 65536:
                out["skipped"] = "ValueError: conv2d/unroll_constmem: does not fit the 64 KB constant memory"
            else:
                rate = self.RATE.get(e.variant, 3000) * (1.2 if params.get("algorithms") == "any" else 1.0)
                rate /= self.BLOCK.get(params.get("block_size", 128), 1.0)
                rate *= {0: 1.0, 2: 0.95, 4: 1.1, 8: 1.2, 16: 0.9}.get(params.get("unroll"), 1.0)
                rate *= {4: 0.35, 8: 0.8, 12: 0.9, 16: 1.0, 20: 0.85, 24: 0.9, 28: 0.97, 32: 0.95}.get(
                    params.get("tile_width"), 1.0)
                rate *= 0.9 if params.get("loop_order") == "crs" else 1.0
                rate *= 1.0 if prob.c < 100 else 0.6 if e.variant != "unroll_c" else 0.6 * (1 + params["unroll"] / 8)
                ms = prob.flops / (rate * 1e6) + (0.004 if gpu else 0.05)
                out.update(median_ms=ms, min_ms=ms * 0.97, max_ms=ms * 1.1, mean_ms=ms * 1.01, std_ms=ms * 0.02,
                           repeats=30, gflops=prob.flops / (ms * 1e6), spin_us=200.0 if gpu else None,
                           overhead_hidden=True)
                if not sweeps._is_reference(e.variant, params):
                    out.update(rel_err=2e-7, reference="cudnn")
            self.cache[ck] = out
        return dict(self.cache[ck])


def _synthetic_report_results(monkeypatch, out):
    """cs6235.json and ece408.json of a full H200 run (model times), written to ``out``."""
    table = _fake_conv_table()
    monkeypatch.setattr(gpuopt, "variants", lambda op=None: table)
    monkeypatch.setattr(gpuopt.registry.Variant, "available", property(lambda self: True))
    monkeypatch.setattr(sweeps, "_ConvPoints", _ModelPoints)
    meta = {"gpu": {**H200, "compute_capability": "9.0"}, "plan": {"mode": "gpu", "level": "full"},
            "gpuopt_version": "0", "commit": "abc", "timestamp_utc": "2026-01-01T00:00:00Z"}
    plan = sweeps.Plan(gpu=True, progress=False)
    results = {}
    for name in ("cs6235", "ece408"):
        res = sweeps.SWEEPS[name].run(plan)
        bench.write_results(name, res.rows, {**meta, "sweep": name, **res.meta, "notes": res.notes}, out,
                            columns=sweeps.SWEEPS[name].columns)
        results[name] = res
    return results


def test_report_sweeps_full_size_tables_and_plot_only(tmp_path, monkeypatch, capsys):
    # Full-size GPU plans with synthetic times: what the H200 run's tables and figures will hold.
    res = _synthetic_report_results(monkeypatch, tmp_path)
    cs, ec = res["cs6235"].rows, res["ece408"].rows
    # Budget: unique points per sweep (each capped at ~0.3 s + warm-up on the GPU).
    assert len({(r["conf"], r["variant"], json.dumps(r["params"], sort_keys=True)) for r in cs}) <= 110
    assert len({(r["layer"], r["B"], r["variant"], json.dumps(r["params"], sort_keys=True)) for r in ec}) <= 140
    fig2 = [r for r in cs if r["figure"] == "fig2" and r["conf"] == "conf3"]
    assert [r.get("x") for r in fig2] == [32, 64, 128, 256, 512, 1024, None]
    assert {r["B"] for r in ec if r["part"] == "op_time"} == {10, 100, 10000}
    assert not any(r["variant"] == "cpu" and r["B"] > 100 for r in ec)  # the CPU code only up to 100 images
    assert {r.get("x") for r in ec if r["part"] == "tile_width"} == {4, 8, 12, 16, 20, 24, 28, 32, None}
    assert {r["B"] for r in ec if r["part"] in ("tile_width", "mnist")} == {10000}
    best = sweeps.cs6235_best_k(cs, "conf4")
    assert best["params"]["unroll"] == 8 and best["params"]["loop_order"] == "rsc"

    pytest.importorskip("matplotlib")
    assert main(["cs6235", "ece408", "--plot-only", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for name in ("cs6235", "ece408"):
        for png in figures(name):
            assert (tmp_path / png).read_bytes()[:8] == PNG_MAGIC, png
    assert "best unroll_k (rsc)" in printed and "(unroll=8)" in printed
    md = (tmp_path / "ece408_op_time.md").read_text()
    _assert_ece408_numbers(md)
    assert "| B=10000: H200 ms | B=10000: report ms | H200 GFLOP/s (B=10000) | x cuDNN (B=10000) |" in md
    assert "| Opt 3: shared memory | tiled | " in md and "| n/a | 1057 [T5] |" not in md
    assert re.search(r"\| M2: sequential CPU \| cpu \| [0-9.]+ \| 7\.455 \| [0-9.]+ \| 74\.735 \| - \| 7463\.296 \|",
                     md)
    assert "| best | 16 | 16 | 16 | 16 |" in md  # the model's fastest tile width
    assert "conv2: best at TILE_WIDTH 28" in md
    cs_md = (tmp_path / "cs6235.md").read_text()
    assert cs_md.count("printed no numbers for this figure") == 8 and "a K80-class card" in cs_md


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
