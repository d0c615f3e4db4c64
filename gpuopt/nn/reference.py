"""The CPU references of the layer ops (csrc/nn/nn_cpu.cpp), registered as each op's ``cpu`` variant."""

from __future__ import annotations

from .. import _core
from .._exec import ExecContext
from ..registry import register

_CPU = dict(report="reference", needs_cuda=False, kernel="csrc/nn/nn_cpu.cpp", test="tests/nn/test_nn.py")


def _host_op(fn):
    """A CPU reference as a variant: arrays to the host, fn timed as the kernel, result back."""

    def run(ctx: ExecContext, *args):
        host = [a if a is None or isinstance(a, (int, str)) else ctx.host(a) for a in args]
        with ctx.kernel():
            out = fn(*host)
        return ctx.finish(out)

    return run


register("relu", "cpu", description="CPU reference", **_CPU)(_host_op(lambda x: _core.activation(x, "relu")))
register("tanh", "cpu", description="CPU reference", **_CPU)(_host_op(lambda x: _core.activation(x, "tanh")))
register("max_pool2d", "cpu", description="CPU reference", **_CPU)(_host_op(lambda x, n: _core.pool2d(x, n, "max")))
register("avg_pool2d", "cpu", description="CPU reference", **_CPU)(_host_op(lambda x, n: _core.pool2d(x, n, "avg")))
register("fully_connected", "cpu", description="CPU reference, float64 accumulation; activation on the float result",
         **_CPU)(_host_op(_core.fully_connected))
register("argmax", "cpu", description="CPU reference", **_CPU)(_host_op(_core.argmax))
register("softmax", "cpu", description="CPU reference, float64 exp and sum",
         **_CPU)(_host_op(_core.softmax))
