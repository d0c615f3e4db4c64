"""Initial centres for :func:`gpuopt.kmeans`: Liao's ``first`` (the default), ``random`` and ``kmeans++``.

Every method is a pure function of the data, k and the seed, so a run is reproducible and every variant
starts from the same centres (what the Liao-exact variants need to stay bit-identical to ``cpu``):

* ``first``: objects 0..k-1, as Liao's programs.
* ``random``: k distinct objects drawn uniformly, ``numpy.random.default_rng(seed).choice(N, k, replace=False)``,
  in the order drawn.
* ``kmeans++`` (Arthur and Vassilvitskii, 2007): the first centre drawn uniformly, each next one with
  probability proportional to D(x)^2, the squared distance (float64) to the nearest centre chosen so far;
  the draw inverts the float64 cumulative sum with ``rng.random()``. When every D(x)^2 is 0 (fewer distinct
  points than k) the next centre is drawn uniformly among the objects not chosen yet. Computed on the host
  (a device ``x`` is copied there once): O(N k D) float64 work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cuda import DeviceArray

__all__ = ["INIT_METHODS", "initial_centres"]

INIT_METHODS = ("first", "random", "kmeans++")


def _rows(x: Any, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` of x (N, D) as a float32 NumPy array; a device x copies only those rows."""
    if isinstance(x, DeviceArray):
        d = x.shape[1]
        out = np.empty((len(idx), d), np.float32)
        for r, i in enumerate(idx.tolist()):
            out[r] = DeviceArray((1, d), np.float32, x.ptr + int(i) * d * 4, x).numpy()[0]
        return out
    return np.array(x[idx], dtype=np.float32)


def _kmeans_plus_plus(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    n = x.shape[0]
    x64 = x.astype(np.float64)
    chosen = [int(rng.integers(n))]
    d2 = ((x64 - x64[chosen[0]]) ** 2).sum(axis=1)
    for _ in range(1, k):
        total = float(d2.sum())
        if total > 0:
            cum = np.cumsum(d2)
            i = int(np.searchsorted(cum, rng.random() * cum[-1], side="right"))
            i = min(i, n - 1)
            while d2[i] == 0:  # rounding at the top of the cumulative sum: step back to a point with weight
                i -= 1
        else:  # every point coincides with a chosen centre: draw among the others
            rest = np.setdiff1d(np.arange(n), chosen)
            i = int(rest[rng.integers(len(rest))])
        chosen.append(i)
        d2 = np.minimum(d2, ((x64 - x64[i]) ** 2).sum(axis=1))
    return np.array(chosen, dtype=np.int64)


def initial_centres(x: Any, k: int, method: str = "first", seed: int = 0) -> np.ndarray:
    """The k initial centres (k, D) float32 of ``method`` (see the module docstring) for x (N, D), NumPy or a
    device array, with 1 <= k <= N (checked by the caller)."""
    n = x.shape[0]
    if method == "first":
        return x.rows(k) if isinstance(x, DeviceArray) else np.array(x[:k], dtype=np.float32)
    rng = np.random.default_rng(seed)
    if method == "random":
        return _rows(x, rng.choice(n, k, replace=False))
    if method == "kmeans++":
        host = x.numpy() if isinstance(x, DeviceArray) else np.asarray(x, np.float32)
        return host[_kmeans_plus_plus(host, k, rng)].copy()
    raise ValueError(f"init must be one of {list(INIT_METHODS)} or an array of shape (k, D), got {method!r}")
