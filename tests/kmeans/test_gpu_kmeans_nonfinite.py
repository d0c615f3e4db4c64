"""Non-finite points in a device x: the loop-on-the-GPU variants find them on the device, at no pass of their own
(a NaN or inf point makes its cluster's centre sums non-finite; the loop's close sees that and stops the run), and
the call raises ValueError at its stop-flag read (``device_persistent`` on device arrays: when its loop count is
read). Every variant and path (the dot form's tile and deep paths, the tensor-core screen, the fused close, the
stream pipeline, the persistent kernel), NaN, +inf and -inf, first (one of the initial centres), middle and last
rows; then the process goes on with the right bits. Outputs poisoned first (conftest)."""

import numpy as np
import pytest

import gpuopt

from .test_gpu_kmeans import assert_same_as_chunked_cpu

pytestmark = pytest.mark.gpu

#: (variant, N, D, k): every loop and path that closes a loop on the device.
CASES = [("device", 50_001, 4, 5), ("device_fused", 50_001, 4, 5), ("device_gemm", 50_001, 8, 300),
         ("device_tiled", 50_001, 4, 5), ("device_tiled", 40_000, 16, 70), ("device_tiled", 20_000, 200, 7),
         ("device_persistent", 50_001, 4, 5), ("stream", 50_001, 4, 5), ("auto", 100, 4, 2)]


@pytest.mark.parametrize("variant,n,d,k", CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_non_finite_device_points_raise(rng, variant, n, d, k, bad, where):
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    x[{"first": 0, "middle": n // 2, "last": n - 1}[where], d // 2] = bad
    with pytest.raises(ValueError, match="only finite values"):
        r = gpuopt.kmeans(gpuopt.to_device(x), k, variant=variant, threshold=0.0, max_iter=4)
        r.iterations  # device_persistent on device arrays: raised where the loop count is read
    x[np.isin(x, [bad]) | np.isnan(x)] = 0.5  # and the next call, on the same GPU state, has the reference's bits
    assert_same_as_chunked_cpu(x, k, variant if variant != "auto" else None, threshold=0.0, max_iter=4)


def test_the_issue_example_all_inf():
    torch = pytest.importorskip("torch")
    x = torch.full((100, 4), float("inf"), device="cuda")
    for variant in ("device", None):
        with pytest.raises(ValueError, match="only finite values"):
            gpuopt.kmeans(x, 2, variant=variant).iterations
