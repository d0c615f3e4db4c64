"""Locating the reference data, plus the argument checks shared by the readers.

The real data sets (MNIST, the ECE408 model, Liao's k-means files, the NCTU
neurons) are *not* part of the gpuopt repository.  They live in a folder
called ``shared/data`` beside the checkout (``../shared/data`` seen from the
project root) or wherever the environment variable ``GPUOPT_DATA_DIR`` points.
:func:`data_dir` finds that folder and :func:`data_path` resolves a file in it.

The private helpers at the bottom turn user arguments into paths and arrays
with the error messages every reader and writer in :mod:`gpuopt.datasets`
uses: ``TypeError`` for a wrong kind of argument (dtype, type),
``ValueError`` for a wrong value (shape, range, malformed file contents) and
``FileNotFoundError`` for a missing file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeAlias

import numpy as np

from .._validate import integer, real

__all__ = ["DATA_DIR_ENV", "PathLike", "data_dir", "data_path"]

#: Name of the environment variable that overrides the data-root search.
DATA_DIR_ENV = "GPUOPT_DATA_DIR"

#: What the readers and writers accept as a file name.
PathLike: TypeAlias = str | os.PathLike[str]

_HINT = (
    f"Set the environment variable {DATA_DIR_ENV} to the folder holding the "
    "reference data (the one with mnist/, ece408_2016fa/, kmeans_liao/ and "
    "nctu_sparse_conv/), or keep it at ../shared/data beside the gpuopt checkout."
)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # e.g. an unreadable parent folder
        return False


def _walk_for_shared_data(start: Path) -> Path | None:
    """First ``shared/data`` folder at or beside an ancestor of ``start``."""
    for ancestor in (start, *start.parents):
        for candidate in (ancestor / "shared" / "data", ancestor.parent / "shared" / "data"):
            if _is_dir(candidate):
                return candidate
    return None


def data_dir(required: bool = True) -> Path | None:
    """Return the root folder of the reference data.

    The folder is looked up in this order:

    1. the environment variable ``GPUOPT_DATA_DIR`` (when set and non-empty,
       it is authoritative: no other place is searched);
    2. walking up from the current working directory: for each ancestor ``A``
       (the directory itself first), ``A/shared/data`` then
       ``A.parent/shared/data``; the first existing folder wins;
    3. the same walk starting from the location of the gpuopt package source
       (symbolic links resolved), which finds ``../shared/data`` beside an
       editable checkout whatever the working directory.

    Parameters
    ----------
    required : bool, default True
        What to do when no folder is found: raise (True) or return ``None``.

    Returns
    -------
    pathlib.Path or None
        Absolute path of the data root, or ``None`` when it was not found and
        ``required`` is False.

    Raises
    ------
    FileNotFoundError
        No data root was found (or ``GPUOPT_DATA_DIR`` names a folder that
        does not exist) and ``required`` is True.  The message names
        ``GPUOPT_DATA_DIR``.
    """
    env = os.environ.get(DATA_DIR_ENV, "")
    if env:
        root = Path(env).expanduser()
        if _is_dir(root):
            return root.resolve()
        if required:
            raise FileNotFoundError(f"{DATA_DIR_ENV}={env!r} is not an existing directory. {_HINT}")
        return None

    try:
        cwd: Path | None = Path.cwd()
    except OSError:  # the working directory was deleted
        cwd = None
    found = _walk_for_shared_data(cwd) if cwd is not None else None
    if found is None:
        found = _walk_for_shared_data(Path(__file__).resolve().parent)
    if found is not None:
        return found.resolve()
    if required:
        raise FileNotFoundError(
            "Could not find the gpuopt reference data: GPUOPT_DATA_DIR is not set "
            "and no shared/data folder exists above the working directory or the "
            f"gpuopt package. {_HINT}"
        )
    return None


def data_path(*parts: str | os.PathLike[str], required: bool = True) -> Path | None:
    """Return the path of a file (or folder) under the data root.

    Parameters
    ----------
    *parts : str or os.PathLike
        Relative path components, e.g. ``data_path("mnist",
        "t10k-labels-idx1-ubyte.gz")``.  Absolute components are rejected.
    required : bool, default True
        Raise when the data root or the file is missing (True), or return
        ``None`` instead (False).

    Returns
    -------
    pathlib.Path or None
        The existing path, or ``None`` when missing and ``required`` is False.

    Raises
    ------
    TypeError
        A component is not a string or path-like object.
    ValueError
        No component was given, or one is absolute.
    FileNotFoundError
        The root or the file is missing and ``required`` is True; the message
        gives the full path tried and how to point gpuopt at the data.
    """
    if not parts:
        raise ValueError("data_path() needs at least one path component")
    rel = Path()
    for i, part in enumerate(parts):
        if not isinstance(part, (str, os.PathLike)):
            raise TypeError(
                f"data_path(): component {i} must be a str or os.PathLike, "
                f"got {type(part).__name__}"
            )
        piece = Path(part)
        if piece.is_absolute():
            raise ValueError(
                f"data_path(): component {i} ({str(piece)!r}) must be relative to the data root"
            )
        rel = rel / piece
    root = data_dir(required=required)
    if root is None:
        return None
    path = root / rel
    if not path.exists():
        if required:
            raise FileNotFoundError(f"Reference data file not found: {path}. {_HINT}")
        return None
    return path


# --------------------------------------------------------------------------
# Private helpers shared by the format modules.
# --------------------------------------------------------------------------


def _data_file(*parts: str) -> Path:
    """:func:`data_path` with ``required=True``, typed as never returning None."""
    path = data_path(*parts, required=True)
    if path is None:  # unreachable: required=True raises instead
        raise FileNotFoundError(f"reference data file {'/'.join(parts)} not found")
    return path


def _as_path(path: object, arg: str) -> Path:
    """``path`` as a :class:`~pathlib.Path`; TypeError when it is not path-like."""
    if isinstance(path, (str, os.PathLike)):
        p = os.fspath(path)
        if isinstance(p, str):
            return Path(p)
    raise TypeError(f"{arg} must be a str or os.PathLike path, got {type(path).__name__}")


def _existing_file(path: object, arg: str) -> Path:
    """``path`` as a Path that names an existing regular file."""
    p = _as_path(path, arg)
    if not p.exists():
        raise FileNotFoundError(f"{arg}: no such file: {p}")
    if not p.is_file():
        raise FileNotFoundError(f"{arg}: {p} exists but is not a regular file")
    return p


def _read_text(path: Path, what: str) -> str:
    """Read an ASCII/UTF-8 text file, with a ValueError for binary contents."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not a text file (byte {exc.start} is not UTF-8); expected {what}"
        ) from None


def _check_int(value: object, arg: str, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python int within ``[low, high]`` (booleans rejected): gpuopt's one rule."""
    return integer(value, arg, low, high)


def _check_float(value: object, arg: str, *, low: float | None = None) -> float:
    """``value`` as a finite Python float, optionally ``>= low``: gpuopt's one rule."""
    return real(value, arg, low)


def _check_choice(value: object, arg: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of the strings ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{arg} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def _int_array(
    x: object,
    arg: str,
    *,
    ndim: int | None = None,
    low: int | None = None,
    high: int | None = None,
) -> np.ndarray:
    """``x`` as an integer ndarray of dimension ``ndim`` with values in ``[low, high]``.

    Raises TypeError unless the dtype is a (signed or unsigned) integer type;
    booleans, floats and objects are rejected rather than silently converted.
    """
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{arg} must have an integer dtype, got {a.dtype}")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{arg} must be {ndim}-D, got {a.ndim}-D array of shape {a.shape}")
    if a.size and (low is not None or high is not None):
        lo, hi = int(a.min()), int(a.max())
        if (low is not None and lo < low) or (high is not None and hi > high):
            raise ValueError(
                f"{arg} has values in [{lo}, {hi}], outside the allowed range [{low}, {high}]"
            )
    return a


def _real_array(x: object, arg: str, *, ndim: int | None = None) -> np.ndarray:
    """``x`` as a real (float or integer, not bool/complex) ndarray of dimension ``ndim``."""
    a = np.asarray(x)
    if a.dtype.kind not in "fiu":
        raise TypeError(f"{arg} must have a real numeric dtype (float or int), got {a.dtype}")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{arg} must be {ndim}-D, got {a.ndim}-D array of shape {a.shape}")
    return a


def _to_float32(a: np.ndarray, arg: str) -> np.ndarray:
    """Cast to C-contiguous float32, refusing finite values that would overflow to inf."""
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(a, dtype=np.float32)
    if a.dtype != np.float32 and a.size:
        bad = ~np.isfinite(out) & np.isfinite(a)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"{arg}[{', '.join(map(str, idx))}] = {a[idx]!r} is outside the float32 range"
            )
    return out
