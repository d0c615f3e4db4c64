"""The measuring harness: measure(), Stats, median_timing(), Progress."""

from __future__ import annotations

import io
import math
import time

import numpy as np
import pytest

import gpuopt
from gpuopt import bench


def test_measure_cpu_stats_are_sane():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.002)

    s = bench.measure(fn, warmup=2, repeat=7, device="cpu")
    assert len(calls) == 9  # warm-up calls are made but not recorded
    assert s.repeats == 7 and len(s.samples) == 7 and s.device == "cpu"
    assert s.min_ms <= s.median_ms <= s.max_ms
    assert s.min_ms <= s.mean_ms <= s.max_ms
    assert s.std_ms >= 0
    assert s.min_ms >= 1.9  # it slept 2 ms each time
    assert s.median_ms == pytest.approx(float(np.median(s.samples)))
    assert s.overhead_hidden and s.spin_us is None
    row = s.row("t_")
    assert row["t_median_ms"] == s.median_ms and row["t_repeats"] == 7


def test_measure_repeat_min_and_max_time():
    fast = bench.measure(lambda: None, warmup=0, repeat=3, min_time_s=0.001, device="cpu")
    assert fast.repeats >= 3  # min_time_s keeps going past repeat for tiny work (bounded)
    assert fast.repeats <= 300
    slow = bench.measure(lambda: time.sleep(0.01), warmup=0, repeat=1000, max_time_s=0.05, device="cpu")
    assert 1 <= slow.repeats < 20  # the time budget stops it early
    one = bench.measure(lambda: time.sleep(0.01), warmup=0, repeat=5, max_time_s=0.0, device="cpu")
    assert one.repeats == 1  # at least one sample


def test_measure_rejects_bad_arguments():
    with pytest.raises(ValueError, match="repeat"):
        bench.measure(lambda: None, repeat=0, device="cpu")
    with pytest.raises(ValueError, match="warmup"):
        bench.measure(lambda: None, warmup=-1, device="cpu")
    with pytest.raises(ValueError, match="device"):
        bench.measure(lambda: None, device="tpu")
    with pytest.raises(TypeError):
        bench.measure(42, device="cpu")


@pytest.mark.skipif(gpuopt.cuda_available(), reason="checks the behaviour without a GPU")
def test_measure_without_gpu():
    assert bench.measure(lambda: None, warmup=0, repeat=2).device == "cpu"  # the default falls back
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        bench.measure(lambda: None, device="gpu")


def test_stats_from_samples_and_median_timing():
    s = bench.Stats.from_samples([3.0, 1.0, 2.0])
    assert (s.median_ms, s.min_ms, s.max_ms, s.mean_ms, s.repeats) == (2.0, 1.0, 3.0, 2.0, 3)
    assert s.std_ms == pytest.approx(1.0)
    with pytest.raises(ValueError):
        bench.Stats.from_samples([])
    ts = [gpuopt.Timing(1.0, 10.0, 0.5, "gpu", {"loop_h2d_ms": 0.1}),
          gpuopt.Timing(3.0, 12.0, 0.5, "gpu", {"loop_h2d_ms": 0.3}),
          gpuopt.Timing(2.0, 11.0, 1.5, "gpu", {})]
    m = bench.median_timing(ts)
    assert m["h2d_ms"] == 2.0 and m["kernel_ms"] == 11.0 and m["d2h_ms"] == 0.5
    assert m["total_ms"] == 14.5 and m["transfer_ms"] == 3.5  # medians of the per-run sums
    assert m["details"] == {"loop_h2d_ms": pytest.approx(0.2)} and m["timing_device"] == "gpu"


def test_progress_counter_lines():
    buf = io.StringIO()
    with bench.Progress(3, "demo", stream=buf) as p:
        for i in range(3):
            p.update(f"step{i}")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3 and lines[-1].startswith("[demo] 3/3 step2") and "ETA" in lines[0]
    quiet = io.StringIO()
    with bench.Progress(3, "demo", enabled=False, stream=quiet) as p:
        p.update()
    assert quiet.getvalue() == ""


@pytest.mark.gpu
def test_measure_gpu_matmul_hides_launch_overhead(rng):
    a = gpuopt.to_device(rng.random((1024, 1024), dtype=np.float32))
    s = bench.measure(lambda: gpuopt.matmul(a, a, variant="naive"), warmup=2, repeat=10)
    assert s.device == "gpu" and s.repeats == 10 and s.median_ms > 0 and s.overhead_hidden
    assert s.min_ms <= s.median_ms <= s.max_ms

    tiny = gpuopt.to_device(rng.random((8, 8), dtype=np.float32))
    quick = bench.measure(lambda: gpuopt.matmul(tiny, tiny, variant="naive"), warmup=3, repeat=20)
    assert quick.overhead_hidden and quick.median_ms < 0.1, quick  # a few microseconds of kernel

    # The host sleeps 2 ms inside fn before queuing the kernel: without the spin the events
    # would measure >= 2 ms; with it they bracket the kernel only (the spin grows to cover it).
    def slow_host():
        time.sleep(0.002)
        return gpuopt.matmul(tiny, tiny, variant="naive")

    hidden = bench.measure(slow_host, warmup=2, repeat=10)
    assert hidden.spin_us >= 2000 and hidden.overhead_hidden
    assert hidden.median_ms < 0.5, hidden

    flushed = bench.measure(lambda: gpuopt.matmul(a, a, variant="cublas"), warmup=1, repeat=5, flush_l2=True)
    assert flushed.median_ms > 0 and math.isfinite(flushed.median_ms)
