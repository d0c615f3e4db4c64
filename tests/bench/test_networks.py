"""The networks study on the CPU (tiny): rows of every kind it can make here, its tables and figure, and what its
outputs declare (the stages' op variants and the layer ops' GPU variants)."""

import numpy as np

import gpuopt
from gpuopt.bench.study import RunSettings
from gpuopt.bench.studies import STUDIES, networks, shown_in
from gpuopt.models import STAGES


def test_tiny_cpu_run_tables_and_figure(tmp_path):
    study = STUDIES["networks"]
    res = study.run(RunSettings(gpu=False, tiny=True, progress=False))
    kinds = {(r["kind"], r["network"], r["stage"]) for r in res.rows}
    assert ("network", "mnist", "serial") in kinds and ("layer", "fashion", "serial") in kinds
    net = [r for r in res.rows if r["kind"] == "network"]
    assert all(r.get("error") is None and r["numpy_ms"] > 0 and r["match_serial"] for r in net)
    layers = [r for r in res.rows if r["kind"] == "layer" and r["network"] == "mnist"]
    assert [r["layer"] for r in layers] == [s.name for s in STAGES["mnist"]["serial"].chain("predict")]
    text = study.table(res.rows, res.meta)
    assert "Table 2" in text and "whole network" in text
    md = networks.markdown_networks(res.meta, res.rows)
    assert md.startswith("### ") and "| layer |" in md
    png = study.figures(res.meta, res.rows, tmp_path / "networks.png")
    assert png.is_file()


def test_outputs_declare_every_stage_and_layer_op_variant():
    for table in STAGES.values():
        for stage in table.values():
            for step in (*stage.steps, *stage.heads.values()):
                assert "networks.md" in shown_in(step.op, step.variant), (step.op, step.variant)
    for op in ("relu", "tanh", "max_pool2d", "avg_pool2d", "fully_connected", "argmax", "softmax", "conv2d_pool"):
        for name, v in gpuopt.variants(op).items():
            if v.needs_cuda:
                assert "networks.md" in shown_in(op, name), (op, name)


def test_speedup_column_only_for_the_reports_batch():
    rows = [dict(kind="layer", network="mnist", stage="basic", images=10, layer="Arg Max", op="argmax",
                 variant="basic", kernel_ms=0.01, h2d_ms=0.0, d2h_ms=0.0, report_ms=0.339771)]
    (_, _, body), = networks._sections({}, rows)
    assert body[0][-1] == "-"
    rows[0]["images"] = networks.TABLE_IMAGES
    (_, _, body), = networks._sections({}, rows)
    assert float(body[0][-1]) == np.float64(0.339771 / 0.01).round(1)
