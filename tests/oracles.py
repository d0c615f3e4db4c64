"""Independent NumPy implementations the C++ references are tested against.

Written from the definitions, not from the C++: float64 sliding windows for conv,
float64 products, a float32 re-statement of Liao's seq_kmeans, int64 sparse conv.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def conv2d(x, w, bias=None, stride=(1, 1), padding=(0, 0), activation="none", dilation=(1, 1), groups=1):
    """float64 cross-correlation: any stride, padding, dilation and groups (w: (K, C / groups, R, S))."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    (u, v), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    r, s = w.shape[2:]
    span = ((r - 1) * dh + 1, (s - 1) * dw + 1)
    win = sliding_window_view(xp, span, axis=(2, 3))[:, :, ::u, ::v, ::dh, ::dw]  # N C P Q R S
    n, c, pp, q = win.shape[:4]
    k, cg = w.shape[:2]
    win = win.reshape(n, groups, cg, pp, q, r, s)
    y = np.einsum("ngcpqrs,gkcrs->ngkpq", win, w.reshape(groups, k // groups, cg, r, s)).reshape(n, k, pp, q)
    if bias is not None:
        y = y + np.asarray(bias, np.float64)[None, :, None, None]
    return apply_activation(y, activation)


def apply_activation(y, activation):
    if activation == "relu":
        return np.where(y < 0, 0.0, y)
    if activation == "tanh":
        return np.tanh(y)
    return y


def matmul(a, b):
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


def liao_kmeans(x, k, threshold=0.001, max_iter=500, init=None):
    """Liao's seq_kmeans in float32, vectorised over objects, sequential where he is."""
    x = np.asarray(x, np.float32)
    n, d = x.shape
    clusters = (x[:k] if init is None else np.asarray(init, np.float32)).copy()
    membership = np.full(n, -1, dtype=np.int64)
    thr = np.float32(threshold)
    deltas = []
    while True:
        # Squared distances summed over coordinates in order, in float32.
        dist = np.zeros((n, k), dtype=np.float32)
        for j in range(d):
            diff = x[:, j : j + 1] - clusters[None, :, j]
            dist = dist + diff * diff
        index = np.argmin(dist, axis=1)  # first minimum = strict '<' scan
        changed = int((index != membership).sum())
        membership = index
        sums = np.zeros((k, d), dtype=np.float32)
        np.add.at(sums, membership, x)  # unbuffered, in object order, float32 rounding
        counts = np.bincount(membership, minlength=k)
        for c in range(k):
            if counts[c] > 0:
                clusters[c] = sums[c] / np.float32(counts[c])
        delta = np.float32(changed) / np.float32(n)
        deltas.append(delta)
        if not (delta > thr and len(deltas) < max_iter):
            break
    return clusters, membership.astype(np.int32), len(deltas), np.array(deltas, np.float32)


def sparse_conv(x, w):
    """'same' conv (int64), ReLU, 2x2 max pool stride 2."""
    x = np.asarray(x, np.int64)
    w = np.asarray(w, np.int64)
    r, s = w.shape[2:]
    xp = np.pad(x, ((0, 0), (r // 2, r // 2), (s // 2, s // 2)))
    win = sliding_window_view(xp, (r, s), axis=(1, 2))  # C H W R S
    y = np.einsum("chwrs,mcrs->mhw", win, w)
    y = np.maximum(y, 0)
    m, h, wd = y.shape
    y = y[:, : h // 2 * 2, : wd // 2 * 2].reshape(m, h // 2, 2, wd // 2, 2)
    return y.max(axis=(2, 4))


def pool2d(x, size, kind):
    x = np.asarray(x, np.float64)
    h, w = x.shape[-2:]
    oh, ow = h // size, w // size
    x = x[..., : oh * size, : ow * size].reshape(*x.shape[:-2], oh, size, ow, size)
    return x.max(axis=(-3, -1)) if kind == "max" else x.mean(axis=(-3, -1))


def softmax(x):
    """Row softmax in float64, the max subtracted first (NaN/+inf in a row, or a row of -inf: NaN row)."""
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf: the NaN rows
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
