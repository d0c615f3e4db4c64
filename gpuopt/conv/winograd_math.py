"""Winograd minimal filtering F(m x m, r x r): exact transforms and a reference of the algorithm.

Fast-algorithm convolutions (conv2d's ``winograd``, :mod:`.winograd`; conv2d_pool's ``winograd``) trade
multiplies for rounding: ``F(m, r)`` computes an m x m output tile of an r x r filter from an n x n input
tile (n = m + r - 1) with n^2 multiplies instead of m^2 r^2, as ``Y = A^T [(G g G^T) * (B^T d B)] A``. This module builds ``A^T``, ``G`` and ``B^T`` exactly
(rational arithmetic) for any m and r, and runs the whole algorithm on NumPy arrays in a chosen precision,
so the error of each tile size can be measured against float64 before a kernel exists, and a kernel can be
checked against the same transforms.

Construction (Toom-Cook, transposed). A linear convolution h = g * e of a filter g (r taps) and a signal e
(m samples) is exact through evaluation at n points: h = C [(V_g g) * (V_e e)], where V_q evaluates a
polynomial of degree q - 1 at the points (the point at infinity reads the leading coefficient) and
C = V_h^-1 interpolates. Correlation, what ``conv2d`` computes, is the transpose of that map in e, so
``y = V_e^T [(V_g g) * (C^T d)]``: A^T = V_e^T, G = V_g, B^T = C^T. Points are 0, +-1, +-2, +-1/2, ... and
infinity, the small-magnitude choice that keeps the transforms' entries and so the rounding small
(Lavin and Gray, 2016).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np

__all__ = ["winograd_points", "winograd_transforms", "conv2d_winograd"]

#: Finite points in the order they are taken; infinity is always the last point.
_POINT_ORDER = (Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2), Fraction(1, 2), Fraction(-1, 2),
                Fraction(4), Fraction(-4), Fraction(1, 4), Fraction(-1, 4), Fraction(3), Fraction(-3))


def winograd_points(n: int) -> tuple[Fraction, ...]:
    """The n - 1 finite interpolation points of an n-point transform (infinity is the n-th)."""
    if not 1 <= n <= len(_POINT_ORDER) + 1:
        raise ValueError(f"tile size n = m + r - 1 must be in 1..{len(_POINT_ORDER) + 1}, got {n}")
    return _POINT_ORDER[: n - 1]


def _vandermonde(points: tuple[Fraction, ...], cols: int) -> list[list[Fraction]]:
    """Rows: a polynomial of ``cols`` coefficients (lowest first) evaluated at each point, then at infinity."""
    rows = [[p ** j for j in range(cols)] for p in points]
    rows.append([Fraction(0)] * (cols - 1) + [Fraction(1)])
    return rows


def _inverse(a: list[list[Fraction]]) -> list[list[Fraction]]:
    """Exact inverse by Gauss-Jordan elimination (the matrix is a nonsingular Vandermonde variant)."""
    n = len(a)
    m = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(a)]
    for col in range(n):
        pivot = next(r for r in range(col, n) if m[r][col] != 0)
        m[col], m[pivot] = m[pivot], m[col]
        inv = 1 / m[col][col]
        m[col] = [v * inv for v in m[col]]
        for r in range(n):
            if r != col and m[r][col] != 0:
                f = m[r][col]
                m[r] = [v - f * w for v, w in zip(m[r], m[col])]
    return [row[n:] for row in m]


@lru_cache(maxsize=None)
def _exact(m: int, r: int) -> tuple[tuple[tuple[Fraction, ...], ...], ...]:
    n = m + r - 1
    pts = winograd_points(n)
    v_e, v_g, v_h = _vandermonde(pts, m), _vandermonde(pts, r), _vandermonde(pts, n)
    c = _inverse(v_h)
    at = [[v_e[i][j] for i in range(n)] for j in range(m)]  # V_e^T: m x n
    bt = [[c[i][j] for i in range(n)] for j in range(n)]  # C^T: n x n
    return tuple(tuple(map(tuple, t)) for t in (at, v_g, bt))


def winograd_transforms(m: int, r: int, dtype=np.float64, *, exact: bool = False):
    """``(A^T, G, B^T)`` of F(m, r): shapes (m, n), (n, r), (n, n) with n = m + r - 1.

    ``exact=True`` gives them as nested tuples of :class:`fractions.Fraction`; otherwise as arrays of
    ``dtype`` (each entry rounded once from its exact value).
    """
    if m < 1 or r < 1:
        raise ValueError(f"F(m, r) needs m >= 1 and r >= 1, got m={m}, r={r}")
    mats = _exact(m, r)
    if exact:
        return mats
    return tuple(np.array([[float(v) for v in row] for row in t], dtype=dtype) for t in mats)


def conv2d_winograd(x: np.ndarray, w: np.ndarray, m: int, *, padding: int = 0, dtype=np.float32) -> np.ndarray:
    """Stride-1 ``conv2d`` (cross-correlation, NCHW x KCRS, square filters) by F(m x m, r x r), every step in
    ``dtype``: filter transform, input transform, the per-point channel sums (a batched matrix product) and
    the output transform. Returns (N, K, P, Q) in ``dtype``. A reference of the algorithm, not a fast path."""
    x = np.asarray(x, dtype=dtype)
    w = np.asarray(w, dtype=dtype)
    n_img, c, h, wd = x.shape
    k, c2, r, s = w.shape
    if c2 != c or r != s:
        raise ValueError(f"need w (K, C, r, r) with C = {c}, got {w.shape}")
    if padding:
        x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
        h, wd = h + 2 * padding, wd + 2 * padding
    p, q = h - r + 1, wd - r + 1
    if p < 1 or q < 1:
        raise ValueError(f"filter {r}x{r} larger than the (padded) input {h}x{wd}")
    at, g, bt = winograd_transforms(m, r, dtype)
    n = m + r - 1
    tp, tq = -(-p // m), -(-q // m)  # tiles; the last ones read zero padding and are cropped
    xp = np.zeros((n_img, c, tp * m + r - 1, tq * m + r - 1), dtype)
    xp[:, :, :h, :wd] = x
    # d[..., i, j, :, :]: the n x n input tile of output tile (i, j)
    idx = (np.arange(tp)[:, None] * m + np.arange(n)[None, :])
    jdx = (np.arange(tq)[:, None] * m + np.arange(n)[None, :])
    d = xp[:, :, idx[:, None, :, None], jdx[None, :, None, :]]  # (N, C, tp, tq, n, n)
    u = np.einsum("ai,kcij,bj->kcab", g, w, g, optimize=True).astype(dtype)  # G g G^T: (K, C, n, n)
    v = np.einsum("ai,nctuij,bj->nctuab", bt, d, bt, optimize=True).astype(dtype)  # B^T d B
    # Per transform point (a, b): a (K x C) by (C x tiles) product, as a kernel's batched GEMM.
    vv = v.transpose(4, 5, 1, 0, 2, 3).reshape(n, n, c, -1)
    uu = u.transpose(2, 3, 0, 1)
    mm = np.matmul(uu, vv).astype(dtype)  # (n, n, K, N*tp*tq)
    mm = mm.reshape(n, n, k, n_img, tp, tq)
    y = np.einsum("ia,abknpq,jb->nkpiqj", at, mm, at, optimize=True).astype(dtype)  # A^T M A
    return np.ascontiguousarray(y.reshape(n_img, k, tp * m, tq * m)[:, :, :p, :q])
