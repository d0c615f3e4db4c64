"""The layer ops' and conv2d_pool's launch plans without a GPU: ExecContext.offer_launch hands a repeated call to the
variant's compiled planner (plan.<op>_<variant>) when there is one -- a replay is then one LaunchPlan.run_new call
with the new inputs' addresses -- and keeps its closure otherwise; the run functions give the planner exactly the
values they gave the launcher. The compiled module is stood in for by the fake GPU's memory with recording
launchers and planners; the planners themselves are checked in the CUDA build (host only)."""

from types import SimpleNamespace

import numpy as np
import pytest

import gpuopt
from conftest import needs_cuda_build
from gpuopt import _exec, _ext, _plan, nn
from gpuopt.cuda import DeviceArray
from models.fake_device import FakeCuda

OPS = ("relu", "tanh", "max_pool2d", "avg_pool2d", "fully_connected", "argmax", "softmax", "conv2d_pool")


class RecordedPlan:
    """A LaunchPlan stand-in: what it was planned with, its output, its run_new calls (each a new DeviceArray)."""

    def __init__(self, mem, name, args, params):
        self.mem, self.name, self.args, self.params = mem, name, args, params
        self.output, self.runs = None, []

    def set_output(self, cls, shape, dtype, nbytes, slot):
        self.output = (cls, shape, dtype, nbytes, slot)

    def run_new(self, a, b, c, stream):
        self.runs.append((a, b, c, stream))
        cls, shape, dtype, nbytes, _ = self.output
        buf = self.mem.Buffer(nbytes)
        return cls(shape, dtype, buf.ptr, buf, stream)


class RecordingCuda(FakeCuda):
    """The fake GPU's memory with the compiled module's launchers (recorded, nothing computed), ConvPoolArgs (its
    arguments) and, with ``planners``, the plan submodule (RecordedPlans)."""

    def __init__(self, planners=True):
        super().__init__()
        self.bindings = {v.binding for op in OPS for v in gpuopt.variants(op).values() if v.needs_cuda}
        self.launches, self.plans = [], []
        self.check = SimpleNamespace()  # no host checks (device inputs skip them anyway)
        if planners:
            self.plan = SimpleNamespace(**{b: self._planner(b) for b in self.bindings})

    def _planner(self, name):
        def plan(*args, **params):
            self.plans.append(RecordedPlan(self, name, args, params))
            return self.plans[-1]
        return plan

    def __getattr__(self, name):
        if name in self.__dict__.get("bindings", ()):
            return lambda *args, **params: self.launches.append((name, args, params))
        raise AttributeError(name)

    def ConvPoolArgs(self, *args):  # noqa: N802 (the real module's name)
        return ("ConvPoolArgs", args)


@pytest.fixture
def recording(monkeypatch):
    def install(planners=True):
        mem = RecordingCuda(planners)
        monkeypatch.setattr(_ext, "_load_cuda", lambda: (mem, ""))
        monkeypatch.setattr(_ext, "_load_cuda_host", lambda: (mem, ""))
        _plan.clear()
        return mem
    yield install
    _plan.clear()


def _cases(rng):
    """{id: (op, variant, call(device arrays..., stream=), host inputs (None: absent), the planner's arguments)}."""
    f = lambda *s: rng.random(s, np.float32)  # noqa: E731
    x2, x4, w4 = f(6, 11), f(2, 3, 12, 12), f(4, 3, 5, 5)
    out = {}
    for op in ("relu", "tanh"):
        out[op] = (op, "cuda", lambda x, op=op, **k: getattr(nn, op)(x, **k), (f(5, 3, 9),), (135,))
    for op in ("max_pool2d", "avg_pool2d"):
        for v in ("basic", "coalesced"):
            out[f"{op}-{v}"] = (op, v, lambda x, op=op, v=v, **k: getattr(nn, op)(x, 3, variant=v, **k),
                                (f(2, 3, 9, 12),), (6, 9, 12, 3))
    for v in ("basic", "tiled", "matmul", "cublas"):
        out[f"fully_connected-{v}"] = (
            "fully_connected", v, lambda x, w, b, v=v, **k: nn.fully_connected(x, w, b, activation="relu", variant=v,
                                                                               **k),
            (f(5, 19), f(19, 7), f(7)), (5, 19, 7, "relu"))
    out["fully_connected-basic-no-bias"] = (
        "fully_connected", "basic", lambda x, w, b, **k: nn.fully_connected(x, w, b, variant="basic", **k),
        (f(5, 19), f(19, 7), None), (5, 19, 7, "none"))
    for v in ("basic", "warp", "streams"):
        out[f"argmax-{v}"] = ("argmax", v, lambda x, v=v, **k: nn.argmax(x, variant=v, **k), (x2,), (6, 11))
    out["softmax"] = ("softmax", "cuda", lambda x, **k: nn.softmax(x, **k), (x2,), (6, 11))
    dims = (2, 3, 12, 12, 4, 5, 5, 2)
    for v, params in (("fused", dict(channels_per_block=0, images=0, channels_per_thread=0)),
                      ("direct_smallc", dict(images=0, maps=0)), ("zero_skip", {}),
                      ("winograd", dict(m=0, products="auto"))):
        out[f"conv2d_pool-{v}"] = (
            "conv2d_pool", v, lambda x, w, b, v=v, **k: nn.conv2d_pool(x, w, b, activation="tanh", pool="avg",
                                                                       variant=v, **k),
            (x4, w4, f(4)), (("float32", 1.0, dims, "tanh", "avg"), params))
    out["conv2d_pool-fused-uint8"] = (
        "conv2d_pool", "fused", lambda x, w, b, **k: nn.conv2d_pool(x, w, b, input_divisor=255.0, variant="fused",
                                                                    **k),
        (rng.integers(0, 256, (2, 3, 12, 12)).astype(np.uint8), w4, None),
        (("uint8", 255.0, dims, "none", "max"), dict(channels_per_block=0, images=0, channels_per_thread=0)))
    return out


def _device(host):
    return [None if h is None else gpuopt.to_device(h) for h in host]


def _addresses(arrays):
    return tuple(0 if a is None else a.ptr for a in arrays)


def test_every_layer_op_variant_is_a_case(rng):
    assert {(op, v) for op, v, *_ in _cases(rng).values()} == {
        (op, n) for op in OPS for n, v in gpuopt.variants(op).items() if v.needs_cuda}


@pytest.mark.parametrize("case", list(_cases(np.random.default_rng(0))))
def test_a_repeated_call_replays_the_planned_launch(case, recording, rng):
    op, variant, call, host, values = _cases(rng)[case]
    mem = recording()
    dev = _device(host)
    first = call(*dev)
    assert type(first) is DeviceArray
    (name, args, params), = mem.launches
    (plan,) = mem.plans
    assert name == plan.name == f"{op}_{variant}"
    n = len(host)
    if op == "conv2d_pool":  # one ConvPoolArgs: the planner gets it less its addresses, and the same keywords
        (kind, (x, dtype, divisor, w, b, y, *rest)), = args
        assert kind == "ConvPoolArgs" and (x, w, b, y) == (*_addresses(dev), first.ptr)
        assert (plan.args, plan.params) == ((dtype, divisor, *rest), params) == values
    else:
        if variant == "streams":  # (x, out, host_out, rows, cols): a device result has no host copy
            assert args[2] is None
            args = args[:2] + args[3:]
        assert args[:n + 1] == (*_addresses(dev), first.ptr)
        assert plan.args == args[n + 1:] == values and plan.params == {}
    assert plan.output == (DeviceArray, first.shape, first.dtype, first.nbytes, n)  # the output after the inputs

    for stream in (0, 7):  # replays: one run_new each, on the call's stream, no launcher call
        dev = _device(host)
        got = call(*dev, stream=stream or None)
        assert plan.runs[-1] == (*_addresses(dev), *(0,) * (3 - n), stream)
        assert type(got) is DeviceArray and got.shape == first.shape and got.stream == stream
    assert len(mem.launches) == 1 and len(mem.plans) == 1 and len(plan.runs) == 2


def test_without_planners_a_replay_calls_the_launcher(recording, rng):
    # A module without plan.<op>_<variant> (an older build, a stand-in): the closure, with the new addresses.
    mem = recording(planners=False)
    x, w = rng.random((5, 19), np.float32), rng.random((19, 7), np.float32)
    for i in range(3):
        dx, dw = gpuopt.to_device(x), gpuopt.to_device(w)
        y = nn.fully_connected(dx, dw, None, activation="tanh", variant="tiled")
        assert mem.launches[-1] == ("fully_connected_tiled", (dx.ptr, dw.ptr, 0, y.ptr, 5, 19, 7, "tanh"), {})
    assert len(mem.launches) == 3 and _plan.size() == 1


class _Variant:
    op, name, binding = "relu", "cuda", "relu_cuda"


def _context(planning=True, device_result=True):
    ctx = _exec.ExecContext(timing=False, device_result=device_result, gpu=True, variant=_Variant())
    ctx.planning = planning
    return ctx


def _array(ptr, shape=(4, 5)):
    return DeviceArray(shape, np.float32, ptr, None)


def test_offer_launch_takes_the_planner_with_its_arguments(monkeypatch):
    made = []
    mem = FakeCuda()
    monkeypatch.setattr(_ext, "planner", lambda v: (lambda *a, **k: made.append(RecordedPlan(mem, v, a, k))
                                                    or made[-1]))
    ctx = _context()
    x, w, y = _array(4096), _array(8192, (5, 3)), _array(12288, (4, 3))
    ctx.offer_launch(lambda *a: pytest.fail("the closure ran"), (x, w, None), (y,), plan=(4, 5, 3, "relu"),
                     params={"tile": 16})
    (plan,), (replay,) = made, ctx.replays
    assert (plan.name.binding, plan.args, plan.params) == ("relu_cuda", (4, 5, 3, "relu"), {"tile": 16})
    assert plan.output == (DeviceArray, (4, 3), np.dtype(np.float32), 48, 3)
    y1 = replay(5, _array(1024), _array(2048, (5, 3)), None)
    y2 = replay(0, _array(1024), _array(2048, (5, 3)), _array(512, (3,)))
    assert plan.runs == [(1024, 2048, 0, 5), (1024, 2048, 512, 0)]  # the addresses (0: None), the stream
    assert (y1.shape, y1.stream, y2.stream) == ((4, 3), 5, 0)  # what run_new returns


def test_offer_launch_conditions_stay(monkeypatch):
    # Only a planning call with a device result and device (or absent) inputs offers a replay; with several outputs,
    # no plan arguments or no planner, the closure.
    monkeypatch.setattr(_ext, "planner", lambda v: pytest.fail("asked for a planner"))
    x, y = _array(4096), _array(8192)
    for ctx, inputs in ((_context(planning=False), (x,)), (_context(device_result=False), (x,)),
                        (_context(), (np.zeros((4, 5), np.float32),))):
        ctx.offer_launch(lambda *a: None, inputs, (y,), plan=(20,))
        assert ctx.replays == []
    monkeypatch.setattr(_ext, "cuda_module", lambda: FakeCuda())
    for outputs, plan in (((y, y), (20,)), ((y,), None)):
        ctx = _context()
        ctx.offer_launch(lambda *a: None, (x,), outputs, plan=plan)
        assert len(ctx.replays) == 1 and "offer_launch" in ctx.replays[0].__qualname__
    monkeypatch.setattr(_ext, "planner", lambda v: None)
    ctx = _context()
    ctx.offer_launch(lambda *a: None, (x,), (y,), plan=(20,))
    assert len(ctx.replays) == 1 and "offer_launch" in ctx.replays[0].__qualname__


@needs_cuda_build
def test_every_layer_op_launcher_has_a_planner():
    from gpuopt import _cuda

    for op in OPS:
        for name in _cuda.variant_bindings[op]:
            assert hasattr(_cuda.plan, f"{op}_{name}"), f"{op}_{name} has no planner"
    # Planners only convert and pack their values: they run without a GPU, and reject what the launcher's binding
    # rejects, with its message.
    plan = _cuda.plan
    for made in (plan.relu_cuda(100), plan.max_pool2d_coalesced(6, 9, 12, 3), plan.argmax_streams(6, 11),
                 plan.fully_connected_matmul(5, 19, 7, "tanh"), plan.softmax_cuda(6, 11),
                 plan.conv2d_pool_fused("uint8", 255.0, (2, 3, 12, 12, 4, 5, 5, 2), "relu", "max",
                                        channels_per_block=0, images=0, channels_per_thread=0),
                 plan.conv2d_pool_zero_skip("float32", 1.0, (2, 3, 12, 12, 4, 5, 5, 2), "none", "avg"),
                 plan.conv2d_pool_winograd("float32", 1.0, (2, 3, 12, 12, 4, 5, 5, 2), "none", "avg", m=0,
                                           products="auto")):
        assert isinstance(made, _cuda.LaunchPlan)
    with pytest.raises(ValueError, match="activation"):
        plan.fully_connected_basic(5, 19, 7, "sigmoid")
    with pytest.raises(ValueError, match="shape must be"):
        plan.conv2d_pool_fused("float32", 1.0, (2, 3), "none", "max", channels_per_block=0, images=0,
                               channels_per_thread=0)
    with pytest.raises(TypeError):
        plan.conv2d_pool_fused("float32", 1.0, (2, 3, 12, 12, 4, 5, 5, 2), "none", "max")  # keywords required
    with pytest.raises(ValueError, match="run_new: no output set"):
        plan.relu_cuda(100).run_new(256, 0, 0, 0)
