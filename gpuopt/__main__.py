"""Command line: ``python -m gpuopt {reproduce,info,variants,check}``.

* ``reproduce`` every figure and table of the five reports and one reproduction report (measured with a GPU,
                redrawn from the committed H200 results without one): ``gpuopt.reproduce``;

* ``info``      what was compiled and which device is here;
* ``variants``  every variant of every op (or of one op) with its parameters; ``--where`` adds where
                each one lives: its kernel source and launcher, its test, the figures and tables that
                show it (paths relative to the repository root); ``--markdown [--full]`` the README's
                (docs/variants.md's) variant table, generated from the registry;
* ``check``     runs every variant usable here on fresh random inputs, awkward sizes
                included, against the CPU reference (and the CPU reference against
                NumPy), and prints one line per variant. Exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable

import numpy as np

import gpuopt
from gpuopt import nn
from gpuopt.sparse import FASTFilters


def _rel(out, ref) -> float:
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    if out.shape != ref.shape or not np.isfinite(out).all():
        return float("inf")
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def _cases(rng: np.random.Generator) -> dict[str, list[tuple[tuple, dict, Callable]]]:
    """Per op: (args, kwargs, numpy_reference) triples, small and awkward."""

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def conv_ref(x, w, stride=1, padding=0):
        from numpy.lib.stride_tricks import sliding_window_view

        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
        win = sliding_window_view(xp, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
        return np.einsum("ncpqrs,kcrs->nkpq", win, w.astype(np.float64))

    cases: dict[str, list] = {"conv2d": [], "matmul": [], "kmeans": [], "sparse_conv2d": [], "max_pool2d": []}
    for n, c, h, w, k, r, s, u, p in [(1, 1, 1, 1, 1, 1, 1, 1, 0), (2, 3, 13, 11, 5, 3, 3, 2, 1), (1, 7, 17, 17, 33, 5, 5, 1, 2),
                                      (2, 4, 12, 11, 9, 3, 3, 1, 0)]:
        x, wt = f32(n, c, h, w), f32(k, c, r, s)
        cases["conv2d"].append(((x, wt), dict(stride=u, padding=p), lambda x=x, wt=wt, u=u, p=p: conv_ref(x, wt, u, p)))
    for m, kk, nn_ in [(1, 1, 1), (33, 17, 65), (127, 131, 1)]:
        a, b = f32(m, kk), f32(kk, nn_)
        cases["matmul"].append(((a, b), {}, lambda a=a, b=b: a.astype(np.float64) @ b))
    for n, d, k in [(1, 1, 1), (1000, 5, 4)]:
        x = gpuopt.datasets.make_kmeans_blobs(n, d, k=k, seed=int(rng.integers(1 << 30)))[0]
        cases["kmeans"].append(((x, k), {}, None))
    xs = rng.integers(0, 1000, (16, 9, 12)).astype(np.int16)
    ws = gpuopt.datasets.make_nctu_filters(8, 16, seed=int(rng.integers(1 << 30)))
    cases["sparse_conv2d"].append(((xs, FASTFilters.from_dense(ws)), {}, None))
    xp = f32(2, 3, 7, 9)
    cases["max_pool2d"].append(((xp,), {}, lambda xp=xp: xp[..., :6, :8].reshape(2, 3, 3, 2, 4, 2).max(axis=(3, 5))))
    return cases


def _run_op(op: str, args, kwargs, variant):
    fn = {"conv2d": gpuopt.conv2d, "matmul": gpuopt.matmul, "kmeans": gpuopt.kmeans,
          "sparse_conv2d": gpuopt.sparse_conv2d, "max_pool2d": nn.max_pool2d}[op]
    return fn(*args, variant=variant, **kwargs)


def cmd_check(seed: int | None) -> int:
    seed = int(np.random.default_rng().integers(1 << 31)) if seed is None else seed
    rng = np.random.default_rng(seed)
    print(f"gpuopt {gpuopt.__version__} self-check, seed {seed}; CUDA usable: {gpuopt.cuda_available()}"
          + ("" if gpuopt.cuda_available() else f" ({gpuopt.cuda_unavailable_reason()})"))
    failures = 0
    for op, cases in _cases(rng).items():
        for name, v in gpuopt.variants(op).items():
            if not v.available:
                print(f"  {op:14s} {name:18s} skipped: needs CUDA")
                continue
            worst, t0, refused = 0.0, time.perf_counter(), 0
            for args, kwargs, numpy_ref in cases:
                try:
                    out = _run_op(op, args, kwargs, name)
                except ValueError:  # a shape-limited variant (direct_fused, winograd) refuses it up front
                    refused += 1
                    continue
                ref = _run_op(op, args, kwargs, "cpu") if name != "cpu" else None
                if op == "kmeans":
                    exact = ref is None or (np.array_equal(out.membership, ref.membership) and out.iterations == ref.iterations)
                    err = 0.0 if exact else float("inf")
                elif op == "sparse_conv2d":
                    err = 0.0 if ref is None or np.array_equal(out, ref) else float("inf")
                else:
                    err = _rel(out, numpy_ref() if ref is None else ref)
                worst = max(worst, err)
            ok = worst < (v.tolerance or 1e-4) and refused < len(cases)
            failures += not ok
            ran = f"{len(cases) - refused} cases" + (f", {refused} refused as outside its shapes" if refused else "")
            print(f"  {op:14s} {name:18s} {'ok  ' if ok else 'FAIL'} worst rel. error {worst:.1e} "
                  f"({ran}, {time.perf_counter() - t0:.2f} s)")
    print("all variants agree with the references" if not failures else f"{failures} variant(s) FAILED")
    return 1 if failures else 0


def _where(op: str) -> dict[str, str]:
    """``variants --where`` lines of each variant of ``op``: kernel and launcher, test, figures."""
    from gpuopt.where import where

    lines = {}
    for name, w in where(op).items():
        launcher = f"  (launcher {w.binding})" if w.binding else ""
        figures = ", ".join(w.figures) or "-"
        lines[name] = f"    kernel   {w.kernel}{launcher}\n    test     {w.test}\n    figures  {figures}"
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["reproduce"]:  # its own options (gpuopt.reproduce)
        from gpuopt.reproduce import main as reproduce_main

        return reproduce_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m gpuopt", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("reproduce", help="the five reports' figures and tables, and the reproduction report "
                                     "(python -m gpuopt reproduce --help)")
    sub.add_parser("info", help="build and device information (JSON)")
    pv = sub.add_parser("variants", help="list variants")
    pv.add_argument("op", nargs="?", help="one op (default: all)")
    pv.add_argument("--where", action="store_true",
                    help="where each variant lives: kernel source and launcher, test file, figures and tables")
    pv.add_argument("--markdown", action="store_true",
                    help="the variant table of the README (Markdown, every op); with --full that of docs/variants.md")
    pv.add_argument("--full", action="store_true", help="with --markdown: one table an op, every parameter")
    pc = sub.add_parser("check", help="check every usable variant against the references")
    pc.add_argument("--seed", type=int, default=None, help="random seed (default: fresh)")
    args = parser.parse_args(argv)

    if args.cmd == "info":
        print(json.dumps({"build": gpuopt.build_info(), "device": gpuopt.device_info()}, indent=2))
        return 0
    if args.cmd == "variants" and args.markdown:
        from gpuopt.registry import markdown

        print(markdown(full=args.full), end="")
        return 0
    if args.cmd == "variants":
        try:
            table = {args.op: gpuopt.variants(args.op)} if args.op else gpuopt.variants()
        except ValueError as exc:
            parser.error(str(exc))
        for op, vs in table.items():
            places = _where(op) if args.where else {}
            for v in vs.values():
                print(v)
                if v.name in places:
                    print(places[v.name])
        return 0
    return cmd_check(args.seed)


if __name__ == "__main__":
    sys.exit(main())
