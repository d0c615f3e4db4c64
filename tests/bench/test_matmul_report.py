"""The matmul_report study (CMU 18-645 Table 4): the report's numbers, its GPU path, CLI and --plot-only."""

from __future__ import annotations

import csv
import re

import pytest

from gpuopt import bench
from gpuopt.bench.__main__ import main
from gpuopt.bench.studies import STUDIES, matmul, matmul_report
from gpuopt.bench.study import RunSettings
from gpuopt.matmul import ladder_step

from .support import H200, PNG_MAGIC, ladder_rows


def test_report_numbers_transcribed():
    # Every printed row: five cases, and its "total" is their sum (as the report's column).
    versions = {v for v, _, _ in matmul_report.REPORT_VERSIONS}
    assert matmul_report.REPORT_CASES == (8, 10, 32, 33, 1000)
    seen = []
    for t in matmul_report.REPORT_TABLES:
        for r in t["rows"]:
            assert r["version"] in versions and len(r["gflops"]) == 5
            if r["total"] is not None:
                assert sum(r["gflops"]) == pytest.approx(r["total"], rel=5e-4), (t["id"], r["version"])
            seen.append((t["id"], r["version"]))
    assert len(seen) == 8 and ("T4c", "TILE_SZ = 4") in seen
    t4a = matmul_report.REPORT_TABLES[1]["rows"][0]
    assert t4a["version"] == "Original Version" and t4a["gflops"][4] == 63.6513
    # The cases' reading: n = 8, 10, 32, 33 all imply one fixed ~0.24 ms per call.
    for t in matmul_report.REPORT_TABLES:
        for r in t["rows"]:
            ms = [matmul_report.report_flops(n) / (g * 1e6)
                  for n, g in zip(matmul_report.REPORT_CASES[:4], r["gflops"][:4])]
            assert all(0.23 < m < 0.29 for m in ms), (t["id"], r["version"], ms)
    labels = dict((v, lb) for v, lb, _ in matmul_report.REPORT_VERSIONS)
    assert labels["Memory Shared Version"] == "shared block=32"
    assert labels["Scheduling Throughput Maximized Version"] == "shared block=16"
    assert labels["TILE_SZ = 2"] == "tile_buffer tile_sz=2" and labels["Original Version"] == "naive"


def test_report_gflops_formula():
    assert matmul_report.report_flops(1000) == 1999 * 1000 * 1000
    assert matmul_report.report_gflops(1000, 1.0) == pytest.approx(1999.0)  # 1.999e9 flop in 1 ms
    assert matmul_report.report_gflops(8, 0.24) == pytest.approx(960 / 0.24e6)  # the report's case 1 at 0.24 ms
    assert matmul_report.report_gflops(1, 1e-6) == pytest.approx(1.0)


def test_matmul_report_study_gpu_path(fake_gpu):
    plan = RunSettings(gpu=True, tiny=True, progress=False)
    rep = STUDIES["matmul_report"].run(plan)
    assert not any("not measured" in n for n in rep.notes if "Memory Shared" in n)
    by = {(r["n"], r["label"]): r for r in rep.rows}
    r = by[(8, "shared block=16")]
    assert r["case"] == 1 and r["report_version"] == "Scheduling Throughput Maximized Version"
    assert r["gflops"] == pytest.approx(matmul_report.report_gflops(8, r["median_ms"]))
    assert r["call_gflops"] == pytest.approx(matmul_report.report_gflops(8, r["call_median_ms"])) and r["check_ok"]
    assert by[(5, "naive")]["case"] is None
    bad = by[(33, "warptile")]  # 1% off: fails the report's 1e-3 check, recorded as an error
    assert bad["check_ok"] is False and bad["max_rel_err"] == pytest.approx(0.01, rel=1e-3)
    assert ">= 0.001" in bad["error"]
    text = matmul_report.table_matmul_report(rep.rows, {"gpu": H200})
    assert "H200 kernel" in text and "H200 whole call" in text and "GTX 480 [T4c]" in text and "206.939" in text


def test_matmul_report_cli_and_plot_only(tmp_path, capsys):
    # CPU mode, tiny sizes: files, the report's numbers in the table and the meta, --plot-only.
    pytest.importorskip("matplotlib")
    out = tmp_path / "res"
    assert main(["matmul_report", "--tiny", "--quiet", "--seed", "5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "(2n-1)*n^2 / t" in printed and "GTX 480" in printed
    for t in matmul_report.REPORT_TABLES:  # every number the report printed is in the table
        for r in t["rows"]:
            for g in r["gflops"]:
                assert repr(g) in printed, g
    with open(out / "matmul_report.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0])[: len(matmul_report.REPORT_COLUMNS)] == list(matmul_report.REPORT_COLUMNS)
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
    rows = ladder_rows()
    bench.write_results("matmul", rows, {**meta, "sweep": "matmul"}, tmp_path, columns=matmul.MATMUL_COLUMNS)
    rrows = []
    for n in matmul_report.REPORT_SIZES[("gpu", "full")]:
        for label, variant in (("naive", "naive"), ("shared block=32", "shared"), ("cublas", "cublas")):
            ms = 0.005 + n**3 / 1e9
            rrows.append({"n": n, "label": label, "variant": variant, "median_ms": ms,
                          "gflops": matmul_report.report_gflops(n, ms),
                          "call_gflops": matmul_report.report_gflops(n, ms + 0.05),
                          "max_rel_err": 1e-7, "repeats": 30})
    bench.write_results("matmul_report", rrows, {**meta, "sweep": "matmul_report"}, tmp_path)
    assert main(["matmul", "matmul_report", "--plot-only", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "H200 whole call" in printed and "Memory Shared Version (shared block=32)" in printed
    assert re.search(r"TILE_SZ = 2 \(tile_buffer tile_sz=2\) +H200: not measured", printed)
    for f in ("matmul.png", "matmul_report.png"):
        assert (tmp_path / f).read_bytes()[:8] == PNG_MAGIC
    assert (f"| {ladder_step('shared')} | shared block=16 | 10000 | 20.0% |"
            in (tmp_path / "matmul_ladder.md").read_text())
