"""conv2d ``winograd`` (fused Winograd F(m x m, r x r)) against float64 and the CPU reference, outputs poisoned by
conftest.

Error bounds (relative Frobenius error of the float32 output against the float64-accumulated reference, inputs
uniform in [0, 1], filters N(0, 1/(C*r*r)), the reports' layers; gpuopt.conv.winograd.ERROR_BOUNDS):
F(2,3) <= 1e-6, F(4,3) <= 4e-6, F(2,5) <= 4e-6, F(4,5) <= 6e-6 -- a few times the NumPy float32 measurement
of the same algorithm (notes/winograd.md: 1.3e-7, 7e-7, 7e-7, 1.2e-6), far above FP32 direct's ~1e-7 yet far
below a wrong index. Awkward shapes (ragged tiles, padding, C not a multiple of the 8-channel chunk, K not a
multiple of the 16/32-map block, batch 1, one channel, tiles spanning images) are checked against the CPU
reference like every variant (error relative to the sums of |terms| < 1e-5). The generic tests of
test_gpu_conv2d.py run it too (and expect its refusals of strides and other filters)."""

import numpy as np
import pytest

import gpuopt
from gpuopt.conv.winograd import ERROR_BOUNDS
from conftest import conv_call
from .cases import (ECE408, LAUNCH_GOOD, check_against_cpu, check_launcher_rejects_bad_arguments, check_shape,
                    misaligned_copy, misaligned_empty, run_and_check, uniform)

pytestmark = pytest.mark.gpu

VARIANT = "winograd"
TILES = tuple(m for m in gpuopt.variants("conv2d")[VARIANT].params["m"].allowed if m != "auto")


def cuda():
    from gpuopt._ext import cuda_module

    return cuda_module()


def rel_fro(y, ref):
    return float(np.linalg.norm(y.astype(np.float64) - ref) / np.linalg.norm(ref))


# (N, C, H, W, K, R, S, stride, padding)
SHAPES = [
    (1, 1, 5, 5, 1, 5, 5, 1, 0),        # one output, one channel
    (1, 1, 1, 1, 3, 3, 3, 1, 1),        # one pixel, all padding around it
    (2, 3, 7, 11, 5, 3, 3, 1, 1),       # ragged tiles in both directions
    (3, 5, 13, 17, 7, 5, 5, 1, 2),
    (2, 4, 6, 6, 3, 5, 5, 1, 4),        # whole windows in the padding
    (1, 300, 9, 9, 5, 3, 3, 1, 1),      # 38 channel chunks, the last partial
    (2, 9, 10, 10, 33, 3, 3, 1, 0),     # C = 9, K = 33: tails of chunk and of 32-map block
    (7, 3, 64, 64, 17, 5, 5, 1, 2),     # K = 17: the 32-map block, 15 maps wasted
    (1, 2, 3, 250, 3, 3, 3, 1, 0),      # one output row
    (1, 13, 257, 3, 2, 3, 3, 1, 1),     # tall
    (37, 2, 5, 7, 3, 3, 3, 1, 0),       # one tile row per image: blocks span many images
    (5, 6, 30, 30, 16, 5, 5, 1, 0),     # Fashion conv2: the 16-map block
    (3, 32, 12, 12, 64, 5, 5, 1, 0),    # MNIST conv2
    (2, 7, 14, 9, 12, 5, 5, 1, 1),      # K = 12 < 16
    (4, 13, 11, 9, 10, 5, 5, 1, 1),     # K <= 16 with m = 4: the 4-channel-chunk block over 4 chunks (last 1 deep)
]


@pytest.mark.parametrize("m", TILES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_awkward_shapes(rng, m, shape):
    check_shape(rng, VARIANT, shape, m=m)


@pytest.mark.parametrize("m", TILES)
@pytest.mark.parametrize("layer", sorted(ECE408))
def test_error_against_float64_on_the_reports_layers(rng, m, layer):
    (_, c, h, w), (k, _, r, s) = ECE408[layer]
    x = rng.uniform(0, 1, (16, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((k, c, r, s)) / np.sqrt(c * r * s)).astype(np.float32)
    y = gpuopt.conv2d(x, wt, variant=VARIANT, m=m)
    ref = gpuopt.conv2d(x, wt, variant="cpu").astype(np.float64)  # float64 sums, rounded once to float32
    err = rel_fro(y, ref)
    assert err <= ERROR_BOUNDS[(m, r)], f"F({m},{r}) on {layer}: {err:.3g}"
    assert err > 0  # a transform that rounds: an exact result would mean another kernel ran


@pytest.mark.parametrize("m", TILES)
@pytest.mark.parametrize("r", (3, 5))
def test_error_bound_3x3_and_5x5_padded(rng, m, r):
    x = rng.uniform(0, 1, (8, 16, 21, 19)).astype(np.float32)
    wt = (rng.standard_normal((24, 16, r, r)) / np.sqrt(16 * r * r)).astype(np.float32)
    y = gpuopt.conv2d(x, wt, padding=r // 2, variant=VARIANT, m=m)
    ref = gpuopt.conv2d(x, wt, padding=r // 2, variant="cpu").astype(np.float64)
    assert rel_fro(y, ref) <= ERROR_BOUNDS[(m, r)]


@pytest.mark.parametrize("m", TILES)
@pytest.mark.parametrize("activation", [None, "relu", "tanh"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
def test_bias_and_activation(rng, m, activation, with_bias):
    bias = uniform(rng, 19) if with_bias else None
    y = run_and_check(VARIANT, uniform(rng, (3, 11, 13, 10)), uniform(rng, (19, 11, 5, 5)), padding=1, bias=bias,
                      activation=activation, m=m)
    if activation == "relu":
        assert (y >= 0).all()
    elif activation == "tanh":
        assert (np.abs(y) <= 1).all()


def test_default_tile_is_4(rng):
    x, w = uniform(rng, (2, 8, 13, 13)), uniform(rng, (16, 8, 5, 5))
    np.testing.assert_array_equal(gpuopt.conv2d(x, w, variant=VARIANT), gpuopt.conv2d(x, w, variant=VARIANT, m=4))
    assert not np.array_equal(gpuopt.conv2d(x, w, variant=VARIANT, m=2), gpuopt.conv2d(x, w, variant=VARIANT, m=4))


@pytest.mark.parametrize("m", TILES)
def test_device_arrays_and_reproducible(rng, m):
    """Device in, device out, bitwise equal to the NumPy path and run to run; a device output chains into the
    next (padded 3x3) layer."""
    x, w, bias = uniform(rng, (6, 5, 15, 13)), uniform(rng, (9, 5, 3, 3)), uniform(rng, 9)
    w2 = uniform(rng, (7, 9, 5, 5))
    kw = dict(padding=1, bias=bias, activation="tanh", variant=VARIANT, m=m)
    y = gpuopt.conv2d(x, w, **kw)
    np.testing.assert_array_equal(y, gpuopt.conv2d(x, w, **kw))
    dx, dw, dbias = gpuopt.to_device(x), gpuopt.to_device(w), gpuopt.to_device(bias)
    dy = gpuopt.conv2d(dx, dw, **{**kw, "bias": dbias})
    assert isinstance(dy, gpuopt.DeviceArray) and dy.shape == y.shape and dy.dtype == np.float32
    np.testing.assert_array_equal(dy.numpy(), y)
    dz = gpuopt.conv2d(dy, gpuopt.to_device(w2), padding=2, variant=VARIANT, m=m)
    assert isinstance(dz, gpuopt.DeviceArray)
    ref = gpuopt.conv2d(gpuopt.conv2d(x, w, padding=1, bias=bias, activation="tanh", variant="cpu"), w2, padding=2,
                        variant="cpu")
    assert rel_fro(dz.numpy(), ref) < 1e-5


@pytest.mark.parametrize("stride,w_shape,match", [
    (2, (4, 3, 3, 3), "stride must be 1"),
    (1, (4, 3, 1, 1), "filters must be 3x3 or 5x5"),
    (1, (4, 3, 3, 5), "filters must be 3x3 or 5x5"),
    (1, (4, 3, 7, 7), "filters must be 3x3 or 5x5"),
])
def test_refuses_other_shapes_naming_why(rng, stride, w_shape, match):
    with pytest.raises(ValueError, match=match):
        gpuopt.conv2d(uniform(rng, (1, 3, 16, 16)), uniform(rng, w_shape), stride=stride, variant=VARIANT)
    with pytest.raises(ValueError, match="m"):
        gpuopt.conv2d(uniform(rng, (1, 3, 16, 16)), uniform(rng, (4, 3, 3, 3)), variant=VARIANT, m=3)


def test_launcher_rejects_bad_arguments_before_launch(rng):
    more = [("stride must be 1", (1, 2, 5, 5, 3, 3, 3, 2, 1, 0, 0), {}),
            ("filters must be 3x3 or 5x5", (1, 2, 5, 5, 3, 1, 1, 1, 1, 0, 0), {}),
            (r"m must be 0 \(auto\), 2 or 4, got 3", LAUNCH_GOOD, {"m": 3})]
    check_launcher_rejects_bad_arguments(cuda().conv2d_winograd, rng, more=more, what=VARIANT, m=0)


def test_kernels_do_not_spill():
    infos = cuda().conv2d_winograd_kernel_info()
    # the chunked blocks: F(4,5) K > 16 both ways (tf32x3, fma), F(4,5) K <= 16, F(2,5), F(4,3), F(2,3); then the
    # resident-V F(4,5) block (C <= 32)
    assert len(infos) == 7
    assert sum("resident" in info["kernel"] for info in infos) == 1
    for info in infos:
        assert info["local_bytes"] == 0, f"{info['kernel']}: {info['local_bytes']} bytes of stack/spills"
        limit = 255 if info["threads"] <= 256 else 128  # one block per SM: 65,536 registers a block
        assert 0 < info["registers"] <= limit and info["max_blocks_per_sm"] >= 1, info


# (N, C, H, W, K, padding): the resident-V block's paths (C <= 32, K > 16): one image, C over 1-4 chunks with a
# partial last one, K over 1-3 map blocks with a partial last one, ragged tiles and a partial last block of tiles,
# padding 0-2; then C = 33 (past the resident limit: the chunked block).
RESIDENT = [(1, 20, 9, 11, 40, 2), (2, 32, 12, 12, 70, 0), (5, 3, 7, 13, 17, 1), (3, 8, 16, 9, 33, 2),
            (2, 33, 10, 10, 24, 1)]


@pytest.mark.parametrize("n,c,h,w,k,pad", RESIDENT, ids=str)
def test_resident_block_shapes(rng, n, c, h, w, k, pad):
    check_shape(rng, VARIANT, (n, c, h, w, k, 5, 5, 1, pad), m=4)
    x = rng.uniform(0, 1, (n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((k, c, 5, 5)) / np.sqrt(c * 25)).astype(np.float32)
    y = gpuopt.conv2d(x, wt, padding=pad, variant=VARIANT)
    ref = gpuopt.conv2d(x, wt, padding=pad, variant="cpu").astype(np.float64)
    assert 0 < rel_fro(y, ref) <= ERROR_BOUNDS[(4, 5)]


def test_auto_fast_picks_winograd_and_precise_does_not(rng):
    x = rng.uniform(0, 1, (1024, 32, 12, 12)).astype(np.float32)  # N*P*Q = 65536
    w = (rng.standard_normal((64, 32, 5, 5)) / np.sqrt(800)).astype(np.float32)
    ref = gpuopt.conv2d(x[:4], w, variant="cpu").astype(np.float64)
    fast = gpuopt.conv2d(x, w, variant="auto", algorithms="fast")
    np.testing.assert_array_equal(fast, gpuopt.conv2d(x, w, variant=VARIANT))
    assert rel_fro(fast[:4], ref) <= ERROR_BOUNDS[(4, 5)]
    precise = gpuopt.conv2d(x, w, variant="auto")
    assert rel_fro(precise[:4], ref) < 1e-6
    assert not np.array_equal(precise, fast)


def test_autotune_precision_classes_are_cached_apart(rng):
    """autotune=True: the precise class never times winograd; the fast class may pick it; each caches its own."""
    from gpuopt.conv import autotune_cache, clear_autotune_cache

    clear_autotune_cache()
    x = rng.uniform(0, 1, (8, 16, 20, 20)).astype(np.float32)
    w = (rng.standard_normal((32, 16, 5, 5)) / 20).astype(np.float32)
    ref = gpuopt.conv2d(x, w, variant="cpu").astype(np.float64)
    _, t = gpuopt.conv2d(x, w, variant="auto", autotune=True, timing=True)
    assert "autotune_winograd_ms" not in t.details
    y, t = gpuopt.conv2d(x, w, variant="auto", autotune=True, algorithms="fast", timing=True)
    assert "autotune_winograd_ms" in t.details and rel_fro(y, ref) <= ERROR_BOUNDS[(4, 5)]
    cache = autotune_cache()
    assert sorted(key[-1] for key in cache) == ["fast", "precise"]
    assert next(v for k, v in cache.items() if k[-1] == "precise")[0] != "winograd"
    clear_autotune_cache()


@pytest.mark.parametrize("m", TILES)
def test_misaligned_base_pointers(rng, m):
    """x, w, bias and y one float off a 16-byte boundary: x is gathered by 4-byte copies, w only read by the filter
    transform (its output, U, is the kernel's own 16-byte-aligned scratch), y and bias by scalars."""
    x, w, bias = uniform(rng, (2, 5, 14, 11)), uniform(rng, (20, 5, 5, 5)), uniform(rng, 20)
    y = misaligned_empty(gpuopt.conv2d_output_shape(x.shape, w.shape, 1, 2))
    dx, dw, db = misaligned_copy(x), misaligned_copy(w), misaligned_copy(bias)
    cuda().conv2d_winograd(conv_call(cuda(), dx.ptr, dw.ptr, db.ptr, y.ptr, (2, 5, 14, 11, 20, 5, 5, 1, 1, 2, 2),
                                     "relu"), m=m)
    check_against_cpu(y.numpy(), x, w, padding=2, bias=bias, activation="relu", what="misaligned")
