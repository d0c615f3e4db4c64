"""The matmul study (the kernel ladder): its GPU path on a fake GPU, FP32 peak, the ladder table."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuopt import bench
from gpuopt.bench import floors
from gpuopt.bench.studies import STUDIES, matmul
from gpuopt.matmul import ladder, ladder_step
from gpuopt.bench.study import RunSettings

from .support import H200, ladder_rows


def test_fp32_peak():
    peak, text = floors.fp32_peak(H200)
    assert peak == pytest.approx(2 * 132 * 128 * 1.98e9 / 1e9) and 66_000 < peak < 68_000
    assert "132 SMs" in text and "128 FP32 lanes" in text
    assert floors.fp32_peak({**H200, "compute_capability": "9.0"})[0] == peak  # meta["gpu"] spells it "9.0"
    a100 = {"multiprocessors": 108, "clock_rate_khz": 1410000, "compute_capability": "8.0"}
    assert floors.fp32_peak(a100)[0] == pytest.approx(19_491.84)  # 64 lanes per SM on an A100
    assert floors.fp32_peak(None)[0] is None and floors.fp32_peak({"name": "x"})[0] is None


def test_matmul_ladder_table(tmp_path):
    rows = ladder_rows()
    meta = {"gpu": {**H200, "compute_capability": "9.0"}, "gpuopt_version": "0", "commit": "abc"}
    peak = floors.fp32_peak(H200)[0]
    n, steps = matmul.matmul_ladder(rows, meta)
    assert n == 4096
    # Steps are the variants' ladder steps (the registry's order); "broken" is on no ladder.
    shared_step = ladder_step("shared")
    assert ladder_step("naive") == 1 and shared_step > 1
    assert [s["step"] for s in steps] == [1, shared_step, None, "ref"]
    naive, shared, broken, cublas = steps
    assert naive["pct_cublas"] == pytest.approx(10.0) and shared["pct_cublas"] == pytest.approx(20.0)
    assert cublas["pct_cublas"] == pytest.approx(100.0)
    assert naive["pct_peak"] == pytest.approx(100 * 5000 / peak) and cublas["pct_peak"] == pytest.approx(
        100 * 50000 / peak)
    assert shared["x_prev"] == pytest.approx(2.0) and naive["x_prev"] is None
    assert shared["registers"] == 40 and shared["local_bytes"] == 8 and broken["gflops"] is None
    assert matmul.matmul_ladder(rows, meta, n=1024)[1][0]["pct_cublas"] == pytest.approx(10.0)
    no4096 = [r for r in rows if r["n"] == 1024]
    assert matmul.matmul_ladder(no4096, meta)[0] == 1024  # the largest measured size instead
    # A recorded peak wins over the device's numbers.
    assert matmul.matmul_ladder(rows, {**meta, "fp32_peak_gflops": 100000.0})[1][0]["pct_peak"] == pytest.approx(5.0)

    text = matmul.table_matmul(rows, meta)
    assert "ladder at n = 4096" in text and "66.9 TFLOP/s" in text and "boom" in text
    [md] = matmul.extras_matmul(meta, rows, tmp_path)
    assert md == tmp_path / "matmul_ladder.md"
    lines = md.read_text().splitlines()
    assert lines[0] == "### matmul ladder at n = 4096"
    assert "| 1 | naive | 5000 | 10.0% | 7.5% | - | 30 | 0 | 0 | 256 | - | - |" in lines
    assert (f"| {shared_step} | shared block=16 | 10000 | 20.0% | 14.9% | 2.00x | 40 | 2048 | 8 | 256 | 8 "
            "| shared<16> |") in lines
    assert "| ref | cublas | 50000 | 100.0% | 74.7% | - | - | - | - | - | - | - |" in lines
    assert "| - | broken | failed |" in md.read_text()


def test_ladder_steps_are_the_registry_s():
    # One row per ladder variant (two for shared, as the study measures it) and cuBLAS: the step column is
    # gpuopt.matmul.ladder_step, shared by the rows of one variant, and "ref" for cuBLAS.
    rows = [{"n": 4096, "label": v, "variant": v, "gflops": 1000.0 + i} for i, v in enumerate(ladder())]
    rows.insert(2, {"n": 4096, "label": "shared block=32", "variant": "shared", "gflops": 5.0})
    rows.append({"n": 4096, "label": "cublas", "variant": "cublas", "gflops": 50000.0})
    _, steps = matmul.matmul_ladder(rows, {})
    assert [s["step"] for s in steps] == [*(ladder_step(r["variant"]) for r in rows[:-1]), "ref"]
    assert [s["step"] for s in steps if s["variant"] == "shared"] == [ladder_step("shared")] * 2
    assert steps[-1]["step"] == "ref" and "cublas" not in ladder()
    assert matmul.matmul_gpu_variants() == (*ladder(), "cublas", "cublas_tf32")


def test_committed_ladder_table_steps():
    # benchmarks/results/matmul_ladder.md: each row's step is its variant's ladder step.
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    _, rows = bench.read_results(results / "matmul.json")
    variant = {r["label"]: r["variant"] for r in rows}
    table = [line.split(" | ") for line in (results / "matmul_ladder.md").read_text().splitlines()
             if line.startswith("| ") and not line.startswith(("| step", "| ---"))]
    assert len(table) == len({r["label"] for r in rows}) > 10
    for cells in table:
        step, label = cells[0][2:], cells[1]
        assert step == ("ref" if variant[label] in matmul.REFERENCES else str(ladder_step(variant[label]))), cells


def test_matmul_study_gpu_path(fake_gpu, tmp_path):
    plan = RunSettings(gpu=True, tiny=True, progress=False)
    res = STUDIES["matmul"].run(plan)
    labels = ["naive", "shared block=32", "shared block=16", "tile_buffer tile_sz=1", "tile_buffer tile_sz=2",
              "tile_buffer tile_sz=4", "coalesced warp_layout=column", "coalesced warp_layout=row", "warptile",
              "cublas"]
    assert [r["label"] for r in res.rows if r["n"] == 32] == labels  # registration order, cuBLAS last
    assert ("shared", (("block", 32),)) in fake_gpu and ("tile_buffer", (("tile_sz", 4),)) in fake_gpu
    # The variants are the (fake) registry's ladder, in its order, then cuBLAS.
    assert matmul.matmul_gpu_variants() == ("naive", "shared", "tile_buffer", "coalesced", "warptile", "cublas")
    by = {(r["n"], r["label"]): r for r in res.rows}
    assert by[(64, "cublas")]["pct_cublas"] == pytest.approx(100.0) and "rel_err" not in by[(64, "cublas")]
    r = by[(64, "naive")]
    assert r["pct_cublas"] == pytest.approx(100 * r["gflops"] / by[(64, "cublas")]["gflops"])
    assert r["pct_peak"] == pytest.approx(100 * r["gflops"] / floors.fp32_peak(H200)[0])
    assert r["reference"] == "cublas" and r["rel_err"] < 1e-6 and by[(64, "warptile")]["rel_err"] > 1e-3
    assert by[(64, "shared block=32")]["static_shared_bytes"] == 8192 and by[(64, "tile_buffer tile_sz=2")][
        "registers"] == 34
    assert by[(64, "cublas")].get("registers") is None and by[(32, "naive")].get("registers") is None
    assert ("kernel_info", "naive", (64, 64, 64)) in fake_gpu  # at the ladder's size (tiny: the largest)
    assert by[(64, "warptile")]["kernel"] == "warptile<64>"
    assert ("coalesced", (("warp_layout", "column"),)) in fake_gpu
    assert res.meta["fp32_peak_gflops"] == pytest.approx(floors.fp32_peak(H200)[0])
