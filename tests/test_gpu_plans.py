"""The plan cache on the GPU: repeated calls through a cached plan (C++ LaunchPlan) match the CPU reference and
are bitwise equal run to run, on device arrays, PyTorch tensors and NumPy; any change of the problem makes a new
plan (outputs poisoned by conftest)."""

import numpy as np
import pytest

import gpuopt
import oracles
from gpuopt import _plan

pytestmark = pytest.mark.gpu

DETERMINISTIC_CONV = [n for n, v in gpuopt.variants("conv2d").items()
                      if v.needs_cuda and n not in ("tiled_channels", "cudnn")]
MATMUL = [n for n, v in gpuopt.variants("matmul").items() if v.needs_cuda]


def _conv_ref(x, w, bias=None, stride=1, padding=0, activation=None):
    return oracles.conv2d(x, w, bias, (stride, stride), (padding, padding), activation or "none")


def _close(got, ref, tol=2e-4):
    got = got.numpy() if isinstance(got, gpuopt.DeviceArray) else got
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * scale)
    return got


@pytest.mark.parametrize("variant", DETERMINISTIC_CONV)
def test_conv2d_plan_runs_match_the_reference_and_each_other(variant, rng):
    _plan.clear()
    x, w = rng.random((2, 3, 11, 9), np.float32) - 0.5, rng.random((5, 3, 3, 3), np.float32) - 0.5
    bias = rng.random(5, np.float32)
    dx, dw, db = gpuopt.to_device(x), gpuopt.to_device(w), gpuopt.to_device(bias)
    kw = dict(stride=1, padding=1, activation="relu", variant=variant)
    try:
        first = gpuopt.conv2d(dx, dw, bias=db, **kw)
    except ValueError as exc:  # a shape the variant rejects (its own tests cover why)
        pytest.skip(str(exc))
    ref = _close(first, _conv_ref(x, w, bias, 1, 1, "relu"))
    assert _plan.size() >= 1
    for _ in range(3):  # through the plan: bitwise the same
        np.testing.assert_array_equal(gpuopt.conv2d(dx, dw, bias=db, **kw).numpy(), ref)
    x2 = rng.random(x.shape, np.float32)  # new values, same plan
    _close(gpuopt.conv2d(gpuopt.to_device(x2), dw, bias=db, **kw), _conv_ref(x2, w, bias, 1, 1, "relu"))
    np.testing.assert_array_equal(gpuopt.conv2d(x, w, bias=bias, **kw), ref)  # NumPy in and out


@pytest.mark.parametrize("change", ["shape", "filter", "stride", "padding", "activation", "bias", "variant", "dtype"])
def test_conv2d_any_change_makes_a_new_plan(change, rng):
    _plan.clear()
    x, w = rng.random((1, 2, 8, 8), np.float32), rng.random((3, 2, 3, 3), np.float32)
    dx, dw = gpuopt.to_device(x), gpuopt.to_device(w)
    base = dict(stride=1, padding=0, activation=None, variant="implicit_gemm")
    gpuopt.conv2d(dx, dw, **base)
    gpuopt.conv2d(dx, dw, **base)
    kw, bias = dict(base), None
    if change == "shape":
        x = rng.random((2, 2, 9, 7), np.float32)
    elif change == "filter":
        w = rng.random((4, 2, 5, 3), np.float32)
    elif change == "stride":
        kw["stride"] = 2
    elif change == "padding":
        kw["padding"] = (2, 1)
    elif change == "activation":
        kw["activation"] = "tanh"
    elif change == "bias":
        bias = rng.random(3, np.float32)
    elif change == "variant":
        kw["variant"] = "basic"
    y = gpuopt.conv2d(x if change == "dtype" else gpuopt.to_device(x), gpuopt.to_device(w),
                      bias=None if bias is None else gpuopt.to_device(bias), **kw)
    assert _plan.size() == 2
    pd = kw["padding"] if isinstance(kw["padding"], tuple) else (kw["padding"],) * 2
    _close(y, oracles.conv2d(x, w, bias, (kw["stride"],) * 2, pd, kw["activation"] or "none"))


def test_conv2d_tiny_default_is_own_kernel_and_reproducible(rng):
    x, w = rng.random((1, 1, 8, 8), np.float32), rng.random((1, 1, 3, 3), np.float32)
    assert gpuopt.conv.api.default_for(gpuopt.conv.problem.validate(x, w, 1, 0, None, None)) in (
        "implicit_gemm", gpuopt.registry.default_variant("conv2d"))
    dx, dw = gpuopt.to_device(x), gpuopt.to_device(w)
    outs = [gpuopt.conv2d(dx, dw).numpy() for _ in range(4)]
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    _close(outs[0], _conv_ref(x, w))


@pytest.mark.parametrize("variant", MATMUL)
def test_matmul_plan_runs_match_the_reference_and_each_other(variant, rng):
    _plan.clear()
    a, b = rng.random((33, 17), np.float32) - 0.5, rng.random((17, 29), np.float32) - 0.5
    da, db = gpuopt.to_device(a), gpuopt.to_device(b)
    tol = gpuopt.variants("matmul")[variant].tolerance or 2e-4
    first = _close(gpuopt.matmul(da, db, variant=variant), oracles.matmul(a, b), tol)
    for _ in range(3):
        np.testing.assert_array_equal(gpuopt.matmul(da, db, variant=variant).numpy(), first)
    np.testing.assert_array_equal(gpuopt.matmul(a, b, variant=variant), first)
    b2 = rng.random((17, 5), np.float32)  # new shape: new plan
    _close(gpuopt.matmul(da, gpuopt.to_device(b2), variant=variant), oracles.matmul(a, b2), tol)
    assert _plan.size() == 3


def test_matmul_parameters_and_default_are_part_of_the_key(rng):
    _plan.clear()
    a, b = rng.random((16, 16), np.float32), rng.random((16, 16), np.float32)
    da, db = gpuopt.to_device(a), gpuopt.to_device(b)
    ref = oracles.matmul(a, b)
    for kw in (dict(variant="async"), dict(variant="async", stages=2), dict(variant="async", tile="64x64x16"),
               dict(variant="shared", block=32), dict(variant="shared", block=16), {}):
        _close(gpuopt.matmul(da, db, **kw), ref)
        _close(gpuopt.matmul(da, db, **kw), ref)
    assert _plan.size() == 6


def test_torch_tensors_through_a_plan(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    _plan.clear()
    a, b = rng.random((16, 16), np.float32), rng.random((16, 16), np.float32)
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    outs = [gpuopt.matmul(ta, tb, variant="async").numpy() for _ in range(3)]
    _close(outs[0], oracles.matmul(a, b))
    np.testing.assert_array_equal(outs[2], outs[0])
    x, w = rng.random((1, 1, 8, 8), np.float32), rng.random((1, 1, 3, 3), np.float32)
    tx, tw = torch.as_tensor(x, device="cuda"), torch.as_tensor(w, device="cuda")
    ys = [gpuopt.conv2d(tx, tw, variant="implicit_gemm").numpy() for _ in range(3)]
    _close(ys[0], _conv_ref(x, w))
    np.testing.assert_array_equal(ys[2], ys[0])
    with pytest.raises(ValueError, match="C-contiguous"):  # a strided view still takes the long way's check
        gpuopt.matmul(ta.t(), tb, variant="async")


def _offset_copy(a):
    """``a`` on the device 4 bytes past a 256-byte aligned address: a view into a larger allocation."""
    buf = gpuopt.to_device(np.zeros(a.size + 1, np.float32))
    view = gpuopt.DeviceArray(a.shape, np.float32, buf.ptr + 4, buf)
    gpuopt._ext.cuda_module().copy_h2d(view.ptr, np.ascontiguousarray(a, np.float32), a.nbytes)
    return view


@pytest.mark.parametrize("variant", ["async", "warptile", "vectorized", "blocktile_2d", "tf32x3", "shared"])
def test_matmul_plan_resolved_for_aligned_operands_is_not_used_on_misaligned_ones(variant, rng):
    # A matmul plan resolves its launch (the 16-byte vector path) on its first aligned replay; operands of the
    # same problem 4 bytes off an aligned address have the same key and must take the launcher's scalar path.
    _plan.clear()
    a, b = rng.random((64, 36), np.float32) - 0.5, rng.random((36, 44), np.float32) - 0.5  # K, N % 4 == 0
    ref = oracles.matmul(a, b)
    tol = gpuopt.variants("matmul")[variant].tolerance or 2e-4
    da, db = gpuopt.to_device(a), gpuopt.to_device(b)
    first = _close(gpuopt.matmul(da, db, variant=variant), ref, tol)
    for _ in range(2):  # replays: the prepared launch
        np.testing.assert_array_equal(gpuopt.matmul(da, db, variant=variant).numpy(), first)
    ma, mb = _offset_copy(a), _offset_copy(b)
    for x, y in ((ma, db), (da, mb), (ma, mb), (da, db)):
        got = gpuopt.matmul(x, y, variant=variant)
        assert isinstance(got, gpuopt.DeviceArray) and got.shape == (64, 44) and got.ptr % 256 == 0
        _close(got, ref, tol)
    assert _plan.size() == 1


@pytest.mark.parametrize("variant", [None, "fast_fused", "fast_sparse_input", "fast_imma"])
@pytest.mark.parametrize("form", ["fast", "coo"])
def test_sparse_plan_replays_match_the_reference(variant, form, rng):
    # A repeated one-pass call on device x and device COO/FAST filters replays its launch (no checks, no auto
    # choice): new inputs, new filters of the same shape, filters whose taps leave int8 (auto's choice and
    # fast_imma's exact path) and filters that no longer prove the int32 bound (a deferred flag) must all still
    # give the CPU reference's bits.
    from gpuopt.cuda import _DEFERRED
    from gpuopt.sparse import COOFilters, FASTFilters

    make = FASTFilters.from_dense if form == "fast" else COOFilters.from_dense
    _plan.clear()

    def inputs(lo=0, hi=100):
        x = rng.integers(lo, hi, (6, 10, 14)).astype(np.int16)
        x[rng.random(x.shape) < 0.6] = 0
        return x

    def run(x, w, filters):
        y = gpuopt.sparse_conv2d(gpuopt.to_device(x), filters, variant=variant)
        assert isinstance(y, gpuopt.DeviceArray)
        np.testing.assert_array_equal(y.numpy(), gpuopt.sparse_conv2d(x, w, variant="cpu"))
        return y

    w = rng.integers(-3, 4, (5, 6, 3, 3)).astype(np.int16)
    filters = make(w).to_device()
    for _ in range(3):
        run(inputs(), w, filters)
    assert _plan.size() == 1
    w2 = rng.integers(-9, 10, (5, 6, 3, 3)).astype(np.int16)  # other values, the same facts: the same plan
    run(inputs(), w2, make(w2).to_device())
    assert _plan.size() == 1
    wide = w2.copy()
    wide[0, 0, 1, 1] = 300  # a tap outside int8: a new plan (auto takes another variant; fast_imma its exact path)
    for _ in range(2):
        run(inputs(), wide, make(wide).to_device())
    assert _plan.size() == 2
    big = w2.copy()
    big[1, :, :, :] = 4000  # sum |w| of map 1 x 32768 > INT32_MAX: the flag is deferred, also in a replay
    big_filters = make(big).to_device()
    for _ in range(2):
        y = run(inputs(0, 30), big, big_filters)
        assert y not in _DEFERRED  # read (and fits) by the check above
        y = gpuopt.sparse_conv2d(gpuopt.to_device(inputs(0, 30)), big_filters, variant=variant)
        assert y in _DEFERRED
        y.check()
    overflow = inputs(30000, 32767)
    y = gpuopt.sparse_conv2d(gpuopt.to_device(overflow), big_filters, variant=variant)
    with pytest.raises(ValueError, match="does not fit in int32"):
        y.numpy()
    assert _plan.size() == 3


def _layer_cases(rng):
    """(name, call, reference) of every layer op on device arrays: call(arrays...) with fresh inputs each time."""
    import gpuopt.nn as nn

    def fc_ref(x, w, b):
        return np.maximum(x.astype(np.float64) @ w + b, 0)

    return [
        ("relu", lambda x: nn.relu(x), lambda x: np.maximum(x, 0), [(7, 13)]),
        ("tanh", lambda x: nn.tanh(x), np.tanh, [(5, 3, 9)]),
        ("max_pool2d", lambda x: nn.max_pool2d(x, 2), lambda x: oracles.pool2d(x, 2, "max"), [(2, 3, 9, 8)]),
        ("avg_pool2d", lambda x: nn.avg_pool2d(x, 3), lambda x: oracles.pool2d(x, 3, "avg"), [(1, 2, 9, 12)]),
        ("softmax", lambda x: nn.softmax(x), oracles.softmax, [(6, 11)]),
        ("argmax", lambda x: nn.argmax(x), lambda x: x.argmax(1), [(9, 17)]),
        ("fully_connected", lambda x, w, b: nn.fully_connected(x, w, b, activation="relu"), fc_ref,
         [(5, 19), (19, 7), (7,)]),
        ("conv2d_pool", lambda x, w, b: nn.conv2d_pool(x, w, b, activation="relu", pool="avg"),
         lambda x, w, b: oracles.pool2d(oracles.conv2d(x, w, b, activation="relu"), 2, "avg"),
         [(2, 3, 12, 10), (4, 3, 5, 5), (4,)]),
    ]


def test_layer_op_plans_replay_their_launch(rng):
    # A repeated layer-op call on device arrays replays its launch (no checks, no context): fresh inputs every
    # call, the CPU reference each time, bitwise equal to the first (long-way) call on the same inputs; an input
    # 4 bytes off an aligned address (the 4-byte path of the elementwise kernels) through the same plan.
    for name, call, ref, shapes in _layer_cases(rng):
        _plan.clear()
        for i in range(4):
            arrays = [rng.random(s, np.float32) - 0.3 for s in shapes]
            dev = [gpuopt.to_device(a) for a in arrays]
            got = call(*dev)
            assert isinstance(got, gpuopt.DeviceArray), name
            got = got.numpy()
            if name == "argmax":
                np.testing.assert_array_equal(got, ref(*arrays), err_msg=name)
            else:
                _close(got, ref(*arrays), 1e-5)
            if i == 0:
                first, first_dev = got, dev
        np.testing.assert_array_equal(call(*first_dev).numpy(), first, err_msg=name)
        assert _plan.size() == 1, name
        off = [_offset_copy(a) for a in arrays]
        if name != "argmax":
            _close(call(*off).numpy(), ref(*arrays), 1e-5)


def test_layer_op_plan_with_a_host_operand_takes_the_general_way(rng):
    # fully_connected with x on the device and w, bias NumPy: a device result, but its plan cannot replay a launch
    # on host operands; the same call repeated stays right.
    import gpuopt.nn as nn

    x, w, b = rng.random((4, 6), np.float32), rng.random((6, 3), np.float32), rng.random(3, np.float32)
    dx = gpuopt.to_device(x)
    for _ in range(3):
        y = nn.fully_connected(dx, w, b)
        _close(y.numpy(), x.astype(np.float64) @ w + b, 1e-5)
