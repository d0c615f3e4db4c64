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
                 exact_vs_cpu=True, details={"filter_arrays": 1.0, "filter_bytes_sent": 1048576.0, "h2d_calls": 2.0,
                                             "h2d_bytes": 2097152.0}),
            dict(variant="fast_fused", filter_format="FASTFilters", kernel_ms=0.05, total_ms=0.4, speedup_vs_cpu=24.0,
                 exact_vs_cpu=True, resident_kernel_ms=0.02, speedup_vs_cudnn=10.0,
                 details={"filter_arrays": 1.0, "filter_bytes_sent": 0.0, "h2d_calls": 1.0, "h2d_bytes": 1048576.0}),
            dict(variant="cudnn_fp32_precise", filter_format="dense float32", resident_kernel_ms=0.2,
                 exact_vs_cpu=True),
            dict(variant="cpu", filter_format="dense", total_ms=9.5)]
    text = lab_markdown({}, rows)
    assert ("| fast | FASTFilters | 16438.6 | 105.128 | 156.4 | 9.5 | 0.8 | 1.1 | 8.5 | 1 | 1048576 | 2 | 2097152 | - "
            "| - | yes |") in text
    assert "| fast_fused | FASTFilters | - | - | - | 9.5 | 0.05 | 0.4 | 24 | 1 | 0 | 1 | 1048576 | 20 | 10 | yes |" in text
    assert "| cudnn_fp32_precise | dense float32 | - | - | - | 9.5 | - | - | - | - | - | - | - | 200 | - | yes |" in text
    assert "| cpu |" not in text  # the CPU is a column, not a row


def test_density_table_and_heat_map(tmp_path):
    pytest.importorskip("matplotlib")
    from gpuopt.bench.studies import sparse_density

    rows = [dict(nnz_per_slice=k, input_density=d, best_variant="fast_fused", sparse_ms=0.01 * k, cudnn_ms=0.2,
                 ratio=0.05 * k, exact_vs_cpu=True) for k in range(1, 10) for d in (0.05, 0.2, 0.5, 1.0)]
    rows.append(dict(nnz_per_slice=3, input_density=0.05, error="RuntimeError: boom"))
    text = sparse_density.table_density(rows)
    assert "sparse/cuDNN" in text and "0.45" in text and "boom" in text
    meta = {"gpu": None, "gpuopt_version": "0", "commit": "abc"}
    study = STUDIES["sparse_density"]
    assert study.opt_in and study.gpu_only and [o.file for o in study.outputs] == ["sparse_density.png"]
    path = study.figures(meta, rows, tmp_path / "sparse_density.png")
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert study.figures(meta, [], tmp_path / "empty.png").read_bytes()[:8] == PNG_MAGIC


def test_density_filters_have_k_nonzeros_per_slice():
    import numpy as np

    from gpuopt.bench.studies.sparse_density import _filters, _inputs

    rng = np.random.default_rng(0)
    for k in (1, 5, 9):
        w = _filters(rng, 4, 6, k)
        assert w.shape == (4, 6, 3, 3) and (np.count_nonzero(w.reshape(24, 9), axis=1) == k).all()
        assert np.abs(w).max() <= 9
    real = np.zeros((4, 8, 8), np.int16)
    real[0, 0, :3] = [5, -7, 9]
    x = _inputs(rng, real, 0.5)
    assert set(np.unique(x)) <= {0, 5, -7, 9} and 0.3 < np.count_nonzero(x) / x.size < 0.7
    assert _inputs(rng, real, None) is real
