"""Fixtures of the bench tests: real data when present, fake GPU registries (see support.py)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import gpuopt
from gpuopt.bench import conv_points
from gpuopt.bench.studies import conv2d, matmul, matmul_report

from .support import H200, fake_conv_table, measure_on_cpu


@pytest.fixture
def data_env(monkeypatch):
    """Point the studies at the real data when this checkout has it (else they skip it, with a note)."""
    root = gpuopt.datasets.data_dir(required=False)
    if root is not None:
        monkeypatch.setenv("GPUOPT_DATA_DIR", str(root))
    return root


@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU-like registry and device on any machine: the matmul studies' GPU path, run on NumPy.

    Variants (the registry's matmul table) naive, cublas (registered second), shared (block 16/32), tile_buffer (tile_sz
    1/2/4), coalesced (warp_layout row/column) and a 'warptile' that is 1% off; to_device is
    the identity and measure() times on the CPU.
    """
    from gpuopt.registry import Param, Variant

    def v(name, *params):
        return Variant("matmul", name, f"fake {name}", "gpuopt", True, {p.name: p for p in params})

    table = {"cpu": Variant("matmul", "cpu", "cpu", "reference", False), "naive": v("naive"), "cublas": v("cublas"),
             "shared": v("shared", Param("block", 16, (16, 32))),
             "tile_buffer": v("tile_buffer", Param("tile_sz", 1, (1, 2, 4))),
             "coalesced": v("coalesced", Param("warp_layout", "row", ("row", "column"))), "warptile": v("warptile")}
    calls = []

    def fake_matmul(a, b, *, variant=None, **params):
        calls.append((variant, tuple(sorted(params.items()))))
        spec = table[variant]
        assert set(params) <= set(spec.params)
        c = (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)
        return c * np.float32(1.01) if variant == "warptile" else c

    def kernel_info(variant, *, shape=(4096, 4096, 4096), **params):  # gpuopt.matmul's signature
        calls.append(("kernel_info", variant, tuple(shape)))
        n = shape[0]
        if variant == "cublas":
            raise ValueError("cublas is not one of gpuopt's kernels")
        return {"registers": 32 + params.get("tile_sz", 0), "static_shared_bytes": 4 * 2 * params.get("block", 0) ** 2,
                "dynamic_shared_bytes": 0, "local_bytes": 0, "threads": 256, "max_blocks_per_sm": 8,
                "kernel": f"{variant}<{n}>", "variant": variant}

    monkeypatch.setattr(gpuopt, "variants", lambda op=None: table)
    monkeypatch.setitem(gpuopt.registry._REGISTRY, "matmul", table)  # where gpuopt.matmul.ladder() looks
    monkeypatch.setattr(gpuopt.registry.Variant, "available", property(lambda self: True))
    monkeypatch.setattr(gpuopt, "matmul", fake_matmul)
    monkeypatch.setattr(gpuopt, "to_device", lambda x: x)
    monkeypatch.setattr(gpuopt, "device_info", lambda: dict(H200))
    measure_on_cpu(monkeypatch, matmul, matmul_report)
    monkeypatch.setattr(importlib.import_module("gpuopt.matmul"), "matmul_kernel_info", kernel_info, raising=False)
    return calls


@pytest.fixture
def fake_conv_gpu(monkeypatch):
    """conv2d's GPU path on NumPy: every variant computes with the cpu variant (unroll_c unroll=4 1% off,
    unroll_constmem rejects filter banks over 64 KB as the real one does); measure() times on the CPU."""
    table = fake_conv_table()
    real_conv2d = gpuopt.conv2d
    calls = []

    def fake_conv2d(x, w, *, stride=1, padding=0, variant=None, **params):
        spec = table[variant]
        for key, value in params.items():
            spec.params[key].check(value, f"conv2d/{variant}")
        if variant == "unroll_constmem" and np.asarray(w).nbytes > 65536:
            raise ValueError("conv2d/unroll_constmem: the filter bank does not fit the 64 KB constant memory")
        calls.append((variant, tuple(np.shape(x)), tuple(sorted(params.items()))))
        y = real_conv2d(x, w, stride=stride, padding=padding, variant="cpu")
        return y * np.float32(1.01) if variant == "unroll_c" and params.get("unroll") == 4 else y

    monkeypatch.setattr(gpuopt, "variants", lambda op=None: table)
    monkeypatch.setattr(gpuopt.registry.Variant, "available", property(lambda self: True))
    monkeypatch.setattr(gpuopt, "conv2d", fake_conv2d)
    monkeypatch.setattr(gpuopt, "to_device", lambda x: x)
    monkeypatch.setattr(gpuopt.conv, "cudnn_algorithm", lambda *a, **k: "IMPLICIT_PRECOMP_GEMM")
    measure_on_cpu(monkeypatch, conv_points, conv2d)
    return calls
