import subprocess
import sys

import numpy as np
import pytest

import gpuopt


def test_build_info_keys():
    info = gpuopt.build_info()
    for key in ("version", "compiler", "openmp", "cuda", "cuda_version", "cuda_architectures", "cublas", "cudnn",
                "cuda_usable", "cuda_reason"):
        assert key in info
    assert info["version"] == gpuopt.__version__
    if info["cuda"]:
        assert "90" in info["cuda_architectures"].split(",") or info["cuda_architectures"]
        assert info["cublas"] and info["cublas_version"]
    assert info["cuda_usable"] == gpuopt.cuda_available()


def test_no_gpu_is_quiet_and_false(tmp_path):
    # A fresh interpreter: importing and asking must print nothing and never raise.
    code = "import gpuopt; print(gpuopt.cuda_available(), gpuopt.device_info() is None)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stderr == ""
    usable = gpuopt.cuda_available()
    assert out.stdout.strip() == f"{usable} {not usable}"


def test_import_does_not_load_cuda(tmp_path):
    code = "import sys, gpuopt; print('gpuopt._cuda' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "False"


def test_reason_when_unavailable():
    if gpuopt.cuda_available():
        assert gpuopt.cuda_unavailable_reason() == ""
    else:
        assert gpuopt.cuda_unavailable_reason()


@pytest.mark.gpu
def test_device_info_on_gpu():
    d = gpuopt.device_info()
    assert d["multiprocessors"] > 0 and d["total_memory_bytes"] > 2**30
    assert d["compute_capability"][0] >= 7
    assert d["driver_version"] >= 12000 and d["runtime_version"] >= 12000
    assert d["cublas_runtime_version"] > 0
    if gpuopt.build_info()["cudnn"]:
        assert d["cudnn_runtime_version"] > 0
    with pytest.raises(ValueError, match="device number"):
        gpuopt.device_info(99)


@pytest.mark.gpu
def test_build_covers_this_device():
    major, minor = gpuopt.device_info()["compute_capability"]
    archs = gpuopt.build_info()["cuda_architectures"].replace("-real", "").replace("-virtual", "").split(",")
    assert any(int(a) <= major * 10 + minor for a in archs)


# ------------------------------------------------------------------ why no GPU: the driver, read with ctypes

INSUFFICIENT = "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"
NO_FILE = "libcuda.so.1: cannot open shared object file: No such file or directory"


class _FakeLibcuda:
    """A libcuda.so.1 stand-in whose cuDriverGetVersion reports ``version`` (e.g. 12040: CUDA 12.4)."""

    def __init__(self, version):
        self.version = version

    def cuDriverGetVersion(self, ref):
        ref._obj.value = self.version
        return 0


def _cdll_raising(name, *args, **kwargs):
    raise OSError(NO_FILE)


@pytest.fixture
def cuda_build_without_device(monkeypatch):
    """gpuopt's loader as on a machine with a CUDA build of gpuopt (CUDA 13.0.88) whose runtime finds no
    device and says "insufficient driver": the compiled modules are stand-ins, the loader's cache is fresh."""
    from types import SimpleNamespace

    from gpuopt import _ext

    module = SimpleNamespace(device_count=lambda: 0, unavailable_reason=lambda: INSUFFICIENT)
    monkeypatch.setattr(_ext, "_core", SimpleNamespace(build_info=lambda: {"cuda": True, "cuda_version": "13.0.88"}))
    monkeypatch.setattr(_ext, "importlib", SimpleNamespace(import_module=lambda name: module))
    _ext._load_cuda.cache_clear()
    yield _ext
    _ext._load_cuda.cache_clear()  # (the real modules come back with monkeypatch's undo, after this)


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the driver is probed on Linux only")


@linux_only
def test_no_driver_library_says_no_driver_not_insufficient(cuda_build_without_device, monkeypatch):
    _ext = cuda_build_without_device
    monkeypatch.setattr(_ext.ctypes, "CDLL", _cdll_raising)
    expected = f"no NVIDIA driver found (libcuda.so.1 could not be loaded: {NO_FILE})"
    assert not gpuopt.cuda_available()
    assert gpuopt.cuda_unavailable_reason() == expected
    # Every GPU error says the same, and points to a CPU variant of the op.
    with pytest.raises(RuntimeError) as err:
        gpuopt.conv2d(np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 3, 3), np.float32), variant="basic")
    message = str(err.value)
    assert f"conv2d/basic needs a CUDA GPU, but {expected}." in message and "variant='cpu'" in message
    assert "Insufficient" not in message and "upgrade" not in message


@linux_only
def test_too_old_driver_says_which_versions(cuda_build_without_device, monkeypatch):
    _ext = cuda_build_without_device
    monkeypatch.setattr(_ext.ctypes, "CDLL", lambda name, *a, **k: _FakeLibcuda(12040))
    reason = gpuopt.cuda_unavailable_reason()
    assert reason.startswith("the NVIDIA driver found supports CUDA up to 12.4, but this build of gpuopt uses the "
                             "CUDA 13.0.88 runtime, which needs a driver for CUDA 13.0 or newer")
    assert INSUFFICIENT in reason and reason.endswith("upgrade the NVIDIA driver")
    assert "no NVIDIA driver found" not in reason


def test_a_failing_probe_leaves_the_runtime_words(cuda_build_without_device, monkeypatch):
    _ext = cuda_build_without_device

    def broken():
        raise RuntimeError("probe failed")

    monkeypatch.setattr(_ext, "probe_driver", broken)
    assert not gpuopt.cuda_available()  # never raises
    assert gpuopt.cuda_unavailable_reason() == f"no usable CUDA device: {INSUFFICIENT}"


@pytest.mark.parametrize("probe,build,expected", [
    (("missing",), "13.0.88", f"no NVIDIA driver found (libcuda.so.1 could not be loaded: {NO_FILE})"),
    ((True, "", 12040), "13.0.88", "the NVIDIA driver found supports CUDA up to 12.4, but this build of gpuopt uses "
                                   "the CUDA 13.0.88 runtime, which needs a driver for CUDA 13.0 or newer"),
    ((True, "", 11080), "12.8.93", "supports CUDA up to 11.8, but this build of gpuopt uses the CUDA 12.8.93 runtime, "
                                   "which needs a driver for CUDA 12.0 or newer"),
    ((True, "", None), "13.0.88", "the NVIDIA driver found is too old: this build of gpuopt uses the CUDA 13.0.88 "
                                  "runtime, which needs a driver for CUDA 13.0 or newer"),
    ((True, "", 12040), None, "the NVIDIA driver found supports CUDA up to 12.4 ("),
    ((True, "", 13000), "13.0.88", "the CUDA runtime (13.0.88) rejected the NVIDIA driver found, which supports CUDA "
                                   "up to 13.0"),
    (None, "13.0.88", "the NVIDIA driver found is too old: this build"),  # not probed (not Linux)
])
def test_no_device_reason(probe, build, expected):
    from gpuopt._ext import DriverProbe, no_device_reason

    probe = DriverProbe(False, NO_FILE) if probe == ("missing",) else None if probe is None else DriverProbe(*probe)
    reason = no_device_reason(INSUFFICIENT, probe, build)
    assert expected in reason
    if probe is None or probe.loaded:
        assert reason.endswith(f"({INSUFFICIENT}); upgrade the NVIDIA driver")


def test_other_runtime_reasons_are_kept():
    from gpuopt._ext import DriverProbe, no_device_reason

    no_gpu = "cudaErrorNoDevice: no CUDA-capable device is detected"
    for probe in (DriverProbe(True, "", 13000), DriverProbe(True), None):
        assert no_device_reason(no_gpu, probe, "13.0.88") == f"no usable CUDA device: {no_gpu}"
    # Without a driver library the runtime's reason is what a missing libcuda looks like to it, whatever it says.
    assert no_device_reason(no_gpu, DriverProbe(False, "gone"), "13.0.88").startswith("no NVIDIA driver found")


@linux_only
def test_probe_driver(monkeypatch):
    from gpuopt import _ext

    found = _ext.probe_driver()  # this machine's, whatever it has: never raises
    assert isinstance(found, _ext.DriverProbe) and (found.loaded or found.error)
    monkeypatch.setattr(_ext.ctypes, "CDLL", _cdll_raising)
    assert _ext.probe_driver() == _ext.DriverProbe(False, NO_FILE, None)
    monkeypatch.setattr(_ext.ctypes, "CDLL", lambda name, *a, **k: _FakeLibcuda(12040))
    assert _ext.probe_driver() == _ext.DriverProbe(True, "", 12040)
    monkeypatch.setattr(_ext.ctypes, "CDLL", lambda name, *a, **k: object())  # no cuDriverGetVersion
    assert _ext.probe_driver() == _ext.DriverProbe(True, "", None)


def test_probe_is_linux_only(monkeypatch):
    from gpuopt import _ext

    monkeypatch.setattr(_ext.sys, "platform", "win32")
    assert _ext.probe_driver() is None
