"""Per-call cost of every public op on small device-resident operands, for an A/B of two builds.

    python3 scripts/call_cost.py [--calls N] [--batches B] [--json FILE]

Times what a user's loop pays: `calls` back-to-back calls of the public function on gpuopt DeviceArrays (and
on torch CUDA tensors where torch is importable), one synchronise, divided by `calls`; the median over
`batches`. Run it once per build (PYTHONPATH selecting the build), alternating, and compare the medians: the
overhead study covers conv2d and matmul; this covers every public op with the same clock.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np


def cases(gpuopt, rng):
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    dev = gpuopt.to_device
    x8, w3 = dev(f32(1, 1, 8, 8)), dev(f32(1, 1, 3, 3))
    a16, b16 = dev(f32(16, 16)), dev(f32(16, 16))
    xm, wm = dev(f32(4, 1, 28, 28)), dev(f32(8, 1, 5, 5))
    yield "conv2d 1x1x8x8 default", lambda: gpuopt.conv2d(x8, w3)
    yield "conv2d 1x1x8x8 implicit_gemm", lambda: gpuopt.conv2d(x8, w3, variant="implicit_gemm")
    yield "conv2d 4x1x28x28 pad 2 relu", lambda: gpuopt.conv2d(xm, wm, padding=2, activation="relu")
    yield "matmul 16 default", lambda: gpuopt.matmul(a16, b16)
    yield "matmul 16 async", lambda: gpuopt.matmul(a16, b16, variant="async")
    pts = dev(f32(4096, 8))
    yield "kmeans 4096x8 k=3 max_iter=1", lambda: gpuopt.kmeans(pts, 3, max_iter=1)
    xs = rng.integers(-3, 4, (4, 16, 16)).astype(np.int16)
    ws = rng.integers(-3, 4, (8, 4, 3, 3)).astype(np.int16)
    ws[rng.random(ws.shape) < 0.7] = 0
    fast = gpuopt.sparse.formats.FASTFilters.from_dense(ws).to_device()
    xsd = dev(xs)
    yield "sparse_conv2d 4x16x16 fast filters", lambda: gpuopt.sparse_conv2d(xsd, fast)
    v = dev(f32(64, 256))
    yield "nn.relu 64x256", lambda: gpuopt.nn.relu(v)
    yield "nn.softmax 64x256", lambda: gpuopt.nn.softmax(v)
    fw = dev(f32(256, 64))
    yield "nn.fully_connected 64x256 @ 256x64", lambda: gpuopt.nn.fully_connected(v, fw)
    img = dev(f32(4, 1, 28, 28))
    cw, cb = dev(f32(8, 1, 5, 5)), dev(f32(8))
    yield "nn.conv2d_pool 4x1x28x28 k=8", lambda: gpuopt.nn.conv2d_pool(img, cw, cb, activation="relu")
    try:
        import torch
        if torch.cuda.is_available():
            ta, tb = torch.randn(16, 16, device="cuda"), torch.randn(16, 16, device="cuda")
            tx, tw = torch.randn(1, 1, 8, 8, device="cuda"), torch.randn(1, 1, 3, 3, device="cuda")
            yield "matmul 16 on torch tensors", lambda: gpuopt.matmul(ta, tb)
            yield "conv2d 1x1x8x8 on torch tensors", lambda: gpuopt.conv2d(tx, tw)
    except ImportError:
        pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--batches", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    import gpuopt
    rng = np.random.default_rng(0)
    out = {"gpuopt": gpuopt.__file__, "rows": {}}
    for name, fn in cases(gpuopt, rng):
        try:
            fn(); gpuopt.synchronize()
            per = []
            for _ in range(args.batches):
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    fn()
                gpuopt.synchronize()
                per.append((time.perf_counter() - t0) / args.calls * 1e6)
            out["rows"][name] = statistics.median(per)
            print(f"{name:40s} {statistics.median(per):8.2f} us/call  (min {min(per):.2f})", flush=True)
        except Exception as exc:  # noqa: BLE001
            out["rows"][name] = None
            print(f"{name:40s} ERROR {type(exc).__name__}: {exc}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
