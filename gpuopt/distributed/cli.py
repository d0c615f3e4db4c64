"""Liao's command line over several processes: ``torchrun --nproc-per-node G -m gpuopt.kmeans -i FILE -n K -b``.

``python -m gpuopt.kmeans`` hands over to :func:`main` when it runs under ``torchrun`` (``RANK`` and ``WORLD_SIZE``
in the environment, one process per GPU). Each rank joins the process group (NCCL where its GPU is usable, else
gloo), reads only its rows of a binary file (its shard of whole sum-tree groups: :func:`.shard_bounds`; an ASCII
file is parsed whole by every rank, which keeps its rows), and runs :func:`gpuopt.distributed.kmeans`; rank 0
gathers the memberships, writes his two output files and prints his lines. The results are those of
``gpuopt.kmeans(x, k, variant="cpu", summation="chunked")`` on the whole file for any number of ranks (not his
``seq_main``'s, whose float32 running sums cannot be split between processes). The switches and exit statuses are
the single-process command's; ``--variant`` takes ``gpuopt.distributed.kmeans``' values (default ``auto``) and
``--init`` only ``first``. A failure on any rank (an unreadable file, a bad value, a CUDA error) ends every rank with
the failing rank's message and nothing written.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from typing import Any

import numpy as np

from .. import datasets
from .._ext import cuda_available
from .._runinfo import environment_line
from .comm import CollectiveError
from .kmeans import VARIANTS, kmeans, shard_bounds

__all__ = ["under_torchrun", "main"]

#: Seconds a rank waits for the others at a collective (reading the file included).
TIMEOUT_S = 600.0


def under_torchrun() -> bool:
    """Whether this process is one rank of a ``torchrun`` (env://) launch."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def _say(rank: int, *lines: str) -> None:
    if rank == 0:
        for line in lines:
            print(line)


def main(args: Any, parser: Any, usage_error: int, run_error: int, loop_limit: int) -> int:
    """The distributed run of ``python -m gpuopt.kmeans``'s parsed ``args`` (see the module docstring)."""
    variant = args.variant or "auto"
    if variant not in VARIANTS:
        parser.error(f"--variant {variant}: under torchrun the variant is one of {', '.join(VARIANTS)} "
                     f"(gpuopt.distributed.kmeans)")
    if args.init != "first":
        parser.error(f"--init {args.init}: under torchrun the initial centres are the first k objects (--init first)")
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("python -m gpuopt.kmeans: error: a run under torchrun needs PyTorch (torch.distributed)",
              file=sys.stderr)
        return run_error
    from .torch_comm import TorchCommunicator

    gpu = variant != "cpu" and cuda_available() and torch.cuda.is_available()
    if gpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if gpu else "gloo", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    try:
        return _run(args, parser, variant, TorchCommunicator(timeout=TIMEOUT_S), run_error, loop_limit)
    finally:
        dist.destroy_process_group()


def _agree_on(comm: Any, error: str) -> str:
    """Every rank's error text ('' for none), exchanged: the first rank's error, or ''."""
    texts = comm.all_gather(np.frombuffer(error.encode("utf-8", "replace")[:400].ljust(400, b"\0"), np.uint8)[None])
    for r, t in enumerate(texts):
        text = bytes(t[0]).rstrip(b"\0").decode("utf-8", "replace")
        if text:
            return text if comm.size == 1 else f"rank {r}: {text}"
    return ""


def _read(args: Any, rank: int, size: int) -> tuple[np.ndarray, int, str]:
    """This rank's rows, N, and '' (or what went wrong, in the single-process command's words)."""
    if os.path.isdir(args.filename):
        return np.empty((0, 0), np.float32), 0, f"-i {args.filename}: a folder, not a data file"
    if not os.path.isfile(args.filename):
        return np.empty((0, 0), np.float32), 0, f"-i {args.filename}: no such file"
    try:
        if args.binary:
            x, n = datasets.read_liao_binary_rows(args.filename, lambda n: shard_bounds(n, size)[rank])
        else:
            whole = datasets.read_liao(args.filename, binary=False)
            n = whole.shape[0]
            start, stop = shard_bounds(n, size)[rank]
            x = np.ascontiguousarray(whole[start:stop])
    except OSError as exc:
        return np.empty((0, 0), np.float32), 0, f"-i {args.filename}: cannot read the file ({exc.strerror or exc})"
    except ValueError as exc:
        return np.empty((0, 0), np.float32), 0, f"-i {args.filename}: not a k-means file: {exc}"
    return x, n, ""


def _run(args: Any, parser: Any, variant: str, comm: Any, run_error: int, loop_limit: int) -> int:
    rank, size = comm.rank, comm.size
    max_iter = loop_limit + 1 if args.max_iter is None else args.max_iter
    start = time.perf_counter()
    x, n, error = _read(args, rank, size)
    error = _agree_on(comm, error)
    if error:
        print(f"python -m gpuopt.kmeans: error: {error}", file=sys.stderr)
        return run_error
    io_s = time.perf_counter() - start
    if args.clusters > n:
        parser.error(f"-n: {args.clusters} clusters for {n} objects in {args.filename} (K must be <= numObjs)")
    if args.debug:
        _say(rank, f"File {args.filename} numObjs   = {n}", f"File {args.filename} numCoords = {x.shape[1]}")

    start = time.perf_counter()
    try:
        result = kmeans(x, args.clusters, threshold=args.threshold, max_iter=max_iter, variant=variant, comm=comm,
                        timeout=TIMEOUT_S)
    except (CollectiveError, TypeError, ValueError, RuntimeError) as exc:
        print(f"python -m gpuopt.kmeans: error (rank {rank} of {size}): {exc}", file=sys.stderr)
        return run_error
    compute_s = time.perf_counter() - start
    pieces = comm.all_gather(np.asarray(result.membership, np.int32))  # shards in rank order: rows in order
    if args.debug:
        _say(rank, *(f"loop {i}: delta = {v:.6f}" for i, v in enumerate(result.delta.tolist())))

    start = time.perf_counter()
    error = ""
    if rank == 0:
        try:
            datasets.write_liao_output(args.filename, result.centroids, np.concatenate(pieces), out_dir=args.out)
        except OSError as exc:
            error = f"cannot write the outputs ({exc})"
    error = _agree_on(comm, error)
    if error:
        print(f"python -m gpuopt.kmeans: error: {error}", file=sys.stderr)
        return run_error
    prefix = args.filename if args.out is None else os.path.join(args.out, os.path.basename(args.filename))
    _say(rank, f'Writing coordinates of K={args.clusters} cluster centers to file "{prefix}.cluster_centres"',
         f'Writing membership of N={n} data objects to file "{prefix}.membership"')
    io_s += time.perf_counter() - start
    if args.timing:
        loops = result.iterations + (0 if result.converged or args.max_iter is not None else 1)
        version = "CUDA version" if variant != "cpu" and cuda_available() else "sequential version"
        _say(rank, f"\nPerforming **** Regular Kmeans ({version}) ****", f"Input file:     {args.filename}",
             f"numObjs       = {n}", f"numCoords     = {x.shape[1]}", f"numClusters   = {args.clusters}",
             f"threshold     = {float(np.float32(args.threshold)):.4f}", f"Loop iterations    = {loops}",
             f"I/O time           = {io_s:10.4f} sec", f"Computation timing = {compute_s:10.4f} sec",
             f"(gpuopt.distributed kmeans/{variant} on {size} ranks; {environment_line()})")
    return 0
