"""Command line compatible with Wei-keng Liao's k-means programs (``seq_main``, ``cuda_main``).

  python -m gpuopt.kmeans [switches] -i filename -n num_clusters
         -i filename    : file containing data to be clustered
         -b             : input file is in binary format (default no)
         -n num_clusters: number of clusters (K must > 1)
         -t threshold   : threshold value (default 0.0010)
         -o             : output timing results (default no)
         -d             : enable debug mode (the delta of every loop)
         --variant V    : gpuopt's variant (default: cpu, seq_main's results bit for bit)
         --max-iter N   : most loops (default 500, as Liao's loop cap)
         --init M       : initial centres: first (Liao's, default), random, kmeans++
         --seed S       : seed of random and kmeans++ (default 0)

As Liao's programs, it writes ``filename.cluster_centres`` and ``filename.membership`` beside the input
(his ``file_write`` formats) and with ``-o`` prints his block of results: input file, numObjs, numCoords,
numClusters, threshold, loop iterations, I/O time (reading plus writing) and computation timing (the whole
clustering call, transfers included, as his ``cuda_main`` times ``cuda_kmeans``), then one line with the
device, driver, CUDA and gpuopt commit. The ``cpu`` variant reproduces ``seq_main`` bit for bit.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from .. import datasets
from ..bench.results import environment_line
from .._ext import cpu_choices_hint, cuda_available, cuda_unavailable_reason
from ..registry import cpu_variants, variants
from .api import kmeans
from .init import INIT_METHODS


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gpuopt.kmeans", usage="%(prog)s [switches] -i filename -n num_clusters",
                                description=__doc__.split("\n")[0])
    p.add_argument("-i", dest="filename", required=True, help="file containing data to be clustered")
    p.add_argument("-b", dest="binary", action="store_true", help="input file is in binary format (default no)")
    p.add_argument("-n", dest="clusters", type=int, required=True, help="number of clusters (K must > 1)")
    p.add_argument("-t", dest="threshold", type=float, default=0.001, help="threshold value (default 0.0010)")
    p.add_argument("-o", dest="timing", action="store_true", help="output timing results (default no)")
    p.add_argument("-d", dest="debug", action="store_true", help="enable debug mode (the delta of every loop)")
    p.add_argument("--variant", choices=list(variants("kmeans")), default=None,
                   help="gpuopt's variant (default: cpu, seq_main's results bit for bit)")
    p.add_argument("--max-iter", type=int, default=500, metavar="N", help="most loops (default 500)")
    p.add_argument("--init", choices=INIT_METHODS, default="first",
                   help="initial centres: first (Liao's, default), random, kmeans++")
    p.add_argument("--seed", type=int, default=0, help="seed of random and kmeans++ (default 0)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.clusters <= 1:
        parser.error(f"-n: number of clusters must be > 1 (Liao's rule), got {args.clusters}")
    if not np.isfinite(args.threshold) or args.threshold < 0:
        parser.error(f"-t: threshold must be finite and >= 0, got {args.threshold}")
    if args.max_iter < 1:
        parser.error(f"--max-iter must be >= 1, got {args.max_iter}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    if not os.path.isfile(args.filename):
        parser.error(f"-i: no such file: {args.filename}")
    # Liao's programs' results by default: the op's own default (auto on a GPU) sums in another order.
    variant = args.variant or "cpu"

    start = time.perf_counter()
    try:
        x = datasets.read_liao(args.filename, binary=args.binary)
    except ValueError as exc:
        if not args.binary and "binary contents" in str(exc):
            parser.error(f"-i {args.filename}: not an ASCII k-means file (binary contents); a binary file needs -b")
        parser.error(f"-i {args.filename}: {exc}")
    io_s = time.perf_counter() - start
    if args.clusters > x.shape[0]:
        parser.error(f"-n: {args.clusters} clusters for {x.shape[0]} objects")

    if variants("kmeans")[variant].needs_cuda and not cuda_available():  # the hint in the command line's words
        print(f"python -m gpuopt.kmeans: error: --variant {variant} needs a CUDA GPU, but {cuda_unavailable_reason()}."
              f"{cpu_choices_hint(cpu_variants('kmeans'), '--variant')}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    try:
        result = kmeans(x, args.clusters, threshold=args.threshold, max_iter=args.max_iter, init=args.init,
                        seed=args.seed, variant=variant)
    except RuntimeError as exc:  # a GPU variant without a usable GPU, or a CUDA error
        print(f"python -m gpuopt.kmeans: error: {exc}", file=sys.stderr)
        return 1
    compute_s = time.perf_counter() - start  # the results are NumPy: the GPU work is done

    start = time.perf_counter()
    datasets.write_liao_output(args.filename, result.centroids, result.membership)
    io_s += time.perf_counter() - start

    if args.debug:
        for loop, delta in enumerate(result.delta.tolist()):
            print(f"loop {loop}: delta = {delta:.6f}")
    if args.timing:
        version = "CUDA version" if variants("kmeans")[variant].needs_cuda else "sequential version"
        print(f"\nPerforming **** Regular Kmeans ({version}) ****")
        print(f"Input file:     {args.filename}")
        print(f"numObjs       = {x.shape[0]}")
        print(f"numCoords     = {x.shape[1]}")
        print(f"numClusters   = {args.clusters}")
        print(f"threshold     = {args.threshold:.4f}")
        print(f"Loop iterations    = {result.iterations}")
        print(f"I/O time           = {io_s:10.4f} sec")
        print(f"Computation timing = {compute_s:10.4f} sec")
        print(f"(gpuopt kmeans/{variant}; {environment_line()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
