import subprocess
import sys

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
