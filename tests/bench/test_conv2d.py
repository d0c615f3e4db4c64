"""The conv2d study (every variant vs cuDNN on the CS6235 configurations), on a fake GPU."""

from __future__ import annotations

import gpuopt
from gpuopt.bench.studies import STUDIES, conv2d
from gpuopt.bench.study import RunSettings


def test_conv2d_study_runs_every_gpu_variant(fake_conv_gpu):
    res = STUDIES["conv2d"].run(RunSettings(gpu=True, tiny=True, progress=False))
    table = gpuopt.variants("conv2d")
    expected = [n for n, v in table.items() if v.needs_cuda and n != "cudnn"] + ["cudnn", "auto-fast", "cudnn-any"]
    assert [r["variant"] for r in res.rows if r["conf"] == "conf1"] == expected
    assert {"implicit_gemm", "tiled_corner_turn", "general"} <= set(expected)
    by = {(r["conf"], r["variant"]): r for r in res.rows}
    assert "64 KB" in by[("conf2", "unroll_constmem")]["skipped"] and not by[("conf2", "unroll_constmem")].get("error")
    assert by[("conf1", "unroll_constmem")]["median_ms"] > 0 and by[("conf1", "cudnn")]["speedup_vs_cudnn"] == 1.0
    text = conv2d.table_conv2d(res.rows)
    assert "not applicable" in text and "unroll_constmem @ conf=conf2" in text


def test_conv2d_study_divides_by_both_cudnns(fake_conv_gpu):
    """Each precision class beside its cuDNN: auto beside cuDNN precise, auto-fast beside cuDNN any; the table
    says which each ratio divides by."""
    res = STUDIES["conv2d"].run(RunSettings(gpu=True, tiny=True, progress=False))
    by = {(r["conf"], r["variant"]): r for r in res.rows}
    assert by[("conf1", "cudnn-any")].get("speedup_vs_cudnn_any") == 1.0, by[("conf1", "cudnn-any")]
    assert by[("conf1", "auto-fast")]["speedup_vs_cudnn_any"] > 0 and by[("conf1", "auto")]["speedup_vs_cudnn"] > 0
    assert "vs cuDNN precise" in conv2d.table_conv2d(res.rows) and "vs cuDNN any" in conv2d.table_conv2d(res.rows)
