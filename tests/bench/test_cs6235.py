"""The cs6235 study (the CS6235 report's eight figures): specs, GPU path on a fake GPU, full-size tables."""

from __future__ import annotations

import json

import pytest

from gpuopt.bench.__main__ import main
from gpuopt.bench import conv_points
from gpuopt.bench.studies import STUDIES, cs6235, ece408
from gpuopt.bench.study import RunSettings

from .support import H200, PNG_MAGIC, figures, synthetic_report_results


def test_cs6235_figure_specs():
    figs = {f["figure"]: f for f in cs6235.CS6235_FIGURES}
    assert list(figs) == [f"fig{i}" for i in range(1, 9)]
    assert figs["fig7"]["confs"] == figs["fig8"]["confs"] == ("conf3", "conf4")
    assert all(figs[f]["kind"] == "lines" for f in ("fig2", "fig3", "fig4"))
    assert cs6235.CS6235_BLOCK_SIZES[("gpu", "full")] == (32, 64, 128, 256, 512, 1024)
    assert cs6235.CS6235_K_UNROLLS[("gpu", "full")] == (2, 4, 8, 16)
    assert cs6235.CS6235_C_UNROLLS[("gpu", "full")] == (0, 2, 4, 8, 16)
    assert all(conv_points.REPORT_CONV_REPEATS[("gpu", lv)]["flush_l2"] for lv in ("full", "quick"))
    assert cs6235.CS6235_FIG3_BLOCK == 512 and ece408.ECE408_TILE_WIDTHS[("gpu", "full")] == tuple(range(4, 33, 4))
    for f in figs.values():
        assert f["report"].startswith(f"Fig {f['figure'][3:]} (Sec.")


def test_cs6235_gpu_path(fake_conv_gpu):
    res = STUDIES["cs6235"].run(RunSettings(gpu=True, tiny=True, progress=False, seed=1))
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
    for conf in conv_points.CONV_CONFS:
        ref = by[("fig1", conf, "cudnn")]
        assert ref["speedup_vs_cudnn"] == pytest.approx(1.0) and ref.get("rel_err") is None
        assert ref["algorithm"] == "IMPLICIT_PRECOMP_GEMM" and ref["device"] == "gpu"
        assert by[("fig1", conf, "general")]["rel_err"] < 1e-6 and by[("fig1", conf, "general")]["reference"] == "cudnn"
        assert by[("fig4", conf, "unroll_c unroll=4")]["rel_err"] == pytest.approx(0.01, rel=1e-3)  # caught
    assert any("plain has no loop_order" in n for n in res.notes)
    text = cs6235.table_cs6235(rows, {"gpu": H200})
    assert "CS6235 Fig 8" in text and "best unroll_k (rsc)" in text and "H200 median kernel time" in text
    assert "printed no numbers for this figure" in text


def test_full_size_tables_and_plot_only(tmp_path, monkeypatch, capsys):
    # A full-size GPU plan with synthetic times: what the H200 run's tables and figures will hold.
    cs = synthetic_report_results(monkeypatch, tmp_path, "cs6235").rows
    # Budget: unique points (each capped at ~0.3 s + warm-up on the GPU).
    assert len({(r["conf"], r["variant"], json.dumps(r["params"], sort_keys=True)) for r in cs}) <= 110
    fig2 = [r for r in cs if r["figure"] == "fig2" and r["conf"] == "conf3"]
    assert [r.get("x") for r in fig2] == [32, 64, 128, 256, 512, 1024, None]
    best = cs6235.cs6235_best_k(cs, "conf4")
    assert best["params"]["unroll"] == 8 and best["params"]["loop_order"] == "rsc"

    pytest.importorskip("matplotlib")
    assert main(["cs6235", "--plot-only", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for png in figures("cs6235"):
        assert (tmp_path / png).read_bytes()[:8] == PNG_MAGIC, png
    assert "best unroll_k (rsc)" in printed and "(unroll=8)" in printed
    cs_md = (tmp_path / "cs6235.md").read_text()
    assert cs_md.count("printed no numbers for this figure") == 8 and "a K80-class card" in cs_md
