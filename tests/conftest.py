"""Shared fixtures: fresh random inputs (seed printed for replay), GPU and data gating."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

# Test the installed package, as users get it (its wheel's files, its compiled modules), not the checkout's
# gpuopt/ folder that `python -m pytest` would find first on sys.path.
REPO = Path(__file__).resolve().parent.parent  # the checkout: sources the layout tests read
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO]

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import gpuopt  # noqa: E402

# Fresh inputs every run, as the standards ask; GPUOPT_TEST_SEED=<n> replays a run.
SEED = int(os.environ.get("GPUOPT_TEST_SEED", secrets.randbelow(2**31)))


def pytest_report_header(config):
    info = gpuopt.build_info()
    cuda = f"CUDA {info['cuda_version']} archs {info['cuda_architectures']}" if info["cuda"] else "no CUDA build"
    device = gpuopt.device_info()
    where = device["name"] if device else f"no GPU ({gpuopt.cuda_unavailable_reason()})"
    return [f"gpuopt {gpuopt.__version__}: {cuda}; device: {where}",
            f"random seed: {SEED} (replay with GPUOPT_TEST_SEED={SEED})"]


def pytest_collection_modifyitems(config, items):
    if gpuopt.cuda_available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {gpuopt.cuda_unavailable_reason()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _gpu_guard(request):
    """For gpu-marked tests: poison every device allocation (0xFF bytes: NaN as float32,
    -1 as int32) so unwritten outputs are caught, and fail on any asynchronous CUDA error
    the test left behind."""
    if "gpu" not in request.keywords or not gpuopt.cuda_available():
        yield
        return
    from gpuopt._ext import cuda_module

    cuda = cuda_module()
    cuda.set_poison(True)
    try:
        yield
        cuda.check_errors()
    finally:
        cuda.set_poison(False)


def cuda_build():
    """The compiled CUDA module whether or not a GPU is usable (it imports without a driver: static CUDA
    runtime; host-side planners and launcher checks work), or None when gpuopt was built without CUDA."""
    if not gpuopt.build_info()["cuda"]:
        return None
    try:
        from gpuopt import _cuda
    except ImportError:
        return None
    return _cuda


#: For tests of host-side C++ (plans, launcher checks) that need the CUDA module but no GPU.
needs_cuda_build = pytest.mark.skipif(cuda_build() is None, reason="gpuopt was built without CUDA")


def cuda_module_without_gpu():
    """The compiled CUDA module when it is built but no GPU is usable (launchers validate before any CUDA
    call, so their checks run on such a machine); None otherwise."""
    return None if gpuopt.cuda_available() else cuda_build()


def conv_call(cuda, x, w, bias, y, shape, activation="none"):
    """The argument struct of a conv2d launcher: device addresses x, w, bias (0: none), y and the shape
    (N, C, H, W, K, R, S, u, v, ph, pw) as a tuple."""
    return cuda.Conv2dArgs(x, w, bias, y, cuda.Conv2dShape(*shape), activation)


def fake_conv_call(cuda, shape, activation="none", *, x=256):
    """A conv2d launcher's argument struct with fake device addresses (256; ``x`` may be 0 for a null pointer), for
    calls the launcher rejects before any CUDA call: they are never dereferenced."""
    return conv_call(cuda, x, 256, 0, 256, shape, activation)


class DeviceTouched(Exception):
    """Raised by CheckOnlyContext when a variant gets as far as copying an input to the device."""


class CheckOnlyContext:
    """An ExecContext stand-in for the checks a variant runs before anything touches the device: any copy raises
    DeviceTouched. ``passes_host_checks`` runs a variant with it."""

    def __init__(self, variant):
        self.variant, self.details, self.timing = variant, {}, False

    def device(self, a):
        raise DeviceTouched(f"{self.variant.op}/{self.variant.name} copied an input to the device")

    host = empty = device


def passes_host_checks(op, variant, problem, **params):
    """True when ``variant``'s run function accepts ``problem`` up to the first copy to the device (on a machine
    without a GPU: up to the "needs a CUDA GPU" error that comes right before it); its ValueError otherwise."""
    v = gpuopt.variants(op)[variant]
    try:
        v.impl(CheckOnlyContext(v), problem, **params)
    except DeviceTouched:
        return True
    except RuntimeError as exc:
        if gpuopt.cuda_available() or "needs a CUDA GPU" not in str(exc):
            raise
        return True
    raise AssertionError(f"{op}/{variant} ran without copying its inputs")


@pytest.fixture
def rng(request):
    # One stream per test, derived from the session seed and the test's name, so a
    # failing test replays alone with the same inputs.
    return np.random.default_rng([SEED, *request.node.nodeid.encode()])


@pytest.fixture(scope="session")
def data_root():
    root = gpuopt.datasets.data_dir(required=False)
    if root is None:
        pytest.skip("real data sets not found: set GPUOPT_DATA_DIR or check out ../shared/data beside the repo")
    return root


def relative_error(out, ref) -> float:
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert out.shape == ref.shape, f"shape {out.shape} != reference {ref.shape}"
    assert np.isfinite(out).all() or not np.isfinite(ref).all(), "output has NaN/inf where the reference has none"
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(out - ref) / (denom if denom > 0 else 1.0))
