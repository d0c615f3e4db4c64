"""The overhead study on the CPU (tiny): its rows, table and figure."""

from gpuopt.bench.study import RunSettings
from gpuopt.bench.studies import STUDIES, shown_in


def test_tiny_cpu_run_table_and_figure(tmp_path):
    from gpuopt.bench.studies import overhead

    study = STUDIES["overhead"]
    res = study.run(RunSettings(gpu=False, tiny=True, progress=False))
    # Without a GPU the NumPy path of every op that has one (the line shapes are device-only)
    assert {(r["op"], r["problem"], r["caller"], r["impl"]) for r in res.rows} == {
        (o.op, o.problem, "numpy", "gpuopt") for o in overhead.OVERHEAD_OPS if "numpy" in o.callers}
    assert len(overhead.OVERHEAD_OPS) == 10  # every family: conv2d, matmul, conv2d_pool, 3 layer ops, sparse, kmeans
    assert {o.op for o in overhead.OVERHEAD_OPS if o.line_us} == {"kmeans", "sparse_conv2d"}  # the loop lines
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


def test_lines_are_judged_from_the_rows():
    from gpuopt.bench.studies import overhead

    rows = [dict(op="kmeans", problem="kmeans04: 488,565x8", caller="device", impl="gpuopt", variant="default (auto)",
                 us_per_call=19.3, line_us=25.0, kernel_us=19.0, over_kernel_us=0.3),
            dict(op="sparse_conv2d", problem="NCTU lab layer", caller="device", impl="gpuopt", variant="default",
                 us_per_call=31.0, line_us=30.0, kernel_us=22.0, over_kernel_us=9.0)]
    lines = overhead._lines(rows)
    assert any("kmeans04" in ln and "(met)" in ln for ln in lines)
    assert any("NCTU lab layer" in ln and "(missed)" in ln for ln in lines)
    assert any("1 of 2 rows" in ln and "sparse_conv2d default +9.0" in ln for ln in lines)
