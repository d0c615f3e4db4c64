"""The kmeans study (Liao's k-means): its table and figure from results rows."""

from __future__ import annotations

import pytest

from gpuopt.bench.studies import STUDIES, kmeans

from .support import PNG_MAGIC

ROWS = [{"dataset": "kmeans01", "source": "synthetic", "N": 351, "D": 34, "k": 3, "threshold": 0.001, "variant": v,
         "iterations": 5, "computation_ms": ms, "kernel_ms": ms * 0.8, "h2d_ms": 0.1, "d2h_ms": 0.05,
         "match_cpu": True if v == "liao" else None} for v, ms in (("liao", 1.25), ("cpu", 40.0))]


def test_table():
    text = kmeans.table_kmeans(ROWS)
    assert text.startswith("k=3, threshold 0.001; computation = wall time of the call (median)")
    assert "kmeans01" in text and "351x34" in text and "1.25" in text and "yes" in text
    failed = [*ROWS, {**ROWS[0], "variant": "cpu", "error": "RuntimeError: boom"}]
    assert "errors:\n  cpu @ dataset=kmeans01: RuntimeError: boom" in kmeans.table_kmeans(failed)


def test_figure(tmp_path):
    pytest.importorskip("matplotlib")
    meta = {"gpu": None, "k": 3, "threshold": 0.001, "gpuopt_version": "0", "commit": "abc"}
    path = STUDIES["kmeans"].figures(meta, ROWS, tmp_path / "kmeans.png")
    assert path == tmp_path / "kmeans.png" and path.read_bytes()[:8] == PNG_MAGIC
    assert [o.file for o in STUDIES["kmeans"].outputs] == ["kmeans.png"]
