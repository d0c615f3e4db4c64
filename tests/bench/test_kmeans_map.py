"""The kmeans_map study without a GPU: its floors, skip rules, table, heat maps (skipped shapes hatched) and
declaration."""

import pytest

from gpuopt.bench.studies import STUDIES, shown_in
from gpuopt.bench.studies.kmeans_map import (MAP_D, MAP_K, MEMORY_SHARE, loop_bytes, map_floor, table_kmeans_map,
                                             why_skipped)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
H200_BYTES = 150_000_000_000


def test_floor_is_the_larger_of_bytes_and_flops():
    f = map_floor(1_000_000, 16, 3, 4.3e12, 66_900.0)  # 72 MB at 4.3 TB/s; 96 MFLOP at 66.9 TFLOP/s
    assert f["bound"] == "memory" and f["floor_us"] == pytest.approx(72e6 / 4.3e12 * 1e6)
    assert f["compute_floor_us"] == pytest.approx(2e6 * 16 * 3 / 66.9e12 * 1e6)
    g = map_floor(1_000_000, 16, 1024, 4.3e12, 66_900.0)
    assert g["bound"] == "compute" and g["floor_us"] == pytest.approx(2e6 * 1024 * 16 / 66.9e12 * 1e6)
    assert map_floor(10, 2, 3, None, None)["floor_us"] is None


def test_the_full_map_is_the_issue_grid():
    assert MAP_D[("gpu", "full")] == (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    assert MAP_K[("gpu", "full")] == (2, 8, 32, 128, 512, 2048, 8192, 32768)


def test_cells_past_memory_or_without_a_gpu_loop_are_skipped_and_say_why(monkeypatch):
    import importlib

    auto = importlib.import_module("gpuopt.kmeans.auto")  # (gpuopt.kmeans is also the function)

    # auto's pick needs a GPU's host checks: here device_tiled's cluster limit stands in for them
    monkeypatch.setattr(auto, "auto_choice", lambda n, d, k: "device_tiled" if k <= 8192 else "cpu")
    # 1M x 1024, k = 8192: 977 chunks x 8192 x 1024 float64 of chunk sums, 65.6 GB: runs on a 150 GB GPU.
    assert loop_bytes(1_000_000, 1024, 8192) < MEMORY_SHARE * H200_BYTES
    assert why_skipped(1_000_000, 1024, 8192, H200_BYTES) is None
    # 1M x 1024, k = 32768: over device_tiled's 8192 clusters (and 262 GB of chunk sums)
    assert "no loop on the GPU" in why_skipped(1_000_000, 1024, 32768, H200_BYTES)
    assert "over 80% of the GPU's" in why_skipped(1_000_000, 512, 8192, 40_000_000_000)


def _rows():
    rows = []
    for d in MAP_D[("gpu", "full")]:
        for k in MAP_K[("gpu", "full")]:
            r = dict(N=1_000_000, D=d, k=k, dtype="float32", **map_floor(1_000_000, d, k, 4.3e12, 66_900.0))
            if k > 8192:
                r["skipped"] = f"auto has no loop on the GPU for k = {k}, D = {d} (it would run cpu)"
            else:
                r.update(auto_variant="device" if k * d <= 1024 else "device_tiled",
                         us_per_iter=r["floor_us"] * (1 + k / 64), torch_us_per_iter=r["floor_us"] * 40)
                r["x_floor"] = r["us_per_iter"] / r["floor_us"]
                r["x_pytorch"] = r["torch_us_per_iter"] / r["us_per_iter"]
            rows.append(r)
    rows[0] = dict(rows[0], x_floor=None, x_pytorch=None, us_per_iter=None, error="RuntimeError: boom")
    rows.append(dict(N=8_000_000, D=128, k=1024, dtype="float16", error="TypeError: float16"))
    return rows


def test_table_and_heat_maps(tmp_path):
    pytest.importorskip("matplotlib")
    rows = _rows()
    text = table_kmeans_map(rows, {"N": 1_000_000})
    assert "PyTorch/auto" in text and "device_tiled" in text and "(it would run cpu)" in text and "boom" in text
    assert "auto over PyTorch on the float32 map: min" in text and "float16" in text
    study = STUDIES["kmeans_map"]
    assert study.opt_in and study.gpu_only
    assert [o.file for o in study.outputs] == ["kmeans_map.png", "kmeans_map_torch.png"]
    meta = {"gpu": {"name": "NVIDIA H200"}, "gpuopt_version": "0", "commit": "abc", "N": 1_000_000}
    drawn = study.figures(meta, rows, tmp_path / "kmeans_map.png")
    assert [p.name for p in drawn] == ["kmeans_map.png", "kmeans_map_torch.png"]
    assert all(p.read_bytes()[:8] == PNG_MAGIC for p in drawn)
    assert all(p.read_bytes()[:8] == PNG_MAGIC for p in study.figures(meta, [], tmp_path / "empty.png"))


def test_declares_what_it_shows():
    assert "kmeans_map.png" in shown_in("kmeans", "auto") and "kmeans_map_torch.png" in shown_in("kmeans", "auto")
