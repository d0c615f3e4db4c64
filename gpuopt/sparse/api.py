"""The public ``gpuopt.sparse_conv2d``: the NCTU lab's layer, argument checks, then the variant's run function."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _plan
from .._exec import Op
from .._validate import Buffer, check_memory, int_array, runs_on_gpu
from ..cuda import DeviceArray
from ..registry import default_variant
from .formats import COOFilters, FASTFilters, to_coo, to_dense, to_fast
from .neurons import SparseNeurons

__all__ = ["sparse_conv2d", "SparseConvProblem"]


@dataclass(frozen=True)
class SparseConvProblem:
    """A validated sparse_conv2d call: x int16 (C, H, W) and the filters in the form given."""

    x: Any  # numpy.ndarray or DeviceArray (int16)
    filters: Any  # dense numpy / DeviceArray, COOFilters or FASTFilters
    shape: tuple[int, int, int, int]  # (M, C, R, S)
    neurons: SparseNeurons | None = None  # x given as SparseNeurons (x is then its dense maps)

    def dense(self) -> np.ndarray:
        return to_dense(self.filters)

    def coo(self) -> COOFilters:
        return to_coo(self.filters)

    def fast(self) -> FASTFilters:
        return to_fast(self.filters)


def sparse_conv2d(x, w, *, variant: str | None = None, timing: bool = False, stream: Any = None, **params: Any):
    """The NCTU lab's sparse convolution layer: conv ("same", stride 1) -> ReLU -> 2x2 max pool.

    ``y[m, i, j] = max over the 2x2 window at (2i, 2j) of relu(sum_{c, r, s}
    w[m, c, r, s] * x[c, h + r - R//2, w + s - S//2])`` with zero padding, in exact
    integer arithmetic. The result equals the lab's int32 accumulation; a sum that
    does not fit in int32 raises ValueError instead of wrapping silently. With a device
    result the call does not wait for the kernel to say so: where the host cannot prove the
    sums fit (max|x| x the largest sum of |w| over a map's taps, known for COO and FAST
    filters and SparseNeurons), the error is raised by the result's first ``numpy()``,
    ``rows()`` or ``check()``, or by ``gpuopt.synchronize()``.

    Parameters
    ----------
    x : array_like, integer, shape (C, H, W), or SparseNeurons
        Input maps; values must fit int16 (the lab's ``short``). H, W >= 2. :class:`SparseNeurons` on the device
        give ``fast_sparse_input`` their lists (no compaction per call); other variants read their dense maps.
    w : array_like integer (M, C, R, S), COOFilters or FASTFilters
        Filters with odd R and S (3x3 in the lab); values must fit int16.
    variant : str, optional
        Implementation (see ``gpuopt.variants("sparse_conv2d")``).
    timing : bool
        Also return a :class:`gpuopt.Timing`: kernels, host-to-device (input maps and
        filters in the variant's format) and device-to-host, as the lab graded them.

    stream : optional
        The stream to run on: a ``cudaStream_t`` handle (int), ``torch.cuda.Stream``, CuPy stream, or anything
        with ``cuda_stream``/``ptr``/``__cuda_stream__``. Default: the first device input's stream (PyTorch's
        or CuPy's current stream for their arrays), else the legacy default stream (:mod:`gpuopt.cuda`).

    Returns
    -------
    numpy.ndarray or DeviceArray, int32, shape (M, H // 2, W // 2)
        A trailing odd row/column is dropped by the pooling. A DeviceArray when x is a
        device array (int16, C-contiguous). With ``timing=True``: ``(y, Timing)``.
    """
    return _OP(variant, timing, params, x, w, stream=stream)


def _validate(x, w):
    neurons = x if isinstance(x, SparseNeurons) else None
    x = neurons.dense if neurons is not None else int_array(x, "x", 3, "(C, H, W)")
    if isinstance(w, (COOFilters, FASTFilters)):
        shape = w.shape
        filters: Any = w
    else:
        filters = int_array(w, "w", 4, "(M, C, R, S)")
        shape = filters.shape
    m, c, r, s = shape
    if c != x.shape[0]:
        raise ValueError(f"w has {c} input channels but x has {x.shape[0]} maps")
    if r % 2 == 0 or s % 2 == 0:
        raise ValueError(f"filters must have odd sides for 'same' padding, got {r}x{s}")
    if x.shape[1] < 2 or x.shape[2] < 2:
        raise ValueError(f"x maps must be at least 2x2 for the 2x2 max pool, got {x.shape[1]}x{x.shape[2]}")
    return (x, filters), (SparseConvProblem(x, filters, shape, neurons),)


#: The variants that read the filters as a dense (M, C, R, S) int16 array, expanding COO or FAST filters to it.
_DENSE_READERS = ("cpu", "dense")


def check_sizes(p: SparseConvProblem, variant: str | None) -> None:
    """ValueError naming the arguments when the output of ``p``, (M, H // 2, W // 2) int32, or the dense filters
    (M, C, R, S) int16 that ``cpu`` and ``dense`` expand COO or FAST filters to (a COO filter of declared side
    10**6 + 1 holds no more values than a 3x3 one, but expands to 10**12 taps a slice), is larger than the memory
    that would hold it (:func:`gpuopt._validate.check_memory`; nothing is allocated)."""
    m, c, r, s = p.shape
    _, h, w = p.x.shape
    buffers = [Buffer(lambda: f"the output (M, H // 2, W // 2) = ({m}, {h // 2}, {w // 2}) int32",
                      4 * m * (h // 2) * (w // 2))]
    expanded = isinstance(p.filters, (COOFilters, FASTFilters))
    name = default_variant("sparse_conv2d") if variant is None else variant  # (None: outside sparse_conv2d)
    if expanded and name in _DENSE_READERS:
        dense = Buffer(lambda: f"the dense filters (M, C, R, S) = {(m, c, r, s)} int16", 2 * m * c * r * s, "host")
        buffers += [dense] if name == "cpu" else [dense, dense._replace(where="device")]
    kind = type(p.filters).__name__ if expanded else "w"
    check_memory("sparse_conv2d", lambda: f"x (C, H, W) = {(c, h, w)} and {kind} (M, C, R, S) = {(m, c, r, s)}",
                 buffers, gpu=lambda: runs_on_gpu("sparse_conv2d", variant),
                 device_result=any(isinstance(a, DeviceArray) for a in (p.x, p.filters)))


_INT32_MAX = int(np.iinfo(np.int32).max)
INT16_ABS_MAX = 32768  # |x| of any int16 (-32768)


def sums_fit_int32(xmax: int, wsum: int) -> bool:
    """Whether every pre-activation sum fits int32 when max|x| <= ``xmax`` and each map's sum of |w| <= ``wsum``."""
    return int(xmax) * int(wsum) <= _INT32_MAX


def _key(x, w):
    """The plan key: x as an array key (SparseNeurons take the long way), COO/FAST filters by type and shape (what
    every check of a call reads), whether their taps fit int8 (``auto``'s choice) and whether they prove the int32
    bound for any int16 x (whether a device result's overflow flag is deferred); the plans read the filters' own
    arrays on each call. (Both facts are cached by the filters.)"""
    kx, hx = _plan.arg_key(x)
    if type(w) in (COOFilters, FASTFilters):
        return (kx, type(w), w.shape, w.taps_fit_int8, sums_fit_int32(INT16_ABS_MAX, w.max_map_abs_sum)), (hx, w)
    kw, hw = _plan.arg_key(w)
    return (kx, kw), (hx, hw)


def _rebuild(p: SparseConvProblem):
    shape = p.shape
    return lambda x, w: (SparseConvProblem(x, w, shape),)


_OP = Op("sparse_conv2d", _validate, check=lambda variant, p: check_sizes(p, variant), key=_key, rebuild=_rebuild)
