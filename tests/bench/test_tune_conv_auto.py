"""The tune_conv_auto study: opt-in, GPU only (skipped with a note without one), its run on a
fake GPU, its log."""

from __future__ import annotations

import pytest

import gpuopt
from gpuopt import bench
from gpuopt.bench.__main__ import main
from gpuopt.bench.studies import DEFAULT_STUDIES, STUDIES, tune_conv_auto
from gpuopt.bench.study import RunSettings

from .support import measure_on_cpu

STUDY = STUDIES["tune_conv_auto"]


def test_opt_in_and_gpu_only():
    assert STUDY.opt_in and STUDY.gpu_only and "tune_conv_auto" not in DEFAULT_STUDIES
    assert list(STUDIES)[-1] == "tune_conv_auto"  # after the default ones
    assert {v for v, _ in tune_conv_auto.candidates()} == set(STUDY.variant_names())
    assert set(tune_conv_auto.LAYERS) == {"conf1", "conf2", "conf3", "conf4", "fashion_conv1", "fashion_conv2",
                                          "mnist_conv1", "mnist_conv2"}
    with pytest.raises(RuntimeError, match="needs a GPU"):
        STUDY.run(RunSettings(gpu=False, tiny=True, progress=False))


@pytest.mark.skipif(gpuopt.cuda_available(), reason="checks the behaviour without a GPU")
def test_skipped_without_gpu(tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["tune_conv_auto", "--quiet", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "== tune_conv_auto" in printed and "skipped: it needs a GPU" in printed and "nothing written" in printed
    assert "running the CPU variants" not in printed  # nothing runs on the CPU instead
    assert not out.exists()


def test_unknown_layer(monkeypatch):
    monkeypatch.setenv(tune_conv_auto.LAYERS_ENV, "conf1,nope")
    with pytest.raises(ValueError, match="unknown layer.*nope.*mnist_conv2"):
        tune_conv_auto._layer_names()
    monkeypatch.setenv(tune_conv_auto.LAYERS_ENV, " conf3, mnist_conv1 ")
    assert tune_conv_auto._layer_names() == ["conf3", "mnist_conv1"]


def test_gpu_path_and_log(fake_conv_gpu, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(tune_conv_auto.LAYERS_ENV, "conf1,conf2")
    measure_on_cpu(monkeypatch, tune_conv_auto)
    res = STUDY.run(RunSettings(gpu=True, tiny=True, progress=False))
    n_cands = len(tune_conv_auto.candidates())
    assert [r["layer"] for r in res.rows] == ["conf1"] * n_cands + ["conf2"] * n_cands
    assert not any(r.get("error") for r in res.rows)
    for layer in ("conf1", "conf2"):
        rows = [r for r in res.rows if r["layer"] == layer]
        cudnn = rows[0]
        assert cudnn["label"] == "cudnn algorithms=precise" and cudnn["algorithm"] == "IMPLICIT_PRECOMP_GEMM"
        assert cudnn["speedup_vs_cudnn"] == pytest.approx(1.0)
        assert sorted(r["rank"] for r in rows if "rank" in r) == list(range(1, 1 + sum("rank" in r for r in rows)))
        summary = res.meta["layers"][layer]
        assert [r["label"] for r in rows if r["auto_pick"]] == [summary["auto_pick"]]  # auto's pick is a candidate
        assert summary["x"] == tune_conv_auto.LAYERS[layer][0]
        assert set(summary["median_ms"]) == {r["label"] for r in rows}
    # The files: CSV/JSON, and the log rewritten by --plot-only (no GPU needed).
    meta = {"gpuopt_version": "0", "commit": "abc", "gpu": None, "sweep": "tune_conv_auto", **res.meta}
    bench.write_results("tune_conv_auto", res.rows, meta, tmp_path, columns=STUDY.columns)
    assert main(["tune_conv_auto", "--plot-only", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    log = (tmp_path / "tune_conv_auto.log").read_text()
    assert log.splitlines()[0] == bench.format_metadata(meta)
    for text in (printed, log):
        assert text.count("auto picks") == 2 and "conf2: cuDNN " in text and "   x cuDNN " in text
    assert len([line for line in log.splitlines() if line.startswith("   ")]) == 2 * tune_conv_auto.TOP
    assert {f.name for f in tmp_path.iterdir()} == set(STUDY.files())
