"""The ECE408 Spring 2018 Fashion-MNIST network (../shared/seeds/ece408-fashion-mnist-conv-report.txt).

Architecture (from the project's published MXNet symbol file; shapes per image)::

    input 1x64x64 -> conv1 5x5 valid, 1->6, no bias (60x60) -> tanh -> 2x2 max pool, stride 2 (30x30)
                  -> conv2 5x5 valid, 6->16, no bias, no activation (26x26)
                  -> flatten NCHW (16*26*26 = 10816, as MXNet's Flatten) -> fc1 10816->140 + bias -> tanh
                  -> fc2 140->10 + bias -> softmax

Neither the trained weights nor the course's 64x64 Fashion-MNIST images are public. :meth:`FashionCNN.random`
makes seeded random weights and :func:`synthetic_images` seeded random images: results on them check that
the stages agree, they say nothing about accuracy. Trained weights can be loaded with
:meth:`FashionCNN.from_file` from an ``.npz`` of this layout (gpuopt's, :meth:`FashionCNN.save` writes it):

==========  ==============  ====================================================================
key         shape           layout
==========  ==============  ====================================================================
conv1       (6, 1, 5, 5)    (K, C, R, S), as MXNet's Convolution weight
conv2       (16, 6, 5, 5)   (K, C, R, S)
fc1         (10816, 140)    [in, out]: the transpose of MXNet's FullyConnected weight (out, in);
                            rows in NCHW flatten order (c, h, w), as MXNet flattens
fc1_bias    (140,)
fc2         (140, 10)       [in, out]
fc2_bias    (10,)
==========  ==============  ====================================================================
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np

from .mnist import _weight, conv_stack
from .network import DEFAULT_MEMORY_BUDGET, LayerSpec, Network

__all__ = ["FashionCNN", "FASHION_KEYS", "synthetic_images"]

#: The arrays of a FashionCNN (and the keys of its .npz file), in network order.
FASHION_KEYS = ("conv1", "conv2", "fc1", "fc1_bias", "fc2", "fc2_bias")


def synthetic_images(n: int, seed: int = 0) -> np.ndarray:
    """``n`` seeded synthetic 64x64 images, uint8 (n, 64, 64): NOT Fashion-MNIST (the course's images are not
    public). A dark background with one bright rectangle per image (random position, size and intensity) plus
    noise, from ``numpy.random.default_rng([seed, 64])`` (a stream apart from :meth:`FashionCNN.random`'s for
    the same seed): enough structure for different predictions."""
    from .._validate import integer

    n = integer(n, "n", 1)
    rng = np.random.default_rng([seed, 64])
    images = rng.integers(0, 40, (n, 64, 64), dtype=np.uint8)
    top, left = rng.integers(0, 48, n), rng.integers(0, 48, n)
    height, width = rng.integers(8, 33, n), rng.integers(8, 33, n)
    level = rng.integers(120, 256, n)
    for i in range(n):
        images[i, top[i]:top[i] + height[i], left[i]:left[i] + width[i]] = level[i]
    return images


class FashionCNN(Network):
    """The ECE408 Spring 2018 Fashion-MNIST network (see the module docstring), runnable by every stage of
    ``gpuopt.models.stages("fashion")``.

    Parameters
    ----------
    conv1, conv2 : array_like, float, (K, C, R, S)
        (6, 1, 5, 5) and (16, 6, 5, 5) in the report's network.
    fc1, fc2 : array_like, float, [in, out]
        (10816, 140) with rows in NCHW flatten order, and (140, 10).
    fc1_bias, fc2_bias : array_like, float
        (140,) and (10,).
    max_batch, memory_budget_bytes, source
        As :class:`~gpuopt.models.MnistCNN`'s (the budget, 2 GiB by default, takes chunks of 7,193 images).

    Raises
    ------
    TypeError, ValueError
        As :class:`~gpuopt.models.MnistCNN`'s; messages name the array.
    """

    network = "fashion"
    side = 64
    title = "ECE408 Spring 2018 Fashion-MNIST network"

    def __init__(self, conv1: Any, conv2: Any, fc1: Any, fc1_bias: Any, fc2: Any, fc2_bias: Any, *,
                 max_batch: int | None = None, memory_budget_bytes: int | None = DEFAULT_MEMORY_BUDGET,
                 source: str = "weight arrays") -> None:
        c1 = _weight(conv1, "conv1", 4, "(K, C, R, S)")
        c2 = _weight(conv2, "conv2", 4, "(K, C, R, S)")
        f1, f2 = _weight(fc1, "fc1", 2, "[in, out]"), _weight(fc2, "fc2", 2, "[in, out]")
        b1, b2 = _weight(fc1_bias, "fc1_bias", 1, "(out,)"), _weight(fc2_bias, "fc2_bias", 1, "(out,)")
        if c1.shape[1] != 1:
            raise ValueError(f"conv1 must have 1 input channel (grey-scale images); got (K, C, R, S) = {c1.shape}")
        h1, w1, p1, q1, h2, w2 = conv_stack(self.side, c1, c2)
        k1, k2 = c1.shape[0], c2.shape[0]
        flat = k2 * h2 * w2
        if f1.shape[0] != flat:
            raise ValueError(f"fc1 has {f1.shape[0]} inputs (rows) but conv2 gives {k2}x{h2}x{w2} = {flat}")
        if b1.shape[0] != f1.shape[1]:
            raise ValueError(f"fc1_bias has {b1.shape[0]} entries for fc1's {f1.shape[1]} outputs")
        if f2.shape[0] != f1.shape[1]:
            raise ValueError(f"fc2 has {f2.shape[0]} inputs (rows) but fc1 has {f1.shape[1]} outputs")
        if b2.shape[0] != f2.shape[1]:
            raise ValueError(f"fc2_bias has {b2.shape[0]} entries for fc2's {f2.shape[1]} outputs")
        hidden, classes = f1.shape[1], f2.shape[1]
        r1, s1, r2, s2 = *c1.shape[2:], *c2.shape[2:]
        layers = (
            LayerSpec("conv1", f"convolution {r1}x{s1}, valid, 1 -> {k1} maps, no bias", (k1, h1, w1)),
            LayerSpec("tanh1", "tanh", (k1, h1, w1)),
            LayerSpec("pool1", "max pool 2x2, stride 2", (k1, p1, q1)),
            LayerSpec("conv2", f"convolution {r2}x{s2}, valid, {k1} -> {k2} maps, no bias, no activation",
                      (k2, h2, w2)),
            LayerSpec("flatten", "flatten, NCHW order (as MXNet's Flatten)", (flat,)),
            LayerSpec("fc1", f"fully connected {flat} -> {hidden}, with bias", (hidden,)),
            LayerSpec("tanh2", "tanh", (hidden,)),
            LayerSpec("fc2", f"fully connected {hidden} -> {classes}, with bias: the logits", (classes,)),
            LayerSpec("softmax", "softmax over the classes (predict: argmax of the logits)", (classes,)),
        )
        self._setup(dict(zip(FASHION_KEYS, (c1, c2, f1, b1, f2, b2))), layers, classes=classes,
                    max_batch=max_batch, memory_budget_bytes=memory_budget_bytes, source=source)

    @classmethod
    def from_arrays(cls, weights: Mapping[str, Any], **options: Any) -> "FashionCNN":
        """From a mapping with the keys of :data:`FASHION_KEYS`; ``options`` as the constructor's."""
        absent = [k for k in FASHION_KEYS if k not in weights]
        if absent:
            raise ValueError(f"weights lack {absent}; a FashionCNN needs {list(FASHION_KEYS)}")
        return cls(*(weights[k] for k in FASHION_KEYS), **options)

    @classmethod
    def from_file(cls, path: Any, **options: Any) -> "FashionCNN":
        """From an ``.npz`` of the layout in the module docstring. FileNotFoundError for a missing file,
        ValueError for a file that is not an .npz or lacks an array (named), or shapes that do not chain."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such weights file: {path}")
        try:
            npz = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{path}: not a readable .npz file ({exc})") from None
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise ValueError(f"{path}: not an .npz archive (np.load gave a {type(npz).__name__})")
        with npz:
            absent = [k for k in FASHION_KEYS if k not in npz.files]
            if absent:
                raise ValueError(f"{path}: missing array(s) {absent}; a FashionCNN .npz holds {list(FASHION_KEYS)}")
            arrays = {k: npz[k] for k in FASHION_KEYS}
        options.setdefault("source", f"weights file {path}")
        try:
            return cls.from_arrays(arrays, **options)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def random(cls, seed: int = 0, **options: Any) -> "FashionCNN":
        """Seeded random weights of the report's shapes, NOT the trained model (not public): LeCun-normal
        (``numpy.random.default_rng(seed)`` standard normals times sqrt(1 / fan_in), right for tanh), biases
        uniform in [-0.1, 0.1], drawn in the order of :data:`FASHION_KEYS`."""
        rng = np.random.default_rng(seed)

        def lecun(shape, fan_in):
            return (rng.standard_normal(shape) * np.sqrt(1.0 / fan_in)).astype(np.float32)

        def bias(n):
            return rng.uniform(-0.1, 0.1, n).astype(np.float32)

        options.setdefault("source", f"seeded random weights, seed {seed}, not trained")
        return cls(lecun((6, 1, 5, 5), 25), lecun((16, 6, 5, 5), 150), lecun((10816, 140), 10816), bias(140),
                   lecun((140, 10), 140), bias(10), **options)

    def save(self, path: Any) -> Any:
        """Write the weights as an ``.npz`` of the layout in the module docstring; returns the path."""
        np.savez(path, **{k: self._weights[k] for k in FASHION_KEYS})
        return path

    def proba(self, images: Any, *, variant: str | None = None, timing: bool = False,
              max_batch: int | None = None):
        """Softmax of the logits: float32 (N, classes), rows summing to 1 (the network's last layer). Arguments
        and placement as :meth:`forward`; with ``timing=True``: ``(probabilities, ForwardTiming)``."""
        return self._run(images, "proba", variant, timing, max_batch)
