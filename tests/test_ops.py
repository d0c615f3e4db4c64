"""Each public op is one gpuopt._exec.Op: per call its arguments are checked once and its variant resolved once
(the registry's table consulted once, twice for ``variant=None``: the default's own lookup), and a replayed call
(the plan cache) does neither. CPU variants, tiny inputs."""

import numpy as np
import pytest

import gpuopt
import gpuopt.nn
from gpuopt import _exec, _plan, registry
from gpuopt.conv import api as conv_api
from gpuopt.matmul import api as matmul_api


@pytest.fixture
def counts(monkeypatch):
    """Calls of registry.resolve (as the Op calls it), of the registry's table lookups (every resolve,
    default_variant, variants and cpu_variants goes through _check_op), and of conv2d's and matmul's checks."""
    _plan.clear()
    n = {"resolve": 0, "lookups": 0, "validate": 0}
    resolve, check_op, validate, float_array = _exec.resolve, registry._check_op, conv_api.validate, \
        matmul_api.float_array

    def counted_resolve(*a, **k):
        n["resolve"] += 1
        return resolve(*a, **k)

    def counted_check_op(op):
        n["lookups"] += 1
        return check_op(op)

    def counted_validate(*a, **k):
        n["validate"] += 1
        return validate(*a, **k)

    def counted_float_array(a, name, *rest):
        n["validate"] += name == "a"
        return float_array(a, name, *rest)

    monkeypatch.setattr(_exec, "resolve", counted_resolve)
    monkeypatch.setattr(registry, "_check_op", counted_check_op)
    monkeypatch.setattr(conv_api, "validate", counted_validate)
    monkeypatch.setattr(matmul_api, "float_array", counted_float_array)
    yield n
    _plan.clear()


def _calls(variant):
    rng = np.random.default_rng(0)
    x, w = rng.random((1, 2, 6, 6), np.float32), rng.random((3, 2, 3, 3), np.float32)
    a = rng.random((4, 4), np.float32)
    pts = rng.random((20, 2), np.float32)
    sx, sw = np.ones((2, 4, 4), np.int16), np.ones((3, 2, 3, 3), np.int16)
    kw = {} if variant is None else {"variant": variant}
    return {
        "conv2d": lambda: gpuopt.conv2d(x, w, padding=1, **kw),
        "matmul": lambda: gpuopt.matmul(a, a, **kw),
        "kmeans": lambda: gpuopt.kmeans(pts, 2, max_iter=3, **kw),
        "sparse_conv2d": lambda: gpuopt.sparse_conv2d(sx, sw, **kw),
        "conv2d_pool": lambda: gpuopt.nn.conv2d_pool(x, w, **kw),
        "relu": lambda: gpuopt.nn.relu(a, **kw),
        "tanh": lambda: gpuopt.nn.tanh(a, **kw),
        "max_pool2d": lambda: gpuopt.nn.max_pool2d(x, **kw),
        "avg_pool2d": lambda: gpuopt.nn.avg_pool2d(x, **kw),
        "fully_connected": lambda: gpuopt.nn.fully_connected(a, a, **kw),
        "argmax": lambda: gpuopt.nn.argmax(a, **kw),
        "softmax": lambda: gpuopt.nn.softmax(a, **kw),
    }


OPS = list(_calls(None))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("variant", ["cpu", None])
def test_one_resolve_per_call(counts, op, variant):
    if variant is None and registry.default_variant(op) != "cpu":
        pytest.skip("variant=None runs a GPU variant here")
    call = _calls(variant)[op]
    for _ in range(2):  # (NumPy kmeans and the uncached ops take the long way every time)
        _plan.clear()
        for k in counts:
            counts[k] = 0
        call()
        assert counts["resolve"] == 1, counts
        assert counts["lookups"] == (1 if variant else 2), counts


@pytest.mark.parametrize("op", ["conv2d", "matmul"])
@pytest.mark.parametrize("variant", ["cpu", None])
def test_checks_once_per_call_and_a_replay_skips_them_and_the_resolve(counts, op, variant):
    call = _calls(variant)[op]
    first = call()
    assert counts["validate"] == 1 and counts["resolve"] == 1 and _plan.size() == 1, counts
    for k in counts:
        counts[k] = 0
    again = call()
    np.testing.assert_array_equal(again, first)
    assert counts == {"resolve": 0, "lookups": 0, "validate": 0}


def test_the_public_functions_are_one_call_to_their_op():
    # The dispatch lives once, in gpuopt._exec.Op: no public function builds a key or dispatches itself.
    import inspect

    from gpuopt.kmeans import api as kmeans_api
    from gpuopt.nn import api as nn_api, conv_pool
    from gpuopt.sparse import api as sparse_api

    for module in (conv_api, matmul_api, kmeans_api, sparse_api, nn_api, conv_pool):
        source = inspect.getsource(module)
        assert "dispatch(" not in source and "_plan.lookup" not in source, module.__name__
        assert isinstance(getattr(module, "_OP", None) or nn_api._RELU, _exec.Op)


# ------------------------------------------------------------------------------------- one argument struct per op

#: The ops whose launchers take a problem (device addresses and a shape): each launcher's one positional parameter
#: is its op's struct, the variant's parameters keywords after it (csrc/bindings; a stream or a new field is added
#: in one place). Not here: the elementwise and row ops (x, y and a size or two) and k-means' Liao ladder steps,
#: which keep the report program's arguments (x on both sides, the initial centres and the result on the host).
ARGUMENT_STRUCTS = {"conv2d": "Conv2dArgs", "conv2d_pool": "ConvPoolArgs", "matmul": "MatmulArgs",
                    "sparse_conv2d": "SparseConv2dArgs", "kmeans": "KMeansArgs"}
#: Launchers of those ops that keep their own arguments, and why (above).
OWN_ARGUMENTS = {"kmeans": {"liao", "liao_occupancy", "liao_aos", "liao_vec"}}


def test_each_op_launcher_takes_its_one_argument_struct():
    from gpuopt._ext import _load_cuda_host

    cuda = _load_cuda_host()[0]
    if cuda is None:
        pytest.skip("a build without CUDA has no launchers")
    wrong = []
    for op, struct in ARGUMENT_STRUCTS.items():
        assert cuda.variant_bindings[op], op
        for variant in set(cuda.variant_bindings[op]) - OWN_ARGUMENTS.get(op, set()):
            signature = getattr(cuda, f"{op}_{variant}").__doc__.splitlines()[0]
            params = signature[signature.index("(") + 1: signature.rindex(") ->")]
            first, _, rest = params.partition(", ")
            if not (first.startswith("args: ") and first.endswith(f".{struct}")) or (rest and not rest.startswith("*")):
                wrong.append(signature)
    assert not wrong, "launchers not taking (args: <Op>Args, *, params):\n" + "\n".join(wrong)
