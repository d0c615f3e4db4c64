"""sparse_conv2d's one-pass variants (fast_fused: conv + ReLU + pool in one kernel; fast_sparse_input: only
the non-zero inputs, scattered) against the CPU reference, exactly.

Outputs are poisoned by conftest (0xFF bytes = -1 as int32): a pooled output the kernel
forgets to write cannot equal the ReLU'd (>= 0) reference.
"""

import numpy as np
import pytest

import gpuopt
from conftest import SEED
from gpuopt import datasets
from gpuopt.sparse import COOFilters, FASTFilters

from .test_gpu_sparse import I16, overflow_cases, ragged_filters, sparse_inputs
from .launch_args import args, shape

pytestmark = pytest.mark.gpu

FUSED = ["fast_fused", "fast_sparse_input"]
# fast_fused's kernels: the one-window-per-thread kernel (any size) and the register-blocked 3x3 ones.
KERNELS = ("window", "int32", "fp32")


def kernels_for(w):
    return KERNELS if w.shape[2:] == (3, 3) else ("window",)


def check(x, w, forms=("dense", "fast")):
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    for variant in FUSED:
        for form in forms:
            filters = w if form == "dense" else FASTFilters.from_dense(w)
            for kw in [{}] + ([{"kernel": k} for k in kernels_for(w)] if variant == "fast_fused" else []):
                y = gpuopt.sparse_conv2d(x, filters, variant=variant, **kw)
                assert y.dtype == np.int32 and y.shape == ref.shape, (variant, form, kw)
                np.testing.assert_array_equal(y, ref, err_msg=f"variant={variant} filters={form} {kw}")
    return ref


@pytest.mark.data
def test_real_nctu_layer_device_resident(data_root):
    x = datasets.read_nctu_neurons_txt(data_root / "nctu_sparse_conv" / "inNeu.txt")
    w = FASTFilters.from_dense(datasets.make_nctu_filters(512, 512, seed=SEED)).to_device()
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    for variant in FUSED:
        y = gpuopt.sparse_conv2d(gpuopt.to_device(x), w, variant=variant).numpy()
        np.testing.assert_array_equal(y, ref)
    for kernel in KERNELS:
        for split in (0, 1, 8):
            y = gpuopt.sparse_conv2d(gpuopt.to_device(x), w, variant="fast_fused", kernel=kernel, split=split).numpy()
            np.testing.assert_array_equal(y, ref, err_msg=f"kernel={kernel} split={split}")
    assert (ref > 0).any()


# (C, H, W, M, R, S): one tile and many (maps beyond 32x32, ragged last tiles), odd sizes, H = 3 (one pooled
# row, the dropped row still convolved), C not a multiple of the 8-channel chunk, M not a multiple of the
# 4 or 8 maps per block, W % 8 == 0 (16-byte loads) and not, 1x1 .. 9x9, non-square; C large enough for the
# automatic cluster split (2..8 blocks sharing the channels) in both variants.
SHAPES = [(1, 2, 2, 1, 3, 3), (1, 3, 9, 2, 3, 3), (3, 3, 2, 5, 3, 3), (9, 7, 5, 3, 3, 3), (17, 31, 37, 5, 3, 3),
          (8, 32, 32, 8, 3, 3), (12, 33, 40, 7, 3, 3), (5, 70, 45, 6, 3, 3), (3, 64, 64, 256, 3, 3),
          (4, 8, 8, 2, 1, 1), (3, 6, 7, 2, 7, 9), (2, 11, 12, 3, 9, 9), (6, 40, 35, 4, 5, 5), (7, 33, 65, 11, 3, 5),
          (20, 16, 24, 9, 9, 3), (130, 32, 32, 12, 3, 3), (300, 20, 18, 5, 5, 5), (520, 9, 40, 3, 3, 3)]


@pytest.mark.parametrize("c,h,w,m,r,s", SHAPES, ids=str)
def test_matches_cpu_reference(rng, c, h, w, m, r, s):
    check(sparse_inputs(rng, c, h, w), ragged_filters(rng, m, c, r, s))


@pytest.mark.parametrize("split", [1, 2, 4, 8])
@pytest.mark.parametrize("c,h,w,m,r,s", [(3, 5, 6, 2, 3, 3), (40, 33, 40, 9, 3, 3), (130, 32, 32, 12, 3, 3),
                                         (17, 20, 18, 5, 5, 5)], ids=str)
def test_cluster_channel_split(rng, split, c, h, w, m, r, s):
    # Every split (blocks with no channels at all when C is small), against the CPU and the unsplit kernel.
    x, wt = sparse_inputs(rng, c, h, w), ragged_filters(rng, m, c, r, s)
    ref = gpuopt.sparse_conv2d(x, wt, variant="cpu")
    for kernel in kernels_for(wt):
        np.testing.assert_array_equal(gpuopt.sparse_conv2d(x, FASTFilters.from_dense(wt), variant="fast_fused",
                                                           split=split, kernel=kernel), ref, err_msg=kernel)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("split", [1, 8])
def test_cluster_split_exact_path_and_overflow(split, kernel):
    # The cluster-wide bound fails but the sums fit (exact int64 path), then a real overflow.
    x = np.zeros((20, 6, 7), np.int16)
    x[1, 2, 3], x[17, 4, 4] = I16.max, I16.min
    w = np.zeros((2, 20, 3, 3), np.int16)
    w[0, :, 1, 1] = I16.max
    w[1, :, 0, 2] = I16.min
    np.testing.assert_array_equal(gpuopt.sparse_conv2d(x, w, variant="fast_fused", split=split, kernel=kernel),
                                  gpuopt.sparse_conv2d(x, w, variant="cpu"))
    x[1:4, 2, 3] = I16.max
    with pytest.raises(ValueError, match="does not fit in int32"):
        gpuopt.sparse_conv2d(x, w, variant="fast_fused", split=split, kernel=kernel)
    with pytest.raises(ValueError, match="split"):
        gpuopt.sparse_conv2d(x, w, variant="fast_fused", split=3)


@pytest.mark.parametrize("nnz", range(0, 10))
def test_every_nonzero_count_per_slice(rng, nnz):
    # Exactly nnz taps in every 3x3 slice (0: all-zero filters; 9: dense); random positions and signs.
    m, c = 6, 11
    w = np.zeros((m, c, 9), np.int16)
    for sl in w.reshape(m * c, 9):
        taps = rng.choice(9, nnz, replace=False)
        sl[taps] = rng.choice([-1, 1], nnz) * rng.integers(1, 500, nnz)
    ref = check(sparse_inputs(rng, c, 18, 21), w.reshape(m, c, 3, 3))
    assert (ref == 0).all() == (nnz == 0)


@pytest.mark.parametrize("zeros", [1.0, 0.95, 0.8, 0.5, 0.0])
def test_input_densities(rng, zeros):
    check(sparse_inputs(rng, 10, 20, 24, zeros=zeros), ragged_filters(rng, 5, 10))


def test_single_nonzero():
    x = np.zeros((9, 12, 10), np.int16)
    x[4, 7, 3] = -123
    w = np.zeros((3, 9, 3, 3), np.int16)
    w[1, 4, 2, 0] = -5
    ref = check(x, w)
    assert np.count_nonzero(ref) == 1


@pytest.mark.parametrize("split", [1, 2])
def test_fp32_bound_edges(split):
    # fp32 is exact while max|x| * sum|w| <= 2^24: at the bound (sums of exactly 2^24, FP32-exact), one past it
    # (the int64 path; the int32 kernel still proves it), and odd sums near 2^24 that FP32 alone would round.
    x = np.zeros((4, 8, 8), np.int16)
    x[:, 3, 3] = 4096
    w = np.zeros((2, 4, 3, 3), np.int16)
    w[0, :, 1, 1] = 1024  # 4 x 4096 x 1024 = 2^24
    w[1, :, 1, 1] = 1024
    w[1, 0, 1, 1] = 1025  # bound 2^24 + 4096: past it
    for maps, top in ((w[:1], 2**24), (w, 2**24 + 4096)):  # map 0 alone: the FP32 path, at its bound
        ref = gpuopt.sparse_conv2d(x, maps, variant="cpu")
        assert ref.max() == top
        for kernel in KERNELS:
            np.testing.assert_array_equal(gpuopt.sparse_conv2d(x, maps, variant="fast_fused", kernel=kernel,
                                                               split=split), ref, err_msg=kernel)
    x[0, 3, 3] = 4095  # sum 2^24 + 1 - 1024: odd, above 2^24 -> FP32 would round it
    x[1, 3, 3] = 4097
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    for kernel in KERNELS:
        np.testing.assert_array_equal(gpuopt.sparse_conv2d(x, w, variant="fast_fused", kernel=kernel, split=split),
                                      ref, err_msg=kernel)


def test_blocked_kernels_are_3x3_only(rng):
    x, w = sparse_inputs(rng, 3, 8, 8), ragged_filters(rng, 2, 3, 5, 5)
    for kernel in ("int32", "fp32"):
        with pytest.raises(ValueError, match="3x3 only"):
            gpuopt.sparse_conv2d(x, w, variant="fast_fused", kernel=kernel)
    np.testing.assert_array_equal(gpuopt.sparse_conv2d(x, w, variant="fast_fused", kernel="auto"),
                                  gpuopt.sparse_conv2d(x, w, variant="cpu"))


def test_int16_limits_fast_and_exact_paths(rng):
    # Sums that fit with the int32 bound provable (fast path) ...
    x = sparse_inputs(rng, 4, 9, 8, low=I16.min, high=I16.max, zeros=0.3)
    check(x, ragged_filters(rng, 3, 4, low=-7, high=7, density=0.5))
    x = np.full((1, 4, 5), I16.max, np.int16)
    w = np.zeros((2, 1, 3, 3), np.int16)
    w[0, 0, 1, 1] = w[0, 0, 1, 2] = I16.max
    w[1, 0, 1, 1] = w[1, 0, 1, 2] = I16.min
    assert check(x, w).max() == 2 * 32767 * 32767
    # ... and where the bound max|x| * sum|w| exceeds int32 but every sum fits: the exact int64 path.
    x = np.zeros((3, 6, 7), np.int16)
    x[1, 2, 3] = I16.max
    x[0, 4, 4] = I16.min
    w = np.zeros((2, 3, 3, 3), np.int16)
    w[0, :, 1, 1] = I16.max
    w[1, :, 0, 2] = I16.min
    ref = check(x, w)
    assert ref.max() == 2**30  # (-32768) * (-32768), map 1


@pytest.mark.parametrize("case", list(overflow_cases()), ids=lambda c: c[0])
def test_int32_overflow_raises(case):
    _, x, w = case
    for variant in FUSED:
        for filters in (w, FASTFilters.from_dense(w)):
            with pytest.raises(ValueError, match="does not fit in int32"):
                gpuopt.sparse_conv2d(x, filters, variant=variant)
        small = np.ones_like(x)  # the flag is per call
        np.testing.assert_array_equal(gpuopt.sparse_conv2d(small, np.ones_like(w), variant=variant),
                                      gpuopt.sparse_conv2d(small, np.ones_like(w), variant="cpu"))


@pytest.mark.parametrize("variant", FUSED)
def test_device_arrays_and_resident_filters(rng, variant):
    x = sparse_inputs(rng, 13, 34, 32)
    w = ragged_filters(rng, 9, 13)
    ref = gpuopt.sparse_conv2d(x, w, variant="cpu")
    filters = FASTFilters.from_dense(w)
    _, t = gpuopt.sparse_conv2d(x, filters, variant=variant, timing=True)
    assert t.details["filter_bytes_sent"] == t.details["filter_bytes"] > 0 and t.details["filter_arrays"] == 1
    filters.to_device()
    for f in (filters, COOFilters.from_dense(w).to_device(), gpuopt.to_device(w)):
        dy = gpuopt.sparse_conv2d(gpuopt.to_device(x), f, variant=variant)
        assert isinstance(dy, gpuopt.DeviceArray) and dy.shape == ref.shape
        np.testing.assert_array_equal(dy.numpy(), ref)
    y, t = gpuopt.sparse_conv2d(x, filters, variant=variant, timing=True)
    np.testing.assert_array_equal(y, ref)
    assert t.details["filter_bytes_sent"] == 0 and t.kernel_ms > 0


def test_default_is_auto_per_shape(rng):
    # auto: fast_imma where it applies and the taps fit int8, fast_sparse_input's planes kernel where it applies (W <=
    # 32, up to 3x3), fast_fused elsewhere; exact whichever it takes.
    from gpuopt.registry import default_variant
    from gpuopt.sparse.auto import auto_choice

    assert default_variant("sparse_conv2d") == "auto"
    for c, h, w, m, r, s, want in [(3, 10, 10, 2, 3, 3, "fast_imma"), (4, 11, 40, 3, 3, 3, "fast_fused"),
                                   (2, 513, 8, 2, 3, 3, "fast_fused"),
                                   (3, 12, 12, 5, 5, 5, "fast_fused"), (2, 9, 33, 2, 1, 1, "fast_fused")]:
        assert auto_choice(c, h, w, m, r, s) == want
        x = sparse_inputs(rng, c, h, w)
        for wt in (ragged_filters(rng, m, c, r, s), ragged_filters(rng, m, c, r, s, low=-128, high=127)):
            ref = gpuopt.sparse_conv2d(x, wt, variant="cpu")
            for filters in (wt, FASTFilters.from_dense(wt)):
                np.testing.assert_array_equal(gpuopt.sparse_conv2d(x, filters), ref, err_msg=f"{(c, h, w, m, r, s)}")
                y, t = gpuopt.sparse_conv2d(x, filters, variant="auto", timing=True)
                np.testing.assert_array_equal(y, ref)
                assert t.kernel_ms > 0


def test_binding_checks_before_launch():
    from gpuopt._ext import cuda_module

    cuda = cuda_module()
    with pytest.raises(ValueError, match="H and W"):
        cuda.sparse_conv2d_fast_fused(args(cuda, 0, [0], 1, 0, 0, 1, 1, 4, 1, 3, 3), split=0, kernel="auto")
    with pytest.raises(ValueError, match="width"):
        cuda.sparse_conv2d_fast_fused(args(cuda, 0, [0], 10, 0, 0, 1, 4, 4, 1, 3, 3), split=0, kernel="auto")
    with pytest.raises(ValueError, match="null"):
        cuda.sparse_conv2d_fast_fused(args(cuda, 0, [0], 1, 0, 0, 1, 4, 4, 1, 3, 3), split=0, kernel="auto")
    for variant in FUSED:
        check = getattr(cuda.check, f"sparse_conv2d_{variant}")
        with pytest.raises(ValueError, match="up to 9x9"):
            check(shape(cuda, 1, 4, 4, 1, 11, 11))
        check(shape(cuda, 1, 4, 4, 1, 3, 3))
    with pytest.raises(ValueError, match="fast_fused"):
        cuda.check.sparse_conv2d_fast_sparse_input(shape(cuda, 1, 40000, 4, 1, 3, 3))
    with pytest.raises(ValueError, match="null"):
        cuda.sparse_conv2d_fast_sparse_input(args(cuda, 0, [0], 1, 0, 0, 1, 4, 4, 1, 3, 3))


# fast_sparse_input's planes kernel (W <= 32, H <= 511, R and S <= 3; else the atomic kernel) at its edges: 1x3,
# 3x1 and 1x1 filters; W = 31, 32 and 33; H = 511, 512 and 600; odd H and W; many row tiles; dense inputs (several
# staged chunks per channel and tile); all-zero inputs; C over several code phases (ragged filters pad to 9 entries:
# 28 channels a phase, warps 28-31 idle in it); C large enough for a cluster split of 2 and 4; M not a multiple of
# the 32 maps per block.
@pytest.mark.parametrize("c,h,w,m,r,s,zeros", [
    (5, 17, 32, 33, 3, 1, 0.8), (4, 9, 31, 3, 1, 3, 0.8), (3, 12, 7, 65, 1, 1, 0.0), (2, 511, 4, 2, 3, 3, 0.5),
    (2, 512, 4, 2, 3, 3, 0.5), (3, 10, 33, 2, 3, 3, 0.5), (70, 10, 12, 3, 3, 3, 0.0), (150, 32, 32, 5, 3, 3, 0.8),
    (300, 16, 32, 40, 3, 3, 0.0), (3, 600, 32, 3, 3, 3, 0.5), (2, 13, 5, 2, 1, 3, 0.3), (5, 9, 32, 4, 3, 3, 1.0),
    (130, 7, 32, 33, 3, 3, 0.0)], ids=str)
def test_sparse_input_planes_edges(rng, c, h, w, m, r, s, zeros):
    x, wt = sparse_inputs(rng, c, h, w, zeros=zeros), ragged_filters(rng, m, c, r, s)
    ref = gpuopt.sparse_conv2d(x, wt, variant="cpu")
    y = gpuopt.sparse_conv2d(x, FASTFilters.from_dense(wt), variant="fast_sparse_input")
    np.testing.assert_array_equal(y, ref)
    assert (ref > 0).any() or zeros == 1.0


# ---------------------------------------------------------------- no host round trip for device results
@pytest.mark.parametrize("case", list(overflow_cases()), ids=lambda c: c[0])
@pytest.mark.parametrize("variant", FUSED + ["fast_imma"])
def test_device_results_defer_the_overflow_error(case, variant):
    """With x and the filters on the device the call returns without reading the overflow flag; the error comes
    from the result's first synchronising read (numpy, check) or gpuopt.synchronize(), once."""
    from gpuopt.cuda import _DEFERRED

    _, x, w = case
    if variant == "fast_imma" and (x.shape[1] > 511 or x.shape[2] > 32):
        pytest.skip("beyond fast_imma's maps")
    gpuopt.synchronize()
    dx = gpuopt.to_device(x)
    for filters in (gpuopt.to_device(w), FASTFilters.from_dense(w).to_device()):
        y = gpuopt.sparse_conv2d(dx, filters, variant=variant)
        assert isinstance(y, gpuopt.DeviceArray) and y in _DEFERRED
        with pytest.raises(ValueError, match="does not fit in int32"):
            y.numpy()
        assert y not in _DEFERRED  # reported once
        y.numpy()
        y = gpuopt.sparse_conv2d(dx, filters, variant=variant)
        with pytest.raises(ValueError, match="does not fit in int32"):
            gpuopt.synchronize()
        gpuopt.synchronize()
        y = gpuopt.sparse_conv2d(dx, filters, variant=variant)
        with pytest.raises(ValueError, match="does not fit in int32"):
            y.check()
    # Sums that fit: the flag stays 0, nothing raised at any read.
    small = gpuopt.to_device(np.ones_like(x))
    y = gpuopt.sparse_conv2d(small, gpuopt.to_device(np.ones_like(w)), variant=variant)
    np.testing.assert_array_equal(y.check().numpy(), gpuopt.sparse_conv2d(np.ones_like(x), np.ones_like(w),
                                                                          variant="cpu"))
    gpuopt.synchronize()


@pytest.mark.parametrize("variant", FUSED + ["fast_imma"])
def test_host_proven_bound_reads_no_flag(rng, variant):
    """FAST filters whose largest per-map sum of |w| times any int16 fits int32: the host proves no overflow, so
    nothing is deferred (no flag to read) and the result is exact."""
    from gpuopt.cuda import _DEFERRED

    x = sparse_inputs(rng, 8, 12, 12)
    w = rng.integers(-3, 4, size=(5, 8, 3, 3)).astype(np.int16)
    fast = FASTFilters.from_dense(w)
    assert 32768 * fast.max_map_abs_sum <= np.iinfo(np.int32).max
    y = gpuopt.sparse_conv2d(gpuopt.to_device(x), fast.to_device(), variant=variant)
    assert y not in _DEFERRED
    np.testing.assert_array_equal(y.numpy(), gpuopt.sparse_conv2d(x, w, variant="cpu"))
