"""conv2d `auto` on the GPU: correct on every heuristic branch; autotune caches a winner; depthwise layers run on
``depthwise``'s rows kernel where it takes them, other grouped and dilated layers on cuDNN."""

import numpy as np
import pytest

import gpuopt
import oracles
from conftest import relative_error
from gpuopt.conv import auto_choice, autotune_cache, clear_autotune_cache

pytestmark = pytest.mark.gpu


def check(rng, x_shape, w_shape, stride=1, padding=0, **kwargs):
    x = rng.uniform(-1, 1, x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, w_shape).astype(np.float32)
    y = gpuopt.conv2d(x, w, stride=stride, padding=padding, variant="auto", **kwargs)
    ref = gpuopt.conv2d(x, w, stride=stride, padding=padding, variant="cpu")
    scale = gpuopt.conv2d(np.abs(x), np.abs(w), stride=stride, padding=padding, variant="cpu")
    assert np.isfinite(y).all()
    assert np.linalg.norm(y.astype(np.float64) - ref) / np.linalg.norm(scale) < 1e-5
    return x, w


@pytest.mark.parametrize("x_shape,w_shape,stride,expected", [
    ((1, 83, 7, 7), (12, 83, 1, 1), 1, "unroll"),
    ((3, 1, 20, 20), (6, 1, 5, 5), 1, "tiled_unrolled"),
    ((1, 3, 30, 30), (20, 3, 3, 3), 2, "implicit_gemm"),
    ((120, 6, 30, 30), (16, 6, 5, 5), 1, "implicit_gemm_tf32x3"),  # 150 taps, K = 16, the image staged whole
    ((40, 8, 48, 48), (16, 8, 5, 5), 1, "direct_fused"),           # ... too large to stage
    ((32, 256, 14, 14), (512, 256, 1, 1), 1, "pointwise_tf32x3"),  # wide 1x1 (the H200 is a Hopper GPU)
    ((32, 256, 28, 28), (512, 256, 1, 1), 2, "pointwise_tf32x3"),  # ... strided
    ((32, 64, 28, 28), (64, 64, 1, 1), 1, "implicit_gemm_fast"),   # narrow 1x1, many pixels
    ((10, 64, 120, 120), (96, 64, 3, 3), 2, "implicit_gemm_fast"),  # few pixels, 2**30+ MACs
    ((10, 128, 60, 60), (128, 128, 3, 3), 2, "implicit_gemm_tf32x3_wgmma"),  # 128-256 maps, windows (Hopper)
    ((32, 512, 28, 28), (128, 512, 1, 1), 1, "implicit_gemm_tf32x3_wgmma"),  # ... 1x1, C >= 256
    ((10, 256, 30, 30), (256, 256, 3, 3), 2, "unroll_tf32x3"),     # wide, with a window (Hopper)
    ((4, 3, 70, 70), (64, 3, 7, 7), 2, "implicit_gemm_fast"),      # a strided stem: 147 taps, 64 maps
    ((40, 1, 48, 48), (6, 1, 5, 5), 1, "direct_fused"),            # one channel
    ((120, 5, 30, 30), (16, 5, 5, 5), 1, "direct_regblock"),       # 125 taps, K = 16
    ((200, 3, 41, 41), (24, 3, 3, 3), 2, "direct_regblock"),       # 27 taps, stride 2
    ((120, 8, 60, 60), (16, 8, 5, 5), 2, "unroll_nk"),             # 200 taps, K = 16, strided
    ((100, 20, 61, 61), (24, 20, 3, 3), 2, "unroll_nk"),           # 180 taps, stride 2
    ((60, 12, 40, 40), (32, 12, 5, 5), 1, "direct_fused"),         # valid stride-1 5x5, K >= 32
    ((300, 8, 20, 20), (64, 8, 3, 3), 1, "direct_fused"),          # 3x3
    ((60, 12, 40, 40), (32, 12, 7, 7), 1, "implicit_gemm_fast"),   # tile 32x128x8 (7x7: not direct_fused)
    ((400, 8, 20, 20), (64, 8, 7, 7), 1, "implicit_gemm_fast"),    # tile 64x128x8
])
def test_each_heuristic_branch_is_correct(rng, x_shape, w_shape, stride, expected):
    assert auto_choice(x_shape, w_shape, stride)[0] == expected
    check(rng, x_shape, w_shape, stride)


def test_autotune_times_once_and_caches(rng):
    clear_autotune_cache()
    x_shape, w_shape = (2, 3, 17, 19), (8, 3, 3, 3)
    x, w = check(rng, x_shape, w_shape, padding=1, autotune=True)
    cache = autotune_cache()
    assert len(cache) == 1
    (key, (name, params)), = cache.items()
    assert key[:2] == (x_shape, w_shape) and name in gpuopt.variants("conv2d") and name not in ("cudnn", "cpu", "auto")
    assert auto_choice(x_shape, w_shape, padding=1) == (name, params)
    # The second call runs the cached winner: no timing details this time.
    _, t = gpuopt.conv2d(x, w, padding=1, variant="auto", autotune=True, timing=True)
    assert not any(k.startswith("autotune_") for k in t.details)
    clear_autotune_cache()
    _, t = gpuopt.conv2d(x, w, padding=1, variant="auto", autotune=True, timing=True)
    timed = {k for k in t.details if k.startswith("autotune_")}
    assert "autotune_basic_ms" in timed and len(timed) >= 10
    clear_autotune_cache()


def test_autotune_skips_variants_that_reject_the_shape(rng):
    clear_autotune_cache()
    # 128x832x1x1 filters (426 KB) do not fit unroll_constmem's 64 KB: it must be skipped.
    check(rng, (1, 832, 7, 7), (128, 832, 1, 1), autotune=True)
    assert next(iter(autotune_cache().values()))[0] != "unroll_constmem"
    clear_autotune_cache()


@pytest.mark.parametrize("shape, expected", [
    ((16, 24, 56, 56, 1, 3, 2, 1), "depthwise"),   # (N, C, H, W, M, R, stride, dilation): MobileNetV2's 3x3/2
    ((8, 64, 46, 46, 1, 7, 1, 1), "depthwise"),    # ConvNeXt's 7x7 (2**20 inputs and more)
    ((2, 16, 30, 30, 1, 7, 1, 1), "cudnn"),        # 28,800 inputs: cuDNN's
    ((8, 64, 46, 46, 1, 3, 1, 2), "cudnn"),        # dilated
])
def test_auto_runs_depthwise_layers_on_the_rows_kernel(rng, monkeypatch, shape, expected):
    from gpuopt.conv import auto
    if "cudnn" not in gpuopt.variants("conv2d"):
        pytest.skip("built without cuDNN")
    n, c, h, w, m, r, stride, dilation = shape
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c * m, 1, r, r)).astype(np.float32)
    seen, resolve = [], auto.resolve
    monkeypatch.setattr(auto, "resolve", lambda op, name, params, **kw: seen.append(name) or resolve(op, name, params,
                                                                                                    **kw))
    y = gpuopt.conv2d(x, wt, stride=stride, padding=r // 2, dilation=dilation, groups=c, variant="auto")
    assert seen == [expected]
    ref = oracles.conv2d(x, wt, None, (stride, stride), (r // 2, r // 2), "none", (dilation, dilation), c)
    assert relative_error(y, ref) < 1e-5
