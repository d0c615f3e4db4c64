"""The command line (python -m gpuopt.bench, benchmarks/run_all.py): every study, --plot-only, --list, exit codes."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest

import gpuopt
from gpuopt import bench
from gpuopt.bench.__main__ import main
from gpuopt.bench.studies import STUDIES, cs6235, matmul_report

from .support import PNG_MAGIC, SWEEP_NAMES, assert_ece408_numbers, figures


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
        assert header[: len(STUDIES[name].columns)] == list(STUDIES[name].columns)
        assert n_rows >= 1
        meta, rows = bench.read_results(out / f"{name}.json")
        assert meta["sweep"] == name and meta["seed"] == 3 and meta["plan"]["tiny"] is True
        assert "commit" in meta and "gpu" in meta and isinstance(meta["notes"], list)
        assert len(rows) == n_rows and not any(r.get("error") for r in rows)
        for png in figures(name):
            assert (out / png).read_bytes()[:8] == PNG_MAGIC, png
    # The files written are the ones each study declares (Study.files()), no more.
    assert {p.name for p in out.iterdir()} == {f for name in SWEEP_NAMES for f in STUDIES[name].files()}
    assert list(STUDIES)[:len(SWEEP_NAMES)] == SWEEP_NAMES  # the default set, in display order
    # What each sweep measured, in CPU mode at least the cpu variant.
    _, mm = bench.read_results(out / "matmul.json")
    assert {r["n"] for r in mm} == {32, 64} and all(r["gflops"] > 0 for r in mm)
    # Each against its own bound: FP32 level, or the registry's tolerance (cuBLAS's TF32 mode).
    table = gpuopt.variants("matmul")
    checked = [(r["rel_err"], table[r["variant"]].tolerance or 1e-5) for r in mm if r.get("rel_err") is not None]
    assert checked and all(e < tol for e, tol in checked)
    assert "| step | kernel | GFLOP/s | % cuBLAS |" in (out / "matmul_ladder.md").read_text()
    _, mr = bench.read_results(out / "matmul_report.json")
    assert [r["n"] for r in mr if r["label"] == mr[0]["label"]] == list(matmul_report.REPORT_SIZES["tiny"])
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
    assert {r["figure"] for r in cs} == {f["figure"] for f in cs6235.CS6235_FIGURES}
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
    assert_ece408_numbers(md)
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
    assert "valid sweeps: matmul, matmul_report, conv2d, cs6235, ece408, kmeans, kmeans_loop, sparse" in proc.stderr
    assert not list(tmp_path.iterdir())  # nothing ran


def test_benchmark_script_runs_from_repo_root(tmp_path, data_env):
    # benchmarks/run_all.py next to gpuopt/: the script must import the installed package, and nothing in
    # benchmarks/ (its sys.path entry) may shadow a module.
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert sorted(f for f in os.listdir(os.path.join(repo, "benchmarks")) if f.endswith(".py")) == ["run_all.py"]
    proc = subprocess.run([sys.executable, os.path.join("benchmarks", "run_all.py"), "sparse", "--tiny", "--quiet",
                           "--out", str(tmp_path)], capture_output=True, text=True, cwd=repo, env=dict(os.environ))
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
