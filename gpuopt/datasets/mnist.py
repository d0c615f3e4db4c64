"""IDX files (the MNIST format) and the MNIST test set.

IDX layout (all integers big-endian)::

    bytes 0-1   0x00 0x00
    byte  2     type code: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
                           0x0D float32, 0x0E float64
    byte  3     number of dimensions d (1..255)
    4 .. 4+4d   d uint32 dimension sizes, outermost first
    rest        the values, row-major (C order), big-endian

A file may be gzip-compressed as a whole; readers detect this from the gzip
magic bytes ``1f 8b`` rather than from the file name.
"""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path

import numpy as np

from ._paths import PathLike, _as_path, _check_choice, _data_file, _existing_file

__all__ = ["IDX_DTYPES", "load_mnist", "read_idx", "write_idx"]

#: IDX type code -> big-endian NumPy dtype of the payload.
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODE_OF = {(dt.kind, dt.itemsize): code for code, dt in IDX_DTYPES.items()}
_GZIP_MAGIC = b"\x1f\x8b"


def read_idx(path: PathLike) -> np.ndarray:
    """Read an IDX file, gzip-compressed or not.

    Parameters
    ----------
    path : str or os.PathLike
        The file.  Gzip compression is detected from the magic bytes, so the
        name does not matter.

    Returns
    -------
    numpy.ndarray
        A new writable array in native byte order with the file's shape and a
        dtype given by its type code: uint8, int8, int16, int32, float32 or
        float64.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        Corrupt gzip stream, bad magic number, unknown type code, zero
        dimensions, truncated header, or a payload whose length differs from
        the one the dimensions imply (truncated file or trailing bytes).
    """
    p = _existing_file(path, "path")
    raw = p.read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"{p}: corrupt or truncated gzip data ({exc})") from None
    if len(raw) < 4:
        raise ValueError(f"{p}: too short for an IDX header ({len(raw)} bytes)")
    if raw[0] != 0 or raw[1] != 0:
        raise ValueError(
            f"{p}: bad IDX magic number 0x{raw[:4].hex()} "
            "(expected 0x0000 followed by a type code and a dimension count)"
        )
    code, ndim = raw[2], raw[3]
    if code not in IDX_DTYPES:
        known = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise ValueError(f"{p}: unknown IDX type code 0x{code:02X} (expected one of {known})")
    if ndim == 0:
        raise ValueError(f"{p}: IDX header declares 0 dimensions")
    header_len = 4 + 4 * ndim
    if len(raw) < header_len:
        raise ValueError(
            f"{p}: truncated IDX header ({len(raw)} bytes, {header_len} needed "
            f"for {ndim} dimensions)"
        )
    shape = tuple(int(v) for v in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[code]
    expected = math.prod(shape) * dtype.itemsize
    found = len(raw) - header_len
    if found != expected:
        problem = "truncated" if found < expected else "has trailing bytes"
        raise ValueError(
            f"{p}: IDX payload {problem}: shape {shape} of {dtype.newbyteorder('=')} needs "
            f"{expected} bytes after the header, found {found}"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header_len).reshape(shape)
    return data.astype(dtype.newbyteorder("="))  # copy: writable and native-endian


def write_idx(path: PathLike, array: np.ndarray, *, compress: bool | None = None) -> Path:
    """Write an array as an IDX file.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; overwritten if it exists.
    array : array_like
        1- to 255-D array of dtype uint8, int8, int16, int32, float32 or
        float64 (any byte order); each dimension must be below 2**32.
    compress : bool, optional
        Gzip the file.  Default: True when ``path`` ends in ``.gz``.  The gzip
        header carries no timestamp, so equal arrays give equal files.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        The dtype has no IDX type code (e.g. bool, uint16, int64, complex).
    ValueError
        The array is 0-D, has more than 255 dimensions or a dimension
        of 2**32 or more.
    """
    p = _as_path(path, "path")
    a = np.asarray(array)
    code = _CODE_OF.get((a.dtype.kind, a.dtype.itemsize))
    if code is None:
        raise TypeError(
            f"array: dtype {a.dtype} has no IDX type code; use uint8, int8, int16, "
            "int32, float32 or float64"
        )
    if not 1 <= a.ndim <= 255:
        raise ValueError(f"array must have 1 to 255 dimensions for IDX, got {a.ndim}")
    if any(n >= 2**32 for n in a.shape):
        raise ValueError(f"array: every dimension must be < 2**32 for IDX, got shape {a.shape}")
    if compress is None:
        compress = p.name.endswith(".gz")
    header = bytes((0, 0, code, a.ndim)) + np.asarray(a.shape, dtype=">u4").tobytes()
    payload = np.ascontiguousarray(a, dtype=IDX_DTYPES[code]).tobytes()
    blob = header + payload
    if compress:
        blob = gzip.compress(blob, compresslevel=6, mtime=0)
    p.write_bytes(blob)
    return p


def _find_idx(folder: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def load_mnist(kind: str = "t10k", root: PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Load the MNIST images and labels of one split.

    Parameters
    ----------
    kind : {"t10k", "train"}
        The split: file names ``{kind}-images-idx3-ubyte`` and
        ``{kind}-labels-idx1-ubyte``, each optionally with ``.gz``
        (the uncompressed file is preferred when both exist).
    root : str or os.PathLike, optional
        Folder holding the files, or a data root with an ``mnist/`` subfolder
        holding them.  Default: ``data_dir() / "mnist"``.  Only the reference
        data set's ``t10k`` split ships in ``shared/data``.

    Returns
    -------
    images : numpy.ndarray
        uint8, shape (N, 28, 28) for MNIST (N, H, W in general), pixel
        intensities 0-255.
    labels : numpy.ndarray
        uint8, shape (N,), the digit classes 0-9.

    Raises
    ------
    FileNotFoundError
        The files are missing (the message lists the places tried).
    ValueError
        Malformed IDX files, wrong dtypes or ndims, or image and label counts
        that differ.
    """
    _check_choice(kind, "kind", ("t10k", "train"))
    if root is None:
        folders = [_data_file("mnist")]
    else:
        base = _as_path(root, "root")
        folders = [base, base / "mnist"]
    stems = (f"{kind}-images-idx3-ubyte", f"{kind}-labels-idx1-ubyte")
    found: list[Path] = []
    for stem in stems:
        hit = next((h for f in folders if (h := _find_idx(f, stem)) is not None), None)
        if hit is None:
            tried = ", ".join(str(f / stem) + "[.gz]" for f in folders)
            raise FileNotFoundError(f"MNIST {kind} file not found; tried {tried}")
        found.append(hit)
    images, labels = read_idx(found[0]), read_idx(found[1])
    if images.dtype != np.uint8 or images.ndim != 3:
        raise ValueError(
            f"{found[0]}: expected uint8 images of shape (N, H, W), "
            f"got {images.dtype} array of shape {images.shape}"
        )
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise ValueError(
            f"{found[1]}: expected uint8 labels of shape (N,), "
            f"got {labels.dtype} array of shape {labels.shape}"
        )
    if images.shape[0] != labels.shape[0]:
        raise ValueError(
            f"MNIST {kind}: {images.shape[0]} images in {found[0]} but "
            f"{labels.shape[0]} labels in {found[1]}"
        )
    return images, labels
