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
    assert [o.file for o in STUDIES["kmeans"].outputs] == ["kmeans.png", "kmeans_report.md"]


def test_report_tables_put_the_gtx480_seconds_beside_this_run():
    from gpuopt.bench.studies.kmeans import KMEANS_REPORT_TABLES, report_markdown

    ms = {"liao": 10.0, "liao_occupancy": 5.0, "liao_aos": 4.0, "liao_vec": 2.0, "device": 1.0}
    rows = [dict(dataset=s, variant=v, computation_ms=t) for s in ("kmeans01", "kmeans02", "kmeans03", "kmeans04")
            for v, t in ms.items()]
    text = report_markdown({}, rows)
    assert [line for line in text.splitlines() if line.startswith("**Table")] == [
        f"**{t}** (GTX 480 s / H200 ms)" for t in KMEANS_REPORT_TABLES]
    # The report's printed rows, and this run's times, totals and speedups over the original version.
    assert "| Original Version | `liao` | 0.0496 / 10 | 0.0447 / 10 | 0.2292 / 10 | 0.4144 / 10 | 0.7379 / 40 | " \
           "1.00x / 1.00x |" in text
    assert "| Auto Vectorized Version | `liao_vec` | 0.0448 / 2 | 0.0450 / 2 | 0.0810 / 2 | 0.0550 / 2 | " \
           "0.2258 / 8 | 3.60x / 5.00x |" in text
    assert "| (gpuopt, not in the report) | `device` |" in text and "- / 10.00x |" in text
    missing = report_markdown({}, [r for r in rows if r["variant"] != "liao_aos"])
    assert "| AOS Optimized Version | `liao_aos` | 0.0440 / - |" in missing  # a variant that did not run
