"""matmul GPU variants against the CPU reference (outputs poisoned by conftest)."""

import numpy as np
import pytest

import gpuopt
from conftest import relative_error

pytestmark = pytest.mark.gpu

GPU_VARIANTS = [name for name, v in gpuopt.variants("matmul").items() if v.needs_cuda]
# 1, primes, non-multiples of every tile, tall-skinny, wide, and large.
SIZES = [(1, 1, 1), (1, 1, 7), (7, 1, 1), (2, 3, 5), (33, 33, 33), (31, 37, 41), (127, 1, 129), (1, 257, 3),
         (129, 65, 257), (1000, 1000, 1000), (1024, 1024, 1024), (4099, 67, 33), (17, 4096, 19), (2048, 2048, 4096)]


@pytest.mark.parametrize("variant", GPU_VARIANTS)
@pytest.mark.parametrize("m,k,n", SIZES, ids=str)
def test_matches_cpu_reference(rng, variant, m, k, n):
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = gpuopt.matmul(a, b, variant=variant)
    ref = gpuopt.matmul(a, b, variant="cpu")
    assert c.shape == (m, n) and c.dtype == np.float32
    assert np.isfinite(c).all(), "unwritten (poisoned) or non-finite outputs"
    assert relative_error(c, ref) < 1e-5


@pytest.mark.parametrize("variant", GPU_VARIANTS)
def test_device_arrays_in_device_array_out(rng, variant):
    a = rng.standard_normal((65, 31)).astype(np.float32)
    b = rng.standard_normal((31, 17)).astype(np.float32)
    da, db = gpuopt.to_device(a), gpuopt.to_device(b)
    dc = gpuopt.matmul(da, db, variant=variant)
    assert isinstance(dc, gpuopt.DeviceArray) and dc.shape == (65, 17)
    # Chained on the device: (a @ b) @ b.T without leaving it.
    dd = gpuopt.matmul(dc, gpuopt.to_device(np.ascontiguousarray(b.T)), variant=variant)
    assert relative_error(dd.numpy(), (a.astype(np.float64) @ b) @ b.T) < 1e-5


@pytest.mark.parametrize("variant", GPU_VARIANTS)
def test_timing_record(rng, variant):
    a = rng.standard_normal((512, 512)).astype(np.float32)
    c, t = gpuopt.matmul(a, a, variant=variant, timing=True)
    assert t.device == "gpu" and t.h2d_ms > 0 and t.kernel_ms > 0 and t.d2h_ms > 0
    assert t.total_ms == pytest.approx(t.h2d_ms + t.kernel_ms + t.d2h_ms)
    _, td = gpuopt.matmul(gpuopt.to_device(a), gpuopt.to_device(a), variant=variant, timing=True)
    assert td.h2d_ms == 0 and td.d2h_ms == 0 and td.kernel_ms > 0


def test_cupy_and_torch_interop(rng):
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((30, 20)).astype(np.float32)
    ref = a.astype(np.float64) @ b
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        out = gpuopt.matmul(cupy.asarray(a), cupy.asarray(b), variant="naive")
        assert relative_error(cupy.asnumpy(cupy.asarray(out)), ref) < 1e-5
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        out = gpuopt.matmul(ta, tb, variant="naive")
        back = torch.as_tensor(out, device="cuda")  # zero-copy view of gpuopt's memory
        assert back.data_ptr() == out.ptr
        assert relative_error(back.cpu().numpy(), ref) < 1e-5
        with pytest.raises(ValueError, match="C-contiguous"):
            gpuopt.matmul(ta.t(), ta, variant="naive")  # a transposed view
        with pytest.raises(TypeError, match="float32"):
            gpuopt.matmul(ta.double(), tb.double(), variant="naive")
    if cupy is None and torch is None:
        pytest.skip("neither CuPy nor PyTorch is installed")


def test_error_leaves_process_usable(rng):
    from gpuopt._ext import cuda_module

    with pytest.raises(RuntimeError, match="CUDA error: cudaErrorMemoryAllocation"):
        cuda_module().Buffer(1 << 50)  # 1 PiB
    a = rng.standard_normal((8, 8)).astype(np.float32)
    assert relative_error(gpuopt.matmul(a, a, variant="naive"), a.astype(np.float64) @ a) < 1e-5
