#!/usr/bin/env python3
"""The sweep behind conv2d auto's heuristic (gpuopt/_conv_auto.py): gpuopt's candidate kernels and their
parameters against cuDNN (strict FP32, its algorithm named) on the eight layers auto is held to: CS6235
conf1-4 and the ECE408 Fashion-MNIST and MNIST layers at 10,000 images. GPU only; L2 flushed before every
run; median of up to 15 event-timed runs.

    python benchmarks/tune_conv_auto.py [OUT_DIR] [--layers conf3,mnist_conv1]

Prints the six fastest per layer and where auto's heuristic pick ranks; writes OUT_DIR/tune_conv_auto.json
with the run's metadata.
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import argparse  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402

import gpuopt  # noqa: E402
from gpuopt.bench import measure, metadata  # noqa: E402
from gpuopt.conv import auto_choice  # noqa: E402

# name: (x shape, w shape, stride)
LAYERS = {
    "conf1": ((1, 3, 112, 112), (64, 3, 3, 3), 2),
    "conf2": ((1, 832, 7, 7), (128, 832, 1, 1), 1),
    "conf3": ((128, 3, 112, 112), (64, 3, 3, 3), 2),
    "conf4": ((128, 832, 7, 7), (128, 832, 1, 1), 1),
    "fashion_conv1": ((10000, 1, 64, 64), (6, 1, 5, 5), 1),
    "fashion_conv2": ((10000, 6, 30, 30), (16, 6, 5, 5), 1),
    "mnist_conv1": ((10000, 1, 28, 28), (32, 1, 5, 5), 1),
    "mnist_conv2": ((10000, 32, 12, 12), (64, 32, 5, 5), 1),
}


def candidates():
    table = gpuopt.variants("conv2d")
    out = [("cudnn", {}), ("unroll", {}), ("unroll_nk", {}), ("general", {}), ("tiled_unrolled", {}),
           ("implicit_gemm", {"tile": 16}), ("implicit_gemm", {"tile": 32})]
    out += [("implicit_gemm_fast", {"tile": t}) for t in table["implicit_gemm_fast"].params["tile"].allowed]
    out += [("direct_regblock", {})]  # its defaults ("auto"), what auto runs
    out += [("direct_regblock", {"k_tile": k, "pixels": p}) for k in (8, 16) for p in (1, 2, 4)]
    return out


def label(variant, params):
    return variant + "".join(f" {k}={v}" for k, v in params.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=".")
    ap.add_argument("--layers", default=",".join(LAYERS))
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    meta = metadata()
    print(gpuopt.bench.format_metadata(meta))
    results = {}
    for name in args.layers.split(","):
        xs, ws, stride = LAYERS[name]
        dx = gpuopt.to_device(rng.uniform(-1, 1, xs).astype(np.float32))
        dw = gpuopt.to_device(rng.uniform(-1, 1, ws).astype(np.float32))
        times = {}
        for variant, params in candidates():
            _, params = gpuopt.registry.resolve("conv2d", variant, params, require_device=False)
            try:
                s = measure(lambda: gpuopt.conv2d(dx, dw, stride=stride, variant=variant, **params), device="gpu",
                            warmup=3, repeat=15, max_time_s=0.5, flush_l2=True)
                times[label(variant, params)] = s.median_ms
            except ValueError as exc:  # the variant rejects the shape
                times[label(variant, params)] = f"rejected: {exc}"[:120]
        pick_variant, pick_params = auto_choice(xs, ws, stride)
        _, pick_params = gpuopt.registry.resolve("conv2d", pick_variant, pick_params, require_device=False)
        pick = label(pick_variant, pick_params)
        cudnn = next(t for k, t in times.items() if k.startswith("cudnn"))
        algorithm = gpuopt.conv.cudnn_algorithm(xs, ws, stride)
        results[name] = {"x": xs, "w": ws, "stride": stride, "cudnn_algorithm": algorithm, "auto_pick": pick,
                         "median_ms": times}
        ranked = sorted((t, k) for k, t in times.items() if isinstance(t, float))
        print(f"{name}: cuDNN {cudnn:.4f} ms ({algorithm}); auto picks {pick}: "
              f"{times.get(pick)} ms, rank {[k for _, k in ranked].index(pick) + 1 if pick in times else '-'}")
        for t, k in ranked[:6]:
            print(f"   {k:<45} {t:.4f} ms   x cuDNN {cudnn / t:.2f}")
        del dx, dw
        gpuopt.cuda.empty_cache()
    path = Path(args.out) / "tune_conv_auto.json"
    path.write_text(json.dumps({"meta": meta, "layers": results}, indent=1, default=str))
    print("wrote", path)


if __name__ == "__main__":
    main()
