"""Host-to-device copies (csrc/common/staging.cpp): large copies are staged through pinned slots by several
host threads; copies up to 64 KiB go through a 16-slot ring of small pinned slots (no stream synchronisation);
the rest take the driver's path. Sizes straddle the 64 KiB and 2 MiB thresholds, the 4 MiB slots, the 3-slot
ring and the 64 KiB per-thread blocks."""


import numpy as np
import pytest

import gpuopt
from gpuopt.cuda import to_device_checked
from threads import run_threads

pytestmark = pytest.mark.gpu

MIB = 2**20
KIB = 2**10
SIZES = [4, 64 * KIB - 4, 64 * KIB, 64 * KIB + 4, 2 * MIB - 4, 2 * MIB, 4 * MIB + 4, 12 * MIB, 13 * MIB + 12, 31_360_000]


@pytest.mark.parametrize("nbytes", SIZES)
def test_round_trip_float32(nbytes):
    host = np.random.default_rng(nbytes).standard_normal(nbytes // 4).astype(np.float32)
    dev, finite = to_device_checked(host, check_finite=True)
    assert finite
    np.testing.assert_array_equal(dev.numpy(), host)


@pytest.mark.parametrize("nbytes", [3, 2 * MIB + 1, 5 * MIB + 3, 12 * MIB + 65537])
def test_round_trip_odd_byte_counts(nbytes):
    host = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    np.testing.assert_array_equal(gpuopt.to_device(host).numpy(), host)


@pytest.mark.parametrize("nbytes", [1024, 4 * MIB, 13 * MIB + 12])
@pytest.mark.parametrize("where", ["first", "block edge", "late slot", "last"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_finite_finds_one_bad_value(nbytes, where, bad):
    n = nbytes // 4
    host = np.random.default_rng(1).random(n, dtype=np.float32)
    at = {"first": 0, "block edge": min(n - 1, 16384), "late slot": min(n - 1, 3 * MIB + 5), "last": n - 1}[where]
    host[at] = bad
    dev, finite = to_device_checked(host, check_finite=True)
    assert not finite
    np.testing.assert_array_equal(dev.numpy(), host)  # the copy is made all the same
    host[at] = np.finfo(np.float32).max  # large but finite; denormals and -0 too
    host[0], host[-1] = np.float32(1e-45), np.float32(-0.0)
    assert to_device_checked(host, check_finite=True)[1]


def test_check_finite_needs_float32():
    with pytest.raises(TypeError, match="float32"):
        to_device_checked(np.zeros(8, np.float64), check_finite=True)


def test_host_buffer_is_free_when_the_call_returns():
    host = np.random.default_rng(2).random(9 * MIB // 4, dtype=np.float32)
    keep = host.copy()
    dev = gpuopt.to_device(host)
    host[:] = -1  # the staged copy took the data already, as cudaMemcpy does
    np.testing.assert_array_equal(dev.numpy(), keep)


def test_concurrent_copies_from_threads():
    rng = np.random.default_rng(3)
    hosts = [rng.random(int(5.5 * MIB) // 4 + i, dtype=np.float32) for i in range(6)]
    results = [None] * len(hosts)

    def work(i):
        results[i] = gpuopt.to_device(hosts[i])

    run_threads(work, len(hosts))
    for host, dev in zip(hosts, results):
        np.testing.assert_array_equal(dev.numpy(), host)


def test_copy_is_ordered_before_later_kernels_and_survives_empty_cache():
    from gpuopt import nn

    x = np.random.default_rng(4).standard_normal((1024, 1024), dtype=np.float32) + np.float32(0.25)
    for _ in range(2):
        y = nn.relu(gpuopt.to_device(x), variant="cuda")  # the kernel reads what the DMA wrote
        np.testing.assert_array_equal(y.numpy(), np.maximum(x, 0))
        gpuopt.cuda.empty_cache()  # frees the pinned slots; the next copy allocates them again


def test_small_copies_in_a_row_overrun_the_ring_and_free_their_host_buffers():
    """More small copies than ring slots, each from one reused host buffer changed right after the call: every
    device copy holds what the host buffer held when its copy returned."""
    host = np.empty(4097, np.float32)  # 16 KiB + 4: within a small slot
    devs, expected = [], []
    for i in range(40):
        host[:] = np.float32(i) + np.arange(host.size, dtype=np.float32) / 8192
        expected.append(host.copy())
        devs.append(gpuopt.to_device(host))
        host[:] = -1
    for d, e in zip(devs, expected):
        np.testing.assert_array_equal(d.numpy(), e)


def test_small_copy_is_ordered_after_earlier_work_on_the_buffer():
    """A small copy into memory a queued kernel still reads waits for it (both on stream 0)."""
    a = np.random.default_rng(3).random((64, 64), np.float32)
    da = gpuopt.to_device(a)
    c = gpuopt.matmul(da, da, variant="naive")
    gpuopt.cuda.empty_cache()  # (releases the small ring too, after waiting for its copies)
    again = gpuopt.to_device(a)
    np.testing.assert_array_equal(c.numpy(), gpuopt.matmul(again, again, variant="naive").numpy())
