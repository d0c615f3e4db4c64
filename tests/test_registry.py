import numpy as np
import pytest

import gpuopt
from gpuopt import registry
from gpuopt.registry import Param


def test_every_op_has_a_cpu_reference():
    ops = gpuopt.ops()
    for op in ("conv2d", "matmul", "kmeans", "sparse_conv2d", "relu", "tanh", "max_pool2d", "avg_pool2d",
               "fully_connected", "argmax"):
        assert op in ops
        v = gpuopt.variants(op)["cpu"]
        assert not v.needs_cuda and v.available and v.report == "reference" and v.description


def test_variants_of_all_ops():
    table = gpuopt.variants()
    assert set(table) == set(gpuopt.ops())
    assert all(isinstance(v, registry.Variant) for vs in table.values() for v in vs.values())


def test_unknown_op_variant_parameter():
    with pytest.raises(ValueError, match=r"unknown op 'conv3d'.*conv2d"):
        gpuopt.variants("conv3d")
    x = np.ones((1, 1, 3, 3), np.float32)
    with pytest.raises(ValueError, match=r"unknown variant 'nope'; valid variants: \['cpu'"):
        gpuopt.conv2d(x, x, variant="nope")
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['tile'\]; valid parameters: none"):
        gpuopt.conv2d(x, x, variant="cpu", tile=16)
    with pytest.raises(TypeError, match="variant must be a string"):
        gpuopt.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), variant=3)


@pytest.fixture
def toy_op():
    """A temporary op with a CUDA variant and a parameterised CPU variant."""
    calls = []
    where = dict(kernel="csrc/toy/toy.cu", test="tests/test_registry.py")
    registry.register("toy", "cpu", description="toy", report="gpuopt", needs_cuda=False, **where,
                      params=(Param("block", 16, (16, 32), "block side"), Param("order", "crs", ("crs", "rsc"))))(
        lambda **kw: calls.append(kw) or kw)
    registry.register("toy", "gpu", description="toy on GPU", report="gpuopt", needs_cuda=True, preferred=True,
                      **where)(lambda **kw: "ran on gpu")
    yield calls
    registry._REGISTRY.pop("toy")
    registry._PREFERRED.pop("toy")


def test_parameters_are_checked_and_defaulted(toy_op):
    v, p = registry.resolve("toy", "cpu", {})
    assert p == {"block": 16, "order": "crs"}
    v, p = registry.resolve("toy", "cpu", {"block": np.int64(32)})
    assert p["block"] == 32 and type(p["block"]) is int
    with pytest.raises(ValueError, match=r"block=24 is not allowed; choose one of \[16, 32\]"):
        registry.resolve("toy", "cpu", {"block": 24})
    with pytest.raises(ValueError, match="not allowed"):
        registry.resolve("toy", "cpu", {"block": True})  # a bool is not a block size
    with pytest.raises(ValueError, match="not allowed"):
        registry.resolve("toy", "cpu", {"order": 1})


def test_resolve_answers_are_kept_but_never_stale(toy_op):
    """resolve() keeps its answers (it is on every call's path); they must equal the long way's every time."""
    import dataclasses

    v, p = registry.resolve("toy", "cpu", {"block": 32})
    p["block"] = 99  # the caller's dict is its own
    assert registry.resolve("toy", "cpu", {"block": 32})[1] == {"block": 32, "order": "crs"}
    registry.resolve("toy", "cpu", {"block": 16})
    for bad in (True, np.True_):  # equal to 1 and hashing alike: the value's type is part of the key
        with pytest.raises(ValueError, match="not allowed"):
            registry.resolve("toy", "cpu", {"block": bad})
    with pytest.raises(ValueError, match="not allowed"):  # unhashable: checked the long way
        registry.resolve("toy", "cpu", {"block": [16]})
    # A variant replaced in its table, and a table replaced: the new one answers.
    table = registry._REGISTRY["toy"]
    table["cpu"] = dataclasses.replace(v, params={"block": Param("block", 32, (32, 64), "block side")})
    assert registry.resolve("toy", "cpu", {})[1] == {"block": 32}
    registry._REGISTRY["toy"] = {"cpu": dataclasses.replace(v, params={})}
    assert registry.resolve("toy", "cpu", {})[1] == {}
    with pytest.raises(ValueError, match="unknown parameter"):
        registry.resolve("toy", "cpu", {"block": 32})


def test_cuda_variant_without_gpu_says_so(toy_op):
    if gpuopt.cuda_available():
        assert registry.resolve("toy", "gpu", {})[0].name == "gpu"
        assert registry.default_variant("toy") == "gpu"
        return
    with pytest.raises(RuntimeError, match=r"toy/gpu needs a CUDA GPU, but .*variant='cpu'"):
        registry.resolve("toy", "gpu", {})
    assert registry.default_variant("toy") == "cpu"  # preferred GPU variant unavailable: fall back
    assert not gpuopt.variants("toy")["gpu"].available


def test_param_default_must_be_allowed():
    with pytest.raises(ValueError):
        Param("block", 8, (16, 32))


def test_variant_str_mentions_params(toy_op):
    s = str(gpuopt.variants("toy")["cpu"])
    assert "toy/cpu" in s and "block=16" in s and "CPU" in s


def test_where_a_variant_lives_is_required(toy_op):
    v = gpuopt.variants("toy")["gpu"]
    assert (v.kernel, v.test, v.binding) == ("csrc/toy/toy.cu", "tests/test_registry.py", "toy_gpu")
    assert gpuopt.variants("toy")["cpu"].binding is None  # CPU variants have no launcher
    with pytest.raises(TypeError):  # kernel and test are required
        registry.register("toy", "other", description="x", report="gpuopt", needs_cuda=False)
    for bad in ("", "/abs/path.cu", None):
        with pytest.raises(ValueError, match="relative to the repository root"):
            registry.register("toy", "other", description="x", report="gpuopt", needs_cuda=False, kernel=bad,
                              test="tests/x.py")
