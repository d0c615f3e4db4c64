"""The layer ops' and conv2d_pool's plans on the GPU: a repeated call on device arrays replays the variant's compiled
LaunchPlan (plan.<op>_<variant>, one call into C++). For every GPU variant, with and without bias and activation
where they apply, on the legacy stream and on a side stream: fresh random inputs through the plan match the CPU
reference, a replay on the first call's inputs is bitwise the first (long-way) call's output, and the output lives
on the call's stream (outputs poisoned by conftest)."""

import numpy as np
import pytest

import gpuopt
from gpuopt import _plan, nn
from gpuopt._ext import cuda_module
from gpuopt.cuda import DeviceArray

pytestmark = pytest.mark.gpu


def _gpu(op):
    return [n for n, v in gpuopt.variants(op).items() if v.needs_cuda]


@pytest.fixture(scope="module")
def side_stream():
    """A non-blocking stream of gpuopt's (a raw handle), as a user's own."""
    return cuda_module().new_stream()


def _f32(rng, *shape):
    return rng.random(shape, np.float32) - 0.4


def _close(got, ref, exact=False):
    if exact:
        np.testing.assert_array_equal(got, ref)
    else:
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(got, np.asarray(ref, np.float64), rtol=1e-4, atol=1e-4 * scale)


def _gpu_plans():
    return [p for p in _plan._PLANS.values() if p.variant.needs_cuda]


def _replays(call, make, ref, stream, exact=False):
    """The first call on ``make()``'s inputs (the long way, which plans), then replays on fresh ones, each against
    ``ref`` on the host inputs, and one on the first inputs, bitwise the first output."""
    _plan.clear()
    host = make()
    dev = [None if h is None else gpuopt.to_device(h).synchronize() for h in host]
    try:
        first = call(*dev, stream=stream)
    except ValueError as exc:  # a shape the variant rejects (its own tests cover why)
        pytest.skip(str(exc))
    want = first.numpy()
    _close(want, ref(*host), exact)
    plans = _gpu_plans()  # (the CPU references' calls are planned too)
    assert len(plans) == 1
    assert "_planned_replay" in plans[0].run.__qualname__, plans[0].run  # the compiled plan, not the closure
    on = 0 if stream is None else stream
    for _ in range(3):
        h = make()
        got = call(*[None if a is None else gpuopt.to_device(a).synchronize() for a in h], stream=stream)
        assert type(got) is DeviceArray and got.shape == first.shape and got.dtype == first.dtype
        assert got.stream == on  # allocated, and launched, on the call's stream
        _close(got.numpy(), ref(*h), exact)
    np.testing.assert_array_equal(call(*dev, stream=stream).numpy(), want)
    assert len(_gpu_plans()) == 1
    _plan.clear()


@pytest.fixture(params=["legacy", "side"])
def stream(request, side_stream):
    return None if request.param == "legacy" else side_stream


@pytest.mark.parametrize("op", ["relu", "tanh"])
def test_activation_plans(op, stream, rng):
    f = getattr(nn, op)
    for shape in ((7, 13), (5, 3, 9), (1000003,)):
        _replays(lambda x, **k: f(x, variant="cuda", **k), lambda: (_f32(rng, *shape),),
                 lambda x: f(x, variant="cpu"), stream, exact=op == "relu")


@pytest.mark.parametrize("variant", _gpu("max_pool2d"))
@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
def test_pool_plans(op, variant, stream, rng):
    f = getattr(nn, op)
    for shape, size in (((2, 3, 9, 8), 2), ((1, 2, 9, 12), 3), ((10, 7), 2)):
        _replays(lambda x, **k: f(x, size, variant=variant, **k), lambda: (_f32(rng, *shape),),
                 lambda x: f(x, size, variant="cpu"), stream, exact=True)


@pytest.mark.parametrize("variant", _gpu("fully_connected"))
@pytest.mark.parametrize("bias, activation", [(False, None), (True, None), (True, "relu"), (False, "tanh")])
def test_fully_connected_plans(variant, bias, activation, stream, rng):
    def make():
        return _f32(rng, 5, 19), _f32(rng, 19, 7), _f32(rng, 7) if bias else None

    _replays(lambda x, w, b, **k: nn.fully_connected(x, w, b, activation=activation, variant=variant, **k), make,
             lambda x, w, b: nn.fully_connected(x, w, b, activation=activation, variant="cpu"), stream)


@pytest.mark.parametrize("variant", _gpu("argmax"))
def test_argmax_plans(variant, stream, rng):
    for shape in ((9, 17), (3, 300)):
        _replays(lambda x, **k: nn.argmax(x, variant=variant, **k), lambda: (_f32(rng, *shape),),
                 lambda x: nn.argmax(x, variant="cpu"), stream, exact=True)


def test_softmax_plans(stream, rng):
    for shape in ((6, 11), (2, 5000)):
        _replays(lambda x, **k: nn.softmax(x, variant="cuda", **k), lambda: (_f32(rng, *shape),),
                 lambda x: nn.softmax(x, variant="cpu"), stream)


@pytest.mark.parametrize("variant", _gpu("conv2d_pool"))
@pytest.mark.parametrize("bias, activation, pool", [(False, "none", "max"), (True, "relu", "avg"),
                                                    (True, "tanh", "max")])
def test_conv2d_pool_plans(variant, bias, activation, pool, stream, rng):
    # (2, 3, 12, 12) images and 5x5 filters: a shape every variant takes (direct_smallc's C*R*S <= 100, zero_skip's
    # (H, W, R, S), winograd's 5x5 and pool 2).
    def make():
        return _f32(rng, 2, 3, 12, 12), _f32(rng, 4, 3, 5, 5), _f32(rng, 4) if bias else None

    kw = dict(activation=activation, pool=pool)
    _replays(lambda x, w, b, **k: nn.conv2d_pool(x, w, b, variant=variant, **kw, **k), make,
             lambda x, w, b: nn.conv2d_pool(x, w, b, variant="cpu", **kw), stream)


@pytest.mark.parametrize("variant", ["fused", "direct_smallc"])
def test_conv2d_pool_plans_of_uint8_images(variant, stream, rng):
    # The input's dtype and divisor are part of the plan (converted once): uint8 pixels scaled by 1 / 255.
    def make():
        return rng.integers(0, 256, (3, 1, 12, 12)).astype(np.uint8), _f32(rng, 6, 1, 5, 5), _f32(rng, 6)

    kw = dict(activation="relu", input_divisor=255.0)
    _replays(lambda x, w, b, **k: nn.conv2d_pool(x, w, b, variant=variant, **kw, **k), make,
             lambda x, w, b: nn.conv2d_pool(x, w, b, variant="cpu", **kw), stream)


def test_conv2d_pool_plans_with_the_variants_parameters(stream, rng):
    # A variant's own parameters reach its planner as keywords (fused's block shape, winograd's tile and products).
    def make():
        return _f32(rng, 2, 8, 12, 12), _f32(rng, 16, 8, 5, 5), _f32(rng, 16)

    for variant, params in (("fused", dict(channels_per_block=8, images=2, channels_per_thread=4)),
                            ("winograd", dict(m=2, products="fma"))):
        _replays(lambda x, w, b, **k: nn.conv2d_pool(x, w, b, activation="tanh", variant=variant, **params, **k),
                 make, lambda x, w, b: nn.conv2d_pool(x, w, b, activation="tanh", variant="cpu"), stream)
