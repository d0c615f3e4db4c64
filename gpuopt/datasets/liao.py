"""Files of Wei-keng Liao's parallel k-means package (the CMU k-means report's code).

Input data (``-i file``, two encodings):

binary (``-b``)
    int32 numObjs, int32 numCoords, then numObjs * numCoords float32,
    row-major; native byte order, i.e. little-endian on every machine the
    package targets.  File size = 8 + 4 * numObjs * numCoords bytes.
ASCII
    One object per line: an id token (ignored), then numCoords coordinates
    separated by spaces, tabs and/or commas.  Blank lines are skipped.

Output (``file_write()`` of the package), for an input named ``prefix``:

``prefix.cluster_centres``
    per cluster ``"%d " % i``, then ``"%f "`` per coordinate, then ``"\\n"``;
``prefix.membership``
    per object ``"%d %d\\n" % (i, membership[i])``.

The reference data (``kmeans_liao/`` in the data root) has
``color17695.bin`` (17695 x 9), ``edge17695.bin`` (17695 x 18),
``texture17695.bin`` (17695 x 20) and 100-object ASCII files
``color100.txt``, ``edge100.txt``, ``texture100.txt``.
"""

from __future__ import annotations

import re
from typing import Callable
from pathlib import Path

import numpy as np

from ._paths import (
    PathLike,
    _as_path,
    _existing_file,
    _int_array,
    _read_text,
    _real_array,
    _to_float32,
)

__all__ = [
    "read_liao",
    "read_liao_binary_rows",
    "read_liao_centres",
    "read_liao_membership",
    "write_liao",
    "write_liao_output",
]

_HEADER = np.dtype("<i4")
_PAYLOAD = np.dtype("<f4")
_INT32_MAX = 2**31 - 1
_TOKEN = re.compile(r"[^\s,]+")


def _binary_shape(raw: bytes) -> tuple[int, int] | None:
    """(numObjs, numCoords) if ``raw`` is a consistent Liao binary file, else None."""
    if len(raw) < 8:
        return None
    n, d = (int(v) for v in np.frombuffer(raw, dtype=_HEADER, count=2))
    if n > 0 and d > 0 and 8 + 4 * n * d == len(raw):
        return n, d
    return None


def _parse_rows(text: str, path: Path, *, id_mode: str) -> tuple[np.ndarray, list[int]]:
    """Parse ``id c1 c2 ...`` lines into a float64 (N, D) array.

    ``id_mode`` is "skip" (ids ignored, data files) or "index" (ids must be
    0, 1, 2, ... in order, the output files).  Returns the array and the
    1-based line number of every row.
    """
    rows: list[list[float]] = []
    linenos: list[int] = []
    width = -1
    for lineno, line in enumerate(text.splitlines(), 1):
        tokens = _TOKEN.findall(line)
        if not tokens:
            continue
        if id_mode == "index":
            try:
                ident = int(tokens[0])
            except ValueError:
                raise ValueError(
                    f"{path}, line {lineno}: expected integer id {len(rows)}, got {tokens[0]!r}"
                ) from None
            if ident != len(rows):
                raise ValueError(
                    f"{path}, line {lineno}: id {ident} out of order (expected {len(rows)})"
                )
        coords = tokens[1:]
        if not coords:
            raise ValueError(f"{path}, line {lineno}: no coordinates after the id {tokens[0]!r}")
        if width < 0:
            width = len(coords)
        elif len(coords) != width:
            raise ValueError(
                f"{path}, line {lineno}: {len(coords)} coordinates, but the first "
                f"object (line {linenos[0]}) has {width}"
            )
        try:
            rows.append([float(t) for t in coords])
        except ValueError:
            bad = next(t for t in coords if not _is_float(t))
            raise ValueError(f"{path}, line {lineno}: {bad!r} is not a number") from None
        linenos.append(lineno)
    if not rows:
        raise ValueError(f"{path}: no objects (the file is empty or blank)")
    return np.array(rows, dtype=np.float64), linenos


def _is_float(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _rows_to_float32(a: np.ndarray, linenos: list[int], path: Path) -> np.ndarray:
    with np.errstate(over="ignore"):
        out = a.astype(np.float32)
    bad = ~np.isfinite(out) & np.isfinite(a)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise ValueError(f"{path}, line {linenos[row]}: value outside the float32 range")
    return out


def read_liao(path: PathLike, *, binary: bool | None = None) -> np.ndarray:
    """Read a k-means input file of Liao's package.

    Parameters
    ----------
    path : str or os.PathLike
        The data file.
    binary : bool, optional
        Encoding.  None (default) detects it: binary when the first 8 bytes
        read as little-endian int32 give positive numObjs and numCoords with
        ``8 + 4 * numObjs * numCoords`` equal to the file size; ASCII otherwise.

    Returns
    -------
    numpy.ndarray
        float32, shape (numObjs, numCoords), C-contiguous.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        Binary: header and file size disagree.  ASCII: not text, no objects,
        a line without coordinates, a non-numeric token, rows with differing
        coordinate counts or values outside float32 (the message gives the
        line number).
    """
    p = _existing_file(path, "path")
    raw = p.read_bytes()
    shape = _binary_shape(raw)
    if binary is None:
        binary = shape is not None
    if binary:
        if shape is None:
            if len(raw) < 8:
                raise ValueError(f"{p}: {len(raw)} bytes, too short for the 8-byte binary header")
            n, d = (int(v) for v in np.frombuffer(raw, dtype=_HEADER, count=2))
            raise ValueError(
                f"{p}: not a valid binary k-means file: header says numObjs={n}, "
                f"numCoords={d} (both must be > 0, file size 8 + 4*numObjs*numCoords), "
                f"but the file has {len(raw)} bytes"
            )
        n, d = shape
        return np.frombuffer(raw, dtype=_PAYLOAD, offset=8).reshape(n, d).astype(np.float32)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(
            f"{p}: not an ASCII k-means file (binary contents); pass binary=True for "
            "the binary format"
        ) from None
    values, linenos = _parse_rows(text, p, id_mode="skip")
    return _rows_to_float32(values, linenos, p)


def write_liao(path: PathLike, x: np.ndarray, *, binary: bool) -> Path:
    """Write a k-means input file in Liao's binary or ASCII format.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; overwritten if it exists.
    x : array_like
        Real-valued objects, shape (numObjs, numCoords), both >= 1; stored
        as float32.
    binary : bool
        Binary (int32 header + little-endian float32) or ASCII.  ASCII lines
        are ``"%d " % (i + 1)`` followed by ``"%f "`` per coordinate, as in
        the package's bundled files (ids start at 1; ``%f`` keeps 6 decimals).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        ``x`` is not real numeric, or ``binary`` is not a bool.
    ValueError
        ``x`` is not 2-D, is empty, is too large for int32 counts, or has
        values outside the float32 range.
    """
    if not isinstance(binary, (bool, np.bool_)):
        raise TypeError(f"binary must be a bool, got {type(binary).__name__}")
    p = _as_path(path, "path")
    a = _real_array(x, "x", ndim=2)
    n, d = a.shape
    if n < 1 or d < 1:
        raise ValueError(f"x must have at least one object and one coordinate, got shape {a.shape}")
    if n > _INT32_MAX or d > _INT32_MAX:
        raise ValueError(f"x shape {a.shape} does not fit the int32 header")
    a32 = _to_float32(a, "x")
    if binary:
        with p.open("wb") as f:
            f.write(np.array([n, d], dtype=_HEADER).tobytes())
            f.write(a32.astype(_PAYLOAD, copy=False).tobytes())
    else:
        fmt = "%d " + "%f " * d + "\n"
        with p.open("w", encoding="ascii", newline="\n") as f:
            f.writelines(fmt % (i, *row) for i, row in enumerate(a32.tolist(), 1))
    return p


def write_liao_output(
    prefix: PathLike,
    centroids: np.ndarray,
    membership: np.ndarray,
    *,
    out_dir: PathLike | None = None,
) -> tuple[Path, Path]:
    """Write clustering results exactly as the package's ``file_write()`` does.

    Parameters
    ----------
    prefix : str or os.PathLike
        Input file name the outputs are named after.
    centroids : array_like
        Real-valued cluster centres, shape (k, numCoords), k >= 1; written as
        float32 with ``%f``.
    membership : array_like
        Integer cluster index of every object, shape (numObjs,), values in
        0..k-1.
    out_dir : str or os.PathLike, optional
        Folder for the two files, created (with its parents) if missing; the
        files are named after the last component of ``prefix``.  None
        (default): beside ``prefix``, where the package writes them.

    Returns
    -------
    centres_path, membership_path : pathlib.Path
        ``{prefix}.cluster_centres`` (lines ``"%d " % i`` + ``"%f "`` per
        coordinate + newline, i from 0) and ``{prefix}.membership`` (lines
        ``"%d %d\\n" % (i, membership[i])``); with ``out_dir``, the same
        names inside ``out_dir``.

    Raises
    ------
    TypeError
        Non-numeric centroids or non-integer membership; a prefix or out_dir
        that is not path-like.
    ValueError
        Wrong ndims, empty centroids, values outside float32 or membership
        outside 0..k-1.
    OSError
        ``out_dir`` or a file cannot be created (e.g. ``out_dir`` is a file).
    """
    base = _as_path(prefix, "prefix")
    folder = None if out_dir is None else _as_path(out_dir, "out_dir")
    c = _real_array(centroids, "centroids", ndim=2)
    if c.shape[0] < 1 or c.shape[1] < 1:
        raise ValueError(f"centroids must be non-empty (k, numCoords), got shape {c.shape}")
    c32 = _to_float32(c, "centroids")
    m = _int_array(membership, "membership", ndim=1, low=0, high=c.shape[0] - 1)
    if folder is not None:
        base = folder / base.name
        folder.mkdir(parents=True, exist_ok=True)  # after the checks: a rejected call creates nothing
    centres_path = Path(f"{base}.cluster_centres")
    membership_path = Path(f"{base}.membership")
    fmt = "%d " + "%f " * c32.shape[1] + "\n"
    with centres_path.open("w", encoding="ascii", newline="\n") as f:
        f.writelines(fmt % (i, *row) for i, row in enumerate(c32.tolist()))
    with membership_path.open("w", encoding="ascii", newline="\n") as f:
        # The exact fprintf format of the package's file_write().
        f.writelines("%d %d\n" % (i, v) for i, v in enumerate(m.tolist()))  # noqa: UP031
    return centres_path, membership_path


def read_liao_binary_rows(path: PathLike, part: Callable[[int], tuple[int, int]]) -> tuple[np.ndarray, int]:
    """Rows of a binary k-means file without reading the rest: ``part(numObjs)`` gives ``(start, stop)`` once the
    header is read (a rank's shard of the whole data: :func:`gpuopt.distributed.shard_bounds`).

    Returns ``(rows, numObjs)``: float32 (stop - start, numCoords), C-contiguous. ValueError where the header and
    the file size disagree (as :func:`read_liao`) or ``part`` gives rows outside [0, numObjs).
    """
    p = _existing_file(path, "path")
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{p}: {len(head)} bytes, too short for the 8-byte binary header")
        n, d = (int(v) for v in np.frombuffer(head, dtype=_HEADER, count=2))
        if not (n > 0 and d > 0 and 8 + 4 * n * d == size):
            raise ValueError(f"{p}: not a valid binary k-means file: header says numObjs={n}, numCoords={d} (both "
                             f"must be > 0, file size 8 + 4*numObjs*numCoords), but the file has {size} bytes")
        start, stop = (int(v) for v in part(n))
        if not 0 <= start <= stop <= n:
            raise ValueError(f"{p}: rows [{start}, {stop}) are not within the file's {n} objects")
        f.seek(8 + 4 * start * d)
        rows = np.fromfile(f, dtype=_PAYLOAD, count=(stop - start) * d)
    return rows.reshape(stop - start, d).astype(np.float32), n


def read_liao_centres(path: PathLike) -> np.ndarray:
    """Read a ``.cluster_centres`` file written by the package or :func:`write_liao_output`.

    Parameters
    ----------
    path : str or os.PathLike
        The file: per line a cluster id (0, 1, ... in order) and its coordinates.

    Returns
    -------
    numpy.ndarray
        float32, shape (k, numCoords).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        Ids not 0..k-1 in order, ragged rows, non-numeric tokens or no rows
        (the message gives the line number).
    """
    p = _existing_file(path, "path")
    values, linenos = _parse_rows(_read_text(p, "a .cluster_centres file"), p, id_mode="index")
    return _rows_to_float32(values, linenos, p)


def read_liao_membership(path: PathLike) -> np.ndarray:
    """Read a ``.membership`` file written by the package or :func:`write_liao_output`.

    Parameters
    ----------
    path : str or os.PathLike
        The file: lines ``"i m"``, object ids i = 0, 1, ... in order.

    Returns
    -------
    numpy.ndarray
        int32, shape (numObjs,), the cluster index ``m`` of every object.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        A line without exactly two integers, ids not 0..N-1 in order,
        negative or out-of-int32 cluster indices, or no lines.
    """
    p = _existing_file(path, "path")
    text = _read_text(p, "a .membership file")
    out: list[int] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 2:
            raise ValueError(f"{p}, line {lineno}: expected 'id cluster', got {len(tokens)} tokens")
        try:
            ident, cluster = int(tokens[0]), int(tokens[1])
        except ValueError:
            raise ValueError(
                f"{p}, line {lineno}: expected two integers, got {line.strip()!r}"
            ) from None
        if ident != len(out):
            raise ValueError(f"{p}, line {lineno}: id {ident} out of order (expected {len(out)})")
        if not 0 <= cluster <= _INT32_MAX:
            raise ValueError(f"{p}, line {lineno}: cluster index {cluster} outside 0..{_INT32_MAX}")
        out.append(cluster)
    if not out:
        raise ValueError(f"{p}: no membership lines (empty file)")
    return np.array(out, dtype=np.int32)
