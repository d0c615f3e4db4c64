"""The ECE408 Fall 2016 MNIST CNN (../shared/seeds/ece408-mnist-cnn-report.txt).

Architecture (shapes per image, for the reference model's weights)::

    input 1x28x28 -> conv1 5x5 valid, 1->32 (24x24) -> ReLU -> 2x2 average pool (12x12)
                  -> conv2 5x5 valid, 32->64 (8x8)  -> ReLU -> 2x2 average pool (4x4)
                  -> flatten in NHWC order (4*4*64 = 1024) -> fc1 1024->128 -> ReLU -> fc2 128->10 -> argmax

No biases. The model file's fc1 rows are in NHWC flatten order (h, w, c), as the project's code
flattened; gpuopt's tensors are NCHW, so :class:`MnistCNN` permutes fc1's rows once, when it is built, to
the NCHW flatten order (c, h, w): ``x_nchw.reshape(N, -1) @ fc1_nchw == x_nhwc.reshape(N, -1) @ fc1``.

Reference accuracy of the trained model on the first N MNIST test images scaled to [0, 1], float32:
1.0 (10), 0.95 (100), 0.8722 (10,000) (:data:`REFERENCE_ACCURACY`).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..datasets import load_ece408_model, save_ece408_model
from .network import DEFAULT_MEMORY_BUDGET, LayerSpec, Network

__all__ = ["MnistCNN", "REFERENCE_ACCURACY", "nhwc_to_nchw_rows"]

#: Accuracy of the trained ECE408 model on the first N MNIST test images (N -> accuracy).
REFERENCE_ACCURACY: Mapping[int, float] = {10: 1.0, 100: 0.95, 10000: 0.8722}


def nhwc_to_nchw_rows(h: int, w: int, c: int) -> np.ndarray:
    """The row permutation ``perm`` with ``fc_nchw = fc_nhwc[perm]``: row ``c*h*w + y*w + x`` of the NCHW flatten
    order is row ``(y*w + x)*c + ch`` of the NHWC one. Its inverse: ``fc_nhwc[perm] = fc_nchw``."""
    return np.arange(h * w * c).reshape(h, w, c).transpose(2, 0, 1).ravel()


def _weight(a: Any, name: str, ndim: int, layout: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a real (float) array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D {layout}, got shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"{name} has an empty dimension: shape {arr.shape} {layout}")
    out = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(out).all():
        raise ValueError(f"{name} contains NaN or infinity (or values outside the float32 range)")
    return out


def conv_stack(side: int, conv1: np.ndarray, conv2: np.ndarray, pool: int = 2) -> tuple[int, ...]:
    """(h1, w1, p1, q1, h2, w2): output sides of conv1, of the pool after it and of conv2 on side x side images,
    for (K, C, R, S) weights; a ValueError naming the layer when the filters do not fit."""
    (k1, _, r1, s1), (_, c2, r2, s2) = conv1.shape, conv2.shape
    if c2 != k1:
        raise ValueError(f"conv2 has {c2} input channels but conv1 has {k1} output maps (weights are (K, C, R, S))")
    h1, w1 = side - r1 + 1, side - s1 + 1
    if h1 < pool or w1 < pool:
        raise ValueError(f"conv1's {r1}x{s1} filters leave {max(h1, 0)}x{max(w1, 0)} of a {side}x{side} image: too "
                         f"small for the {pool}x{pool} pool")
    p1, q1 = h1 // pool, w1 // pool
    h2, w2 = p1 - r2 + 1, q1 - s2 + 1
    if h2 < 1 or w2 < 1:
        raise ValueError(f"conv2's {r2}x{s2} filters are larger than its {p1}x{q1} input")
    return h1, w1, p1, q1, h2, w2


class MnistCNN(Network):
    """The ECE408 Fall 2016 MNIST CNN (see the module docstring), runnable by every stage of
    ``gpuopt.models.stages("mnist")``.

    Parameters
    ----------
    conv1, conv2 : array_like, float
        Convolution filters, (K, C, R, S) (``layout="kcrs"``, gpuopt's) or [R, S, C, K] (``layout="file"``,
        the model file's): the reference model's are (32, 1, 5, 5) and (64, 32, 5, 5).
    fc1, fc2 : array_like, float
        Fully connected weights [in, out]; fc1's rows in the model file's NHWC flatten order (1024, 128),
        fc2 (128, 10).
    max_batch : int, optional
        Largest chunk of images one op call sees (default: limited by the memory budget only).
    memory_budget_bytes : int or None
        Activation memory of one chunk (input and every layer's output, float32), default 2 GiB:
        10,175 images per chunk for the reference network. None: no limit.
    source : str
        Where the weights came from, for messages and ``repr``.

    Raises
    ------
    TypeError
        A weight is not a real numeric array.
    ValueError
        Wrong dimensions or shapes that do not chain (the message names the array), non-finite weights.

    Notes
    -----
    ``weights`` holds what the stages compute with: conv1/conv2 (K, C, R, S) and fc1 with its rows permuted
    to the NCHW flatten order; :meth:`file_weights` gives them back in the model file's order.
    """

    network = "mnist"
    side = 28
    title = "ECE408 Fall 2016 MNIST CNN"

    def __init__(self, conv1: Any, conv2: Any, fc1: Any, fc2: Any, *, layout: str = "kcrs",
                 max_batch: int | None = None, memory_budget_bytes: int | None = DEFAULT_MEMORY_BUDGET,
                 source: str = "weight arrays") -> None:
        if layout not in ("kcrs", "file"):
            raise ValueError(f"layout must be 'kcrs' or 'file', got {layout!r}")
        shape = "(K, C, R, S)" if layout == "kcrs" else "[R, S, C, K]"
        c1, c2 = (_weight(a, n, 4, shape) for a, n in ((conv1, "conv1"), (conv2, "conv2")))
        if layout == "file":
            c1, c2 = (np.ascontiguousarray(c.transpose(3, 2, 0, 1)) for c in (c1, c2))
        f1 = _weight(fc1, "fc1", 2, "[in, out]")
        f2 = _weight(fc2, "fc2", 2, "[in, out]")
        if c1.shape[1] != 1:
            raise ValueError(f"conv1 must have 1 input channel (MNIST is grey-scale); got (K, C, R, S) = {c1.shape}")
        h1, w1, p1, q1, h2, w2 = conv_stack(self.side, c1, c2)
        p2, q2, k2 = h2 // 2, w2 // 2, c2.shape[0]
        if p2 < 1 or q2 < 1:
            raise ValueError(f"conv2's output {h2}x{w2} is too small for the 2x2 pool")
        if f1.shape[0] != p2 * q2 * k2:
            raise ValueError(f"fc1 has {f1.shape[0]} inputs (rows) but the convolutions give {p2}x{q2}x{k2} = "
                             f"{p2 * q2 * k2}")
        if f2.shape[0] != f1.shape[1]:
            raise ValueError(f"fc2 has {f2.shape[0]} inputs (rows) but fc1 has {f1.shape[1]} outputs")
        self._perm = nhwc_to_nchw_rows(p2, q2, k2)
        k1, hidden, classes = c1.shape[0], f1.shape[1], f2.shape[1]
        r1, s1, r2, s2 = *c1.shape[2:], *c2.shape[2:]
        layers = (
            LayerSpec("conv1", f"convolution {r1}x{s1}, valid, 1 -> {k1} maps, no bias", (k1, h1, w1)),
            LayerSpec("relu1", "ReLU", (k1, h1, w1)),
            LayerSpec("pool1", "average pool 2x2, stride 2", (k1, p1, q1)),
            LayerSpec("conv2", f"convolution {r2}x{s2}, valid, {k1} -> {k2} maps, no bias", (k2, h2, w2)),
            LayerSpec("relu2", "ReLU", (k2, h2, w2)),
            LayerSpec("pool2", "average pool 2x2, stride 2", (k2, p2, q2)),
            LayerSpec("flatten", "flatten, NHWC order of the model file (NCHW here, fc1 rows permuted once)",
                      (p2 * q2 * k2,)),
            LayerSpec("fc1", f"fully connected {p2 * q2 * k2} -> {hidden}, no bias", (hidden,)),
            LayerSpec("relu3", "ReLU", (hidden,)),
            LayerSpec("fc2", f"fully connected {hidden} -> {classes}, no bias: the logits", (classes,)),
            LayerSpec("argmax", "predicted class", ()),
        )
        self._setup({"conv1": c1, "conv2": c2, "fc1": f1[self._perm], "fc2": f2}, layers, classes=classes,
                    max_batch=max_batch, memory_budget_bytes=memory_budget_bytes, source=source)

    @classmethod
    def from_arrays(cls, weights: Mapping[str, Any], *, layout: str = "kcrs", **options: Any) -> "MnistCNN":
        """From a mapping with the keys ``conv1``, ``conv2``, ``fc1``, ``fc2`` (what
        ``gpuopt.datasets.load_ece408_model`` returns); ``options`` as the constructor's."""
        absent = [k for k in ("conv1", "conv2", "fc1", "fc2") if k not in weights]
        if absent:
            raise ValueError(f"weights lack {absent}; an MnistCNN needs conv1, conv2, fc1, fc2")
        return cls(weights["conv1"], weights["conv2"], weights["fc1"], weights["fc2"], layout=layout, **options)

    @classmethod
    def from_file(cls, path: Any = None, **options: Any) -> "MnistCNN":
        """From an ECE408 ``model.hdf5`` (default: ``data_dir()/ece408_2016fa/model.hdf5``) or any file of its
        layout (``/conv1``, ``/conv2`` [R, S, C, K], ``/fc1``, ``/fc2`` [in, out], float).

        Raises ImportError without h5py, FileNotFoundError for a missing file and ValueError naming the
        dataset that is missing or has the wrong shape (``gpuopt.datasets.load_ece408_model``'s checks).
        """
        from ..datasets import data_path

        where = data_path("ece408_2016fa", "model.hdf5") if path is None else path
        model = load_ece408_model(where)
        options.setdefault("source", f"model file {where}")
        return cls.from_arrays(model, **options)

    @classmethod
    def random(cls, seed: int = 0, **options: Any) -> "MnistCNN":
        """Seeded random weights of the reference shapes, NOT a trained model (its predictions mean nothing):
        He-normal, ``numpy.random.default_rng(seed)`` standard normals times sqrt(2 / fan_in), drawn in the
        order conv1, conv2, fc1, fc2, so the logits of [0, 1] images are of order 1."""
        rng = np.random.default_rng(seed)

        def he(shape, fan_in):
            return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

        options.setdefault("source", f"seeded random weights, seed {seed}, not trained")
        return cls(he((32, 1, 5, 5), 25), he((64, 32, 5, 5), 800), he((1024, 128), 1024), he((128, 10), 128),
                   **options)

    def file_weights(self) -> dict[str, np.ndarray]:
        """The weights as ``load_ece408_model`` returns them: conv (K, C, R, S), fc1's rows in NHWC order."""
        fc1 = np.empty_like(self._weights["fc1"])
        fc1[self._perm] = self._weights["fc1"]
        return {"conv1": self._weights["conv1"].copy(), "conv2": self._weights["conv2"].copy(), "fc1": fc1,
                "fc2": self._weights["fc2"].copy()}

    def save(self, path: Any) -> Any:
        """Write the weights as an ECE408 ``model.hdf5`` (needs h5py); returns the path."""
        return save_ece408_model(path, self.file_weights())
