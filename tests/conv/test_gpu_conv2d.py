"""conv2d GPU variants against the CPU reference (outputs poisoned by conftest)."""

import numpy as np
import pytest

import gpuopt
from conftest import relative_error
from .cases import (AWKWARD_SHAPES, CS6235, ECE408, VALID_STRIDE1_ONLY, check_device_arrays,
                    check_launcher_rejects_bad_arguments, refusal, run_and_check, uniform)

pytestmark = pytest.mark.gpu

GPU_VARIANTS = [name for name, v in gpuopt.variants("conv2d").items() if v.needs_cuda]
# Not bitwise reproducible: float atomics (tiled_channels); cuDNN promises nothing.
NONDETERMINISTIC = {"tiled_channels", "cudnn"}
HAS_CUDNN = "cudnn" in gpuopt.variants("conv2d")
TRANSFORM_ALGORITHMS = {"FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"}
CUDNN_ALGORITHMS = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT"} | TRANSFORM_ALGORITHMS

# Variants that take one kind of layer only (the generic problems below get one of that kind: problem_for).
SHAPE_LIMITED = ("depthwise", "pointwise_tf32x3")


def problem_for(variant, n, c, hw, k):
    """(x shape, w shape, keyword arguments) of an n x c x hw x hw -> k problem that ``variant`` takes: a 3x3
    filter, padding 1 (0 for the valid-only variants), a 1x1 filter for pointwise_tf32x3, groups = C (K = 2C)
    for depthwise."""
    if variant == "pointwise_tf32x3":
        return (n, c, hw, hw), (k, c, 1, 1), {}
    if variant == "depthwise":
        return (n, c, hw, hw), (2 * c, 1, 3, 3), dict(padding=1, groups=c)
    return (n, c, hw, hw), (k, c, 3, 3), dict(padding=0 if variant in VALID_STRIDE1_ONLY else 1)


# The shared awkward shapes, plus 1x1 filters and C = 832 with 3x3 and 1x1 filters.
SHAPES = AWKWARD_SHAPES + [
    (2, 7, 9, 9, 3, 1, 1, 1, 0),
    (2, 832, 9, 9, 5, 3, 3, 1, 1),
    (3, 832, 7, 7, 13, 1, 1, 1, 0),
]

def check_against_cpu(variant, x, w, *, stride=1, padding=0, bias=None, activation=None, images=None):
    """Run ``variant`` on the whole batch; compare with the CPU reference on ``images`` (all by default), the
    error relative to the sums of |terms| (cases.check_against_cpu)."""
    # unroll_constmem's weights live in the 64 KB constant bank: larger filter banks are refused up front;
    # shape-limited variants refuse the problems they do not compute (cases.refusal).
    refused = "64 KB|65536" if variant == "unroll_constmem" and w.nbytes > 65536 else refusal(
        variant, w.shape, stride, padding, x.shape)
    if refused:
        with pytest.raises(ValueError, match=refused):
            gpuopt.conv2d(x, w, stride=stride, padding=padding, bias=bias, activation=activation, variant=variant)
        return None
    return run_and_check(variant, x, w, stride=stride, padding=padding, bias=bias, activation=activation,
                         images=images)


@pytest.mark.parametrize("variant", GPU_VARIANTS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_cpu_reference(rng, variant, shape):
    n, c, h, w, k, r, s, stride, padding = shape
    check_against_cpu(variant, uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s)), stride=stride, padding=padding)


@pytest.mark.parametrize("variant", GPU_VARIANTS)
@pytest.mark.parametrize("conf", list(CS6235))
def test_cs6235_configurations(rng, variant, conf):
    n, c, k, h, w, r, s, u, v = CS6235[conf]
    x, wt = uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s))
    # N = 128: the CPU reference checks the first, the last and one random image (every
    # output is still checked for poison); the GPU runs the whole batch.
    images = None if n == 1 else [0, int(rng.integers(1, n - 1)), n - 1]
    check_against_cpu(variant, x, wt, stride=(u, v), images=images)


@pytest.mark.parametrize("variant", GPU_VARIANTS)
@pytest.mark.parametrize("layer", list(ECE408))
def test_ece408_layers(rng, variant, layer):
    x_shape, w_shape = ECE408[layer]
    check_against_cpu(variant, uniform(rng, x_shape), uniform(rng, w_shape))


@pytest.mark.parametrize("variant", GPU_VARIANTS)
@pytest.mark.parametrize("activation", [None, "relu", "tanh"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("shape", [(2, 3, 11, 13, 5, 3, 3, 1, 1), (3, 832, 7, 7, 13, 1, 1, 1, 0),
                                   (1, 2, 8, 8, 2, 3, 3, 4, 3)], ids=str)
def test_bias_and_activation(rng, variant, activation, with_bias, shape):
    n, c, h, w, k, r, s, stride, padding = shape
    bias = uniform(rng, k) if with_bias else None
    y = check_against_cpu(variant, uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s)), stride=stride,
                          padding=padding, bias=bias, activation=activation)
    if y is None:  # refused up front (checked inside)
        return
    if activation == "relu":
        assert (y >= 0).all()
    elif activation == "tanh":
        assert (np.abs(y) <= 1).all()


# winograd: its chained second layer here is 2x2 at stride 2, which it refuses; depthwise and pointwise_tf32x3
# take neither layer here: each of the three has its own device-array test. (direct_fused gets a 3x3 stride-1
# second layer: cases.check_device_arrays.)
@pytest.mark.parametrize("variant", [v for v in GPU_VARIANTS if v not in ("winograd",) + SHAPE_LIMITED])
def test_device_arrays_in_device_array_out(rng, variant):
    check_device_arrays(rng, variant, exact=variant not in NONDETERMINISTIC)


@pytest.mark.parametrize("variant", [v for v in GPU_VARIANTS if v not in NONDETERMINISTIC])
def test_deterministic_variants_are_bitwise_reproducible(rng, variant):
    x_shape, w_shape, kw = problem_for(variant, 3, 40, 11, 20)
    x, w = uniform(rng, x_shape), uniform(rng, w_shape)
    y1 = gpuopt.conv2d(x, w, variant=variant, **kw)
    np.testing.assert_array_equal(y1, gpuopt.conv2d(x, w, variant=variant, **kw))


@pytest.mark.parametrize("variant", GPU_VARIANTS)
def test_timing_record(rng, variant):
    x_shape, w_shape, kw = problem_for(variant, 4, 16, 32, 32)
    x, w = uniform(rng, x_shape), uniform(rng, w_shape)
    y, t = gpuopt.conv2d(x, w, variant=variant, timing=True, **kw)
    assert isinstance(t, gpuopt.Timing) and t.device == "gpu"
    assert t.h2d_ms > 0 and t.kernel_ms > 0 and t.d2h_ms > 0
    assert t.total_ms == pytest.approx(t.h2d_ms + t.kernel_ms + t.d2h_ms)
    assert relative_error(y, gpuopt.conv2d(x, w, variant="cpu", **kw)) < 1e-5
    dy, td = gpuopt.conv2d(gpuopt.to_device(x), gpuopt.to_device(w), variant=variant, timing=True, **kw)
    assert isinstance(dy, gpuopt.DeviceArray)
    assert td.h2d_ms == 0 and td.d2h_ms == 0 and td.kernel_ms > 0


def test_launchers_reject_bad_shapes_before_launch(rng):
    """Direct calls of the bindings (bypassing gpuopt's checks) fail with ValueError, and
    the process stays usable."""
    from gpuopt._ext import cuda_module

    for name, params in (("conv2d_basic", {}), ("conv2d_cudnn", {"algorithms": "precise"})):
        if hasattr(cuda_module(), name):
            check_launcher_rejects_bad_arguments(getattr(cuda_module(), name), rng, what=name, **params)


@pytest.mark.skipif(not HAS_CUDNN, reason="gpuopt was built without cuDNN")
def test_cudnn_algorithm_is_cached_and_stable(rng):
    x, w = uniform(rng, (2, 16, 20, 20)), uniform(rng, (8, 16, 3, 3))
    first = gpuopt.conv.cudnn_algorithm(x.shape, w.shape, stride=1, padding=1)
    assert first in CUDNN_ALGORITHMS
    y1 = gpuopt.conv2d(x, w, padding=1, variant="cudnn")
    assert gpuopt.conv.cudnn_algorithm(x.shape, w.shape, stride=1, padding=1) == first
    assert gpuopt.conv.cudnn_algorithm(x.shape, w.shape, stride=(1, 1), padding=(1, 1)) == first
    y2 = gpuopt.conv2d(x, w, padding=1, variant="cudnn")
    np.testing.assert_allclose(y2, y1, rtol=1e-6, atol=1e-6)
    assert relative_error(y1, gpuopt.conv2d(x, w, padding=1, variant="cpu")) < 1e-5
    # Every CS6235 configuration has an algorithm, the same one when asked again.
    for n, c, k, h, wd, r, s, u, v in CS6235.values():
        name = gpuopt.conv.cudnn_algorithm((n, c, h, wd), (k, c, r, s), stride=(u, v))
        assert name in CUDNN_ALGORITHMS
        assert gpuopt.conv.cudnn_algorithm((n, c, h, wd), (k, c, r, s), stride=(u, v)) == name
    with pytest.raises(ValueError, match="input channels"):
        gpuopt.conv.cudnn_algorithm((1, 3, 8, 8), (4, 2, 3, 3))


def test_cudnn_registered_iff_built_with_cudnn():
    assert HAS_CUDNN == bool(gpuopt.build_info()["cudnn"])
    if HAS_CUDNN:
        v = gpuopt.variants("conv2d")["cudnn"]
        assert v.needs_cuda and v.report == "library"
        assert list(v.params) == ["algorithms"] and v.params["algorithms"].default == "precise"


@pytest.mark.skipif(not HAS_CUDNN, reason="gpuopt was built without cuDNN")
@pytest.mark.parametrize("layer", sorted(ECE408))
def test_cudnn_precise_never_picks_a_transform_algorithm(rng, layer):
    # Under compute-sanitizer cuDNN's timings change and it once picked a transform
    # algorithm with 3e-4 relative error on mnist-conv2: "precise" must exclude them.
    x_shape, w_shape = ECE408[layer]
    assert gpuopt.conv.cudnn_algorithm(x_shape, w_shape) not in TRANSFORM_ALGORITHMS
    check_against_cpu("cudnn", uniform(rng, x_shape), uniform(rng, w_shape))


@pytest.mark.skipif(not HAS_CUDNN, reason="gpuopt was built without cuDNN")
@pytest.mark.parametrize("layer", sorted(ECE408))
def test_cudnn_any_algorithm_is_close(rng, layer):
    x_shape, w_shape = ECE408[layer]
    x, w = uniform(rng, x_shape), uniform(rng, w_shape)
    name = gpuopt.conv.cudnn_algorithm(x_shape, w_shape, algorithms="any")
    y = gpuopt.conv2d(x, w, variant="cudnn", algorithms="any")
    ref = gpuopt.conv2d(x, w, variant="cpu")
    # FFT/Winograd round differently: 1e-3 relative at most (TF32 would be ~1e-3 too, but
    # FMA math is set, so it is never used).
    limit = 1e-3 if name in TRANSFORM_ALGORITHMS else 1e-5
    assert relative_error(y, ref) < limit, name
    with pytest.raises(ValueError, match=r"algorithms=.*not allowed"):
        gpuopt.conv2d(x, w, variant="cudnn", algorithms="fastest")


@pytest.mark.skipif(not HAS_CUDNN, reason="gpuopt was built without cuDNN")
def test_algorithms_fast_on_the_default_variant(rng):
    # variant=None runs cuDNN, which takes auto's "fast" class: the same search as its older name "any"
    x, w = uniform(rng, (4, 16, 20, 20)), uniform(rng, (8, 16, 5, 5))
    y = gpuopt.conv2d(x, w, algorithms="fast")
    assert y.tobytes() == gpuopt.conv2d(x, w, variant="cudnn", algorithms="any").tobytes()
    assert gpuopt.conv.cudnn_algorithm(x.shape, w.shape, algorithms="fast") == \
        gpuopt.conv.cudnn_algorithm(x.shape, w.shape, algorithms="any")
    assert relative_error(y, gpuopt.conv2d(x, w, variant="cpu")) < 1e-3
