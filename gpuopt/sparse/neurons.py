"""Sparse neurons (notes/sparse.md, round 6): input maps held as the per-(channel, row) lists of their non-zeros that
``fast_sparse_input``'s planes kernel reads, built once, so a call with them queues that kernel alone.

The lists (csrc/sparse/sparse_conv_cuda.hpp, ``sparse_neurons_compact``): per channel c its non-zeros in raster
order, each packed ``value << 16 | 4 * (iy * 32 + ix)`` (``nz[c, :count]``, capacity H*W), ``rowptr[c, iy]`` the
first entry of row iy (``rowptr[c, H]`` the count) and ``absmax[c]`` = max |x[c]|. :meth:`SparseNeurons.to_device`
builds them on the device with the compaction kernel (the encoding step, like ``FASTFilters.to_device()``);
:meth:`SparseNeurons.host_lists` is the same encoding in NumPy (what the GPU tests compare with). The dense maps are
kept beside them: every other variant reads those, and the planes kernel's exact int64 path does too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._ext import cuda_module, kernel_limits
from .._validate import int_array

__all__ = ["SparseNeurons"]


def _check_planes_shape(shape: tuple[int, ...], name: str) -> tuple[int, int, int]:
    lim = kernel_limits()
    c, h, w = (int(v) for v in shape)
    if min(c, h, w) < 1:
        raise ValueError(f"{name} must have non-zero (C, H, W), got shape {tuple(shape)}")
    if h > lim["sparse_conv2d_planes_max_height"] or w > lim["sparse_conv2d_planes_max_width"]:
        raise ValueError(f"{name}: sparse neurons hold maps up to {lim['sparse_conv2d_planes_max_height']} high and "
                         f"{lim['sparse_conv2d_planes_max_width']} wide (the planes kernel's lists), got {h}x{w}")
    return c, h, w


def _entry_row() -> int:
    """The row length of an entry's packed position (4 * (iy * row + ix)): the planes kernel's widest map."""
    return int(kernel_limits()["sparse_conv2d_planes_max_width"])


class SparseNeurons:
    """Input maps (C, H, W) int16 with their non-zeros listed per (channel, row); see the module docstring.

    Build with :meth:`from_dense` or :meth:`from_coo`; :meth:`to_device` builds the lists on the device once.
    ``gpuopt.sparse_conv2d(neurons, filters, variant="fast_sparse_input")`` then skips the compaction; any other
    variant reads the dense maps (the result is a DeviceArray once the neurons are on the device).
    """

    def __init__(self, x: Any) -> None:
        x = int_array(x, "x", 3, "(C, H, W)")
        self.shape = _check_planes_shape(x.shape, "x")
        self._host = x if isinstance(x, np.ndarray) else None
        self._dev: dict[str, Any] = {"x": None if self._host is not None else x}

    @classmethod
    def from_dense(cls, x) -> "SparseNeurons":
        """From integer maps x (C, H, W) (values must fit int16; a device int16 array stays on the device)."""
        return cls(x)

    @classmethod
    def from_coo(cls, path=None, *, shape: tuple[int, int] = (32, 32)) -> "SparseNeurons":
        """From the lab's COO neuron file (``inNeu.coo``; bad lines: ValueError naming the line)."""
        from ..datasets import read_nctu_neurons_coo

        return cls(read_nctu_neurons_coo(path, shape=shape))

    # ------------------------------------------------------------------ device
    def to_device(self) -> "SparseNeurons":
        """Copy the maps to the device (if they are not there) and build their lists with the compaction kernel,
        once; returns self. Needs a GPU."""
        if self.on_device:
            return self
        from ..cuda import DeviceArray, to_device

        c, h, w = self.shape
        dx = self._dev["x"] if self._dev["x"] is not None else to_device(self._host)
        nz = DeviceArray.empty((c, h * w), np.int32)
        rowptr = DeviceArray.empty((c, h + 1), np.int32)
        absmax = DeviceArray.empty((c,), np.int32)
        cuda_module().sparse_neurons_compact(dx.ptr, nz.ptr, rowptr.ptr, absmax.ptr, c, h, w)
        self._dev.update(x=dx, nz=nz, rowptr=rowptr, absmax=absmax)
        return self

    @property
    def on_device(self) -> bool:
        """Whether the lists are built on the device (:meth:`to_device`)."""
        return "nz" in self._dev

    @property
    def dense(self) -> Any:
        """The maps as the other variants read them: the device array once on the device, else NumPy."""
        return self._dev["x"] if self._dev["x"] is not None else self._host

    def device_lists(self) -> dict[str, Any]:
        """The device arrays ``nz``, ``rowptr``, ``absmax`` (after :meth:`to_device`)."""
        if not self.on_device:
            raise RuntimeError("SparseNeurons: call to_device() first (the lists are built on the device)")
        return {k: self._dev[k] for k in ("nz", "rowptr", "absmax")}

    # ------------------------------------------------------------------ host
    def numpy(self) -> np.ndarray:
        """The dense maps as NumPy int16 (C, H, W)."""
        if self._host is None:
            self._host = self._dev["x"].numpy()
        return self._host

    def host_lists(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(nz, rowptr, absmax) computed in NumPy, the kernel's encoding: nz int32 (C, H*W) with unused tail
        entries 0, rowptr int32 (C, H+1), absmax int32 (C,)."""
        x = self.numpy()
        c, h, w = self.shape
        flat = x.reshape(c, h * w).astype(np.int32)
        mask = flat != 0
        rows = np.zeros((c, h + 1), np.int32)
        np.cumsum(mask.reshape(c, h, w).sum(axis=2), axis=1, out=rows[:, 1:])
        iy, ix = np.divmod(np.arange(h * w), w)
        packed = ((flat.astype(np.uint32) << 16) | (4 * (iy * _entry_row() + ix)).astype(np.uint32)).view(np.int32)
        order = np.argsort(~mask, axis=1, kind="stable")  # the non-zeros first, in raster order
        listed = np.arange(h * w)[None, :] < mask.sum(axis=1)[:, None]
        nz = np.where(listed, np.take_along_axis(packed, order, axis=1), 0).astype(np.int32)
        absmax = np.abs(flat).max(axis=1).astype(np.int32)
        return nz, rows, absmax

    @staticmethod
    def decode(nz: np.ndarray, rowptr: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
        """Dense int16 (C, H, W) from lists (the round trip of the encoding)."""
        c, h, w = shape
        row = _entry_row()
        out = np.zeros((c, h * w), np.int16)
        counts = rowptr[:, h].astype(np.int64)
        if (counts < 0).any() or (counts > h * w).any():
            raise ValueError(f"rowptr counts must be in 0..{h * w}")
        valid = np.arange(h * w)[None, :] < counts[:, None]
        e = nz.astype(np.int32)[valid]
        pos = (e & 0xFFFF) // 4
        iy, ix = np.divmod(pos, row)
        chan = np.repeat(np.arange(c), counts)
        out[chan, iy * w + ix] = (e >> 16).astype(np.int16)
        return out.reshape(shape)

    def to_dense(self) -> np.ndarray:
        """The maps decoded from their lists: the device's (after :meth:`to_device`: the compaction's round trip),
        else the NumPy encoding's."""
        if self.on_device:
            lists = self.device_lists()
            return self.decode(lists["nz"].numpy(), lists["rowptr"].numpy(), self.shape)
        nz, rowptr, _ = self.host_lists()
        return self.decode(nz, rowptr, self.shape)

    @property
    def absmax(self) -> int:
        """max |x| over every map (the int32 bound's input side)."""
        if "max" not in self._dev:
            self._dev["max"] = int(np.abs(self.numpy().astype(np.int32)).max())
        return self._dev["max"]

    @property
    def nnz(self) -> int:
        return int(np.count_nonzero(self.numpy()))

    def __repr__(self) -> str:
        c, h, w = self.shape
        return f"SparseNeurons(shape={self.shape}, nnz={self.nnz}, density={self.nnz / (c * h * w):.3f}, " \
               f"on_device={self.on_device})"
