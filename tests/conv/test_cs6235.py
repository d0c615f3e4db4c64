"""The CS6235 conv2d variants' registry entries, parameter checks and plans: no GPU needed
(parameters are validated before the GPU is looked for; plans are host logic)."""

import re

import numpy as np
import pytest

import gpuopt
from conftest import conv_call, cuda_build, needs_cuda_build
from gpuopt._ext import kernel_limits
from gpuopt.conv import unroll_jam as cs

BLOCK_SIZES = [32, 64, 128, 256, 512, 1024]

# variant -> (binding, {param: (default, allowed)})
EXPECTED = {
    "plain": ("conv2d_plain", {"block_size": (128, BLOCK_SIZES)}),
    "reorder": ("conv2d_reorder", {"block_size": (128, BLOCK_SIZES)}),
    "unroll_k": ("conv2d_unroll_k", {"block_size": (128, BLOCK_SIZES), "unroll": (8, [2, 4, 8, 16]),
                                     "loop_order": ("rsc", ["crs", "rsc"])}),
    "unroll_c": ("conv2d_unroll_c", {"block_size": (128, BLOCK_SIZES), "unroll": (4, [0, 2, 4, 8, 16])}),
    "unroll_nk": ("conv2d_unroll_nk", {"block_size": (128, BLOCK_SIZES)}),
    "shared": ("conv2d_shared", {"block_size": (128, BLOCK_SIZES)}),
    "general": ("conv2d_general", {"block_size": (128, BLOCK_SIZES)}),
}

def small_problem():
    return np.ones((1, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32)


def test_every_variant_is_registered_with_its_parameters():
    table = gpuopt.variants("conv2d")
    for name, (_, params) in EXPECTED.items():
        v = table[name]
        assert v.report == "cs6235" and v.needs_cuda and v.description
        assert list(v.params) == list(params), name
        for pname, (default, allowed) in params.items():
            p = v.params[pname]
            assert p.default == default and list(p.allowed) == allowed and p.doc, (name, pname)
        assert v.defaults() == {k: d for k, (d, _) in params.items()}


def test_registration_order_is_simple_to_fast():
    names = [n for n, v in gpuopt.variants("conv2d").items() if v.report == "cs6235"]
    assert names == list(EXPECTED)


@pytest.mark.parametrize("variant", list(EXPECTED))
def test_bad_parameter_values_are_rejected_before_the_gpu(variant):
    x, w = small_problem()
    params = EXPECTED[variant][1]
    bad = {"block_size": [0, 16, 100, 127, 2048, 128.0, True, "128", None]}
    if "unroll" in params:
        bad["unroll"] = [1, 3, 32, -2, 4.0, True] + ([0] if variant == "unroll_k" else [])
    if "loop_order" in params:
        bad["loop_order"] = ["CRS", "srk", "", 0]
    for pname, values in bad.items():
        for value in values:
            with pytest.raises(ValueError, match=rf"conv2d/{variant}: parameter {pname}=.* is not allowed; choose one"):
                gpuopt.conv2d(x, w, variant=variant, **{pname: value})


@pytest.mark.parametrize("variant", list(EXPECTED))
def test_unknown_parameters_are_rejected(variant):
    x, w = small_problem()
    others = {"unroll": 4, "loop_order": "crs", "tile_width": 16, "block": 128}
    for pname, value in others.items():
        if pname in EXPECTED[variant][1]:
            continue
        with pytest.raises(ValueError, match=rf"conv2d/{variant}: unknown parameter\(s\) \['{pname}'\]"):
            gpuopt.conv2d(x, w, variant=variant, **{pname: value})


@pytest.mark.parametrize("variant", list(EXPECTED))
def test_allowed_values_resolve(variant):
    params = EXPECTED[variant][1]
    for pname, (_, allowed) in params.items():
        for value in allowed:
            v, resolved = _resolve_without_gpu(variant, {pname: value})
            assert resolved[pname] == value and type(resolved[pname]) is type(value)
    # NumPy integers are canonicalised to the allowed Python int.
    _, resolved = _resolve_without_gpu(variant, {"block_size": np.int64(256)})
    assert resolved["block_size"] == 256 and type(resolved["block_size"]) is int


def _resolve_without_gpu(variant, params):
    from gpuopt import registry

    try:
        return registry.resolve("conv2d", variant, params)
    except RuntimeError as exc:  # no GPU here: parameters were validated first
        assert "needs a CUDA GPU" in str(exc)
        v = gpuopt.variants("conv2d")[variant]
        resolved = v.defaults()
        resolved.update({k: v.params[k].check(val, variant) for k, val in params.items()})
        return v, resolved


@pytest.mark.skipif(gpuopt.cuda_available(), reason="checks the no-GPU error; this machine has a GPU")
@pytest.mark.parametrize("variant", list(EXPECTED))
def test_valid_call_without_gpu_says_why(variant):
    x, w = small_problem()
    with pytest.raises(RuntimeError, match=rf"conv2d/{variant} needs a CUDA GPU"):
        gpuopt.conv2d(x, w, variant=variant)


@needs_cuda_build
@pytest.mark.parametrize("variant", list(EXPECTED))
def test_bindings_take_the_registry_parameters_as_keywords(variant):
    """gpuopt.conv's run function passes the resolved parameters as keyword arguments: the binding and its
    check must take exactly those names (keyword-only, required), after the call's struct (the shape)."""
    binding, params = EXPECTED[variant]
    assert gpuopt.variants("conv2d")[variant].binding == binding
    for fn, first in ((getattr(cuda_build(), binding), "args"), (getattr(cuda_build().check, binding), "shape")):
        signature = fn.__doc__.splitlines()[0]
        head, _, keywords = signature.partition(", *, ")
        assert re.findall(r"(\w+):", head) == [first]
        assert re.findall(r"(\w+):", keywords) == list(params)
        assert "=" not in keywords  # no second source of defaults


@needs_cuda_build
def test_launcher_validates_before_touching_the_gpu():
    """The C++ launcher rejects bad configurations, shapes and pointers with ValueError
    before any CUDA call, so this runs without a GPU."""
    cuda = cuda_build()
    good = (1, 2, 5, 5, 3, 3, 3, 1, 1, 0, 0)  # N C H W K R S u v ph pw
    ptrs = (1 << 20, 2 << 20, 0, 3 << 20)  # never dereferenced: every call here fails validation
    cases = [
        (cuda.conv2d_plain, dict(block_size=100), "block_size must be 32, 64, 128, 256, 512 or 1024, got 100"),
        (cuda.conv2d_plain, dict(block_size=96), "block_size must be 32, 64, .*, got 96"),  # the registry's values only
        (cuda.conv2d_plain, dict(block_size=0), "block_size must be .*, got 0"),
        (cuda.conv2d_general, dict(block_size=2048), "block_size must be .*, got 2048"),
        (cuda.conv2d_unroll_k, dict(block_size=128, unroll=3, loop_order="crs"), "unroll must be 2, 4, 8 or 16"),
        (cuda.conv2d_unroll_k, dict(block_size=128, unroll=0, loop_order="rsc"), "unroll must be 2, 4, 8 or 16"),
        (cuda.conv2d_unroll_k, dict(block_size=128, unroll=4, loop_order="scr"), "loop_order must be 'crs' or 'rsc'"),
        (cuda.conv2d_unroll_c, dict(block_size=128, unroll=1), r"unroll must be 0, 2, 4, 8 or 16, got 1"),
        (cuda.conv2d_unroll_c, dict(block_size=128, unroll=32), r"unroll must be 0, 2, 4, 8 or 16, got 32"),
    ]
    for fn, kw, match in cases:
        with pytest.raises(ValueError, match=match):
            fn(conv_call(cuda, *ptrs, good), **kw)
        with pytest.raises(ValueError, match=match):  # the same checks, before anything is copied
            getattr(cuda.check, fn.__name__)(cuda.Conv2dShape(*good), **kw)
    bad_shapes = {
        "filter larger than the padded input": (1, 2, 5, 5, 3, 7, 3, 1, 1, 0, 0),
        "stride must be positive": (1, 2, 5, 5, 3, 3, 3, 0, 1, 0, 0),
        "padding must be non-negative": (1, 2, 5, 5, 3, 3, 3, 1, 1, -1, 0),
        "every dimension must be positive": (1, 0, 5, 5, 3, 3, 3, 1, 1, 0, 0),
    }
    for match, shape in bad_shapes.items():
        for binding, params in EXPECTED.values():
            kw = {p: d for p, (d, _) in params.items()}
            with pytest.raises(ValueError, match=match):
                getattr(cuda, binding)(conv_call(cuda, *ptrs, shape), **kw)
            with pytest.raises(ValueError, match=match):
                getattr(cuda.check, binding)(cuda.Conv2dShape(*shape), **kw)
    with pytest.raises(ValueError, match="must be device pointers"):
        cuda.conv2d_shared(conv_call(cuda, 0, 2 << 20, 0, 3 << 20, good), block_size=128)
    with pytest.raises(ValueError, match="activation must be"):
        cuda.conv2d_unroll_nk(conv_call(cuda, *ptrs, good, "sigmoid"), block_size=128)
    with pytest.raises(TypeError):  # parameters are required keywords
        cuda.conv2d_unroll_k(conv_call(cuda, *ptrs, good), block_size=128)
    with pytest.raises(TypeError):
        cuda.check.conv2d_unroll_k(cuda.Conv2dShape(*good), block_size=128)


# ---------------------------------------------------------------- plans

@needs_cuda_build
def test_plans_of_the_fixed_variants():
    x_shape, w_shape = (3, 5, 13, 17), (7, 5, 3, 3)
    expect = {
        "plain": ("qpkn", 1, 1, 1, "crs", False),
        "reorder": ("qpnk", 1, 1, 1, "crs", False),
        "unroll_nk": ("qpkn", 4, 4, 1, "rsc", False),
        "shared": ("qpnk", 1, 1, 1, "rsc", True),
    }
    for variant, (mapping, ku, nu, cu, order, shared) in expect.items():
        plan = cs.cs6235_plan(x_shape, w_shape, variant=variant)
        assert (plan["mapping"], plan["k_unroll"], plan["n_unroll"], plan["c_unroll"], plan["loop_order"],
                plan["shared"]) == (mapping, ku, nu, cu, order, shared), variant
    for unroll in (2, 4, 8, 16):
        for order in ("crs", "rsc"):
            plan = cs.cs6235_plan(x_shape, w_shape, variant="unroll_k", unroll=unroll, loop_order=order)
            assert (plan["k_unroll"], plan["n_unroll"], plan["c_unroll"], plan["loop_order"]) == (unroll, 1, 1, order)
    for unroll in (0, 2, 4, 8, 16):
        plan = cs.cs6235_plan(x_shape, w_shape, variant="unroll_c", unroll=unroll)
        assert (plan["k_unroll"], plan["c_unroll"], plan["loop_order"]) == (1, max(unroll, 1), "crs")
    # Defaults come from the registry.
    assert cs.cs6235_plan(x_shape, w_shape, variant="unroll_k")["k_unroll"] == 8
    assert cs.cs6235_plan(x_shape, w_shape, variant="unroll_c")["c_unroll"] == 4


@needs_cuda_build
def test_general_switch_and_its_thresholds():
    def pick(n, c, k):
        p = cs.cs6235_plan((n, c, 9, 9), (k, c, 3, 3), variant="general")
        assert p["loop_order"] == "rsc" and p["mapping"] == "qpkn" and not p["shared"]
        return p["n_unroll"], p["k_unroll"], p["c_unroll"]

    nk, kc, k = (4, 4, 1), (1, 2, 8), (1, 2, 1)
    # The report's four configurations (cnn-gpu N C K H W R S u v).
    assert cs.cs6235_plan((1, 3, 112, 112), (64, 3, 3, 3), 2, variant="general")["k_unroll"] == 2  # conf1: k
    assert pick(1, 3, 64) == k
    assert pick(1, 832, 128) == kc  # conf2
    assert pick(128, 3, 64) == nk  # conf3
    assert pick(128, 832, 128) == nk  # conf4: N large wins over C >= 256
    # Thresholds, both sides.
    limits = kernel_limits()  # the kernels' own thresholds, read from the compiled module
    n_min, k_min, c_min = (limits[f"conv2d_general_min_{key}"] for key in ("images", "maps", "channels"))
    assert pick(n_min, 3, k_min) == nk
    assert pick(n_min - 1, 3, 64) == k
    assert pick(n_min - 1, c_min, 64) == kc
    assert pick(128, 3, k_min - 1) == k
    assert pick(128, c_min, k_min - 1) == kc
    assert pick(1, c_min - 1, 64) == k
    assert pick(1, c_min, 64) == kc
    assert str(n_min) in gpuopt.variants("conv2d")["general"].description
    assert str(c_min) in gpuopt.variants("conv2d")["general"].description


@needs_cuda_build
def test_shared_tile_sizes():
    # conf4 at 128 threads: runs of N*P*Q = 6272 groups share a map, so a block spans at
    # most 2 maps; 1x1 filters: 128 // 2 = 64 channels per tile (the report's Tilesz =
    # Blocksize values).
    p = cs.cs6235_plan((128, 832, 7, 7), (128, 832, 1, 1), variant="shared")
    assert (p["tile_channels"], p["shared_bytes"]) == (64, 2 * 64 * 4)
    # Tiles never exceed C.
    p = cs.cs6235_plan((128, 3, 112, 112), (64, 3, 3, 3), 2, variant="shared")
    assert (p["tile_channels"], p["shared_bytes"]) == (3, 2 * 3 * 9 * 4)
    # One output position per image (P = Q = 1, N = 1): every thread of a block has its own
    # map, so the tile holds block_size maps (capped by K) of one channel.
    p = cs.cs6235_plan((1, 4, 8, 8), (1025, 4, 8, 8), variant="shared", block_size=1024)
    assert (p["tile_channels"], p["shared_bytes"]) == (1, 1025 * 64 * 4)  # > 227 KB: rejected at launch
    p = cs.cs6235_plan((1, 4, 8, 8), (1025, 4, 8, 8), variant="shared", block_size=128)
    assert (p["tile_channels"], p["shared_bytes"]) == (1, 129 * 64 * 4)
    # Few maps: 5 maps x 64 taps = 320 values per channel, so 1024 // 320 = 3 channels.
    p = cs.cs6235_plan((1, 4, 8, 8), (5, 4, 8, 8), variant="shared", block_size=1024)
    assert (p["tile_channels"], p["shared_bytes"]) == (3, 3 * 5 * 64 * 4)
    for variant in ("plain", "unroll_k", "general"):
        p = cs.cs6235_plan((1, 4, 8, 8), (5, 4, 3, 3), variant=variant)
        assert (p["shared"], p["tile_channels"], p["shared_bytes"]) == (False, 0, 0)


@needs_cuda_build
def test_plan_rejects_bad_input():
    with pytest.raises(ValueError, match="CS6235 variants"):
        cs.cs6235_plan((1, 1, 5, 5), (1, 1, 3, 3), variant="basic")
    with pytest.raises(ValueError, match=r"unroll=3 is not allowed"):
        cs.cs6235_plan((1, 1, 5, 5), (1, 1, 3, 3), variant="unroll_k", unroll=3)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['unroll'\]"):
        cs.cs6235_plan((1, 1, 5, 5), (1, 1, 3, 3), variant="plain", unroll=2)
    with pytest.raises(ValueError, match="input channels"):
        cs.cs6235_plan((1, 2, 5, 5), (1, 1, 3, 3))
    with pytest.raises(ValueError, match="larger than the padded input"):
        cs.cs6235_plan((1, 1, 5, 5), (1, 1, 7, 3))
    with pytest.raises(ValueError, match="stride"):
        cs.cs6235_plan((1, 1, 5, 5), (1, 1, 3, 3), stride=0)
    with pytest.raises(ValueError, match="4-tuple"):
        cs.cs6235_plan((1, 5, 5), (1, 1, 3, 3))
    # The C++ plan validates on its own too (direct callers).
    cuda = cuda_build()
    with pytest.raises(ValueError, match="takes no unroll factor"):
        cuda.conv2d_cs6235_plan("plain", cuda.Conv2dShape(1, 1, 5, 5, 1, 3, 3), block_size=128, unroll=2)
    with pytest.raises(ValueError, match="loop_order is a parameter of unroll_k only"):
        cuda.conv2d_cs6235_plan("general", cuda.Conv2dShape(1, 1, 5, 5, 1, 3, 3), block_size=128, loop_order="rsc")
    with pytest.raises(ValueError, match="variant must be one of"):
        cuda.conv2d_cs6235_plan("fast", cuda.Conv2dShape(1, 1, 5, 5, 1, 3, 3), block_size=128)
