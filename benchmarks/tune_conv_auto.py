#!/usr/bin/env python3
"""Tile sweep behind conv2d auto's heuristic (gpuopt/_conv_auto.py): gpuopt's candidate kernels vs
cuDNN on the layers where auto first trailed it. GPU only; L2 flushed before every run.

    python benchmarks/tune_conv_auto.py [OUT_DIR]     # prints the six fastest per layer, writes tune_fast.json
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
import os  # noqa: E402
os.environ.setdefault("OUT", sys.argv[1] if len(sys.argv) > 1 else ".")

import numpy as np, gpuopt, json, os
from gpuopt.bench import measure
rng = np.random.default_rng(0)
layers = {
    "conf3": ((128, 3, 112, 112), (64, 3, 3, 3), 2),
    "fashion_conv2": ((10000, 6, 30, 30), (16, 6, 5, 5), 1),
    "mnist_conv1": ((10000, 1, 28, 28), (32, 1, 5, 5), 1),
    "mnist_conv2": ((10000, 32, 12, 12), (64, 32, 5, 5), 1),
}
cands = [("cudnn", {})] + [("implicit_gemm_fast", {"tile": t}) for t in gpuopt.variants("conv2d")["implicit_gemm_fast"].params["tile"].allowed] + [("implicit_gemm", {"tile": 16}), ("implicit_gemm", {"tile": 32}), ("unroll", {}), ("unroll_nk", {}), ("general", {})]
out = {}
for name, (xs, ws, st) in layers.items():
    dx = gpuopt.to_device(rng.uniform(-1, 1, xs).astype(np.float32)); dw = gpuopt.to_device(rng.uniform(-1, 1, ws).astype(np.float32))
    res = {}
    for v, p in cands:
        try:
            s = measure(lambda: gpuopt.conv2d(dx, dw, stride=st, variant=v, **p), device="gpu", warmup=3, repeat=15, max_time_s=0.5, flush_l2=True)
            res[f"{v} {p}"] = s.median_ms
        except Exception as e:
            res[f"{v} {p}"] = repr(e)[:80]
    out[name] = res
    c = res["cudnn {}"]
    print(name, "cudnn %.3f" % c)
    for k, t in sorted(((k, t) for k, t in res.items() if isinstance(t, float)), key=lambda kv: kv[1])[:6]:
        print("   %-45s %.3f ms  x cuDNN %.2f" % (k, t, c / t))
json.dump(out, open(os.environ["OUT"] + "/tune_fast.json", "w"), indent=1)
