"""matmul GPU variants against the CPU reference (outputs poisoned by conftest)."""

import functools

import numpy as np
import pytest

import gpuopt
import oracles
from conftest import SEED, relative_error
from gpuopt.matmul import matmul_kernel_info

pytestmark = pytest.mark.gpu

GPU_VARIANTS = [name for name, v in gpuopt.variants("matmul").items() if v.needs_cuda]
# Variants with a kernel of gpuopt's own (matmul_kernel_info answers for these).
OWN_VARIANTS = [name for name in GPU_VARIANTS if name not in ("cublas", "cublas_tf32", "naive")]
# Kernels with 16-byte paths and scalar fallbacks.
VECTOR_VARIANTS = ["vectorized", "warptile", "async", "tf32x3", "tf32x3_wgmma"]
# 1, primes, non-multiples of every tile, tall-skinny, wide, and large.
SIZES = [(1, 1, 1), (1, 1, 7), (7, 1, 1), (2, 3, 5), (33, 33, 33), (31, 37, 41), (127, 1, 129), (1, 257, 3),
         (129, 65, 257), (1000, 1000, 1000), (1024, 1024, 1024), (4099, 67, 33), (17, 4096, 19), (2048, 2048, 4096)]
# (m, k, n) for every parameter value: awkward shapes only (small, fast), including ones
# whose rows are 16-byte aligned (K % 4 == N % 4 == 0) but are no multiple of any tile, so
# the vector paths meet edge tiles too.
AWKWARD = [(1, 1, 1), (2, 3, 5), (33, 33, 33), (31, 37, 41), (127, 1, 129), (1, 257, 3), (129, 65, 257),
           (4099, 67, 33), (17, 4096, 19), (131, 516, 260), (257, 64, 128), (100, 4, 4)]


def _configs():
    """(variant, params) for every GPU variant at every allowed value of its parameters
    (the full cross product: async's tile x stages is 18 instantiations)."""
    out = []
    for name in GPU_VARIANTS:
        params = list(gpuopt.variants("matmul")[name].params.values())
        combos = [{}]
        for p in params:
            combos = [dict(c, **{p.name: value}) for c in combos for value in p.allowed]
        out += [(name, c) for c in combos]
    return out


CONFIGS = _configs()


def _config_id(cfg):
    name, params = cfg
    return "-".join([name, *(f"{k}={v}" for k, v in params.items())])


@functools.lru_cache(maxsize=None)
def _problem(m, k, n):
    """Inputs uniform in [-1, 1] (fixed per shape within a run, fresh per run) and the
    float64-accumulated reference: the cpu variant, or NumPy's float64 product (the same
    reference, faster) for the large shapes."""
    g = np.random.default_rng([SEED, m, k, n])
    a = g.uniform(-1, 1, (m, k)).astype(np.float32)
    b = g.uniform(-1, 1, (k, n)).astype(np.float32)
    ref = gpuopt.matmul(a, b, variant="cpu") if m * k * n <= 1 << 28 else oracles.matmul(a, b)
    return a, b, ref


# Variants not FP32-accurate by design (cuBLAS with TF32 tensor cores, a speed baseline) carry their own bound.
TOLERANCE = {n: v.tolerance for n, v in gpuopt.variants("matmul").items() if v.tolerance}


def _check(c, ref, what="", tol=1e-5):
    assert c.shape == ref.shape and c.dtype == np.float32
    assert np.isfinite(c).all(), f"{what}: unwritten (poisoned) or non-finite outputs"
    err = relative_error(c, ref)
    assert err < tol, f"{what}: relative error {err:.2e}"


@pytest.mark.parametrize("variant", GPU_VARIANTS)
@pytest.mark.parametrize("m,k,n", SIZES, ids=str)
def test_matches_cpu_reference(variant, m, k, n):
    a, b, ref = _problem(m, k, n)
    _check(gpuopt.matmul(a, b, variant=variant), ref, variant, TOLERANCE.get(variant, 1e-5))


@pytest.mark.parametrize("cfg", CONFIGS, ids=_config_id)
def test_every_parameter_value_on_awkward_shapes(cfg):
    name, params = cfg
    for m, k, n in AWKWARD:
        a, b, ref = _problem(m, k, n)
        _check(gpuopt.matmul(a, b, variant=name, **params), ref, f"{_config_id(cfg)} at {(m, k, n)}",
               TOLERANCE.get(name, 1e-5))


def _misaligned(x):
    """A device copy of x whose base address is 4 bytes past a 16-byte boundary."""
    from gpuopt._ext import cuda_module

    x = np.ascontiguousarray(x, np.float32)
    buf = gpuopt.cuda.DeviceArray.empty((x.size + 1,), np.float32)
    view = gpuopt.cuda.DeviceArray(x.shape, np.float32, buf.ptr + 4, owner=buf)
    assert view.ptr % 16 == 4
    cuda_module().copy_h2d(view.ptr, x, x.nbytes)
    return view


_VECTOR_CONFIGS = [cfg for cfg in CONFIGS if cfg[0] in VECTOR_VARIANTS]


@pytest.mark.parametrize("cfg", _VECTOR_CONFIGS, ids=_config_id)
def test_misaligned_rows_and_pointers(cfg):
    """The 16-byte paths fall back to scalar copies where a row is not 16-byte aligned:
    K % 4 != 0 (rows of a), N % 4 != 0 (rows of b and c), or a base pointer off by one float."""
    name, params = cfg
    cases = [(64, 130, 128), (64, 128, 130), (70, 66, 70), (133, 128, 132)]  # K%4, N%4, both, neither
    for m, k, n in cases:
        a, b, ref = _problem(m, k, n)
        for where, (da, db) in {"aligned": (gpuopt.to_device(a), gpuopt.to_device(b)),
                                "a+4B": (_misaligned(a), gpuopt.to_device(b)),
                                "b+4B": (gpuopt.to_device(a), _misaligned(b)),
                                "both+4B": (_misaligned(a), _misaligned(b))}.items():
            dc = gpuopt.matmul(da, db, variant=name, **params)
            _check(dc.numpy(), ref, f"{_config_id(cfg)} at {(m, k, n)}, {where}")


@pytest.mark.parametrize("variant,params", [("warptile", {}), ("async", {}), ("async", {"tile": "128x256x16"}),
                                            ("async", {"tile": "64x64x16", "stages": 2}),
                                            ("async", {"tile": "128x128x16", "split_k": 4}), ("tf32x3", {}),
                                            ("tf32x3", {"stages": 4}), ("tf32x3_wgmma", {})],
                         ids=["warptile", "async", "async-128x256x16", "async-64x64x16-s2", "async-128x128x16-split4",
                              "tf32x3", "tf32x3-s4", "tf32x3_wgmma"])
def test_large_square_2048(variant, params):
    a, b, ref = _problem(2048, 2048, 2048)
    _check(gpuopt.matmul(gpuopt.to_device(a), gpuopt.to_device(b), variant=variant, **params).numpy(), ref, variant)


def test_large_square_4096_best_variant():
    """The best variant at 4096^3 (K = 4096 float32 terms per output). The float64
    reference is computed on 256 sampled rows; every output is checked for NaN."""
    g = np.random.default_rng([SEED, 4096])
    a = g.uniform(-1, 1, (4096, 4096)).astype(np.float32)
    b = g.uniform(-1, 1, (4096, 4096)).astype(np.float32)
    c = gpuopt.matmul(gpuopt.to_device(a), gpuopt.to_device(b), variant="async").numpy()
    assert np.isfinite(c).all(), "unwritten (poisoned) or non-finite outputs"
    rows = np.sort(g.choice(4096, 256, replace=False))
    err = relative_error(c[rows], oracles.matmul(a[rows], b))
    assert err < 1e-5, f"relative error {err:.2e}"


@pytest.mark.parametrize("variant,params,match", [
    ("shared", {"block": 8}, "block=8 is not allowed"),
    ("shared", {"block": True}, "block=True is not allowed"),
    ("tile_buffer", {"tile_sz": 3}, "tile_sz=3 is not allowed"),
    ("coalesced", {"warp_layout": "diagonal"}, "warp_layout='diagonal' is not allowed"),
    ("blocktile_2d", {"tile": "128x128x16"}, "tile='128x128x16' is not allowed"),
    ("vectorized", {"tile": "auto"}, "tile='auto' is not allowed"),
    ("warptile", {"tile": "128x256x16"}, "tile='128x256x16' is not allowed"),
    ("async", {"tile": "256x256x8"}, "tile='256x256x8' is not allowed"),
    ("async", {"stages": 1}, "stages=1 is not allowed"),
    ("async", {"stages": 5}, "stages=5 is not allowed"),
    ("async", {"split_k": 3}, "split_k=3 is not allowed"),
    ("async", {"split_k": "2"}, "split_k='2' is not allowed"),
    ("blocktile_1d", {"tile": "64x64x8"}, r"unknown parameter\(s\) \['tile'\]"),
])
def test_bad_parameters_rejected_before_launch(variant, params, match):
    a = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match=match):
        gpuopt.matmul(a, a, variant=variant, **params)


def test_cpp_launchers_check_their_parameters():
    """The C++ launchers reject what the registry would (direct callers get the limit)."""
    from gpuopt._ext import cuda_module

    cuda = cuda_module()
    a = gpuopt.to_device(np.ones((4, 4), np.float32))
    c = gpuopt.cuda.empty((4, 4), np.float32)
    args = (cuda.MatmulArgs(a.ptr, a.ptr, c.ptr, 4, 4, 4),)
    with pytest.raises(ValueError, match="block must be 16 or 32"):
        cuda.matmul_shared(*args, block=64)
    with pytest.raises(ValueError, match="tile_sz must be 1, 2 or 4"):
        cuda.matmul_tile_buffer(*args, tile_sz=8)
    with pytest.raises(ValueError, match="warp_layout must be 'row' or 'column'"):
        cuda.matmul_coalesced(*args, warp_layout="diagonal")
    with pytest.raises(ValueError, match="tile must be"):
        cuda.matmul_warptile(*args, tile="32x32x8")
    with pytest.raises(ValueError, match="stages must be 2, 3 or 4"):
        cuda.matmul_async(*args, tile="128x128x16", stages=7, split_k=1)
    with pytest.raises(ValueError, match=r"split_k must be 0 \(auto\), 1, 2 or 4, got 3"):
        cuda.matmul_async(*args, tile="128x128x16", stages=3, split_k=3)
    with pytest.raises(ValueError, match="matmul async: tile must be 'auto', .* got '96x96x16'"):
        cuda.matmul_async(*args, tile="96x96x16", stages=3, split_k=0)
    with pytest.raises(ValueError, match="M, N and K must be positive"):
        cuda.matmul_async(cuda.MatmulArgs(a.ptr, a.ptr, c.ptr, 0, 4, 4), tile="auto", stages=3, split_k=0)
    with pytest.raises(ValueError, match="must be < 2"):
        cuda.matmul_vectorized(cuda.MatmulArgs(a.ptr, a.ptr, c.ptr, 1 << 31, 4, 4), tile="128x128x8")


@pytest.mark.parametrize("cfg", [cfg for cfg in CONFIGS if cfg[0] in OWN_VARIANTS], ids=_config_id)
def test_kernel_info_no_spills(cfg):
    name, params = cfg
    info = matmul_kernel_info(name, **params)
    assert info["variant"] == name and info["kernel"].startswith(name)
    assert info["local_bytes"] == 0, f"{info['kernel']}: {info['local_bytes']} bytes of local memory (spills)"
    assert 1 <= info["threads"] <= 1024 and info["registers"] > 0
    assert info["max_blocks_per_sm"] >= 1, f"{info['kernel']} cannot be resident on a multiprocessor"
    assert info["static_shared_bytes"] + info["dynamic_shared_bytes"] > 0 or name == "coalesced"


def test_kernel_info_auto_tile_and_rejections():
    big = matmul_kernel_info("async", shape=(8192, 8192, 8192))
    small = matmul_kernel_info("async", shape=(256, 256, 256))
    assert "split" not in big["kernel"] and "64x64" in small["kernel"]
    assert big["dynamic_shared_bytes"] > 48 * 1024 and big["static_shared_bytes"] == 0
    split = matmul_kernel_info("async", tile="128x128x16", split_k=4)
    assert "split4" in split["kernel"] and split["dynamic_shared_bytes"] >= 128 * 128 * 4
    for variant in ("cublas", "cpu"):
        with pytest.raises(ValueError, match="no kernel of gpuopt's own"):
            matmul_kernel_info(variant)
    naive = matmul_kernel_info("naive")
    assert naive["kernel"] == "naive<16x16>" and naive["threads"] == 256 and naive["local_bytes"] == 0
    with pytest.raises(ValueError, match="stages=9 is not allowed"):
        matmul_kernel_info("async", stages=9)


def test_async_auto_picks_smaller_tiles_for_small_shapes():
    # 1000^2 has 64 tiles of 128x128 for 132 multiprocessors: auto must still be exact
    # whichever tile it picks, and agree with an explicit tile choice to rounding.
    a, b, ref = _problem(1000, 1000, 1000)
    for tile in ("auto", "128x128x16", "128x64x16", "64x64x16"):
        for split_k in ("auto", 1, 2, 4):
            _check(gpuopt.matmul(a, b, variant="async", tile=tile, split_k=split_k), ref, f"{tile} split_k={split_k}")


@pytest.mark.parametrize("variant", GPU_VARIANTS)
def test_device_arrays_in_device_array_out(rng, variant):
    a = rng.standard_normal((65, 31)).astype(np.float32)
    b = rng.standard_normal((31, 17)).astype(np.float32)
    da, db = gpuopt.to_device(a), gpuopt.to_device(b)
    dc = gpuopt.matmul(da, db, variant=variant)
    assert isinstance(dc, gpuopt.DeviceArray) and dc.shape == (65, 17)
    # Chained on the device: (a @ b) @ b.T without leaving it.
    dd = gpuopt.matmul(dc, gpuopt.to_device(np.ascontiguousarray(b.T)), variant=variant)
    assert relative_error(dd.numpy(), (a.astype(np.float64) @ b) @ b.T) < TOLERANCE.get(variant, 1e-5)


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


def _tf32(x: np.ndarray) -> np.ndarray:
    """x rounded to TF32 (10 mantissa bits, to nearest): what a single TF32 product sees."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x1000) & 0xFFFFE000
    return bits.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("split", ["fragment", "tile"])
@pytest.mark.parametrize("flush_k", [8, 16, 32])
@pytest.mark.parametrize("m,k,n", [(256, 4096, 384), (1000, 1000, 1000), (129, 65, 257)], ids=str)
def test_tf32x3_has_fp32_level_error(m, k, n, flush_k, split):
    """3xTF32 against float64, beside an FFMA kernel on the same data: FP32-level error (within 2x of the FFMA
    kernel's, and far below one TF32 product's, which the split exists to avoid); the same bits on every run."""
    g = np.random.default_rng([SEED, m, k, n, 3])
    a = g.standard_normal((m, k)).astype(np.float32)
    b = g.standard_normal((k, n)).astype(np.float32)
    exact = oracles.matmul(a, b)  # float64
    da, db = gpuopt.to_device(a), gpuopt.to_device(b)
    c3 = gpuopt.matmul(da, db, variant="tf32x3", flush_k=flush_k, split=split).numpy()
    err3 = relative_error(c3, exact)
    err_ffma = relative_error(gpuopt.matmul(da, db, variant="async").numpy(), exact)
    err_tf32 = relative_error(_tf32(a).astype(np.float64) @ _tf32(b).astype(np.float64), exact)
    # Summed in the tensor cores' accumulator over all of K (round toward zero) this was 2.9e-5 at K = 4096.
    assert err3 < 2 * err_ffma + 1e-7, f"3xTF32 {err3:.2e} vs FFMA {err_ffma:.2e}"
    assert err3 < err_tf32 / 30, f"3xTF32 {err3:.2e} is not far below one TF32 product's {err_tf32:.2e}"
    np.testing.assert_array_equal(gpuopt.matmul(da, db, variant="tf32x3", flush_k=flush_k, split=split).numpy(), c3)
    # Both splits compute the same hi and lo and issue the same mma in the same order: the same bits.
    other = "tile" if split == "fragment" else "fragment"
    np.testing.assert_array_equal(gpuopt.matmul(da, db, variant="tf32x3", flush_k=flush_k, split=other).numpy(), c3)


@pytest.mark.parametrize("m,k,n", [(256, 4096, 384), (1000, 1000, 1000), (129, 65, 257), (4099, 67, 33)], ids=str)
def test_tf32x3_wgmma_has_fp32_level_error(m, k, n):
    """The wgmma kernel splits as tf32x3 does and adds every 32 k in FP32 (tf32x3's flush_k = 32): FP32-level
    error against float64 beside an FFMA kernel, far below one TF32 product's; the same bits on every run and
    for a misaligned copy of the inputs (the split kernels' scalar path)."""
    g = np.random.default_rng([SEED, m, k, n, 11])
    a = g.standard_normal((m, k)).astype(np.float32)
    b = g.standard_normal((k, n)).astype(np.float32)
    exact = oracles.matmul(a, b)
    da, db = gpuopt.to_device(a), gpuopt.to_device(b)
    c3 = gpuopt.matmul(da, db, variant="tf32x3_wgmma").numpy()
    err3 = relative_error(c3, exact)
    err_ffma = relative_error(gpuopt.matmul(da, db, variant="async").numpy(), exact)
    err_tf32 = relative_error(_tf32(a).astype(np.float64) @ _tf32(b).astype(np.float64), exact)
    assert err3 < 2 * err_ffma + 1e-7, f"3xTF32 (wgmma) {err3:.2e} vs FFMA {err_ffma:.2e}"
    assert err3 < err_tf32 / 30, f"3xTF32 (wgmma) {err3:.2e} is not far below one TF32 product's {err_tf32:.2e}"
    np.testing.assert_array_equal(gpuopt.matmul(da, db, variant="tf32x3_wgmma").numpy(), c3)
    np.testing.assert_array_equal(gpuopt.matmul(_misaligned(a), _misaligned(b), variant="tf32x3_wgmma").numpy(), c3)


def test_cublas_tf32_is_tf32_accurate_only():
    """The TF32 baseline really uses the tensor cores' 10-bit mantissas (its error is far above FP32's), which is
    why the 3xTF32 steps exist."""
    g = np.random.default_rng([SEED, 12])
    a = g.standard_normal((512, 1024)).astype(np.float32)
    b = g.standard_normal((1024, 256)).astype(np.float32)
    exact = oracles.matmul(a, b)
    da, db = gpuopt.to_device(a), gpuopt.to_device(b)
    err_tf32 = relative_error(gpuopt.matmul(da, db, variant="cublas_tf32").numpy(), exact)
    err_fp32 = relative_error(gpuopt.matmul(da, db, variant="cublas").numpy(), exact)
    assert 1e-5 < err_tf32 < 2e-3 and err_tf32 > 30 * err_fp32, (err_tf32, err_fp32)


def test_tf32x3_wgmma_kernel_resources():
    """Two warpgroups, one block per multiprocessor (192 KB of stages), no spills."""
    info = matmul_kernel_info("tf32x3_wgmma")
    assert info["threads"] == 256 and info["max_blocks_per_sm"] == 1 and info["local_bytes"] == 0, info
    assert info["dynamic_shared_bytes"] >= 3 * 64 * 1024, info


def test_tf32x3_kernel_resources():
    """What the kernel is written for: 8 warps, one block per multiprocessor, no spills."""
    for stages, split in ((3, "fragment"), (4, "fragment"), (3, "tile"), (4, "tile")):
        info = matmul_kernel_info("tf32x3", stages=stages, split=split)
        assert info["threads"] == 256 and info["max_blocks_per_sm"] == 1 and info["local_bytes"] == 0, info
