"""The GEMM-based conv2d variants (unroll, implicit_gemm, implicit_gemm_fast) in the registry: names, reports,
parameters, defaults, and the rejections that need no GPU (parameters, then the launchers' host-side checks of
the index ranges, before anything touches the device; the launchers run the same checks before any CUDA call)."""

from types import SimpleNamespace

import pytest

import gpuopt
from conftest import cuda_build, cuda_module_without_gpu, fake_conv_call, needs_cuda_build, passes_host_checks
from gpuopt import registry
from gpuopt._ext import kernel_choices
from gpuopt.conv import Conv2dProblem
from gpuopt.conv.gemm import unroll_chunk_images

EXPECTED = {
    "unroll": ("ece408-fashion", {"gemm": "async"}),
    "implicit_gemm": ("ece408-mnist", {"tile": 16}),
    "implicit_gemm_fast": ("gpuopt", {"tile": "64x64x8"}),
}
# The allowed values the kernels dispatch on: C++'s tables (csrc/conv/conv2d_choices.hpp), read from the export,
# not a copy (tests/test_choices.py checks the registry's Params against the same tables).
_CHOICES = kernel_choices()
ALLOWED = {
    ("unroll", "gemm"): _CHOICES["conv2d/unroll/gemm"]["allowed"],
    ("implicit_gemm", "tile"): (16, 32),
    ("implicit_gemm_fast", "tile"): _CHOICES["conv2d/implicit_gemm_fast/tile"]["allowed"],
}
LIMIT = 2**31 - 1024


def table():
    return gpuopt.variants("conv2d")


def test_variants_registered_after_the_report_families():
    names = list(table())
    order = [names.index(name) for name in EXPECTED]
    assert order == sorted(order), "simple to fast: unroll, implicit_gemm, implicit_gemm_fast"
    assert names.index("basic") < order[0]
    assert names.index("tiled_corner_turn") < order[0], "registered after the ECE408 Fashion-MNIST family"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_variant_metadata(name):
    report, defaults = EXPECTED[name]
    v = table()[name]
    assert v.op == "conv2d" and v.name == name
    assert v.needs_cuda and v.report == report and v.description
    assert v.defaults() == defaults
    for param in v.params.values():
        assert param.allowed == ALLOWED[(name, param.name)] and param.doc
    assert not v.available or gpuopt.cuda_available()
    assert name in str(v)


@pytest.mark.parametrize("name,param,bad", [
    ("unroll", "gemm", ["cublas", "ASYNC", "vectorized", 1, None]),
    ("implicit_gemm", "tile", [8, 64, 0, True, 16.0, "16"]),
    ("implicit_gemm_fast", "tile", ["auto", "128x256x32", "64x64x16", 64, "64X64X8"]),
])
def test_parameters_validated_before_the_gpu_check(name, param, bad):
    for value in bad:
        with pytest.raises(ValueError, match=rf"conv2d/{name}: parameter {param}=.* is not allowed"):
            registry.resolve("conv2d", name, {param: value})
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['block_size'\]"):
        registry.resolve("conv2d", name, {"block_size": 128})
    for good in ALLOWED[(name, param)]:
        _, resolved = registry.resolve("conv2d", name, {param: good}, require_device=False)
        assert resolved == {param: good} and type(resolved[param]) is type(good)
        if not gpuopt.cuda_available():
            with pytest.raises(RuntimeError, match=f"conv2d/{name} needs a CUDA GPU"):
                registry.resolve("conv2d", name, {param: good})


def test_unroll_scratch_budget_is_not_a_registry_parameter():
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['scratch_limit_bytes'\]"):
        registry.resolve("conv2d", "unroll", {"scratch_limit_bytes": 1 << 20})


def problem(x_shape, w_shape, stride=(1, 1), padding=(0, 0)):
    """A Conv2dProblem over shape-only stand-ins (no memory: the shapes may be enormous)."""
    return Conv2dProblem(SimpleNamespace(shape=x_shape), SimpleNamespace(shape=w_shape), None, stride, padding, "none")


IMPLICIT = ["implicit_gemm", "implicit_gemm_fast"]


def defaults(name):
    return {p.name: p.default for p in table()[name].params.values()}


@needs_cuda_build
@pytest.mark.parametrize("name", list(EXPECTED))
@pytest.mark.parametrize("x_shape,w_shape,match", [
    ((1, 2**16, 256, 256), (1, 2**16, 2**8, 2**8), r"C\*R\*S = 65536\*256\*256 must be < 2\^31 - 1024"),
    ((1, 1, 1, 1), (2**31, 1, 1, 1), r"K = 2147483648 must be < 2\^31 - 1024"),
    ((1, 2, 2**15, 2**15), (1, 2, 1, 1), r"C\*H\*W = 2\*32768\*32768 must be < 2\^31"),
    ((1, 1, 50000, 50000), (1, 1, 1, 1), r"P\*Q = 50000\*50000 must be < 2\^31 - 1024"),
], ids=["CRS", "K", "CHW", "PQ"])
def test_index_ranges_rejected_before_touching_the_device(name, x_shape, w_shape, match):
    with pytest.raises(ValueError, match=rf"conv2d {name}: {match} \(int indices"):
        passes_host_checks("conv2d", name, problem(x_shape, w_shape), **defaults(name))


@needs_cuda_build
def test_columns_beyond_int_range_rejected_by_the_implicit_variants_only():
    # 2^20 images of 64 x 64 outputs: 2^32 columns. unroll splits the batch into GEMMs of fewer columns.
    p = problem((2**20, 1, 64, 64), (3, 1, 1, 1))
    for name in IMPLICIT:
        with pytest.raises(ValueError, match=r"N\*P\*Q = 1048576\*4096 must be < 2\^31 - 1024 \(int column indices\); "
                                             r"split"):
            passes_host_checks("conv2d", name, p, **defaults(name))
    assert passes_host_checks("conv2d", "unroll", p, gemm="async")  # passes the checks, then needs the device
    # The largest column count that is accepted: N*P*Q = 2^31 - 1025.
    ok = problem((LIMIT - 1, 1, 1, 1), (1, 1, 1, 1))
    for name in IMPLICIT:
        assert passes_host_checks("conv2d", name, ok, **defaults(name))


@needs_cuda_build
def test_naive_gemm_map_limit():
    with pytest.raises(ValueError, match=r"gemm 'naive' takes at most 1048560 maps \(K; .*\), got 1048561"):
        passes_host_checks("conv2d", "unroll", problem((1, 1, 1, 1), (1048561, 1, 1, 1)), gemm="naive")
    assert passes_host_checks("conv2d", "unroll", problem((1, 1, 1, 1), (1048560, 1, 1, 1)), gemm="naive")
    assert passes_host_checks("conv2d", "unroll", problem((1, 1, 1, 1), (1048561, 1, 1, 1)), gemm="async")


# ------------------------------------------------------------------------------------------ unroll's chunks


@needs_cuda_build  # the launcher's rule, computed on the host
def test_unroll_chunk_images():
    chunk = unroll_chunk_images
    # Fashion-MNIST conv2 (6x30x30 -> 16 maps 5x5): (150 + 16) * 26*26 floats per image.
    per_image = (150 + 16) * 26 * 26 * 4
    assert chunk((10000, 6, 30, 30), (16, 6, 5, 5)) == (1 << 30) // per_image == 2392
    assert chunk((100, 6, 30, 30), (16, 6, 5, 5)) == 100  # the whole batch in one GEMM
    # MNIST conv2 (32x12x12 -> 64 maps 5x5): (800 + 64) * 8*8 floats per image.
    assert chunk((10000, 32, 12, 12), (64, 32, 5, 5)) == (1 << 30) // ((800 + 64) * 64 * 4) == 4854
    assert chunk((7, 3, 9, 9), (5, 3, 3, 3), scratch_limit_bytes=3 * (27 + 5) * 49 * 4) == 3
    assert chunk((7, 3, 9, 9), (5, 3, 3, 3), scratch_limit_bytes=3 * (27 + 5) * 49 * 4 - 1) == 2
    assert chunk((7, 3, 9, 9), (5, 3, 3, 3), scratch_limit_bytes=1) == 1  # at least one image
    assert chunk((7, 3, 9, 9), (5, 3, 3, 3), stride=2, padding=1, scratch_limit_bytes=2 * (27 + 5) * 25 * 4) == 2
    # Never more than 2^31 - 1025 columns in one GEMM, whatever the budget.
    assert chunk((2**22, 1, 1, 1024), (1, 1, 1, 1), scratch_limit_bytes=2**62) == (LIMIT - 1) // 1024
    with pytest.raises(ValueError, match="scratch_limit_bytes must be positive"):
        chunk((1, 1, 4, 4), (1, 1, 3, 3), scratch_limit_bytes=0)
    with pytest.raises(ValueError, match="larger than the padded input"):
        chunk((1, 1, 2, 2), (1, 1, 3, 3))


@needs_cuda_build
@pytest.mark.parametrize("shape,budget", [
    ((10000, 6, 30, 30, 16, 5, 5, 1, 1, 0, 0), 1 << 30),
    ((10000, 32, 12, 12, 64, 5, 5, 1, 1, 0, 0), 1 << 30),
    ((7, 3, 9, 9, 5, 3, 3, 2, 1, 1, 0), 5000),
    ((7, 3, 9, 9, 5, 3, 3, 1, 1, 0, 0), 1),
    ((128, 832, 7, 7, 128, 1, 1, 1, 1, 0, 0), 1 << 20),
    ((2**22, 1, 1, 1024, 1, 1, 1, 1, 1, 0, 0), 2**62),
])
def test_unroll_chunk_rule_is_the_documented_one(shape, budget):
    """As many images as fit the budget at (C*R*S + K) * P*Q floats each, at least 1, at most N, never more than
    2^31 - 1025 columns (gpuopt.conv.gemm's docstring), computed here independently of the C++."""
    n, c, h, w, k, r, s, u, v, ph, pw = shape
    p, q = (h + 2 * ph - r) // u + 1, (w + 2 * pw - s) // v + 1
    expected = max(1, min(max(1, budget // 4 // ((c * r * s + k) * p * q)), (LIMIT - 1) // (p * q), n))
    assert unroll_chunk_images((n, c, h, w), (k, c, r, s), (u, v), (ph, pw), budget) == expected
    assert cuda_build().conv2d_unroll_chunk_images(cuda_build().Conv2dShape(*shape),
                                                   scratch_limit_bytes=budget) == expected


@pytest.mark.skipif(cuda_module_without_gpu() is None,
                    reason="needs the CUDA module built and no usable GPU (tests/conv/test_gpu_gemm.py checks the "
                           "launchers with real device arrays)")
def test_launchers_validate_before_any_cuda_call():
    cuda = cuda_module_without_gpu()
    good = (1, 2, 9, 9, 3, 3, 3, 1, 1, 0, 0)  # every call below is rejected before a launch

    def call(x, shape, activation="none"):
        return fake_conv_call(cuda, shape, activation, x=x)

    calls = {"conv2d_unroll": {"gemm": "async"}, "conv2d_implicit_gemm": {"tile": 16},
             "conv2d_implicit_gemm_fast": {"tile": "64x64x8"}}
    for name, kw in calls.items():
        fn = getattr(cuda, name)
        with pytest.raises(ValueError, match="must be device pointers"):
            fn(call(0, good), **kw)
        with pytest.raises(ValueError, match="filter larger than the padded input"):
            fn(call(256, (1, 2, 5, 5, 3, 7, 3, 1, 1, 0, 0)), **kw)
        with pytest.raises(ValueError, match="activation must be"):
            fn(call(256, good, "sigmoid"), **kw)
        with pytest.raises(ValueError, match=r"C\*R\*S = 65536\*256\*256 must be < 2\^31 - 1024"):
            fn(call(256, (1, 2**16, 256, 256, 1, 256, 256, 1, 1, 0, 0)), **kw)
        with pytest.raises(ValueError, match=r"C\*H\*W = 2\*32768\*32768 must be < 2\^31"):
            fn(call(256, (1, 2, 2**15, 2**15, 1, 1, 1, 1, 1, 0, 0)), **kw)
    for name in ("conv2d_implicit_gemm", "conv2d_implicit_gemm_fast"):
        with pytest.raises(ValueError, match=r"N\*P\*Q = 1048576\*4096 must be < 2\^31 - 1024"):
            getattr(cuda, name)(call(256, (2**20, 1, 64, 64, 3, 1, 1, 1, 1, 0, 0)), **calls[name])
    with pytest.raises(ValueError, match="tile must be 16 or 32"):
        cuda.conv2d_implicit_gemm(call(256, good), tile=64)
    with pytest.raises(ValueError, match="conv2d implicit_gemm_fast: tile must be '64x64x8', .* got 'auto'"):
        cuda.conv2d_implicit_gemm_fast(call(256, good), tile="auto")
    with pytest.raises(ValueError, match="gemm must be 'async', 'tf32x3', 'tf32x3_wgmma', 'warptile', 'shared' or 'naive'"):
        cuda.conv2d_unroll(call(256, good), gemm="cublas")
    with pytest.raises(ValueError, match="scratch_limit_bytes must be positive"):
        cuda.conv2d_unroll(call(256, good), gemm="async", scratch_limit_bytes=0)
    with pytest.raises(ValueError, match="gemm 'naive' takes at most 1048560 maps"):
        cuda.conv2d_unroll(call(256, (1, 1, 1, 1, 1048561, 1, 1, 1, 1, 0, 0)), gemm="naive")
