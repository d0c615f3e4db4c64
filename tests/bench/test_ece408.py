"""The ece408 study (the ECE408 reports' Op Time table, TILE_WIDTH, MNIST layers)."""

from __future__ import annotations

import json
import re

import pytest

from gpuopt.bench.__main__ import main
from gpuopt.bench.studies import STUDIES, cs6235, ece408
from gpuopt.bench.study import RunSettings

from .support import H200, PNG_MAGIC, assert_ece408_numbers, figures, synthetic_report_results


def test_ece408_report_numbers_transcribed():
    ops = ece408.ECE408_OP_TIMES
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
    assert ece408.ms_text(0.203084) == "203.084" and ece408.ms_text(7.463296) == "7463.296"
    assert ece408.ms_text(0.000259) == "0.259" and ece408.ms_text(25.670930) == "25670.93"
    ms, where = ece408.ece408_report_ms("tiled", "conv2", 10000)
    assert ms == 387.863 and "l.414" in where and "0.387863" in where
    assert ece408.ece408_report_ms("cudnn", "conv1", 10) == (None, None)
    assert ece408.ece408_report_ms("basic", "conv1", 1000) == (None, None)
    mnist = {(v, lay, tag): ms for v, lay, ms, tag, _ in ece408.ECE408_MNIST_TIMES}
    assert mnist[("tiled", "mnist_conv1", "T4")] == 374.624 and mnist[("unroll", "mnist_conv2", "T5")] == 1057.0
    assert mnist[("cpu", "mnist_conv2", "T2")] == 798785.0 and len(mnist) == 8
    # The layers (shared/data/README.md): conv1 64x64 -> 60x60, pooled to 30x30 for conv2 -> 26x26 (16x26x26 = 10816).
    assert ece408.ECE408_LAYERS == {"conv1": (1, 64, 64, 6, 5, 5), "conv2": (6, 30, 30, 16, 5, 5)}
    assert ece408.MNIST_LAYERS == {"mnist_conv1": (1, 28, 28, 32, 5, 5), "mnist_conv2": (32, 12, 12, 64, 5, 5)}
    assert ece408.ECE408_GPU == "a P100-class card" and ece408.ECE408_MNIST_GPU == "Tesla K80"
    assert cs6235.CS6235_GPU == "a K80-class card" and "kp359" in cs6235.CS6235_GPU_NOTE


def test_ece408_gpu_path(fake_conv_gpu):
    res = STUDIES["ece408"].run(RunSettings(gpu=True, tiny=True, progress=False, seed=2))
    rows = res.rows
    assert not any(r.get("error") for r in rows)
    op = [r for r in rows if r["part"] == "op_time" and r["layer"] == "conv1"]
    assert [r["label"] for r in op] == [lb for lb, *_ in ece408.ECE408_STEPS]  # cpu too: B=10 <= 100
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
    text = ece408.table_ece408(rows, {"gpu": H200})
    assert "B=10: H200 ms" in text and "B=10: report ms" in text and "not applicable" in text
    assert_ece408_numbers(text)


def test_full_size_tables_and_plot_only(tmp_path, monkeypatch, capsys):
    # A full-size GPU plan with synthetic times: what the H200 run's tables and figures will hold.
    ec = synthetic_report_results(monkeypatch, tmp_path, "ece408").rows
    # Budget: unique points (each capped at ~0.3 s + warm-up on the GPU).
    assert len({(r["layer"], r["B"], r["variant"], json.dumps(r["params"], sort_keys=True)) for r in ec}) <= 152  # 140 + auto-fast and winograd, 6 points each
    assert {r["B"] for r in ec if r["part"] == "op_time"} == {10, 100, 10000}
    assert not any(r["variant"] == "cpu" and r["B"] > 100 for r in ec)  # the CPU code only up to 100 images
    assert {r.get("x") for r in ec if r["part"] == "tile_width"} == {4, 8, 12, 16, 20, 24, 28, 32, None}
    assert {r["B"] for r in ec if r["part"] in ("tile_width", "mnist")} == {10000}

    pytest.importorskip("matplotlib")
    assert main(["ece408", "--plot-only", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    for png in figures("ece408"):
        assert (tmp_path / png).read_bytes()[:8] == PNG_MAGIC, png
    md = (tmp_path / "ece408_op_time.md").read_text()
    assert_ece408_numbers(md)
    assert ("| B=10000: H200 ms | B=10000: report ms | H200 GFLOP/s (B=10000) | x cuDNN precise (B=10000) "
            "| x cuDNN any (B=10000) |") in md
    assert "| Opt 3: shared memory | tiled | " in md and "| n/a | 1057 [T5] |" not in md
    assert re.search(r"\| M2: sequential CPU \| cpu \| [0-9.]+ \| 7\.455 \| [0-9.]+ \| 74\.735 \| - \| 7463\.296 \|",
                     md)
    assert "| best | 16 | 16 | 16 | 16 |" in md  # the model's fastest tile width
    assert "conv2: best at TILE_WIDTH 28" in md
