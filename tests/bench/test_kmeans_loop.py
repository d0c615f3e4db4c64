"""The kmeans_loop study on the CPU (tiny): its rows, table and figure."""

from gpuopt.bench.study import RunSettings
from gpuopt.bench.studies import STUDIES, shown_in
from gpuopt.bench.studies.kmeans_loop import LOOP_ITERS, LOOP_SHAPES


def test_tiny_cpu_run_table_and_figure(tmp_path):
    study = STUDIES["kmeans_loop"]
    res = study.run(RunSettings(gpu=False, tiny=True, progress=False))
    assert [(r["dataset"], r["variant"]) for r in res.rows] == [(s[0], "cpu") for s in LOOP_SHAPES]
    for r in res.rows:
        assert r.get("error") is None and r["iterations"] == LOOP_ITERS and r["N"] == 2000
        assert r["us_per_iter"] > 0 and r["call_min_ms"] <= r["call_max_ms"]
    assert any("cut to at most 2000" in n for n in res.notes)
    text = study.table(res.rows, res.meta)
    assert "µs/iter" in text and "x PyTorch" in text
    assert study.figures(res.meta, res.rows, tmp_path / "kmeans_loop.png").is_file()


def test_declares_what_it_shows():
    assert "kmeans_loop.png" in shown_in("kmeans", "device") and "kmeans_loop.png" in shown_in("kmeans", "liao")
