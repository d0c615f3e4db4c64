"""Half-precision points on the GPU: float16 (torch, CuPy, gpuopt DeviceArray) and bfloat16 (torch) device arrays are
widened to float32 on the device before the loop, so every variant gives the float32 run's bits on the widened
points (centres, memberships, loop count, delta history); the widening itself is exact for every float16 and
bfloat16 bit pattern, at any length and alignment, on the caller's stream. Outputs poisoned first (conftest)."""

import numpy as np
import pytest

import gpuopt
from gpuopt._ext import cuda_module

pytestmark = pytest.mark.gpu

#: (variant, N, D, k): the loops on the GPU and auto, short and long points.
CASES = [("auto", 50_001, 4, 5), ("device", 20_001, 8, 7), ("device_gemm", 20_000, 8, 300),
         ("device_tiled", 40_003, 16, 70), ("device_tiled", 10_000, 200, 9), ("device_persistent", 20_001, 4, 5),
         ("stream", 20_001, 4, 5)]


def _host(a):
    return a if isinstance(a, np.ndarray) else a.numpy()


def _same_as_float32(xh32, got, variant, k):
    ref = gpuopt.kmeans(gpuopt.to_device(xh32), k, variant=variant, threshold=0.0, max_iter=5)
    assert _host(got.centroids).tobytes() == _host(ref.centroids).tobytes()
    assert _host(got.membership).tobytes() == _host(ref.membership).tobytes()
    assert got.iterations == ref.iterations and got.delta.tobytes() == ref.delta.tobytes()


@pytest.mark.parametrize("variant,n,d,k", CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_half_points_are_the_float32_run_on_them(rng, variant, n, d, k, dtype):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng.uniform(-4, 4, (n, d)).astype(np.float32)).cuda().to(getattr(torch, dtype))
    got = gpuopt.kmeans(x, k, variant=variant, threshold=0.0, max_iter=5)
    _same_as_float32(x.float().cpu().numpy(), got, variant, k)


def test_float16_device_arrays_of_every_kind(rng):
    xh = rng.uniform(-4, 4, (30_001, 6)).astype(np.float16)
    ref = gpuopt.kmeans(xh.astype(np.float32), 4, variant="cpu", summation="chunked", threshold=0.0, max_iter=5)
    d = gpuopt.to_device(xh)
    if d.dtype == np.float16:  # a DeviceArray keeps its dtype
        got = gpuopt.kmeans(d, 4, threshold=0.0, max_iter=5)
        assert _host(got.centroids).tobytes() == ref.centroids.tobytes()
    cp = pytest.importorskip("cupy")
    got = gpuopt.kmeans(cp.asarray(xh), 4, threshold=0.0, max_iter=5)
    assert _host(got.centroids).tobytes() == ref.centroids.tobytes()
    np.testing.assert_array_equal(_host(got.membership), ref.membership)


def test_on_a_side_stream(rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng.uniform(-1, 1, (100_000, 4)).astype(np.float32)).cuda()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000)  # the side stream busy: gpuopt must wait for it, not read x early
        xh = (x * 1).half()  # made on the side stream
        got = gpuopt.kmeans(xh, 5, threshold=0.0, max_iter=4)
    side.synchronize()
    ref16 = gpuopt.kmeans(x.half().float(), 5, threshold=0.0, max_iter=4)
    assert _host(got.centroids).tobytes() == _host(ref16.centroids).tobytes()
    assert _host(got.membership).tobytes() == _host(ref16.membership).tobytes()


def test_non_finite_half_points_raise():
    torch = pytest.importorskip("torch")
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.full((100, 4), float("inf"), device="cuda", dtype=dtype)
        with pytest.raises(ValueError, match="only finite values"):
            gpuopt.kmeans(x, 2, variant="device")
    x = torch.ones((100, 4), device="cuda", dtype=torch.float16)[:, ::2]  # not contiguous
    with pytest.raises(ValueError, match="C-contiguous"):
        gpuopt.kmeans(x, 2)


@pytest.mark.parametrize("bfloat16", [False, True])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_widening_is_exact_for_every_bit_pattern(bfloat16, offset):
    bits = np.arange(1 << 16, dtype=np.uint16)
    src = gpuopt.to_device(np.concatenate([np.zeros(offset, np.uint16), bits, np.zeros(5, np.uint16)]))
    n = (1 << 16) + 5 - (offset % 2)  # odd lengths and a misaligned start (a 2-byte offset breaks 16-byte loads)
    dst = gpuopt.cuda.empty((n,), np.float32)
    cuda_module().widen_half(dst.ptr, src.ptr + 2 * offset, n, bfloat16)
    got = dst.numpy()
    src_bits = np.concatenate([bits, np.zeros(5, np.uint16)])[:n]
    want = (src_bits.astype(np.uint32) << 16).view(np.float32) if bfloat16 else src_bits.view(np.float16).astype(
        np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert got[ok].tobytes() == want[ok].tobytes()
