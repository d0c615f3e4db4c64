"""Benchmarks: the measuring harness and the studies that regenerate the reports' figures.

The bench kit (every helper a public, documented name in its module's ``__all__``):

* :mod:`.harness`: :func:`measure` and its :class:`Stats`, :func:`median_timing`, :class:`Progress`;
* :mod:`.results`: :func:`write_results` / :func:`read_results`, and run :func:`metadata` (from
  ``gpuopt._runinfo``);
* :mod:`.study`: what a study is (:class:`~.study.Study`, :class:`~.study.Plan`, the per-level
  tables :func:`~.study.per_level` / :func:`~.study.repeats`) and the machinery the studies share;
  :mod:`.tables` and :mod:`.figures`: their shared table and figure helpers;
* :mod:`.floors` (FP32 peak, DRAM bandwidth, time floors), :mod:`.baselines` (strict-FP32 PyTorch,
  cuDNN's algorithm), and what the studies of one family share: :mod:`.conv_points`,
  :mod:`.matmul_runs`, :mod:`.sparse_resident`;
* :mod:`.studies`: one module per study (matmul, matmul_report, conv2d, cs6235, ece408,
  kmeans, sparse; opt-in: tune_conv_auto), collected in ``studies.STUDIES``;
* the command line: ``python -m gpuopt.bench`` (or ``python benchmarks/run_all.py``).

Timing protocol (:func:`measure`)
---------------------------------
* GPU (``device="gpu"``): ``fn`` must only *queue* device work on device-resident inputs
  (e.g. ``lambda: gpuopt.matmul(da, db, variant="naive")`` with ``da = gpuopt.to_device(a)``).
  Each repeat queues a spin kernel, then a start event, ``fn()``, an end event; the time
  is ``start.elapsed_ms(end)``. While the GPU spins, the host enqueues the events and
  ``fn``'s launches, so the events bracket the GPU work only, not Python's launch
  overhead. The host time of that enqueue is measured; if it exceeds the spin, the
  spin is lengthened and the repeat redone (``Stats.retries``). A ``fn`` that waits for
  the GPU itself cannot be hidden this way; such samples are kept and
  ``Stats.overhead_hidden`` is False. ``flush_l2=True`` clears the L2 cache before each
  repeat (a memset of twice its size, queued before the spin, outside the events).
* CPU (``device="cpu"``): ``time.perf_counter`` around ``fn()`` -- right for CPU code and
  for calls that return only when their GPU work is done (NumPy in, NumPy out).
* Warm-up calls run first and are not recorded.

>>> from gpuopt import bench
>>> s = bench.measure(lambda: sum(range(1000)), warmup=1, repeat=5, device="cpu")
>>> s.repeats, s.min_ms <= s.median_ms <= s.max_ms
(5, True)
"""

from __future__ import annotations

from .harness import MAX_SPIN_US, SPIN_US, Progress, Stats, measure, median_timing
from .results import format_metadata, metadata, read_results, write_results

__all__ = [
    "Stats",
    "measure",
    "median_timing",
    "metadata",
    "format_metadata",
    "write_results",
    "read_results",
    "Progress",
    "SPIN_US",
    "MAX_SPIN_US",
]
