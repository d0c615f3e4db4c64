"""The UIUC ECE408 Fall 2016 MNIST CNN: trained model and test images (HDF5).

File formats (from ``illinois-impact/2016fa_ece408_project``, ``data/``):

``model.hdf5``
    Four float32 datasets, no biases:

    ========  ===============  ===================================
    dataset   shape            layout
    ========  ===============  ===================================
    /conv1    (5, 5, 1, 32)    [R, S, C, K]: kernel rows, cols, in, out
    /conv2    (5, 5, 32, 64)   [R, S, C, K]
    /fc1      (1024, 128)      [in, out]; input flattened in NHWC order
    /fc2      (128, 10)        [in, out]
    ========  ===============  ===================================

``test{2,10,100}.hdf5``
    ``/x`` float32 (N, 28, 28, 1), NHWC, the first N MNIST test images / 255;
    ``/y`` float64 (N, 10), one-hot labels.

The network: conv1 (valid) -> ReLU -> 2x2 average pool -> conv2 (valid) ->
ReLU -> 2x2 average pool -> flatten (NHWC) -> fc1 -> ReLU -> fc2 -> argmax.

gpuopt's kernels take convolution weights as (K, C, R, S) ("kcrs"), which is
what :func:`load_ece408_model` returns by default.  h5py is needed only here
and is imported lazily.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._paths import (
    PathLike,
    _as_path,
    _check_choice,
    _data_file,
    _existing_file,
    _int_array,
    _real_array,
    _to_float32,
)

__all__ = [
    "ECE408_MODEL_KEYS",
    "load_ece408_model",
    "load_ece408_test",
    "save_ece408_model",
    "save_ece408_test",
]

#: Dataset names of the model file, in network order.
ECE408_MODEL_KEYS = ("conv1", "conv2", "fc1", "fc2")
_IMAGE_SIDE = 28
_NUM_CLASSES = 10
_TEST_SIZES = (2, 10, 100)


def _import_h5py() -> Any:
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Reading and writing the ECE408 HDF5 files needs h5py: "
            "pip install h5py (or pip install gpuopt[test])"
        ) from exc
    return h5py


def _open_h5(path: Path, mode: str) -> Any:
    h5py = _import_h5py()
    try:
        return h5py.File(path, mode)
    except OSError as exc:
        if mode == "r":
            raise ValueError(f"{path}: not a readable HDF5 file ({exc})") from None
        raise


def _read_dataset(f: Any, name: str, path: Path) -> np.ndarray:
    h5py = _import_h5py()
    obj = f.get(name)
    if obj is None:
        raise ValueError(f"{path}: missing dataset /{name}")
    if not isinstance(obj, h5py.Dataset):
        raise ValueError(f"{path}: /{name} is not a dataset")
    arr = np.asarray(obj[()])
    if arr.dtype.kind != "f":
        raise ValueError(f"{path}: /{name} must be floating point, got {arr.dtype}")
    return arr


def _check_file_layout(model: Mapping[str, np.ndarray], where: str) -> None:
    """Validate the [R,S,C,K] / [in,out] shapes as one consistent ECE408 network."""
    ndims = {"conv1": 4, "conv2": 4, "fc1": 2, "fc2": 2}
    for key, nd in ndims.items():
        if model[key].ndim != nd:
            raise ValueError(f"{where}: {key} must be {nd}-D, got shape {model[key].shape}")
    r1, s1, c1, k1 = model["conv1"].shape
    r2, s2, c2, k2 = model["conv2"].shape
    f1_in, f1_out = model["fc1"].shape
    f2_in, f2_out = model["fc2"].shape
    if min(r1, s1, k1, r2, s2, k2, f1_out, f2_out) < 1:
        raise ValueError(f"{where}: zero-sized weight dimension")
    if c1 != 1:
        raise ValueError(
            f"{where}: conv1 must have 1 input channel (MNIST is grey-scale); "
            f"file-layout shape {model['conv1'].shape} is [R,S,C,K]"
        )
    if c2 != k1:
        raise ValueError(f"{where}: conv2 expects {c2} input channels but conv1 has {k1} outputs")
    h = (_IMAGE_SIDE - r1 + 1) // 2 - r2 + 1
    w = (_IMAGE_SIDE - s1 + 1) // 2 - s2 + 1
    if h < 2 or w < 2:
        raise ValueError(f"{where}: kernel sizes too large for 28x28 input")
    flat = (h // 2) * (w // 2) * k2
    if f1_in != flat:
        raise ValueError(
            f"{where}: fc1 has {f1_in} inputs but the conv stack yields "
            f"{h // 2}x{w // 2}x{k2} = {flat}"
        )
    if f2_in != f1_out:
        raise ValueError(f"{where}: fc2 has {f2_in} inputs but fc1 has {f1_out} outputs")


def load_ece408_model(
    path: PathLike | None = None, *, layout: str = "kcrs"
) -> dict[str, np.ndarray]:
    """Load the ECE408 Fall 2016 CNN weights.

    Parameters
    ----------
    path : str or os.PathLike, optional
        HDF5 model file.  Default: ``data_path("ece408_2016fa", "model.hdf5")``.
    layout : {"kcrs", "file"}
        ``"kcrs"``: convolution weights as (K, C, R, S) = (out channels, in
        channels, kernel rows, kernel cols), gpuopt's layout.  ``"file"``: as
        stored, [R, S, C, K].  Fully connected weights are (in, out) either way.

    Returns
    -------
    dict of str to numpy.ndarray
        Keys ``conv1``, ``conv2``, ``fc1``, ``fc2``; float32, C-contiguous.
        For the reference model (kcrs): conv1 (32, 1, 5, 5), conv2
        (64, 32, 5, 5), fc1 (1024, 128), fc2 (128, 10).

    Raises
    ------
    ImportError
        h5py is not installed.
    FileNotFoundError
        The file does not exist.
    ValueError
        Not an HDF5 file, missing or non-float datasets, or shapes that do not
        form the conv-pool-conv-pool-fc-fc network on 28x28x1 input.
    """
    _check_choice(layout, "layout", ("kcrs", "file"))
    p = _data_file("ece408_2016fa", "model.hdf5") if path is None else _existing_file(path, "path")
    with _open_h5(p, "r") as f:
        stored = {key: _read_dataset(f, key, p) for key in ECE408_MODEL_KEYS}
    _check_file_layout(stored, str(p))
    model: dict[str, np.ndarray] = {}
    for key, arr in stored.items():
        if layout == "kcrs" and key.startswith("conv"):
            arr = arr.transpose(3, 2, 0, 1)  # [R,S,C,K] -> (K,C,R,S)
        model[key] = _to_float32(arr, f"{p}:/{key}")
    return model


def save_ece408_model(
    path: PathLike, model: Mapping[str, np.ndarray], *, layout: str = "kcrs"
) -> Path:
    """Write CNN weights in the ECE408 ``model.hdf5`` format (inverse of the loader).

    Parameters
    ----------
    path : str or os.PathLike
        Destination HDF5 file; overwritten if it exists.
    model : mapping of str to array_like
        Exactly the keys ``conv1``, ``conv2``, ``fc1``, ``fc2`` with real
        (float or integer) values.  Convolution weights are (K, C, R, S) for
        ``layout="kcrs"`` or [R, S, C, K] for ``layout="file"``; fully
        connected weights are (in, out).
    layout : {"kcrs", "file"}
        Layout of the convolution weights in ``model``.

    Returns
    -------
    pathlib.Path
        ``path``.  The file holds float32 datasets in the [R, S, C, K] /
        [in, out] layout.

    Raises
    ------
    ImportError
        h5py is not installed.
    TypeError
        ``model`` is not a mapping, or a weight is not real numeric.
    ValueError
        Missing or unexpected keys, wrong ndims, inconsistent shapes, or
        values outside the float32 range.
    """
    _check_choice(layout, "layout", ("kcrs", "file"))
    p = _as_path(path, "path")
    if not isinstance(model, Mapping):
        raise TypeError(f"model must be a mapping of name to array, got {type(model).__name__}")
    keys = set(model)
    if keys != set(ECE408_MODEL_KEYS):
        missing = sorted(set(ECE408_MODEL_KEYS) - keys)
        extra = sorted(map(str, keys - set(ECE408_MODEL_KEYS)))
        raise ValueError(
            f"model must have exactly the keys {list(ECE408_MODEL_KEYS)}; "
            f"missing {missing}, unexpected {extra}"
        )
    stored: dict[str, np.ndarray] = {}
    for key in ECE408_MODEL_KEYS:
        nd = 4 if key.startswith("conv") else 2
        arr = _real_array(model[key], f"model[{key!r}]", ndim=nd)
        if layout == "kcrs" and nd == 4:
            arr = arr.transpose(2, 3, 1, 0)  # (K,C,R,S) -> [R,S,C,K]
        stored[key] = _to_float32(arr, f"model[{key!r}]")
    _check_file_layout(stored, f"model (as file layout [R,S,C,K], given layout={layout!r})")
    with _open_h5(p, "w") as f:
        for key in ECE408_MODEL_KEYS:
            f.create_dataset(key, data=stored[key])
    return p


def _check_onehot(y: np.ndarray, where: str) -> None:
    if y.ndim != 2 or y.shape[1] != _NUM_CLASSES:
        raise ValueError(f"{where}: one-hot labels must have shape (N, 10), got {y.shape}")
    ok = np.isin(y, (0, 1)).all(axis=1) & (np.count_nonzero(y, axis=1) == 1)
    if not ok.all():
        row = int(np.argmin(ok))
        raise ValueError(
            f"{where}: row {row} is not one-hot (exactly one 1, the rest 0): {y[row].tolist()}"
        )


def _resolve_test_path(n_or_path: object) -> Path:
    if isinstance(n_or_path, (str, os.PathLike)):
        return _existing_file(n_or_path, "n_or_path")
    if isinstance(n_or_path, (bool, np.bool_)):
        raise TypeError("n_or_path must be 2, 10, 100 or a path, got a bool")
    try:
        n = operator.index(n_or_path)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"n_or_path must be 2, 10, 100 or a path, got {type(n_or_path).__name__}"
        ) from None
    if n not in _TEST_SIZES:
        raise ValueError(f"n_or_path: the reference test files hold 2, 10 or 100 images, got {n}")
    return _data_file("ece408_2016fa", f"test{n}.hdf5")


def load_ece408_test(
    n_or_path: int | PathLike = 10, *, layout: str = "nchw", onehot: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Load an ECE408 test file.

    Parameters
    ----------
    n_or_path : {2, 10, 100} or str or os.PathLike, default 10
        Number of images of a reference file (``test{n}.hdf5`` under
        ``ece408_2016fa/`` in the data root), or the path of such a file.
    layout : {"nchw", "nhwc"}
        Layout of the returned images.
    onehot : bool, default False
        Return the labels as stored (one-hot) instead of class indices.

    Returns
    -------
    x : numpy.ndarray
        float32, C-contiguous, (N, 1, 28, 28) for "nchw" or (N, 28, 28, 1)
        for "nhwc"; MNIST intensities scaled to [0, 1].
    labels : numpy.ndarray
        int64 (N,) class indices 0-9 (argmax of ``/y``), or with
        ``onehot=True`` float64 (N, 10) as stored.

    Raises
    ------
    ImportError
        h5py is not installed.
    TypeError
        ``n_or_path`` is neither an int nor a path.
    FileNotFoundError
        The file does not exist.
    ValueError
        ``n`` not in {2, 10, 100}; not an HDF5 file; missing datasets; ``/x``
        not (N, 28, 28, 1); ``/y`` not one-hot (N, 10) with the same N.
    """
    _check_choice(layout, "layout", ("nchw", "nhwc"))
    p = _resolve_test_path(n_or_path)
    with _open_h5(p, "r") as f:
        x = _read_dataset(f, "x", p)
        y = _read_dataset(f, "y", p)
    if x.ndim != 4 or x.shape[1:] != (_IMAGE_SIDE, _IMAGE_SIDE, 1):
        raise ValueError(f"{p}: /x must have shape (N, 28, 28, 1) (NHWC), got {x.shape}")
    _check_onehot(y, f"{p}:/y")
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"{p}: /x holds {x.shape[0]} images but /y {y.shape[0]} labels")
    if layout == "nchw":
        x = x.transpose(0, 3, 1, 2)
    x = _to_float32(x, f"{p}:/x")
    if onehot:
        return x, np.ascontiguousarray(y, dtype=np.float64)
    return x, np.argmax(y, axis=1).astype(np.int64)


def save_ece408_test(
    path: PathLike, x: np.ndarray, labels_or_onehot: np.ndarray, *, layout: str = "nchw"
) -> Path:
    """Write images and labels in the ECE408 test-file format.

    Parameters
    ----------
    path : str or os.PathLike
        Destination HDF5 file; overwritten if it exists.
    x : array_like
        Real-valued images, (N, 1, 28, 28) for ``layout="nchw"`` or
        (N, 28, 28, 1) for ``layout="nhwc"``; stored as float32 NHWC ``/x``.
    labels_or_onehot : array_like
        Either integer class indices (N,) in 0..9, or one-hot labels (N, 10)
        (exactly one 1 per row, the rest 0); stored as float64 one-hot ``/y``.
    layout : {"nchw", "nhwc"}
        Layout of ``x``.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ImportError
        h5py is not installed.
    TypeError
        Non-numeric ``x``, or labels that are neither integer (N,) nor
        numeric (N, 10).
    ValueError
        Wrong shapes, label values outside 0..9, rows that are not one-hot,
        or differing N.
    """
    _check_choice(layout, "layout", ("nchw", "nhwc"))
    p = _as_path(path, "path")
    xa = _real_array(x, "x", ndim=4)
    want = (1, _IMAGE_SIDE, _IMAGE_SIDE) if layout == "nchw" else (_IMAGE_SIDE, _IMAGE_SIDE, 1)
    if xa.shape[1:] != want:
        raise ValueError(
            f"x must have shape (N, {', '.join(map(str, want))}) for layout={layout!r}, "
            f"got {xa.shape}"
        )
    if layout == "nchw":
        xa = xa.transpose(0, 2, 3, 1)
    x32 = _to_float32(xa, "x")
    lab = np.asarray(labels_or_onehot)
    if lab.ndim == 1:
        lab = _int_array(lab, "labels_or_onehot", ndim=1, low=0, high=_NUM_CLASSES - 1)
        y = np.zeros((lab.shape[0], _NUM_CLASSES), dtype=np.float64)
        y[np.arange(lab.shape[0]), lab] = 1.0
    elif lab.ndim == 2:
        y = _real_array(lab, "labels_or_onehot", ndim=2).astype(np.float64)
        _check_onehot(y, "labels_or_onehot")
    else:
        raise ValueError(
            f"labels_or_onehot must be (N,) class indices or (N, 10) one-hot, got shape {lab.shape}"
        )
    if y.shape[0] != x32.shape[0]:
        raise ValueError(f"x holds {x32.shape[0]} images but labels_or_onehot {y.shape[0]} labels")
    with _open_h5(p, "w") as f:
        f.create_dataset("x", data=x32)
        f.create_dataset("y", data=y)
    return p
