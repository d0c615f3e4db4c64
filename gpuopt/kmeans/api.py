"""The public ``gpuopt.kmeans``: its result type, argument checks, then the variant's run function."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _plan
from .._exec import Op
from .._validate import choice, float_array, integer, real
from ..cuda import DeviceArray
from .half import widened
from .init import INIT_METHODS, initial_centres

__all__ = ["kmeans", "KMeansResult", "KMeansProblem"]

_FLOAT32 = np.dtype(np.float32)


class KMeansResult:
    """Outcome of :func:`gpuopt.kmeans` (read-only).

    Attributes
    ----------
    centroids : numpy.ndarray (or DeviceArray for device input), float32, shape (k, D)
        Final cluster centres.
    membership : numpy.ndarray (or DeviceArray for device input), int32, shape (N,)
        Index of the centre each object belongs to.
    iterations : int
        Loops run (Liao's "Loop iterations").
    delta : numpy.ndarray, float32, shape (iterations,)
        Fraction of objects whose membership changed, per loop.
    converged : bool
        Whether the last loop met the threshold (False when max_iter stopped it).

    For a device ``x`` whose loop runs in one launch (``device_persistent``, what ``auto`` picks for small loops),
    the call returns as soon as the loop is queued: ``centroids`` and
    ``membership`` are device arrays ordered after it on the call's stream, and ``iterations``, ``delta`` and
    ``converged`` are read from the device on first access (that read waits for the loop; with ``max_iter=1`` they
    are known without it). A loop of calls therefore costs the GPU's time, not a host round trip a call.
    """

    __slots__ = ("_centroids", "_membership", "_iterations", "_delta", "_converged", "_pending")

    def __init__(self, centroids: Any, membership: Any, iterations: int, delta: np.ndarray, converged: bool) -> None:
        self._centroids, self._membership = centroids, membership
        self._iterations, self._delta, self._converged = iterations, delta, converged
        self._pending = None

    @classmethod
    def _deferred(cls, centroids: Any, membership: Any, loop: DeviceArray, threshold: float) -> KMeansResult:
        """A result whose loop count and history are still on the device: ``loop`` int32 [1 + max_iter], the count
        then the history's float32 bits (kmeans_persistent.cu), read on first access."""
        r = cls.__new__(cls)
        r._centroids, r._membership, r._pending = centroids, membership, (loop, threshold)
        return r

    def _settled(self) -> KMeansResult:
        """self, its loop record read first where it is still on the device."""
        if self._pending is not None:
            self._settle()
        return self

    def _settle(self) -> None:
        loop, threshold = self._pending
        info = loop.numpy()  # waits for the loop on its stream
        iterations = int(info[0])
        if not 1 <= iterations < info.size:
            raise RuntimeError(f"kmeans: the device loop reported {iterations} loops (expected 1..{info.size - 1})")
        delta = info[1:1 + iterations].view(np.float32).copy()
        if np.isnan(delta[-1]):  # kmeans_persistent.cu: the last loop's centre sums were not finite
            self._pending = None
            raise ValueError(f"kmeans: x must contain only finite values: the centre sums of loop {iterations} "
                             f"were NaN or inf (found on the device)")
        self._iterations, self._delta = iterations, delta
        self._converged = bool(delta[-1] <= np.float32(threshold))
        self._pending = None

    @property
    def centroids(self) -> Any:
        return self._centroids

    @property
    def membership(self) -> Any:
        return self._membership

    iterations = property(lambda self: self._settled()._iterations, doc="int: loops run")
    delta = property(lambda self: self._settled()._delta, doc="numpy.ndarray float32 (iterations,): delta per loop")
    converged = property(lambda self: self._settled()._converged, doc="bool: whether the last loop met the threshold")

    def __repr__(self) -> str:
        if self._pending is not None:
            loop = "iterations=<on the device>"
        else:
            loop = f"iterations={self._iterations}, delta={self._delta!r}, converged={self._converged}"
        return f"KMeansResult(centroids={self._centroids!r}, membership={self._membership!r}, {loop})"


@dataclass(frozen=True)
class KMeansProblem:
    """A validated kmeans call: x (N, D) float32, init (k, D) float32 initial centres (on the device, a view of
    x's first k rows, where x is on the device and init is "first")."""

    x: Any  # numpy.ndarray or DeviceArray
    init: Any  # numpy.ndarray or DeviceArray
    threshold: float
    max_iter: int


def kmeans(x, k, *, threshold=0.001, max_iter=500, init=None, seed: int = 0, variant: str | None = None,
           timing: bool = False, stream: Any = None, **params: Any):
    """k-means clustering exactly as Wei-keng Liao's ``seq_kmeans`` computes it.

    The initial centres are the first ``k`` objects (or ``init``). Each loop assigns
    every object to its nearest centre by squared Euclidean distance (float32, summed
    over coordinates in order; ties go to the lower centre index), sets
    ``delta`` = fraction of objects whose membership changed (all of them in the first
    loop), and replaces each centre by the mean of its members (sums in object order;
    an empty cluster keeps its centre). It stops when ``delta <= threshold`` or after
    ``max_iter`` loops. (Liao's own loop cap, ``loop++ < 500``, allows 501 loops.)

    Parameters
    ----------
    x : array_like, float, shape (N, D)
        N objects with D coordinates each. Float32 is used as given; other host floats are converted; float16
        (any device array) and bfloat16 (a torch tensor, or ml_dtypes' on the host) are widened to float32 before
        the loop (on the device for device arrays, a float32 copy of x of the call's own, not in ``kernel_ms``):
        every half value is a float32, so the result is the float32 run's on the same points, bit for bit.
    k : int
        Number of clusters, 1 <= k <= N.
    threshold : float
        Convergence threshold on delta, finite and >= 0 (compared in float32).
    max_iter : int
        Most loops to run, >= 1.
    init : "first", "random", "kmeans++" or array_like float (k, D), optional
        Initial centres: ``"first"`` (default, Liao's: ``x[:k]``), ``"random"`` (k distinct objects),
        ``"kmeans++"`` (D(x)^2 sampling), both drawn with ``seed`` (see :mod:`gpuopt.kmeans.init`), or
        the centres themselves (finite).
    seed : int
        Seed of the ``random`` and ``kmeans++`` draws (>= 0); the same seed gives the same centres.
    variant : str, optional
        Implementation (see ``gpuopt.variants("kmeans")``). None: ``auto`` on a GPU (the loop on the GPU,
        centre sums as ``cpu(summation="chunked")``: Liao's centres up to rounding), else ``cpu``.
    timing : bool
        Also return a :class:`gpuopt.Timing` (its ``kernel_ms`` is Liao's "computation
        timing": the whole loop).

    stream : optional
        The stream to run on: a ``cudaStream_t`` handle (int), ``torch.cuda.Stream``, CuPy stream, or anything
        with ``cuda_stream``/``ptr``/``__cuda_stream__``. Default: the first device input's stream (PyTorch's
        or CuPy's current stream for their arrays), else the legacy default stream (:mod:`gpuopt.cuda`).

    Returns
    -------
    KMeansResult
        ``centroids`` (k, D) float32, ``membership`` (N,) int32, ``iterations``,
        ``delta`` history; device arrays for a device ``x``. With ``timing=True``:
        ``(result, Timing)``.

    Raises
    ------
    TypeError
        Non-float x/init, non-integer k or max_iter, non-real threshold.
    ValueError
        Wrong shapes, empty x, non-finite x/init/threshold, k out of range,
        unknown variant or parameter. A NumPy x is checked on the host; a device x by the loop-on-the-GPU
        variants, on the device, at no pass of their own: a NaN or inf point makes its cluster's centre sums
        non-finite, the loop's close sees it and stops the run, and the call raises at its stop-flag read
        (``device_persistent`` on device arrays: when the result's loop count or history is read; a one-loop
        call on device arrays reads nothing back, so there it shows only as non-finite centres).
    """
    return _OP(variant, timing, params, x, k, threshold, max_iter, init, seed, stream=stream)


def _key(x, k, threshold, max_iter, init, seed):
    # Device x only (a NumPy x's finiteness is checked on every call), with Liao's first-k initial centres.
    if not (init is None or (type(init) is str and init == "first")):
        raise _plan.Uncacheable
    kx, hx = _plan.arg_key(x)
    if type(hx) is not DeviceArray or hx._dtype != _FLOAT32 or type(threshold) not in (int, float):
        raise _plan.Uncacheable  # (half-precision x: widened on every call, see .half)
    return ((kx, _plan.scalar_key(k), type(threshold), threshold, _plan.scalar_key(max_iter), init,
             _plan.scalar_key(seed)), (hx,))


def _validate(x, k, threshold, max_iter, init, seed):
    x = float_array(widened(x), "x", 2, "(N, D)")
    n, d = x.shape
    k = integer(k, "k", 1)
    if k > n:
        raise ValueError(f"k must be <= the number of objects N={n}, got k={k}")
    threshold = real(threshold, "threshold", 0.0)
    max_iter = integer(max_iter, "max_iter", 1)
    on_device = not isinstance(x, np.ndarray)
    if not on_device and not np.isfinite(x).all():
        raise ValueError("x must contain only finite values (NaN/inf found)")
    seed = integer(seed, "seed", 0)
    method = None if init is not None and not isinstance(init, str) else choice(init or "first", "init", INIT_METHODS)
    if method == "first" and on_device:
        # Liao's first k objects, left on the device (a view of x): the loop-on-the-GPU variants copy them there,
        # with no host round trip; the others copy them to the host.
        init = DeviceArray((k, d), np.float32, x.ptr, x)
    elif method is not None:
        init = initial_centres(x, k, method, seed)
    else:
        init = float_array(init, "init", 2, "(k, D)")
        if init.shape != (k, d):
            raise ValueError(f"init must have shape (k, D) = ({k}, {d}), got {init.shape}")
        if not np.isfinite(init).all():
            raise ValueError("init must contain only finite values")
    return (x,), (KMeansProblem(x, init, threshold, max_iter),)


def _rebuild(p: KMeansProblem):
    (k, d), threshold, max_iter = p.init.shape, p.threshold, p.max_iter
    return lambda xh: (KMeansProblem(xh, DeviceArray((k, d), np.float32, xh.ptr, xh), threshold, max_iter),)


def _result(out, x, k, threshold, *rest) -> KMeansResult:
    centroids, membership, iterations, delta = out
    if not iterations:  # a deferred loop: delta is its device record (device_persistent)
        if rest[0] == 1:  # one loop changes every membership (from none): delta 1.0, known without a read
            return KMeansResult(centroids, membership, 1, np.ones(1, np.float32), bool(1.0 <= np.float32(threshold)))
        return KMeansResult._deferred(centroids, membership, delta, float(threshold))
    return KMeansResult(centroids, membership, int(iterations), delta, bool(delta[-1] <= np.float32(float(threshold))))


_OP = Op("kmeans", _validate, key=_key, rebuild=_rebuild, result=_result)
