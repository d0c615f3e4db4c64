"""Shared pieces of the gpuopt.models tests: independent NumPy forwards, data, stage gating."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import gpuopt
from gpuopt.models import missing, stages
import oracles

HAVE_H5PY = importlib.util.find_spec("h5py") is not None
needs_h5py = pytest.mark.skipif(not HAVE_H5PY, reason="h5py is not installed (pip install gpuopt[test])")


def data_file(*parts):
    """A file of the reference data, or skip."""
    path = gpuopt.datasets.data_path(*parts, required=False)
    if path is None:
        pytest.skip(f"reference data {'/'.join(parts)} not found: set GPUOPT_DATA_DIR or check out ../shared/data")
    return path


def avg_pool(x):
    n, c, h, w = x.shape
    return x[:, :, : h // 2 * 2, : w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).mean(axis=(3, 5))


def max_pool(x):
    n, c, h, w = x.shape
    return x[:, :, : h // 2 * 2, : w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def as_nchw_float(images, side):
    x = np.asarray(images)
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / np.float32(255)
    return x.reshape(len(x), 1, side, side).astype(np.float64)


def mnist_forward(conv1, conv2, fc1_file, fc2, images):
    """The ECE408 network from its definition, float64: conv (K, C, R, S), fc1 rows in NHWC flatten order."""
    relu = lambda a: np.maximum(a, 0.0)  # noqa: E731
    h = avg_pool(relu(oracles.conv2d(as_nchw_float(images, 28), conv1)))
    h = avg_pool(relu(oracles.conv2d(h, conv2)))
    h = h.transpose(0, 2, 3, 1).reshape(len(h), -1)  # NHWC flatten, as the project's code
    return relu(h @ np.asarray(fc1_file, np.float64)) @ np.asarray(fc2, np.float64)


def fashion_forward(w, images):
    """The Fashion-MNIST network from its definition, float64 (w: the FASHION_KEYS arrays)."""
    h = max_pool(np.tanh(oracles.conv2d(as_nchw_float(images, 64), w["conv1"])))
    h = oracles.conv2d(h, w["conv2"]).reshape(len(h), -1)  # NCHW flatten, as MXNet's Flatten
    h = np.tanh(h @ np.asarray(w["fc1"], np.float64) + w["fc1_bias"])
    return h @ np.asarray(w["fc2"], np.float64) + w["fc2_bias"]


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def rel_to_max(out, ref) -> float:
    """max |out - ref| / max |ref|: the tolerance scale of the network tests."""
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert np.isfinite(out).all(), "non-finite logits"
    return float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))


def require_stage(network, name, head="*"):
    """Skip when the stage needs op variants this build does not register yet."""
    absent = missing(stages(network)[name], head)
    if absent:
        pytest.skip(f"{network} stage {name!r} needs {', '.join(absent)} (not registered in this build)")
