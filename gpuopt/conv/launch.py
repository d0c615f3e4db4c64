"""How a conv2d GPU variant runs: one run function for every variant with a launcher of its own.

The launcher is the one the binding rule names for the variant being run (``ctx.variant``):
``conv2d_<variant>(args, **params)``, where ``args`` is one ``Conv2dArgs`` (the device addresses of
x, w, bias and y, the shape in the reports' names, the activation). When the launcher has host-side
checks (``check.conv2d_<variant>(shape, **params)``: shape and parameter limits the C++ knows, such as
the 64 KB constant bank or the 32-bit index ranges), they run first when an input must be copied to the
device, so that nothing is copied for a call that will be rejected. The launcher runs the same checks
itself, and its device-dependent ones (shared memory), before it launches anything: with every input
already on the device the Python-side call would only repeat them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._exec import ExecContext, check_before_copy
from .._ext import cuda_host_module, cuda_module, launcher, planner
from .._plan import device_ptrs
from ..cuda import DeviceArray
from .problem import Conv2dProblem

__all__ = ["conv2d_shape", "run_gpu"]


def conv2d_shape(p: Conv2dProblem) -> Any:
    """The compiled module's ``Conv2dShape`` of a problem (needs a CUDA build, not a GPU)."""
    return cuda_host_module("conv2d").Conv2dShape(*p.dims, *p.dilation, p.groups)


def run_gpu(ctx: ExecContext, p: Conv2dProblem, **params: Any) -> Any:
    """Run ``ctx.variant``'s launcher on ``p`` with its (resolved, launcher-ready) parameters."""
    shape = conv2d_shape(p)
    check_before_copy(ctx.variant, (p.x, p.w, p.bias), shape, **params)
    run = launcher(ctx.variant)
    dx, dw = ctx.device(p.x), ctx.device(p.w)
    dbias = None if p.bias is None else ctx.device(p.bias)
    dy = ctx.empty(p.output_shape, np.float32)
    args = cuda_host_module().Conv2dArgs(dx.ptr, dw.ptr, 0 if dbias is None else dbias.ptr, dy.ptr, shape,
                                         p.activation)
    with ctx.kernel():
        run(args, **params)
    if getattr(ctx, "planning", False):  # (test stand-ins of the context have no plans)
        ctx.offer_replay(_replay(ctx, p, shape, run, params))
    return ctx.finish(dy)


_F32 = np.dtype(np.float32)
_DA = DeviceArray


def _replay(ctx: ExecContext, p: Conv2dProblem, shape: Any, run: Any, params: dict[str, Any]) -> Any:
    """This launch again on new inputs of the same problem (a cached plan, gpuopt._plan): addresses in, one call
    to the variant's compiled LaunchPlan, which allocates the output, launches and returns the DeviceArray (or,
    without a planner, the launcher with the arguments packed, on an output allocated here)."""
    act = p.activation
    out_shape = tuple(p.output_shape)
    nbytes = 4 * out_shape[0] * out_shape[1] * out_shape[2] * out_shape[3]
    device_result = ctx.device_result
    cplan = planner(ctx.variant)
    if cplan is not None:
        launch = cplan(shape, act, **params)
        launch.set_output(DeviceArray, out_shape, _F32, nbytes, 3)
        run_new = launch.run_new

        def replay(stream: int, x: Any, w: Any, bias: Any) -> Any:
            if type(x) is _DA and type(w) is _DA and (bias is None or type(bias) is _DA):  # no copies
                y = run_new(x._ptr, w._ptr, 0 if bias is None else bias._ptr, stream)
            else:
                keep: list = []
                y = run_new(*device_ptrs((x, w, bias), keep, stream), stream)
            return y if device_result else y.numpy()

        return replay
    conv_args, cuda, alloc = cuda_host_module().Conv2dArgs, cuda_module(), DeviceArray._alloc

    def replay_unplanned(stream: int, x: Any, w: Any, bias: Any) -> Any:
        previous = cuda.set_stream(stream)
        try:
            keep: list = []
            px, pw, pb = device_ptrs((x, w, bias), keep, stream)
            dy = alloc(cuda, out_shape, _F32, nbytes)
            run(conv_args(px, pw, pb, dy._ptr, shape, act), **params)
        finally:
            cuda.set_stream(previous)
        return dy if device_result else dy.numpy()

    return replay_unplanned
