"""Seeded synthetic data with the shapes of the reports' data sets.

Every generator takes an integer ``seed`` and draws from
``numpy.random.default_rng(seed)`` in a fixed order, so equal arguments give
bit-identical arrays on every platform and NumPy version that keeps the
``Generator`` streams stable.
"""

from __future__ import annotations

import numpy as np

from ._paths import _check_float, _check_int

__all__ = ["KMEANS_SHAPES", "make_kmeans_blobs", "make_nctu_filters", "make_nctu_neurons"]

#: (numObjs, numCoords) of the CMU k-means report's data sets.
KMEANS_SHAPES: dict[str, tuple[int, int]] = {
    "kmeans01": (351, 34),
    "kmeans02": (7089, 4),
    "kmeans03": (191681, 22),
    "kmeans04": (488565, 8),
}

_I16_MIN, _I16_MAX = -(2**15), 2**15 - 1


def _rng(seed: object) -> np.random.Generator:
    return np.random.default_rng(_check_int(seed, "seed", low=0))


def make_kmeans_blobs(
    n_or_name: int | str,
    d: int | None = None,
    *,
    k: int = 3,
    seed: int = 0,
    spread: float = 1.0,
    scale: float = 10.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian clusters for k-means.

    ``k`` centres are drawn uniformly from the cube ``[-scale, scale]^d``;
    every object picks a cluster uniformly at random and adds isotropic
    Gaussian noise of standard deviation ``spread``.

    Parameters
    ----------
    n_or_name : int or str
        Number of objects N, or a key of :data:`KMEANS_SHAPES` (which also
        fixes D).
    d : int, optional
        Number of coordinates D; required with an int N, must be None or
        match with a name.
    k : int, default 3
        Number of clusters, >= 1.
    seed : int, default 0
        Non-negative seed of ``numpy.random.default_rng``.
    spread : float, default 1.0
        Standard deviation of the noise around each centre, >= 0.
    scale : float, default 10.0
        Half-width of the cube the centres are drawn from, >= 0.

    Returns
    -------
    x : numpy.ndarray
        float32, shape (N, D).
    labels : numpy.ndarray
        int32, shape (N,), the generating cluster of each object, 0..k-1.

    Raises
    ------
    TypeError
        Arguments of the wrong type.
    ValueError
        Unknown name, missing or conflicting ``d``, or out-of-range values.
    """
    if isinstance(n_or_name, str):
        if n_or_name not in KMEANS_SHAPES:
            raise ValueError(
                f"n_or_name: unknown data set {n_or_name!r}; expected one of "
                f"{sorted(KMEANS_SHAPES)} or an int"
            )
        n, dd = KMEANS_SHAPES[n_or_name]
        if d is not None and _check_int(d, "d", low=1) != dd:
            raise ValueError(f"d={d} conflicts with {n_or_name!r}, which has d={dd}")
    else:
        n = _check_int(n_or_name, "n_or_name", low=1)
        if d is None:
            raise ValueError("d is required when n_or_name is a number of objects")
        dd = _check_int(d, "d", low=1)
    k = _check_int(k, "k", low=1)
    spread = _check_float(spread, "spread", low=0.0)
    scale = _check_float(scale, "scale", low=0.0)
    rng = _rng(seed)
    centres = rng.uniform(-scale, scale, size=(k, dd))
    labels = rng.integers(0, k, size=n)
    x = centres[labels] + rng.normal(0.0, spread, size=(n, dd))
    return x.astype(np.float32), labels.astype(np.int32)


def make_nctu_filters(
    m: int = 512, c: int = 512, *, seed: int = 0, low: int = -9, high: int = 9
) -> np.ndarray:
    """3x3 filters with exactly one non-zero weight per slice, like the NCTU lab's.

    The lab's real ``filt.txt`` is not public; its kernels assume one non-zero
    per 3x3 slice, which this reproduces.

    Parameters
    ----------
    m : int, default 512
        Number of filters (output maps), >= 1.
    c : int, default 512
        Slices per filter (input maps), >= 1.
    seed : int, default 0
        Non-negative seed of ``numpy.random.default_rng``.
    low, high : int, default -9, 9
        Inclusive range of the non-zero weight, drawn uniformly among the
        non-zero integers in ``[low, high]``; within int16 and containing at
        least one non-zero integer.  The default keeps ``|w| <= 9``.

    Returns
    -------
    numpy.ndarray
        int16, shape (M, C, 3, 3); in every ``[i, j]`` slice exactly one
        entry, at a uniformly chosen position, is non-zero.

    Raises
    ------
    TypeError
        Non-integer arguments.
    ValueError
        Out-of-range sizes or an empty/zero-only value range.
    """
    m = _check_int(m, "m", low=1)
    c = _check_int(c, "c", low=1)
    low = _check_int(low, "low", low=_I16_MIN, high=_I16_MAX)
    high = _check_int(high, "high", low=_I16_MIN, high=_I16_MAX)
    values = np.arange(low, high + 1, dtype=np.int64)
    values = values[values != 0]
    if values.size == 0:
        raise ValueError(f"[low, high] = [{low}, {high}] contains no non-zero integer")
    rng = _rng(seed)
    picked = values[rng.integers(0, values.size, size=(m, c))]
    position = rng.integers(0, 9, size=(m, c))
    w = np.zeros((m, c, 9), dtype=np.int16)
    np.put_along_axis(w, position[..., None], picked[..., None].astype(np.int16), axis=2)
    return w.reshape(m, c, 3, 3)


def make_nctu_neurons(
    c: int = 512,
    h: int = 32,
    w: int = 32,
    *,
    density: float = 0.2,
    seed: int = 0,
    high: int = 999,
) -> np.ndarray:
    """Sparse non-negative input neurons like the NCTU lab's ``inNeu.txt``.

    Parameters
    ----------
    c, h, w : int, default 512, 32, 32
        Number of maps and map size, each >= 1.
    density : float, default 0.2
        Probability that an entry is non-zero, in [0, 1] (the reference file
        has about 20 % non-zeros).
    seed : int, default 0
        Non-negative seed of ``numpy.random.default_rng``.
    high : int, default 999
        Largest value, 1..32767; non-zeros are uniform in ``1..high``.

    Returns
    -------
    numpy.ndarray
        int16, shape (C, H, W), values in ``0..high``.

    Raises
    ------
    TypeError
        Non-numeric arguments.
    ValueError
        Out-of-range arguments.
    """
    c = _check_int(c, "c", low=1)
    h = _check_int(h, "h", low=1)
    w = _check_int(w, "w", low=1)
    density = _check_float(density, "density", low=0.0)
    if density > 1.0:
        raise ValueError(f"density must be <= 1, got {density}")
    high = _check_int(high, "high", low=1, high=_I16_MAX)
    rng = _rng(seed)
    mask = rng.random((c, h, w)) < density
    values = rng.integers(1, high + 1, size=(c, h, w), dtype=np.int16)
    return np.where(mask, values, np.int16(0)).astype(np.int16)
