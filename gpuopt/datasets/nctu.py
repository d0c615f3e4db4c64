"""Text files of the NCTU 2016 sparse-convolution lab (``nctu-pcslab/CA2016F-FP``).

All files are whitespace-separated tokens; the lab's C++ reader
(``cnnConvLayer.h``) reads them token by token with ``ifstream >>``, so line
breaks carry no meaning.  gpuopt's writers use the line layout shown below.

Neurons, (C, H, W) int16 -- the lab's ``data/inNeu.txt`` and ``data/inNeu.coo``
(512 maps of 32 x 32, values 0-999, about 80 % zeros):

``inNeu.txt`` (dense)::

    FM0
    v v v ... v        <- W values per line, H lines, row-major
    ...
    FM1
    ...

``inNeu.coo`` (coordinate list per map; n may be 0)::

    FM0
    NNZ: n
    Data: v1 v2 ... vn
    Row: r1 r2 ... rn
    Col: c1 c2 ... cn
    FM1
    ...

Filters, (M, C, R, S) int16 -- the lab's ``filt.txt`` / ``filt.coo``
(512 x 512 x 3 x 3, one non-zero per 3 x 3 slice) are not public; gpuopt
writes files its reader accepts:

``filt.txt`` (dense)::

    FL0
    FM0
    w w w              <- S values per line, R lines
    ...
    FM1
    ...
    FL1
    ...

``filt.coo``::

    FL0
    FM0
    NNZ: n
    Data: v1 ... vn
    Row: r1 ... rn
    Col: c1 ... cn
    FM1
    ...

For n == 1 the ``Data: v`` / ``Row: r`` / ``Col: c`` lines are exactly the
label/value pairs the lab's reader expects.  Filter row and column indices
are single digits (R, S <= 9) so that the lab's FAST encoding
``data * 100 + row * 10 + col`` can represent them.

Readers check every label (``FM<i>`` / ``FL<m>`` numbered from 0 in order),
every count and index, and that values fit int16; errors are ValueErrors
giving the file and line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ._paths import (
    PathLike,
    _as_path,
    _check_int,
    _data_file,
    _existing_file,
    _int_array,
    _read_text,
)

__all__ = [
    "read_nctu_filters_coo",
    "read_nctu_filters_txt",
    "read_nctu_neurons_coo",
    "read_nctu_neurons_txt",
    "write_nctu_filters_coo",
    "write_nctu_filters_txt",
    "write_nctu_neurons_coo",
    "write_nctu_neurons_txt",
]

_I16_MIN, _I16_MAX = -(2**15), 2**15 - 1
_MAX_COO_KERNEL = 9


def _looks_int(token: str) -> bool:
    c = token[0]
    return c.isdigit() or (c in "+-" and len(token) > 1)


class _Tokens:
    """Cursor over the whitespace-separated tokens of a text file."""

    def __init__(self, text: str, path: Path) -> None:
        self.text = text
        self.path = path
        self.tok = text.split()
        self.pos = 0

    # -- errors ------------------------------------------------------------
    def _line_of(self, index: int) -> int:
        seen = 0
        lineno = 0
        for lineno, line in enumerate(self.text.splitlines(), 1):
            seen += len(line.split())
            if seen > index:
                return lineno
        return lineno

    def error(self, msg: str, at: int | None = None) -> ValueError:
        index = self.pos if at is None else at
        if index >= len(self.tok):
            return ValueError(f"{self.path}: unexpected end of file: {msg}")
        return ValueError(f"{self.path}, line {self._line_of(index)}: {msg}")

    # -- reading -----------------------------------------------------------
    def at_end(self) -> bool:
        return self.pos >= len(self.tok)

    def peek(self) -> str | None:
        return None if self.at_end() else self.tok[self.pos]

    def expect(self, literal: str, hint: str = "") -> None:
        if self.at_end():
            raise self.error(f"expected {literal!r}{hint}")
        got = self.tok[self.pos]
        if got != literal:
            raise self.error(f"expected {literal!r}, got {got!r}{hint}")
        self.pos += 1

    def count_ints(self) -> int:
        """Number of integer-looking tokens from the cursor on (up to the next label)."""
        j = self.pos
        while j < len(self.tok) and _looks_int(self.tok[j]):
            j += 1
        return j - self.pos

    def ints(self, n: int, what: str, *, low: int = _I16_MIN, high: int = _I16_MAX) -> list[int]:
        """Parse the next ``n`` tokens as integers in ``[low, high]``."""
        start = self.pos
        chunk = self.tok[start : start + n]
        try:
            if len(chunk) < n or not all(map(_looks_int, chunk)):
                raise ValueError
            values = list(map(int, chunk))
        except ValueError:
            for j, t in enumerate(chunk):
                if not _is_int(t):
                    raise self.error(
                        f"{what}: expected {n} integers, but value {j + 1} is {t!r}", at=start + j
                    ) from None
            raise self.error(
                f"{what}: expected {n} integers, found {len(chunk)}", at=len(self.tok)
            ) from None
        if values and (min(values) < low or max(values) > high):
            j = next(j for j, v in enumerate(values) if not low <= v <= high)
            raise self.error(
                f"{what}: value {values[j]} outside the allowed range [{low}, {high}]",
                at=start + j,
            )
        self.pos += n
        return values

    def count(self, label: str, limit: int, what: str) -> int:
        """Read ``label n`` (e.g. ``NNZ: 12``) with 0 <= n <= limit."""
        self.expect(label)
        return self.ints(1, f"{what} {label.rstrip(':')}", low=0, high=limit)[0]


def _is_int(token: str) -> bool:
    try:
        int(token)
    except ValueError:
        return False
    return True


def _shape2(value: object, arg: str, *, high: int | None = None) -> tuple[int, int]:
    """A pair of positive ints (an int n means (n, n))."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != 2:
            raise ValueError(f"{arg} must be a pair (rows, cols), got {value!r}")
        r, c = (_check_int(v, arg, low=1, high=high) for v in value)
        return r, c
    n = _check_int(value, arg, low=1, high=high)
    return n, n


def _line(label: str, values: Sequence[int]) -> str:
    return f"{label} {' '.join(map(str, values))}\n" if len(values) else f"{label}\n"


def _coo_block(
    tokens: _Tokens, what: str, shape: tuple[int, int], base: int, index: list[int], data: list[int]
) -> None:
    """Parse ``NNZ: n  Data: ...  Row: ...  Col: ...`` of one (R, S) matrix.

    Appends the flat positions ``base + row * S + col`` to ``index`` and the
    values to ``data``.
    """
    rows_n, cols_n = shape
    start = tokens.pos
    n = tokens.count("NNZ:", rows_n * cols_n, what)
    more = f" (more values than 'NNZ: {n}'?)"
    tokens.expect("Data:")
    values = tokens.ints(n, f"{what} Data (NNZ: {n})")
    tokens.expect("Row:", more)
    rows = tokens.ints(n, f"{what} Row (NNZ: {n})", low=0, high=rows_n - 1)
    tokens.expect("Col:", more)
    cols = tokens.ints(n, f"{what} Col (NNZ: {n})", low=0, high=cols_n - 1)
    flat = [base + r * cols_n + c for r, c in zip(rows, cols, strict=True)]
    if n > 1 and len(set(flat)) != n:
        raise tokens.error(f"{what}: duplicate (row, col) entries", at=start)
    index.extend(flat)
    data.extend(values)


def _dense_from_coo(shape: tuple[int, ...], index: list[int], data: list[int]) -> np.ndarray:
    out = np.zeros(shape, dtype=np.int16)
    if index:
        out.reshape(-1)[np.array(index, dtype=np.int64)] = np.array(data, dtype=np.int16)
    return out


def _neuron_array(x: object) -> np.ndarray:
    a = _int_array(x, "x", ndim=3, low=_I16_MIN, high=_I16_MAX)
    if min(a.shape) < 1:
        raise ValueError(f"x must have non-zero (C, H, W), got shape {a.shape}")
    return a


def _filter_array(w: object, *, max_kernel: int | None = None) -> np.ndarray:
    a = _int_array(w, "w", ndim=4, low=_I16_MIN, high=_I16_MAX)
    if min(a.shape) < 1:
        raise ValueError(f"w must have non-zero (M, C, R, S), got shape {a.shape}")
    if max_kernel is not None and max(a.shape[2:]) > max_kernel:
        raise ValueError(
            f"w: kernel {a.shape[2]}x{a.shape[3]} too large for the COO format "
            f"(R and S must be 1..{max_kernel} so row/col indices are single digits)"
        )
    return a


# ---------------------------------------------------------------------------
# Neurons
# ---------------------------------------------------------------------------


def read_nctu_neurons_txt(
    path: PathLike | None = None, *, shape: tuple[int, int] | None = None
) -> np.ndarray:
    """Read dense input neurons (the lab's ``inNeu.txt`` format).

    Parameters
    ----------
    path : str or os.PathLike, optional
        Default: ``data_path("nctu_sparse_conv", "inNeu.txt")``.
    shape : (int, int), optional
        Map size (H, W).  Default: square, the side inferred from the number
        of values of the first map (32 for the reference file).

    Returns
    -------
    numpy.ndarray
        int16, shape (C, H, W); (512, 32, 32) for the reference file.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        Labels not ``FM0``, ``FM1``, ... in order, a map with the wrong number
        of values (or a non-square first map when ``shape`` is None),
        non-integer tokens, or values outside int16.
    """
    hw = None if shape is None else _shape2(shape, "shape")
    p = (
        _data_file("nctu_sparse_conv", "inNeu.txt")
        if path is None
        else _existing_file(path, "path")
    )
    tokens = _Tokens(_read_text(p, "FM<i> labels and integers"), p)
    if not tokens.tok:
        raise ValueError(f"{p}: empty file, expected 'FM0' and a map of integers")
    if hw is None:
        tokens.expect("FM0")
        n0 = tokens.count_ints()
        side = math.isqrt(n0)
        if n0 == 0 or side * side != n0:
            raise tokens.error(f"map FM0 has {n0} values, not a square number; pass shape=(H, W)")
        hw = (side, side)
        tokens.pos = 0
    values: list[int] = []
    c = 0
    while not tokens.at_end():
        tokens.expect(f"FM{c}")
        values.extend(tokens.ints(hw[0] * hw[1], f"map FM{c} ({hw[0]}x{hw[1]} values)"))
        nxt = tokens.peek()
        if nxt is not None and _looks_int(nxt):
            raise tokens.error(f"map FM{c} has more than {hw[0]}x{hw[1]} values")
        c += 1
    return np.array(values, dtype=np.int16).reshape(c, *hw)


def write_nctu_neurons_txt(path: PathLike, x: np.ndarray) -> Path:
    """Write dense neurons in the ``inNeu.txt`` format.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; overwritten if it exists.
    x : array_like
        Integer array (C, H, W) with values in the int16 range.  Each map is
        written as ``FM<c>`` followed by H lines of W space-separated values.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        ``x`` does not have an integer dtype.
    ValueError
        ``x`` is not 3-D, is empty, or has values outside int16.
    """
    p = _as_path(path, "path")
    a = _neuron_array(x)
    with p.open("w", encoding="ascii", newline="\n") as f:
        for c, fmap in enumerate(a.tolist()):
            f.write(f"FM{c}\n")
            f.writelines(" ".join(map(str, row)) + "\n" for row in fmap)
    return p


def read_nctu_neurons_coo(
    path: PathLike | None = None, *, shape: tuple[int, int] = (32, 32)
) -> np.ndarray:
    """Read sparse neurons (the lab's ``inNeu.coo`` format) into a dense array.

    Parameters
    ----------
    path : str or os.PathLike, optional
        Default: ``data_path("nctu_sparse_conv", "inNeu.coo")``.
    shape : (int, int), default (32, 32)
        Map size (H, W); the format does not store it.

    Returns
    -------
    numpy.ndarray
        int16, shape (C, H, W), zeros where no entry is listed.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        Labels out of order, ``NNZ`` not matching the number of Data/Row/Col
        values (or larger than H*W), rows/cols outside the map, duplicate
        coordinates, non-integers, or values outside int16.
    """
    hw = _shape2(shape, "shape")
    p = (
        _data_file("nctu_sparse_conv", "inNeu.coo")
        if path is None
        else _existing_file(path, "path")
    )
    tokens = _Tokens(_read_text(p, "COO neuron maps"), p)
    index: list[int] = []
    data: list[int] = []
    c = 0
    while not tokens.at_end():
        tokens.expect(f"FM{c}")
        _coo_block(tokens, f"map FM{c}", hw, c * hw[0] * hw[1], index, data)
        c += 1
    if c == 0:
        raise ValueError(f"{p}: empty file, expected 'FM0' and a COO map")
    return _dense_from_coo((c, *hw), index, data)


def write_nctu_neurons_coo(path: PathLike, x: np.ndarray) -> Path:
    """Write neurons in the ``inNeu.coo`` format.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; overwritten if it exists.
    x : array_like
        Integer array (C, H, W) with values in the int16 range.  Each map's
        non-zeros are listed in row-major order; an all-zero map is written
        as ``NNZ: 0`` with empty Data/Row/Col lines.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        ``x`` does not have an integer dtype.
    ValueError
        ``x`` is not 3-D, is empty, or has values outside int16.
    """
    p = _as_path(path, "path")
    a = _neuron_array(x)
    with p.open("w", encoding="ascii", newline="\n") as f:
        for c in range(a.shape[0]):
            rows, cols = np.nonzero(a[c])
            f.write(f"FM{c}\nNNZ: {rows.size}\n")
            f.write(_line("Data:", a[c][rows, cols].tolist()))
            f.write(_line("Row:", rows.tolist()))
            f.write(_line("Col:", cols.tolist()))
    return p


# ---------------------------------------------------------------------------
# Filters
# ---------------------------------------------------------------------------


def _read_filters(
    tokens: _Tokens,
    read_slice: Callable[[str, int], None],
    what: str,
    num_slices: int | None,
) -> tuple[int, int]:
    """Walk ``FL<m>`` blocks of ``FM<c>`` slices; every filter must have the same C.

    ``read_slice(what, k)`` parses slice number ``k`` (= m * C + c) at the
    cursor.  Returns (M, C).
    """
    m = 0
    depth = num_slices
    while not tokens.at_end():
        tokens.expect(f"FL{m}")
        c = 0
        while (nxt := tokens.peek()) is not None and nxt.startswith("FM"):
            tokens.expect(f"FM{c}")
            read_slice(f"filter FL{m} slice FM{c}", m * depth + c if depth else c)
            c += 1
        if c == 0 or (depth is not None and c != depth):
            want = f"{depth}" if depth is not None else "at least 1"
            found = repr(nxt) if nxt is not None else "end of file"
            raise tokens.error(
                f"filter FL{m} has {c} slices (FM0, FM1, ...), expected {want}; next token {found}"
            )
        depth = c
        m += 1
    if m == 0 or depth is None:
        raise ValueError(f"{tokens.path}: empty file, expected 'FL0' and {what}")
    return m, depth


def read_nctu_filters_txt(
    path: PathLike,
    *,
    num_slices: int | None = None,
    kernel_size: int | tuple[int, int] | None = None,
) -> np.ndarray:
    """Read dense filters (the lab's ``filt.txt`` format).

    Parameters
    ----------
    path : str or os.PathLike
        The file (the lab's own ``filt.txt`` is not public; see
        :func:`gpuopt.datasets.make_nctu_filters` and
        :func:`write_nctu_filters_txt`).
    num_slices : int, optional
        Expected input depth C (512 in the lab); checked when given, else
        taken from the first filter.
    kernel_size : int or (int, int), optional
        Kernel size (R, S).  Default: square, inferred from the number of
        values of the first slice (3 for the lab).

    Returns
    -------
    numpy.ndarray
        int16, shape (M, C, R, S).

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        Labels not ``FL<m>`` / ``FM<c>`` in order, differing slice counts,
        slices with the wrong number of values, non-integers, or values
        outside int16.
    """
    if num_slices is not None:
        num_slices = _check_int(num_slices, "num_slices", low=1)
    rs = None if kernel_size is None else _shape2(kernel_size, "kernel_size")
    p = _existing_file(path, "path")
    tokens = _Tokens(_read_text(p, "FL<m>/FM<c> labels and integers"), p)
    if rs is None:
        if tokens.tok[:2] != ["FL0", "FM0"]:
            raise tokens.error(f"expected 'FL0 FM0' at the start, got {' '.join(tokens.tok[:2])!r}")
        tokens.pos = 2
        n0 = tokens.count_ints()
        side = math.isqrt(n0)
        if n0 == 0 or side * side != n0:
            raise tokens.error(
                f"slice FL0/FM0 has {n0} values, not a square number; pass kernel_size=(R, S)"
            )
        rs = (side, side)
        tokens.pos = 0

    values: list[int] = []

    def read_slice(what: str, k: int) -> None:
        values.extend(tokens.ints(rs[0] * rs[1], f"{what} ({rs[0]}x{rs[1]} values)"))
        nxt = tokens.peek()
        if nxt is not None and _looks_int(nxt):
            raise tokens.error(f"{what} has more than {rs[0]}x{rs[1]} values")

    m, c = _read_filters(tokens, read_slice, "dense filter slices", num_slices)
    return np.array(values, dtype=np.int16).reshape(m, c, *rs)


def write_nctu_filters_txt(path: PathLike, w: np.ndarray) -> Path:
    """Write dense filters in the ``filt.txt`` format.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; overwritten if it exists.
    w : array_like
        Integer array (M, C, R, S) with values in the int16 range.  Written
        as ``FL<m>``, then per slice ``FM<c>`` and R lines of S values.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        ``w`` does not have an integer dtype.
    ValueError
        ``w`` is not 4-D, is empty, or has values outside int16.

    Notes
    -----
    Only square kernels are read back without arguments; for R != S pass
    ``kernel_size=(R, S)`` to :func:`read_nctu_filters_txt`.
    """
    p = _as_path(path, "path")
    a = _filter_array(w)
    with p.open("w", encoding="ascii", newline="\n") as f:
        for m, filt in enumerate(a.tolist()):
            f.write(f"FL{m}\n")
            for c, kernel in enumerate(filt):
                f.write(f"FM{c}\n")
                f.writelines(" ".join(map(str, row)) + "\n" for row in kernel)
    return p


def read_nctu_filters_coo(path: PathLike, *, kernel_size: int | tuple[int, int] = 3) -> np.ndarray:
    """Read sparse filters (the lab's ``filt.coo`` format) into a dense array.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    kernel_size : int or (int, int), default 3
        Kernel size (R, S), each 1..9; the format does not store it.

    Returns
    -------
    numpy.ndarray
        int16, shape (M, C, R, S).

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        Labels out of order, differing slice counts, ``NNZ`` not matching the
        Data/Row/Col values, rows/cols outside the kernel, duplicate
        coordinates, non-integers or values outside int16.
    """
    rs = _shape2(kernel_size, "kernel_size", high=_MAX_COO_KERNEL)
    p = _existing_file(path, "path")
    tokens = _Tokens(_read_text(p, "FL<m>/FM<c> labels and COO slices"), p)
    index: list[int] = []
    data: list[int] = []
    area = rs[0] * rs[1]

    def read_slice(what: str, k: int) -> None:
        _coo_block(tokens, what, rs, k * area, index, data)

    m, c = _read_filters(tokens, read_slice, "COO filter slices", None)
    return _dense_from_coo((m, c, *rs), index, data)


def write_nctu_filters_coo(path: PathLike, w: np.ndarray) -> Path:
    """Write filters in the ``filt.coo`` format.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; overwritten if it exists.
    w : array_like
        Integer array (M, C, R, S), R and S in 1..9, values in the int16
        range.  Each slice's non-zeros are listed in row-major order; an
        all-zero slice is written as ``NNZ: 0`` with empty Data/Row/Col lines.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        ``w`` does not have an integer dtype.
    ValueError
        ``w`` is not 4-D, is empty, has R or S above 9, or values outside int16.
    """
    p = _as_path(path, "path")
    a = _filter_array(w, max_kernel=_MAX_COO_KERNEL)
    m_n, c_n, r_n, s_n = a.shape
    flat = a.reshape(m_n, c_n, r_n * s_n)
    with p.open("w", encoding="ascii", newline="\n") as f:
        for m in range(m_n):
            f.write(f"FL{m}\n")
            nz_m, nz_idx = np.nonzero(flat[m])  # slice index, flat kernel index; row-major
            bounds = np.searchsorted(nz_m, np.arange(c_n + 1))
            for c in range(c_n):
                idx = nz_idx[bounds[c] : bounds[c + 1]]
                f.write(f"FM{c}\nNNZ: {idx.size}\n")
                f.write(_line("Data:", flat[m, c, idx].tolist()))
                f.write(_line("Row:", (idx // s_n).tolist()))
                f.write(_line("Col:", (idx % s_n).tolist()))
    return p
