"""The conv_layers study's layer tables, floors, table and figure (its run needs a GPU and torch)."""

from __future__ import annotations

import pytest

from gpuopt.bench.studies import conv_layers as cl


def test_the_networks_unique_layers():
    rows = cl.layers()
    by_net = {}
    for net, *layer in rows:
        by_net.setdefault(net, []).append(layer)
    # ResNet-50: the stem, and per stage the reduce/3x3/expand of the first block, its shortcut, the later blocks'
    # reduce and (for the strided stages) their 3x3: 1 + 4 + 6 + 6 + 6 = 23 unique shapes
    assert len(by_net["ResNet-50 b32"]) == len(by_net["ResNet-50 b1"]) == 23
    assert len(by_net["VGG-16 b16"]) == 9 and len(by_net["reports"]) == 8
    dw = [layer for layer in by_net["MobileNetV2 b32"] if layer[-1] > 1]
    assert dw and all(layer[-1] == layer[2] == layer[5] for layer in dw)  # groups = C = K
    assert all(n == 1 for _, n, *_ in by_net["ResNet-50 b1"])
    assert max(n for _, _, n, *_ in cl.layers(4)) == 4


def test_shapes_chain_through_each_network():
    # each ResNet stage's 3x3 reads the reduce's maps; the outputs fit the next stage's inputs
    for net, name, n, c, h, w, k, r, s, stride, padding, groups in cl.layers():
        p = (h + 2 * padding - r) // stride + 1
        assert p >= 1 and c % groups == 0 and k % groups == 0, (net, name)
        if name.startswith("stem 7x7"):
            assert p == 112


def test_floors():
    f = cl.floors(16, 128, 56, 56, 128, 3, 3, 1, 1, 1)  # the VGG-style layer: 2 N K C R S P Q = 14.8 GFLOP
    assert f["gflop"] == pytest.approx(14.8, rel=0.01)
    assert f["fp32_floor_ms"] == pytest.approx(f["gflop"] / 66.9e3 * 1e3, rel=1e-6)
    assert f["floor_ms"] == max(f["fp32_floor_ms"], f["bytes_floor_ms"])
    dw = cl.floors(32, 144, 56, 56, 144, 3, 3, 1, 1, 144)  # depthwise: bytes-bound
    assert dw["floor_ms"] == dw["bytes_floor_ms"] > dw["fp32_floor_ms"]


def test_table_and_figure(tmp_path):
    rows = [dict(network="VGG-16 b16", layer="3x3 64>64 @224", gflop=59.2, torch_ms=1.0, auto_ms=2.0,
                 auto_variant="implicit_gemm_fast", auto_x_torch=0.5, auto_x_cudnn_precise=1.7, auto_fast_x_torch=1.2, best_kernel="winograd",
                 best_x_torch=1.2, floor_ms=0.9, auto_x_floor=2.2, torch_err=1e-7, auto_err=2e-7, auto_fast_err=3e-5),
            dict(network="reports", layer="conf4", error="RuntimeError: x")]
    text = cl.table_conv_layers(rows)
    assert "implicit_gemm_fast" in text and "reports conf4: RuntimeError: x" in text
    assert "auto x precise" in text and "1.70" in text
    assert cl.plot_conv_layers({}, rows, tmp_path / "f.png").exists()
    assert cl.plot_conv_layers({}, rows[1:], tmp_path / "g.png").exists()
