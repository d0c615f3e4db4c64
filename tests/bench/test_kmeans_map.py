"""The kmeans_map study without a GPU: its floors, table, heat map (unsupported shapes hatched) and declaration."""

import pytest

from gpuopt.bench.studies import STUDIES, shown_in
from gpuopt.bench.studies.kmeans_map import MAP_D, MAP_K, map_floor, table_kmeans_map

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_floor_is_the_larger_of_bytes_and_flops():
    f = map_floor(1_000_000, 16, 3, 4.3e12, 66_900.0)  # 72 MB at 4.3 TB/s; 96 MFLOP at 66.9 TFLOP/s
    assert f["bound"] == "memory" and f["floor_us"] == pytest.approx(72e6 / 4.3e12 * 1e6)
    assert f["compute_floor_us"] == pytest.approx(2e6 * 16 * 3 / 66.9e12 * 1e6)
    g = map_floor(1_000_000, 16, 1024, 4.3e12, 66_900.0)
    assert g["bound"] == "compute" and g["floor_us"] == pytest.approx(2e6 * 1024 * 16 / 66.9e12 * 1e6)
    assert map_floor(10, 2, 3, None, None)["floor_us"] is None


def _rows():
    rows = []
    for d in MAP_D:
        for k in MAP_K:
            r = dict(N=1_000_000, D=d, k=k, **map_floor(1_000_000, d, k, 4.3e12, 66_900.0))
            if k * d > 4096:
                r["skipped"] = f"no loop-on-the-GPU variant takes k*D = {k * d}"
            else:
                r.update(best_variant="device" if k * d <= 1024 else "device_gemm", auto_variant="device",
                         us_per_iter=r["floor_us"] * (1 + k / 64))
                r["ratio"] = r["us_per_iter"] / r["floor_us"]
            rows.append(r)
    rows[0] = dict(rows[0], ratio=None, us_per_iter=None, error="RuntimeError: boom")
    return rows


def test_table_and_heat_map(tmp_path):
    pytest.importorskip("matplotlib")
    rows = _rows()
    text = table_kmeans_map(rows, {"N": 1_000_000})
    assert "time/floor" in text and "device_gemm" in text and "takes k*D = 8192" in text and "boom" in text
    study = STUDIES["kmeans_map"]
    assert study.opt_in and study.gpu_only and [o.file for o in study.outputs] == ["kmeans_map.png"]
    meta = {"gpu": {"name": "NVIDIA H200"}, "gpuopt_version": "0", "commit": "abc", "N": 1_000_000}
    assert study.figures(meta, rows, tmp_path / "kmeans_map.png").read_bytes()[:8] == PNG_MAGIC
    assert study.figures(meta, [], tmp_path / "empty.png").read_bytes()[:8] == PNG_MAGIC


def test_declares_what_it_shows():
    assert "kmeans_map.png" in shown_in("kmeans", "device_gemm") and "kmeans_map.png" in shown_in("kmeans", "device")
