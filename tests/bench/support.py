"""What the bench tests share: the expected files, stand-ins for a GPU (its registry and
device on NumPy, synthetic H200 kernel times, hand-made ladder rows), and the check that
every number the ECE408 reports printed is in a table."""

from __future__ import annotations

import gpuopt
from gpuopt import bench
from gpuopt.bench import conv_points
from gpuopt.bench.studies import STUDIES, ece408
from gpuopt.bench.study import RunSettings

SWEEP_NAMES = ["matmul", "matmul_report", "conv2d", "cs6235", "ece408", "kmeans", "kmeans_loop", "sparse", "networks",
               "overhead"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: The figures of the sweeps that draw more than <name>.png.
FIGURES = {"cs6235": [f"cs6235_fig{i}.png" for i in range(1, 9)],
           "ece408": ["ece408_op_time.png", "ece408_tile_width.png"]}


def figures(name):
    return FIGURES.get(name, [f"{name}.png"])


H200 = {"name": "NVIDIA H200", "compute_capability": (9, 0), "multiprocessors": 132, "clock_rate_khz": 1980000}


def measure_on_cpu(monkeypatch, *modules):
    """measure() of the studies in ``modules`` times on the CPU whatever device they ask for."""
    real_measure = bench.measure
    for module in modules:
        monkeypatch.setattr(module, "measure", lambda fn, device=None, **kw: real_measure(fn, device="cpu", **kw))


def ladder_rows():
    rows = []
    for n, scale in ((1024, 0.5), (4096, 1.0)):
        for label, variant, g, info in (("naive", "naive", 5000.0, dict(registers=30, static_shared_bytes=0,
                                                                         local_bytes=0, threads=256)),
                                        ("shared block=16", "shared", 10000.0, dict(registers=40,
                                                                                     static_shared_bytes=2048,
                                                                                     dynamic_shared_bytes=0,
                                                                                     local_bytes=8, threads=256,
                                                                                     max_blocks_per_sm=8,
                                                                                     kernel="shared<16>")),
                                        ("cublas", "cublas", 50000.0, {})):
            rows.append({"n": n, "label": label, "variant": variant, "gflops": g * scale, "median_ms": 1.0, **info})
    rows.append({"n": 4096, "label": "broken", "variant": "broken", "error": "RuntimeError: boom"})
    return rows


def fake_conv_table():
    """The build's conv2d variants, plus stand-ins for the ones another engineer is adding."""
    from gpuopt.registry import Param, Variant

    table = dict(gpuopt.variants("conv2d"))

    def v(name, *params):
        return Variant("conv2d", name, f"fake {name}", "gpuopt", True, {p.name: p for p in params})

    for name in ("unroll", "implicit_gemm", "implicit_gemm_fast", "auto"):
        table.setdefault(name, v(name))
    table.setdefault("cudnn", v("cudnn", Param("algorithms", "precise", ("precise", "any"))))
    return table


class ModelPoints(conv_points.ConvPoints):
    """Synthetic H200-like kernel times (no data, nothing run): for the tables and figures at full size."""

    RATE = {"basic": 2500, "unroll": 1800, "unroll_constmem": 2000, "tiled": 4500, "tiled_unrolled": 5200,
            "tiled_channels": 4800, "tiled_corner_turn": 5400, "implicit_gemm": 9000, "implicit_gemm_fast": 21000,
            "direct_regblock": 24000, "auto": 24000, "cudnn": 15000, "cpu": 15, "general": 6000, "plain": 2500, "reorder": 2400,
            "unroll_k": 4000, "unroll_c": 2500, "unroll_nk": 9000, "shared": 3000}
    BLOCK = {32: 1.7, 64: 1.1, 128: 1.0, 256: 1.05, 512: 1.25, 1024: 1.6}

    def load(self, key, prob):
        self.key, self.problem = key, prob

    def release(self):
        pass

    def measure(self, e):
        ck = self.cache_key(self.key, e)
        if ck not in self.cache:
            prob, params = self.problem, self.full_params(e)
            gpu = e.variant != "cpu"
            out = {"params": params, "device": "gpu" if gpu else "cpu", "flush_l2": gpu}
            if e.variant == "unroll_constmem" and 4 * prob.k * prob.c * prob.r * prob.s > 65536:
                out["skipped"] = "ValueError: conv2d/unroll_constmem: does not fit the 64 KB constant memory"
            else:
                rate = self.RATE.get(e.variant, 3000) * (1.2 if params.get("algorithms") == "any" else 1.0)
                rate /= self.BLOCK.get(params.get("block_size", 128), 1.0)
                rate *= {0: 1.0, 2: 0.95, 4: 1.1, 8: 1.2, 16: 0.9}.get(params.get("unroll"), 1.0)
                rate *= {4: 0.35, 8: 0.8, 12: 0.9, 16: 1.0, 20: 0.85, 24: 0.9, 28: 0.97, 32: 0.95}.get(
                    params.get("tile_width"), 1.0)
                rate *= 0.9 if params.get("loop_order") == "crs" else 1.0
                rate *= 1.0 if prob.c < 100 else 0.6 if e.variant != "unroll_c" else 0.6 * (1 + params["unroll"] / 8)
                ms = prob.flops / (rate * 1e6) + (0.004 if gpu else 0.05)
                out.update(median_ms=ms, min_ms=ms * 0.97, max_ms=ms * 1.1, mean_ms=ms * 1.01, std_ms=ms * 0.02,
                           repeats=30, gflops=prob.flops / (ms * 1e6), spin_us=200.0 if gpu else None,
                           overhead_hidden=True)
                if not conv_points.is_reference(e.variant, params):
                    out.update(rel_err=2e-7, reference="cudnn")
            self.cache[ck] = out
        return dict(self.cache[ck])


def assert_ece408_numbers(text):
    """Every Op Time the ECE408 Fashion-MNIST report printed (as ms) and the MNIST report's times are in ``text``."""
    for variant, entry in ece408.ECE408_OP_TIMES.items():
        for b, (t1, t2, _) in entry["times"].items():
            for s in (t1, t2):
                assert ece408.ms_text(s) in text, (variant, b, s)
    for variant, layer, ms, tag, _ in ece408.ECE408_MNIST_TIMES:
        assert f"{ms:g} [{tag}]" in text, (variant, layer, ms)


def synthetic_report_results(monkeypatch, out, name):
    """``<name>.json`` (cs6235 or ece408) of a full H200 run (model times), written to ``out``; the StudyResult."""
    table = fake_conv_table()
    monkeypatch.setattr(gpuopt, "variants", lambda op=None: table)
    monkeypatch.setattr(gpuopt.registry.Variant, "available", property(lambda self: True))
    monkeypatch.setattr(conv_points, "ConvPoints", ModelPoints)
    meta = {"gpu": {**H200, "compute_capability": "9.0"}, "plan": {"mode": "gpu", "level": "full"},
            "gpuopt_version": "0", "commit": "abc", "timestamp_utc": "2026-01-01T00:00:00Z"}
    res = STUDIES[name].run(RunSettings(gpu=True, progress=False))
    bench.write_results(name, res.rows, {**meta, "sweep": name, **res.meta, "notes": res.notes}, out,
                        columns=STUDIES[name].columns)
    return res
