"""Sparse filters in the NCTU lab's formats: COO and FAST.

The NCTU 2016 lab stores each 3x3 filter slice ``w[m, c]`` as COO lists of
(value, row, col) and proposes FAST, which packs one entry into one int32:
``code = value * 100 + row * 10 + col``. Both are held here per slice, in slice order
``s = m * C + c``, with ``offsets`` delimiting each slice's entries (CSR over slices),
so slices may hold any number of non-zeros; the lab's filters hold exactly one.

FAST decodes with floor division (``col = code mod 10``, ``row = (code // 10) mod 10``,
``value = code // 100``), so negative values round-trip too. It can only encode rows
and columns 0..9 (filters up to 10x10); anything else is rejected, never corrupted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from .. import _core
from .._validate import int_array
from ..cuda import is_device_array

__all__ = ["COOFilters", "FASTFilters", "to_coo", "to_fast", "to_dense"]

_INT16 = np.iinfo(np.int16)
#: The filter formats of the GPU variants with kernel arrays of their own (``dense`` reads the dense array).
_KERNEL_FORMATS = ("coo", "fast")


def _slice_offsets(nnz: np.ndarray) -> np.ndarray:
    offsets = np.zeros(nnz.size + 1, dtype=np.int64)
    np.cumsum(nnz.ravel(), out=offsets[1:])
    return offsets


def _check_filter_shape(shape: Any) -> tuple[int, int, int, int]:
    if len(shape) != 4 or any(int(v) < 1 for v in shape):
        raise ValueError(f"filter shape must be (M, C, R, S) with every entry >= 1, got {tuple(shape)}")
    return tuple(int(v) for v in shape)  # type: ignore[return-value]


def _check_fast_shape(shape: Any) -> tuple[int, int, int, int]:
    shape = _check_filter_shape(shape)
    if shape[2] > 10 or shape[3] > 10:
        raise ValueError(f"FAST stores row and column as one decimal digit each; filters of {shape[2]}x{shape[3]} "
                         "taps cannot be encoded (at most 10x10)")
    return shape


@dataclass(frozen=True, eq=False)
class COOFilters:
    """Filters w (M, C, R, S) in COO form, one list of non-zeros per (m, c) slice.

    Attributes
    ----------
    shape : (M, C, R, S)
    nnz : numpy.ndarray, int32, shape (M, C)
        Entries in each slice.
    offsets : numpy.ndarray, int64, shape (M*C + 1,)
        Slice ``m*C + c`` owns entries ``offsets[s]:offsets[s+1]``.
    data, row, col : numpy.ndarray, int16, shape (nnz.sum(),)
        Value and position of each entry, row-major within a slice.
    """

    shape: tuple[int, int, int, int]
    nnz: np.ndarray
    data: np.ndarray
    row: np.ndarray
    col: np.ndarray
    offsets: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        shape = _check_filter_shape(self.shape)
        m, c, r, s = shape
        nnz = np.asarray(self.nnz)
        if nnz.shape != (m, c) or nnz.dtype.kind not in "iu" or (nnz < 0).any() or (nnz > r * s).any():
            raise ValueError(f"nnz must be integer counts in 0..{r * s} of shape ({m}, {c}), got {nnz.dtype} {nnz.shape}")
        total = int(nnz.sum())
        arrays = {}
        for name in ("data", "row", "col"):
            arr = np.asarray(getattr(self, name))
            if arr.ndim != 1 or arr.size != total:
                raise ValueError(f"COO {name} must be 1-D with nnz.sum() = {total} entries, got shape {arr.shape}")
            if arr.size and arr.dtype.kind not in "iu":
                raise TypeError(f"COO {name} must be integers, got {arr.dtype}")
            arrays[name] = arr
        if total:
            if arrays["data"].min() < _INT16.min or arrays["data"].max() > _INT16.max:
                raise ValueError("COO data values must fit in int16")
            for name, limit in (("row", r), ("col", s)):
                if arrays[name].min() < 0 or arrays[name].max() >= limit:
                    raise ValueError(f"COO {name} indices must be in 0..{limit - 1}")
        slice_ids = np.repeat(np.arange(m * c, dtype=np.int64), nnz.ravel())
        flat = slice_ids * (r * s) + arrays["row"].astype(np.int64) * s + arrays["col"]
        # Strictly increasing (slices in order, entries row-major: what from_dense and the lab write) means no
        # repeats, in one pass; otherwise sort (np.unique cost 70 ms on the lab's 262,144 entries).
        if total > 1 and not (flat[1:] > flat[:-1]).all() and (np.diff(np.sort(flat)) == 0).any():
            raise ValueError("COO lists the same (row, col) twice in one slice")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "nnz", np.ascontiguousarray(nnz, dtype=np.int32))
        for name, arr in arrays.items():
            object.__setattr__(self, name, np.ascontiguousarray(arr, dtype=np.int16))
        object.__setattr__(self, "offsets", _slice_offsets(self.nnz))

    @classmethod
    def from_dense(cls, w) -> "COOFilters":
        """COO of dense integer filters w (M, C, R, S) (values must fit int16)."""
        w = int_array(w, "w", 4, "(M, C, R, S)")
        # C++ (two passes, parallel over slices): entries slice by slice, taps row-major
        return cls._valid(w.shape, *_core.dense_to_coo(w))

    @classmethod
    def _valid(cls, shape, nnz, data, row, col) -> "COOFilters":
        """Built from parts that are valid by construction (from_dense, decoded FAST codes): the checks of
        ``__post_init__`` skipped, the dtypes set."""
        out = object.__new__(cls)
        nnz = np.ascontiguousarray(nnz, dtype=np.int32)
        for name, value in (("shape", tuple(int(v) for v in shape)), ("nnz", nnz),
                            ("data", np.ascontiguousarray(data, dtype=np.int16)),
                            ("row", np.ascontiguousarray(row, dtype=np.int16)),
                            ("col", np.ascontiguousarray(col, dtype=np.int16)), ("offsets", _slice_offsets(nnz))):
            object.__setattr__(out, name, value)
        return out

    def to_dense(self) -> np.ndarray:
        """Dense int16 filters (M, C, R, S)."""
        m, c, r, s = self.shape
        out = np.zeros((m * c, r * s), dtype=np.int16)
        slice_ids = np.repeat(np.arange(m * c), self.nnz.ravel())
        out[slice_ids, self.row.astype(np.int64) * s + self.col] = self.data
        return out.reshape(self.shape)

    def to_fast(self) -> "FASTFilters":
        """The same filters in FAST form (ValueError if R or S > 10)."""
        return FASTFilters.from_coo(self)

    @property
    def uniform_nnz(self) -> int | None:
        """The common number of entries per slice (the lab's layout), or None."""
        first = int(self.nnz.flat[0])
        return first if (self.nnz == first).all() else None

    def padded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(data, row, col), each int16 (M, C, max_nnz), slices padded with value 0 at (0, 0).

        A fixed stride per slice, as the lab's kernels index ``i * nnz + k``; padding
        entries contribute nothing.
        """
        m, c, _, _ = self.shape
        width = max(int(self.nnz.max()), 1)
        out = [np.zeros((m * c, width), dtype=np.int16) for _ in range(3)]
        slice_ids = np.repeat(np.arange(m * c), self.nnz.ravel())
        lane = np.arange(self.data.size) - self.offsets[slice_ids]
        for dst, src in zip(out, (self.data, self.row, self.col)):
            dst[slice_ids, lane] = src
        return tuple(a.reshape(m, c, width) for a in out)  # type: ignore[return-value]

    def kernel_arrays(self, fmt: str) -> tuple[list[Any], int]:
        """What the GPU variant ``fmt`` reads, and the padded slice width: ``"coo"``: the :meth:`padded` data, row
        and col (int16 (M, C, width) each); ``"fast"``: their FAST codes (int32 (M, C, width)). Built once per
        object and kept; DeviceArrays after :meth:`to_device`, so a call sends nothing but the input maps."""
        if fmt not in _KERNEL_FORMATS:
            raise ValueError(f"fmt must be one of {list(_KERNEL_FORMATS)}, got {fmt!r}")
        cache = self.__dict__.setdefault("_kernel_arrays", {})  # (frozen: the cache is not a field)
        if fmt not in cache:
            data, row, col = self.padded()
            cache[fmt] = ([data, row, col] if fmt == "coo" else [FASTFilters.encode(data, row, col)], data.shape[2])
        return cache[fmt]

    def to_device(self, formats: tuple[str, ...] = _KERNEL_FORMATS) -> "COOFilters":
        """Copy the kernel arrays of ``formats`` to the device once and keep them there (returns self): later
        ``sparse_conv2d`` calls with these filters neither re-encode nor re-send them. Needs a GPU. The copies are
        waited for once (DeviceArray.synchronize): calls on any stream, and graph captures, read them without a wait.
        """
        from ..cuda import DeviceArray, to_device

        for fmt in (formats,) if isinstance(formats, str) else formats:
            arrays, width = self.kernel_arrays(fmt)
            self.__dict__["_kernel_arrays"][fmt] = (
                [a if isinstance(a, DeviceArray) else to_device(a).synchronize() for a in arrays], width)
        return self

    @property
    def on_device(self) -> tuple[str, ...]:
        """The formats whose kernel arrays are on the device (:meth:`to_device`)."""
        from ..cuda import DeviceArray

        cache = self.__dict__.get("_kernel_arrays", {})
        return tuple(f for f in _KERNEL_FORMATS if f in cache and isinstance(cache[f][0][0], DeviceArray))

    @property
    def taps_fit_int8(self) -> bool:
        """Whether every tap is in -128..127 (a position is listed once per slice): ``fast_imma``'s tensor-core
        operands (``auto`` takes it then; its kernel checks again and falls back to exact int64 sums). Cached (the
        taps do not change): ``auto`` asks on every call."""
        if "_taps_fit_int8" not in self.__dict__:
            self.__dict__["_taps_fit_int8"] = bool(self.data.size == 0 or (self.data.min() >= -128 and
                                                                           self.data.max() <= 127))
        return self.__dict__["_taps_fit_int8"]

    @property
    def max_map_abs_sum(self) -> int:
        """max over maps m of sum |w[m]| (the int32 bound's filter side; cached)."""
        if "_max_map_abs_sum" not in self.__dict__:
            m, c, _, _ = self.shape
            maps = np.repeat(np.arange(m * c, dtype=np.int64), self.nnz.ravel()) // c
            sums = np.bincount(maps, weights=np.abs(self.data.astype(np.int64)), minlength=m)
            self.__dict__["_max_map_abs_sum"] = int(sums.max()) if sums.size else 0
        return self.__dict__["_max_map_abs_sum"]

    @property
    def density(self) -> float:
        """Fraction of filter taps that are stored."""
        return float(self.data.size) / float(np.prod(self.shape))

    def __repr__(self) -> str:
        return f"COOFilters(shape={self.shape}, nnz={self.data.size}, density={self.density:.3f})"


@dataclass(frozen=True, eq=False)
class FASTFilters:
    """Filters in the lab's FAST form: one int32 ``value*100 + row*10 + col`` per entry.

    Attributes
    ----------
    shape : (M, C, R, S), with R, S <= 10
    nnz : numpy.ndarray, int32, shape (M, C)
    offsets : numpy.ndarray, int64, shape (M*C + 1,)
    codes : numpy.ndarray, int32, shape (nnz.sum(),)
    """

    shape: tuple[int, int, int, int]
    nnz: np.ndarray
    codes: np.ndarray
    offsets: np.ndarray = field(init=False, repr=False)
    _coo: COOFilters = field(init=False, repr=False)

    def __post_init__(self) -> None:
        shape = _check_fast_shape(self.shape)
        codes = np.asarray(self.codes)
        if codes.ndim != 1 or (codes.size and codes.dtype.kind not in "iu"):
            raise TypeError(f"FAST codes must be a 1-D integer array, got {codes.dtype} {codes.shape}")
        codes64 = codes.astype(np.int64)
        # Decoding validates everything: the COO constructor checks counts, ranges, duplicates.
        value = codes64 // 100
        if codes.size and (value.min() < _INT16.min or value.max() > _INT16.max):
            raise ValueError("FAST codes decode to values outside int16")
        coo = COOFilters(shape, self.nnz, value, (codes64 // 10) % 10, codes64 % 10)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "nnz", coo.nnz)
        object.__setattr__(self, "codes", np.ascontiguousarray(codes64, dtype=np.int32))
        object.__setattr__(self, "offsets", coo.offsets)
        object.__setattr__(self, "_coo", coo)

    @staticmethod
    def encode(value, row, col) -> np.ndarray:
        """int32 FAST codes of (value, row, col) arrays: ``value*100 + row*10 + col``."""
        return (np.asarray(value, np.int64) * 100 + np.asarray(row, np.int64) * 10 + np.asarray(col, np.int64)).astype(np.int32)

    @staticmethod
    def decode(codes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(value, row, col) int64 arrays of FAST codes (floor division: negatives round-trip)."""
        c = np.asarray(codes, np.int64)
        return c // 100, (c // 10) % 10, c % 10

    @classmethod
    def from_coo(cls, coo: COOFilters) -> "FASTFilters":
        """FAST codes of valid COO filters (ValueError if R or S > 10); nothing is re-validated."""
        _check_fast_shape(coo.shape)
        out = object.__new__(cls)
        for name, value in (("shape", coo.shape), ("nnz", coo.nnz), ("codes", cls.encode(coo.data, coo.row, coo.col)),
                            ("offsets", coo.offsets), ("_coo", coo)):
            object.__setattr__(out, name, value)
        return out

    @classmethod
    def from_dense(cls, w) -> "FASTFilters":
        return cls.from_coo(COOFilters.from_dense(w))

    def to_coo(self) -> COOFilters:
        return self._coo

    def to_dense(self) -> np.ndarray:
        return self._coo.to_dense()

    def kernel_arrays(self, fmt: str) -> tuple[list[Any], int]:
        """As :meth:`COOFilters.kernel_arrays` (kept with this object's COO form)."""
        return self._coo.kernel_arrays(fmt)

    def to_device(self, formats: tuple[str, ...] = ("coo", "fast")) -> "FASTFilters":
        """As :meth:`COOFilters.to_device` (returns self)."""
        self._coo.to_device(formats)
        return self

    @property
    def on_device(self) -> tuple[str, ...]:
        return self._coo.on_device

    @property
    def uniform_nnz(self) -> int | None:
        return self._coo.uniform_nnz

    @property
    def taps_fit_int8(self) -> bool:
        return self._coo.taps_fit_int8

    @property
    def max_map_abs_sum(self) -> int:
        return self._coo.max_map_abs_sum

    def __repr__(self) -> str:
        return f"FASTFilters(shape={self.shape}, nnz={self.codes.size})"


Filters = Union[np.ndarray, COOFilters, FASTFilters]


def to_dense(w):
    """Dense int16 (M, C, R, S) filters from a dense array, COOFilters or FASTFilters."""
    if isinstance(w, (COOFilters, FASTFilters)):
        return w.to_dense()
    return int_array(w, "w", 4, "(M, C, R, S)")


def to_coo(w) -> COOFilters:
    """COOFilters from a dense array (host or device), COOFilters or FASTFilters."""
    if isinstance(w, COOFilters):
        return w
    if isinstance(w, FASTFilters):
        return w.to_coo()
    if is_device_array(w):
        from ..cuda import as_device_array

        w = as_device_array(w, "w").numpy()
    return COOFilters.from_dense(w)


def to_fast(w) -> FASTFilters:
    """FASTFilters from a dense array, COOFilters or FASTFilters."""
    if isinstance(w, FASTFilters):
        return w
    return to_coo(w).to_fast()
