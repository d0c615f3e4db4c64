"""Command line compatible with Wei-keng Liao's k-means programs (``seq_main``, ``cuda_main``).

  python -m gpuopt.kmeans [switches] -i filename -n num_clusters
         -i filename    : file containing data to be clustered
         -b             : input file is in binary format (default no)
         -n num_clusters: number of clusters (K must > 1)
         -t threshold   : threshold value (default 0.0010)
         -o             : output timing results (default no)
         -d             : enable debug mode
         --out DIR      : write the two output files into DIR (default: beside the input, as Liao)
         --variant V    : gpuopt's variant (default: cpu, seq_main's results bit for bit)
         --max-iter N   : at most N loops (default: Liao's cap, 501 loops)
         --init M       : initial centres: first (Liao's, default), random, kmeans++
         --seed S       : seed of random and kmeans++ (default 0)

  torchrun --nproc-per-node G -m gpuopt.kmeans [switches] -i filename -n num_clusters
         the same run split over G processes (one a GPU): each reads only its rows of a binary file, rank 0
         writes the outputs; results of cpu(summation="chunked") for any G (gpuopt.distributed.cli)

What it prints and writes is his programs', in his order:

* with ``-d``, his reader's lines (``lineLen = ...`` for an ASCII file, then ``File ... numObjs   = ...`` and
  ``File ... numCoords = ...``), then gpuopt's own ``loop i: delta = ...`` for every loop (his programs print none);
* ``Writing coordinates of K=... cluster centers to file "..."`` and ``Writing membership of N=... data objects to
  file "..."``, naming the files written: ``filename.cluster_centres`` and ``filename.membership`` beside the input
  (his ``file_write`` formats), or inside ``--out DIR`` (created if missing) under the input's base name;
* with ``-o``, his block of results: input file, numObjs, numCoords, numClusters, threshold, loop iterations, I/O
  time (reading plus writing) and computation timing (the whole clustering call, transfers included, as his
  ``cuda_main`` times ``cuda_kmeans``), then gpuopt's line with the device, driver, CUDA and gpuopt commit.

The loop cap is his: ``do { ... } while (delta > threshold && loop++ < 500)`` runs at most 501 loops, and he
prints ``loop + 1``: the loop the threshold stopped (1, 2, ...), or 502 when the cap stopped the run.
``--max-iter N`` runs at most N loops and prints the loops run. The ``cpu`` variant reproduces ``seq_main`` bit
for bit (centres, memberships, loop count).

Exit status, as his programs: 0 on success; 255 for a usage error, ``-h`` included (his ``usage()`` prints the
switches and calls ``exit(-1)``): an unknown switch or one without its value, no ``-i``, ``-n`` not an integer > 1
(or more clusters than objects), ``-t`` not a finite number >= 0 (his ``atof`` reads a non-number as 0), a bad
gpuopt switch, ``--out`` naming a file; 1 when the input cannot be read (his ``file_read`` fails and ``main`` calls
``exit(1)``): a missing or unreadable file, or one that is not a k-means file in the encoding asked for; 1 also for
a GPU variant without a usable GPU or a CUDA error (his ``checkCuda`` exits 1) and for outputs that cannot be
written. Nothing is written when it fails before the outputs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from .. import datasets
from .._runinfo import environment_line
from .._ext import cpu_choices_hint, cuda_available, cuda_unavailable_reason
from ..registry import cpu_variants, variants
from .api import kmeans
from .init import INIT_METHODS

#: Exit status of a usage error: his usage() ends with exit(-1), which the shell sees as 255.
USAGE_ERROR = 255
#: Exit status when the input cannot be read (his main: file_read returned NULL, exit(1)), the GPU fails or the
#: outputs cannot be written.
RUN_ERROR = 1

#: His loop test, ``loop++ < 500``, runs the loop body once more than this: 501 loops at most.
_LIAO_LOOP_LIMIT = 500

_EPILOG = f"""\
defaults, as Liao's seq_main / cuda_main:
  at most {_LIAO_LOOP_LIMIT + 1} loops (his "loop++ < {_LIAO_LOOP_LIMIT}"); "Loop iterations" printed as he prints
  it: the loop the threshold stopped, or {_LIAO_LOOP_LIMIT + 2} when the cap stopped the run;
  filename.cluster_centres and filename.membership written beside the input.

exit status, as his:
  0    done
  {USAGE_ERROR}  usage error, -h included (his usage() calls exit(-1))
  {RUN_ERROR}    input file missing, unreadable or not a k-means file (his file_read
       fails: exit(1)); GPU error; outputs not written
"""


class _Parser(argparse.ArgumentParser):
    """argparse with his usage() exit status (argparse exits 2)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (-h lists the switches)\n")


class _Help(argparse.Action):
    """-h: the switches on stderr and exit 255, as his usage() (his getopt knows no -h)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.print_help(sys.stderr)
        parser.exit(USAGE_ERROR)


def _parser() -> _Parser:
    p = _Parser(prog="python -m gpuopt.kmeans", usage="%(prog)s [switches] -i filename -n num_clusters",
                description=__doc__.split("\n")[0], epilog=_EPILOG, add_help=False,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-h", "--help", action=_Help,
                   help=f"show the switches (on stderr) and exit {USAGE_ERROR}, as his usage()")
    p.add_argument("-i", dest="filename", metavar="filename", required=True,
                   help="file containing data to be clustered")
    p.add_argument("-b", dest="binary", action="store_true", help="input file is in binary format (default no)")
    p.add_argument("-n", dest="clusters", metavar="num_clusters", type=int, required=True,
                   help="number of clusters (K must > 1)")
    p.add_argument("-t", dest="threshold", metavar="threshold", type=float, default=0.001,
                   help="threshold value (default 0.0010)")
    p.add_argument("-o", dest="timing", action="store_true", help="output timing results (default no)")
    p.add_argument("-d", dest="debug", action="store_true",
                   help="enable debug mode (his reader's lines, then gpuopt's delta of every loop)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="write filename's .cluster_centres and .membership into DIR, created if missing "
                        "(default: beside the input, as Liao)")
    p.add_argument("--variant", choices=list(variants("kmeans")), default=None,
                   help="gpuopt's variant (default: cpu, seq_main's results bit for bit)")
    p.add_argument("--max-iter", type=int, default=None, metavar="N",
                   help=f"at most N loops, the loops run printed (default: Liao's cap, {_LIAO_LOOP_LIMIT + 1} loops, "
                        f"printed as {_LIAO_LOOP_LIMIT + 2} when it stops the run)")
    p.add_argument("--init", choices=INIT_METHODS, default="first",
                   help="initial centres: first (Liao's, default), random, kmeans++")
    p.add_argument("--seed", type=int, default=0, help="seed of random and kmeans++ (default 0)")
    return p


def _run_error(message: str) -> int:
    print(f"python -m gpuopt.kmeans: error: {message}", file=sys.stderr)
    return RUN_ERROR


def _line_buffer(raw: bytes) -> int:
    """The line buffer (bytes) his ASCII reader ends with, which ``-d`` prints as ``lineLen``: 128, grown by 128
    while a line, its newline included, fills all but the buffer's last byte."""
    *lines, last = raw.split(b"\n")
    longest = max([len(line) + 1 for line in lines] + [len(last)])
    size = 128
    while longest >= size - 1:
        size += 128
    return size


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit status, or raises SystemExit
    with status 255 for a usage error."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.clusters <= 1:
        parser.error(f"-n: number of clusters must be > 1 (Liao's rule), got {args.clusters}")
    if not np.isfinite(args.threshold) or args.threshold < 0:
        parser.error(f"-t: threshold must be finite and >= 0, got {args.threshold}")
    if args.max_iter is not None and args.max_iter < 1:
        parser.error(f"--max-iter must be >= 1, got {args.max_iter}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    if args.out is not None and os.path.exists(args.out) and not os.path.isdir(args.out):
        parser.error(f"--out {args.out}: exists and is not a folder")
    from ..distributed import cli as distributed_cli

    if distributed_cli.under_torchrun():  # one rank of several processes: gpuopt.distributed's run
        return distributed_cli.main(args, parser, USAGE_ERROR, RUN_ERROR, _LIAO_LOOP_LIMIT)
    # Liao's programs' results by default: the op's own default (auto on a GPU) sums in another order.
    variant = args.variant or "cpu"
    max_iter = _LIAO_LOOP_LIMIT + 1 if args.max_iter is None else args.max_iter

    start = time.perf_counter()
    if os.path.isdir(args.filename):
        return _run_error(f"-i {args.filename}: a folder, not a data file")
    if not os.path.isfile(args.filename):
        return _run_error(f"-i {args.filename}: no such file")
    try:
        x = datasets.read_liao(args.filename, binary=args.binary)
    except OSError as exc:  # unreadable (permissions, a vanished file)
        return _run_error(f"-i {args.filename}: cannot read the file ({exc.strerror or exc})")
    except ValueError as exc:
        if not args.binary and "binary contents" in str(exc):
            return _run_error(f"-i {args.filename}: not an ASCII k-means file (binary contents); "
                              "a binary file needs -b")
        return _run_error(f"-i {args.filename}: not a k-means file: {exc}")
    io_s = time.perf_counter() - start
    if args.clusters > x.shape[0]:
        parser.error(f"-n: {args.clusters} clusters for {x.shape[0]} objects in {args.filename} (K must be <= numObjs)")

    if args.debug:  # his file_read's lines
        if not args.binary:
            with open(args.filename, "rb") as f:
                print(f"lineLen = {_line_buffer(f.read())}")
        print(f"File {args.filename} numObjs   = {x.shape[0]}")
        print(f"File {args.filename} numCoords = {x.shape[1]}")

    if variants("kmeans")[variant].needs_cuda and not cuda_available():  # the hint in the command line's words
        print(f"python -m gpuopt.kmeans: error: --variant {variant} needs a CUDA GPU, but {cuda_unavailable_reason()}."
              f"{cpu_choices_hint(cpu_variants('kmeans'), '--variant')}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    try:
        result = kmeans(x, args.clusters, threshold=args.threshold, max_iter=max_iter, init=args.init,
                        seed=args.seed, variant=variant)
    except RuntimeError as exc:  # a GPU variant without a usable GPU, or a CUDA error
        return _run_error(str(exc))
    compute_s = time.perf_counter() - start  # the results are NumPy: the GPU work is done

    if args.debug:  # gpuopt's: his programs print nothing per loop
        for loop, delta in enumerate(result.delta.tolist()):
            print(f"loop {loop}: delta = {delta:.6f}")

    start = time.perf_counter()
    try:
        datasets.write_liao_output(args.filename, result.centroids, result.membership, out_dir=args.out)
    except OSError as exc:
        return _run_error(f"cannot write the outputs ({exc})")
    # His file_write names filename + suffix as given; with --out, the same inside DIR.
    prefix = args.filename if args.out is None else os.path.join(args.out, os.path.basename(args.filename))
    print(f'Writing coordinates of K={args.clusters} cluster centers to file "{prefix}.cluster_centres"')
    print(f'Writing membership of N={x.shape[0]} data objects to file "{prefix}.membership"')
    io_s += time.perf_counter() - start

    if args.timing:
        if args.max_iter is None:
            # His count is loop + 1 after "loop++ < 500": the stopping loop, or one more when the cap stopped it.
            loops = result.iterations + (0 if result.converged else 1)
        else:
            loops = result.iterations
        version = "CUDA version" if variants("kmeans")[variant].needs_cuda else "sequential version"
        print(f"\nPerforming **** Regular Kmeans ({version}) ****")
        print(f"Input file:     {args.filename}")
        print(f"numObjs       = {x.shape[0]}")
        print(f"numCoords     = {x.shape[1]}")
        print(f"numClusters   = {args.clusters}")
        # His threshold is a float (float32), printed with %.4f.
        print(f"threshold     = {float(np.float32(args.threshold)):.4f}")
        print(f"Loop iterations    = {loops}")
        print(f"I/O time           = {io_s:10.4f} sec")
        print(f"Computation timing = {compute_s:10.4f} sec")
        print(f"(gpuopt kmeans/{variant}; {environment_line()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
