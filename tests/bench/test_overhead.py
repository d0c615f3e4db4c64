"""The overhead study on the CPU (tiny): its rows, table and figure."""

from gpuopt.bench.study import RunSettings
from gpuopt.bench.studies import STUDIES, shown_in


def test_tiny_cpu_run_table_and_figure(tmp_path):
    from gpuopt.bench.studies import overhead

    study = STUDIES["overhead"]
    res = study.run(RunSettings(gpu=False, tiny=True, progress=False))
    assert {(r["op"], r["caller"], r["impl"]) for r in res.rows} == {(o.op, "numpy", "gpuopt")
                                                                    for o in overhead.OVERHEAD_OPS}
    assert len(overhead.OVERHEAD_OPS) == 8  # every family: conv2d, matmul, conv2d_pool, three layer ops, sparse, kmeans
    assert all(r.get("error") is None and r["us_per_call"] > 0 and r["us_min"] <= r["us_max"] for r in res.rows)
    assert any("no GPU here" in n for n in res.notes)
    text = study.table(res.rows, res.meta)
    assert "µs/call" in text and "x PyTorch" in text
    assert study.figures(res.meta, res.rows, tmp_path / "overhead.png").is_file()


def test_declares_what_it_shows():
    assert "overhead.png" in shown_in("matmul", "async") and "overhead.png" in shown_in("conv2d", "implicit_gemm")


def test_default_rows_name_the_variant_variant_none_runs():
    import numpy as np

    import gpuopt
    from gpuopt.bench.studies import overhead

    rng = np.random.default_rng(0)
    for o in overhead.OVERHEAD_OPS:
        name = overhead._default(o.op, *overhead._inputs(o.op, rng))
        op = o.op
        assert name in gpuopt.variants(op)
        if not gpuopt.cuda_available():
            assert name == "cpu"
