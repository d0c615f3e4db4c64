"""The plan cache (gpuopt._plan) on the CPU: a repeated call skips the checks, any change of shape, dtype,
parameters, variant, registry or device makes a new plan, and every rejection stays what it was."""

import numpy as np
import pytest

import gpuopt
import oracles
from conftest import needs_cuda_build
from gpuopt import _ext, _plan, registry
from gpuopt.conv import api as conv_api
from gpuopt.matmul import api as matmul_api


@pytest.fixture
def plans(monkeypatch):
    """An empty plan cache, and a count of the calls that took the long way (conv2d's and matmul's checks)."""
    _plan.clear()
    slow = {"conv2d": 0, "matmul": 0}
    validate, float_array = conv_api.validate, matmul_api.float_array

    def counted_validate(*a, **k):
        slow["conv2d"] += 1
        return validate(*a, **k)

    def counted_float_array(a, name, *rest):
        if name == "a":
            slow["matmul"] += 1
        return float_array(a, name, *rest)

    monkeypatch.setattr(conv_api, "validate", counted_validate)
    monkeypatch.setattr(matmul_api, "float_array", counted_float_array)
    yield slow
    _plan.clear()


def conv(x, w, **kw):
    return gpuopt.conv2d(x, w, variant="cpu", **kw)


def test_repeated_call_uses_its_plan_and_gives_the_same_result(plans, rng):
    x, w = rng.random((2, 3, 9, 8), np.float32), rng.random((4, 3, 3, 3), np.float32)
    first = conv(x, w, padding=1)
    assert plans["conv2d"] == 1 and _plan.size() == 1
    for _ in range(3):
        again = conv(x, w, padding=1)
        np.testing.assert_array_equal(again, first)
    assert plans["conv2d"] == 1 and _plan.size() == 1
    x2 = rng.random(x.shape, np.float32)  # new values, same problem: the plan runs on them
    np.testing.assert_allclose(conv(x2, w, padding=1), oracles.conv2d(x2, w, padding=(1, 1)), rtol=1e-5, atol=1e-5)
    assert plans["conv2d"] == 1


@pytest.mark.parametrize("change", [
    dict(x_shape=(2, 3, 10, 8)), dict(w_shape=(5, 3, 3, 3)), dict(w_shape=(4, 3, 1, 3)),
    dict(kw=dict(padding=(1, 0))), dict(kw=dict(padding=0)), dict(kw=dict(stride=2, padding=1)),
    dict(kw=dict(padding=1, activation="relu")), dict(kw=dict(padding=1, activation="tanh")),
    dict(kw=dict(padding=1, bias="yes")),
])
def test_any_change_of_the_problem_makes_a_new_plan(plans, rng, change):
    x_shape, w_shape = change.get("x_shape", (2, 3, 9, 8)), change.get("w_shape", (4, 3, 3, 3))
    kw = dict(change.get("kw", dict(padding=1)))
    x0, w0 = rng.random((2, 3, 9, 8), np.float32), rng.random((4, 3, 3, 3), np.float32)
    conv(x0, w0, padding=1)
    x, w = rng.random(x_shape, np.float32), rng.random(w_shape, np.float32)
    if kw.get("bias") == "yes":
        kw["bias"] = rng.random(w_shape[0], np.float32)
    y = conv(x, w, **kw)
    assert plans["conv2d"] == 2 and _plan.size() == 2
    st = kw.get("stride", 1)
    pd = kw.get("padding", 0)
    ref = oracles.conv2d(x, w, kw.get("bias"), (st, st), pd if isinstance(pd, tuple) else (pd, pd),
                         kw.get("activation") or "none")
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    conv(x, w, **kw)
    assert plans["conv2d"] == 2


def test_other_dtypes_and_layouts_take_the_long_way(plans, rng):
    x, w = rng.random((1, 2, 6, 6)), rng.random((3, 2, 3, 3), np.float32)  # x float64: converted by the checks
    ref = conv(x.astype(np.float32), w)
    for xx in (x, x.astype(np.float16), np.asfortranarray(x.astype(np.float32)), x.astype(np.float32).tolist()):
        np.testing.assert_allclose(conv(xx, w), ref, rtol=1e-3, atol=1e-3)
        conv(xx, w)
    assert _plan.size() == 1  # only the float32 C-order call made one
    assert plans["conv2d"] == 1 + 8


def test_rejections_stay_the_same_after_a_plan_exists(plans, rng):
    x, w = rng.random((1, 2, 6, 6), np.float32), rng.random((3, 2, 3, 3), np.float32)
    conv(x, w, stride=1, padding=1)
    with pytest.raises(TypeError, match="stride must be an integer"):
        conv(x, w, stride=1.0, padding=1)
    with pytest.raises(TypeError, match="stride must be an integer"):
        conv(x, w, stride=True, padding=1)
    with pytest.raises(TypeError, match="padding.* must be an integer"):
        conv(x, w, stride=1, padding=(1, np.float32(1)))
    with pytest.raises(TypeError, match="x must be a floating-point array"):
        conv(x.astype(np.int32), w, stride=1, padding=1)
    with pytest.raises(ValueError, match="activation must be one of"):
        conv(x, w, stride=1, padding=1, activation="gelu")
    with pytest.raises(ValueError, match="unknown parameter"):
        conv(x, w, stride=1, padding=1, tile=16)
    with pytest.raises(TypeError, match="variant must be a string"):
        gpuopt.conv2d(x, w, stride=1, padding=1, variant=3)
    with pytest.raises(TypeError, match="timing must be True or False"):
        gpuopt.conv2d(x, w, variant="cpu", stride=1, padding=1, timing=1)
    a = rng.random((3, 4), np.float32)
    gpuopt.matmul(a, a.T.copy(), variant="cpu")
    with pytest.raises(ValueError, match="inner dimensions differ"):
        gpuopt.matmul(a, a, variant="cpu")
    with pytest.raises(ValueError, match="unknown parameter"):
        gpuopt.matmul(a, a.T.copy(), variant="cpu", block=16)


def test_timing_calls_are_never_planned(plans, rng):
    x, w = rng.random((1, 2, 6, 6), np.float32), rng.random((3, 2, 3, 3), np.float32)
    y, t = gpuopt.conv2d(x, w, variant="cpu", timing=True)
    assert t.device == "cpu" and _plan.size() == 0
    np.testing.assert_array_equal(conv(x, w), y)


def test_matmul_plans(plans, rng):
    a, b = rng.random((5, 7), np.float32), rng.random((7, 3), np.float32)
    c = gpuopt.matmul(a, b, variant="cpu")
    np.testing.assert_array_equal(gpuopt.matmul(a, b, variant="cpu"), c)
    assert plans["matmul"] == 1 and _plan.size() == 1
    gpuopt.matmul(a, b[:, :2].copy(), variant="cpu")  # new shape
    gpuopt.matmul(a, b)  # variant=None: its own key
    assert plans["matmul"] == 3 and _plan.size() == 3
    np.testing.assert_allclose(gpuopt.matmul(a, b), oracles.matmul(a, b), rtol=1e-5)


def test_a_registration_or_a_swapped_table_retires_the_plans(plans, rng, monkeypatch):
    x, w = rng.random((1, 2, 6, 6), np.float32), rng.random((3, 2, 3, 3), np.float32)
    conv(x, w)
    monkeypatch.setattr(registry, "_GENERATION", [registry.generation() + 1])
    conv(x, w)
    assert plans["conv2d"] == 2
    conv(x, w)
    monkeypatch.setitem(registry._REGISTRY, "conv2d", dict(registry._REGISTRY["conv2d"]))
    conv(x, w)
    assert plans["conv2d"] == 3


class _Module:
    """A CUDA module stand-in that only has a current device (the key reads it)."""

    def __init__(self):
        self.device = 0

    def current_device(self):
        return self.device


def test_a_change_of_device_or_module_makes_a_new_plan(plans, rng, monkeypatch):
    x, w = rng.random((1, 2, 6, 6), np.float32), rng.random((3, 2, 3, 3), np.float32)
    mod = _Module()
    monkeypatch.setattr(_ext, "_load_cuda", lambda: (mod, ""))
    conv(x, w)
    conv(x, w)
    assert plans["conv2d"] == 1
    mod.device = 1
    conv(x, w)
    assert plans["conv2d"] == 2 and _plan.size() == 2
    mod.device = 0
    conv(x, w)
    assert plans["conv2d"] == 2
    monkeypatch.setattr(_ext, "_load_cuda", lambda: (_Module(), ""))  # another module, same device number
    conv(x, w)
    assert plans["conv2d"] == 3


def test_cache_is_bounded(plans, rng, monkeypatch):
    monkeypatch.setattr(_plan, "MAX_PLANS", 3)
    w = rng.random((1, 1, 1, 1), np.float32)
    for h in range(2, 9):
        conv(rng.random((1, 1, h, 3), np.float32), w)
        assert _plan.size() <= 3


def test_the_tiny_default_only_replaces_cudnn(monkeypatch, rng):
    p = conv_api.validate(rng.random((1, 1, 8, 8), np.float32), rng.random((1, 1, 3, 3), np.float32), 1, 0, None,
                          None)
    big = conv_api.validate(rng.random((8, 64, 32, 32), np.float32), rng.random((64, 64, 3, 3), np.float32), 1, 1,
                            None, None)
    monkeypatch.setattr(conv_api, "default_variant", lambda op: "cudnn")
    assert conv_api.default_for(p) == "implicit_gemm" and conv_api.default_for(big) == "cudnn"
    monkeypatch.setattr(conv_api, "default_variant", lambda op: "cpu")
    assert conv_api.default_for(p) == "cpu"
    monkeypatch.setattr(matmul_api, "default_variant", lambda op: "cublas")
    assert matmul_api.default_for((16, 16), (16, 16)) == "async"
    assert matmul_api.default_for((512, 512), (512, 512)) == "cublas"


@needs_cuda_build
def test_every_conv2d_and_matmul_launcher_has_a_planner():
    from gpuopt import _cuda

    for op in ("conv2d", "matmul"):
        for name in _cuda.variant_bindings[op]:
            assert hasattr(_cuda.plan, f"{op}_{name}"), f"{op}_{name} has no planner"
    # Planners only pack arguments: they run without a GPU.
    shape = _cuda.Conv2dShape(1, 1, 8, 8, 1, 3, 3, 1, 1, 0, 0)
    assert isinstance(_cuda.plan.conv2d_implicit_gemm(shape, "relu", tile=16), _cuda.LaunchPlan)
    assert isinstance(_cuda.plan.matmul_async(16, 16, 16, tile="auto", stages=3, split_k=0), _cuda.LaunchPlan)
    with pytest.raises(TypeError):
        _cuda.plan.matmul_async(16, 16, 16)  # the parameters are required keywords, as the launcher's


@needs_cuda_build
def test_launch_plan_output_is_checked():
    from gpuopt import _cuda

    plan = _cuda.plan.matmul_async(16, 16, 16, tile="auto", stages=3, split_k=0)
    with pytest.raises(ValueError, match="no output set"):
        plan.run_new(256, 256)
    with pytest.raises(ValueError, match="slot must be 0 to 3"):
        plan.set_output(gpuopt.DeviceArray, (16, 16), np.dtype(np.float32), 1024, 4)
    with pytest.raises(ValueError, match="cls must be a class"):
        plan.set_output(object(), (16, 16), np.dtype(np.float32), 1024, 2)
