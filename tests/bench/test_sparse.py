"""The sparse study (the NCTU sparse convolution layer): its table and figure from results rows."""

from __future__ import annotations

import pytest

from gpuopt.bench.studies import STUDIES, sparse

from .support import PNG_MAGIC

ROWS = [{"variant": v, "filter_format": sparse.SPARSE_FORMATS[v], "C": 512, "H": 32, "W": 32, "M": 512, "nnz": 262144,
         "kernel_ms": k, "transfer_ms": t, "total_ms": k + t, "speedup_vs_cpu": 400.0 / (k + t),
         "exact_vs_cpu": None if v == "cpu" else True} for v, k, t in (("dense", 2.0, 1.0), ("coo", 1.0, 0.5),
                                                                        ("fast", 0.5, 0.5), ("cpu", 400.0, 0.0))]


def test_table():
    text = sparse.table_sparse(ROWS)
    assert text.startswith(f"512 maps 32x32, 512 filters ({sparse.SPARSE_FILTER_NOTE})")
    assert "FASTFilters" in text and "reference" in text and "400" in text
    assert sparse.table_sparse([{**ROWS[1], "exact_vs_cpu": False}]).count("NO") == 1


def test_figure(tmp_path):
    pytest.importorskip("matplotlib")
    meta = {"gpu": None, "gpuopt_version": "0", "commit": "abc"}
    path = STUDIES["sparse"].figures(meta, ROWS, tmp_path / "sparse.png")
    assert path == tmp_path / "sparse.png" and path.read_bytes()[:8] == PNG_MAGIC
    assert [o.file for o in STUDIES["sparse"].outputs] == ["sparse.png", "sparse_report.md"]


def test_lab_table_puts_the_labs_numbers_beside_this_run():
    from gpuopt.bench.studies.sparse import lab_markdown

    rows = [dict(variant="fast", filter_format="FASTFilters", kernel_ms=0.8, total_ms=1.1, speedup_vs_cpu=8.5,
                 exact_vs_cpu=True, details={"filter_arrays": 1.0, "filter_bytes_sent": 1048576.0}),
            dict(variant="cpu", filter_format="dense", total_ms=9.5)]
    text = lab_markdown({}, rows)
    assert "| fast | FASTFilters | 16438.6 | 105.128 | 156.4 | 9.5 | 0.8 | 1.1 | 8.5 | 1 | 1048576 | yes |" in text
    assert "| cpu |" not in text  # the CPU is a column, not a row
