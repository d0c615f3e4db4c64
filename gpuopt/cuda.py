"""Device arrays and interop with other GPU libraries.

Stream and synchronisation rules
--------------------------------
* Every op runs on one stream, the call's stream: the ``stream=`` it is given (a raw ``cudaStream_t``
  handle, a ``torch.cuda.Stream``, a CuPy stream, or any object with ``cuda_stream``, ``ptr`` or
  ``__cuda_stream__``); else the stream of its first device input -- for a torch tensor PyTorch's *current*
  stream (so inside ``with torch.cuda.stream(s):`` gpuopt runs on ``s``, and under ``torch.cuda.graph`` capture it
  is captured), for other foreign arrays the stream their ``__cuda_array_interface__`` names (CuPy's current
  stream), for a gpuopt :class:`DeviceArray` the stream it was made on; else (NumPy only) the legacy default
  stream. Everything
  of the call -- copies, kernels, cuBLAS/cuDNN, its memory -- is queued on it, in order with the caller's work.
* A device input made on another stream than the call's is waited for on the device (an event, no host sync);
  one whose stream is None (:meth:`DeviceArray.synchronize` was called: a network's weights) is not.
* Ops given device arrays return a :class:`DeviceArray` without waiting for the kernel; it remembers its stream
  (its ``__cuda_array_interface__`` and ``__dlpack__`` report it, so PyTorch and CuPy order their reads after
  it). :meth:`DeviceArray.numpy` waits for that stream; :func:`synchronize` for the whole device.
* Memory is stream-ordered: a result's block is freed on its stream when the array is garbage-collected, and
  reused elsewhere only once that is safe. A stream must therefore outlive the arrays made on it (PyTorch's
  streams always do; a CuPy ``Stream`` object or a raw handle must be kept alive as long as its results).
* Ops given NumPy arrays copy the inputs in, run, copy the result out, and return NumPy.
* An error an op can only find on the device (the sparse layer's int32 overflow, where the host could not
  prove it impossible) does not cost a host round trip per call when the result stays on the device: it is
  raised by the first of the result's :meth:`DeviceArray.numpy` / :meth:`DeviceArray.rows` /
  :meth:`DeviceArray.check`, or :func:`synchronize`, that follows (once). With NumPy results it is raised by
  the call itself.
* A kernel fault surfaces as RuntimeError at the next synchronising call. Argument errors
  and bad launch configurations raise before anything runs and leave the process usable;
  a memory fault inside a kernel poisons the CUDA context until the process restarts
  (a CUDA property).
"""

from __future__ import annotations

import math
import operator
import sys
import weakref
from typing import Any, Sequence

import numpy as np

from ._ext import require_cuda

__all__ = ["DeviceArray", "to_device", "empty", "synchronize", "is_device_array", "from_dlpack", "stream_handle"]

#: DLPack's device types (gpuopt's memory is kDLCUDA) and data type codes.
_DL_CUDA, _DL_CUDA_MANAGED, _DL_CPU = 2, 13, 1
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}
_DL_KINDS = {v: k for k, v in _DL_CODES.items()}


#: Errors found on the device and not yet read: result DeviceArray -> (its int32 device flag, the message). The
#: flag is read when the caller synchronises on the result (numpy, rows, check) or on everything (synchronize).
_DEFERRED: "weakref.WeakKeyDictionary[DeviceArray, tuple[DeviceArray, str]]" = weakref.WeakKeyDictionary()


def defer_error(result: "DeviceArray", flag: "DeviceArray", message: str) -> None:
    """Report ValueError(``message``) later if the int32 device ``flag`` is non-zero: at the first synchronising
    read of ``result`` or :func:`synchronize` (for an op whose error the host cannot rule out, without a host
    round trip per call)."""
    _DEFERRED[result] = (flag, message)


def _raise_deferred(result: "DeviceArray | None") -> None:
    """Read and forget the deferred errors of ``result`` (None: of every array); raise the first that is set."""
    if result is None:
        pending = list(_DEFERRED.values())
        _DEFERRED.clear()
    else:
        found = _DEFERRED.pop(result, None)
        pending = [] if found is None else [found]
    for flag, message in pending:
        if int(flag.numpy()[0]) != 0:
            raise ValueError(message)


def stream_handle(stream: Any) -> int | None:
    """The ``cudaStream_t`` handle (an int; 0: the legacy default stream, 2: the per-thread one) of ``stream``: None
    (returned as None: "not given"), an int handle (1 is read as 0, as the CUDA Array Interface numbers it), a
    ``torch.cuda.Stream`` (``cuda_stream``), a CuPy stream (``ptr``), a Numba stream (``handle``) or any object with
    ``__cuda_stream__`` (returning ``(version, handle)``). TypeError for anything else."""
    if stream is None:
        return None
    t = type(stream)
    if t is int:
        h = stream
    elif t is bool or t is float:
        raise TypeError(f"stream must be a CUDA stream or its handle (an int), got {stream!r}")
    elif hasattr(stream, "__cuda_stream__"):
        h = stream.__cuda_stream__()[1]
    elif hasattr(stream, "cuda_stream"):  # torch.cuda.Stream / ExternalStream
        h = stream.cuda_stream
    elif hasattr(stream, "ptr"):  # cupy.cuda.Stream
        h = stream.ptr
    elif hasattr(stream, "handle"):  # numba's stream (a ctypes c_void_p)
        h = getattr(stream.handle, "value", stream.handle) or 0
    elif hasattr(stream, "__index__"):  # NumPy integers
        h = operator.index(stream)
    else:
        raise TypeError(f"stream must be a CUDA stream (torch, CuPy, Numba, or with __cuda_stream__) or its handle "
                        f"(an int), got {type(stream).__name__}")
    h = int(h)
    if h < 0:
        raise ValueError(f"stream handle must be >= 0, got {h}")
    return 0 if h == 1 else h


def torch_stream(obj: Any) -> int:
    """PyTorch's current stream on ``obj``'s device when ``obj`` is a torch tensor (its ``__cuda_array_interface__``
    is version 2: no stream), else 0. torch's raw-stream query (what Triton uses), without importing torch."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.Tensor):
        return 0
    try:
        h = torch._C._cuda_getCurrentRawStream(obj.get_device())
    except AttributeError:  # (a torch without the private query)
        h = torch.cuda.current_stream(obj.device).cuda_stream
    return 0 if h in (None, 1) else int(h)


#: torch.Tensor once torch is imported (None before: gpuopt never imports torch itself), torch's dtypes, its float32
#: and its raw current-stream query (by device index; None: a torch without it).
_TORCH_TENSOR: Any = None
_TORCH_DTYPES: dict[Any, np.dtype] = {}
_TORCH_F32: Any = None
_TORCH_RAW_STREAM: Any = None
_F32 = np.dtype(np.float32)


def torch_tensor_type() -> Any:
    """``torch.Tensor`` if torch has been imported, else None."""
    global _TORCH_TENSOR, _TORCH_F32, _TORCH_RAW_STREAM
    if _TORCH_TENSOR is None:
        torch = sys.modules.get("torch")
        if torch is not None:
            for name in ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "bool"):
                _TORCH_DTYPES[getattr(torch, name)] = np.dtype(name)
            _TORCH_F32 = torch.float32
            _TORCH_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            _TORCH_TENSOR = torch.Tensor
    return _TORCH_TENSOR


def torch_view(t: Any) -> "DeviceArray | None":
    """A DeviceArray viewing a CUDA, C-contiguous torch tensor of a NumPy dtype, on PyTorch's current stream, read
    from the tensor's own attributes (torch's ``__cuda_array_interface__`` is a Python property that costs ~2 us a
    call on the H200's host); None for anything else (the caller takes the general path and its messages). Every
    step is one C call of torch's (measured there: ~0.1-0.2 us each); the shape is torch's own ``torch.Size``, a
    tuple."""
    device = t.get_device()  # (-1: a CPU tensor)
    if device < 0 or not t.is_contiguous():
        return None
    dt = t.dtype
    dtype = _F32 if dt is _TORCH_F32 else _TORCH_DTYPES.get(dt)
    if dtype is None:
        return None
    view = object.__new__(DeviceArray)
    view._shape, view._dtype, view._ptr, view._owner = t.shape, dtype, t.data_ptr(), t
    if _TORCH_RAW_STREAM is not None:
        h = _TORCH_RAW_STREAM(device)
        view._stream = 0 if h is None or h == 1 else h
    else:
        view._stream = torch_stream(t)
    return view


def cai_stream(obj: Any, iface: dict) -> int:
    """The stream a ``__cuda_array_interface__`` array is made on (a handle, 0: legacy): its ``stream`` entry, or for
    a torch tensor (which reports none) PyTorch's current stream."""
    stream = iface.get("stream")
    if stream is None:
        return torch_stream(obj) if iface.get("version", 3) < 3 or "stream" not in iface else 0
    return 0 if stream == 1 else int(stream)


_OWNERS = object()  # DeviceArray(stream=...) not given: the owner's stream


def _c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    strides, acc = [], itemsize
    for dim in reversed(shape):
        strides.append(acc)
        acc *= max(int(dim), 1)
    return tuple(reversed(strides))


class DeviceArray:
    """A C-contiguous array in GPU memory.

    Either owns a block from gpuopt's caching pool (returned to the pool when the object
    is garbage-collected) or views memory owned by another library (kept alive while
    this view lives). Exposes ``__cuda_array_interface__`` (v3), so CuPy, PyTorch and
    Numba consume it without a copy, e.g. ``torch.as_tensor(d, device="cuda")``.
    """

    __slots__ = ("_shape", "_dtype", "_ptr", "_owner", "_stream", "__weakref__")

    def __init__(self, shape: Sequence[int], dtype: Any, ptr: int, owner: Any, stream: Any = _OWNERS) -> None:
        self._shape = tuple(int(s) for s in shape)
        self._dtype = np.dtype(dtype)
        self._ptr = int(ptr)
        self._owner = owner
        # The stream its contents are made on (a handle, 0: legacy; None: complete, usable on any stream without
        # waiting): given, else a view's owner's (else legacy).
        if stream is _OWNERS:
            stream = owner._stream if isinstance(owner, DeviceArray) else 0
        self._stream = stream

    @classmethod
    def empty(cls, shape: Sequence[int], dtype: Any = np.float32) -> "DeviceArray":
        """Uninitialised device array (filled with 0xFF bytes while poisoning is on), on the current stream (an
        op's: its call's stream; else the legacy default stream)."""
        cuda = require_cuda("gpuopt.cuda.empty")
        shape = tuple(int(s) for s in shape)
        dtype = np.dtype(dtype)
        buf = cuda.Buffer(math.prod(shape) * dtype.itemsize)
        out = object.__new__(cls)  # every op's output is made here: skip __init__'s conversions, done above
        out._shape, out._dtype, out._ptr, out._owner, out._stream = shape, dtype, buf.ptr, buf, buf.stream
        return out

    @classmethod
    def _alloc(cls, cuda: Any, shape: tuple, dtype: np.dtype, nbytes: int) -> "DeviceArray":
        """:meth:`empty` for callers that checked and computed everything (a cached plan's output), from
        ``cuda``'s pool."""
        buf = cuda.Buffer(nbytes)
        out = object.__new__(cls)
        out._shape, out._dtype, out._ptr, out._owner, out._stream = shape, dtype, buf.ptr, buf, buf.stream
        return out

    @staticmethod
    def _parts(specs: Sequence[tuple[tuple, np.dtype]]) -> tuple[int, tuple]:
        """The layout of arrays ``specs`` ((shape, dtype) each) in one block, each 256-byte aligned: (bytes, ((shape,
        dtype, offset), ...)), for :meth:`_alloc_parts` (a cached plan computes it once)."""
        parts, total = [], 0
        for shape, dtype in specs:
            parts.append((shape, dtype, total))
            total += (math.prod(shape) * dtype.itemsize + 255) // 256 * 256
        return total, tuple(parts)

    @classmethod
    def _alloc_parts(cls, cuda: Any, layout: tuple[int, tuple]) -> tuple["DeviceArray", ...]:
        """The arrays of a :meth:`_parts` layout (checked by the caller) in ONE pool block (a pool allocation and
        its free are ~0.75 µs of host time each: csrc/common/scratch.hpp); the block lives while any of them does."""
        total, parts = layout
        shape, dtype, _ = parts[0]
        first = cls._alloc(cuda, shape, dtype, total)
        out = [first]
        for shape, dtype, offset in parts[1:]:
            part = object.__new__(cls)
            part._shape, part._dtype, part._ptr = shape, dtype, first._ptr + offset
            part._owner, part._stream = first._owner, first._stream
            out.append(part)
        return tuple(out)

    # ---------------------------------------------------------------- array protocol
    shape = property(lambda self: self._shape, doc="tuple of ints")
    dtype = property(lambda self: self._dtype, doc="numpy.dtype")
    ptr = property(lambda self: self._ptr, doc="device address (int)")
    ndim = property(lambda self: len(self._shape))
    size = property(lambda self: math.prod(self._shape))
    nbytes = property(lambda self: self.size * self._dtype.itemsize)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d device array")
        return self._shape[0]

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        # The stream it is made on, which the consumer waits for (1 for the legacy default stream: the interface
        # disallows 0; None for a complete array: no wait).
        return {"shape": self._shape, "typestr": self._dtype.str, "data": (self._ptr, False), "strides": None,
                "version": 3, "stream": 1 if self._stream == 0 else self._stream}

    stream = property(lambda self: self._stream,
                      doc="the stream handle its contents are made on (0: legacy; None: complete, see synchronize)")

    def synchronize(self) -> "DeviceArray":
        """Wait on the host for the stream this array is made on; from then on it is complete, and ops on any stream
        read it without waiting (its ``stream`` becomes None). For arrays made once and read by many calls on other
        streams (a network's weights). Returns self."""
        if self._stream is not None:
            require_cuda("DeviceArray.synchronize").stream_synchronize(self._stream)
            self._stream = None
        return self

    # ---------------------------------------------------------------- DLPack
    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCUDA, the device that owns the memory)."""
        return _DL_CUDA, int(require_cuda("DeviceArray.__dlpack_device__").pointer_device(self._ptr))

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """A DLPack capsule viewing this array (no copy; ``copy=True``: of a device copy). ``stream``: the
        consumer's stream (1 legacy default, 2 per-thread default, else a ``cudaStream_t``; None: legacy), made
        to wait on the device for the stream this array is made on; ``-1``: no ordering. ``torch.from_dlpack(a)``,
        ``cupy.from_dlpack(a)``."""
        cuda = require_cuda("DeviceArray.__dlpack__")
        device = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError(f"DeviceArray lives on {device}, asked for {tuple(dl_device)}")
        if copy:
            return self.copy().__dlpack__(stream=stream)
        if self._dtype.kind not in _DL_CODES:
            raise BufferError(f"DLPack has no type for dtype {self._dtype}")
        if stream is not None and stream != -1:
            if isinstance(stream, bool) or not isinstance(stream, int) or stream == 0:
                raise ValueError(f"stream must be None, -1, 1, 2 or a CUDA stream handle, got {stream!r}")
            if self._stream is not None:
                cuda.stream_wait(stream, self._stream)
        return cuda.dlpack_export(self, self._ptr, list(self._shape), _DL_CODES[self._dtype.kind],
                                  8 * self._dtype.itemsize, device[1])

    def numpy(self) -> np.ndarray:
        """Copy to a new NumPy array (waits for the work that produces it; raises the error its op found on the
        device, if any: see the module docstring)."""
        out = np.empty(self._shape, dtype=self._dtype)
        if self.nbytes:
            require_cuda("DeviceArray.numpy").copy_d2h(out, self._ptr, self.nbytes, self._stream or 0)
        if _DEFERRED:
            _raise_deferred(self)
        return out

    def rows(self, n: int) -> np.ndarray:
        """Copy the first ``n`` rows (along axis 0) to a new NumPy array."""
        n = min(int(n), self._shape[0])
        out = np.empty((n, *self._shape[1:]), dtype=self._dtype)
        if out.nbytes:
            require_cuda("DeviceArray.rows").copy_d2h(out, self._ptr, out.nbytes, self._stream or 0)
        if _DEFERRED:
            _raise_deferred(self)
        return out

    def check(self) -> "DeviceArray":
        """Raise the error the op that made this array found on the device (ValueError, e.g. the sparse layer's
        int32 overflow), if any; waits for that op. Returns self."""
        if _DEFERRED:
            _raise_deferred(self)
        return self

    def copy(self, stream: Any = None) -> "DeviceArray":
        """A new device array with the same contents: a device-to-device copy on ``stream`` (see
        :func:`stream_handle`; default: this array's stream), which first waits for this array's stream on the
        device; the copy is made on that stream."""
        cuda = require_cuda("DeviceArray.copy")
        handle = stream_handle(stream)
        stream = (self._stream or 0) if handle is None else handle
        if self._stream is not None and self._stream != stream:
            cuda.stream_wait(stream, self._stream)
        previous = cuda.set_stream(stream)
        try:
            out = DeviceArray.empty(self._shape, self._dtype)
            if self.nbytes:
                cuda.copy_d2d(out.ptr, self._ptr, self.nbytes, stream)
        finally:
            cuda.set_stream(previous)
        return out

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self._shape}, dtype={self._dtype.name}, ptr=0x{self._ptr:x})"


def is_device_array(obj: Any) -> bool:
    """True for arrays in CUDA device memory: gpuopt's, objects exposing ``__cuda_array_interface__`` (CuPy,
    PyTorch, Numba) and DLPack tensors on a CUDA device (JAX, ...)."""
    return isinstance(obj, DeviceArray) or hasattr(obj, "__cuda_array_interface__") or is_cuda_dlpack(obj)


def is_cuda_dlpack(obj: Any) -> bool:
    """A DLPack tensor in CUDA memory without ``__cuda_array_interface__`` (taken in by :func:`from_dlpack`)."""
    if type(obj) is np.ndarray or not hasattr(obj, "__dlpack_device__"):
        return False
    try:
        return obj.__dlpack_device__()[0] in (_DL_CUDA, _DL_CUDA_MANAGED)
    except Exception:  # (a producer that cannot say: not a device array gpuopt can use)
        return False


def as_device_array(obj: Any, name: str) -> DeviceArray:
    """View a ``__cuda_array_interface__`` object (or a CUDA DLPack tensor) as a DeviceArray without copying.

    Raises ValueError for non-contiguous or masked arrays (gpuopt's kernels read dense
    C-order memory; make a contiguous copy on the device first).
    """
    if isinstance(obj, DeviceArray):
        return obj
    if type(obj) is torch_tensor_type():
        view = torch_view(obj)
        if view is not None:
            view._shape = tuple(view._shape)  # (a plain tuple for whoever keeps it; plan keys keep torch.Size)
            return view
    if not hasattr(obj, "__cuda_array_interface__"):
        return from_dlpack(obj)
    iface = obj.__cuda_array_interface__
    shape = tuple(int(s) for s in iface["shape"])
    dtype = np.dtype(iface["typestr"])
    if iface.get("mask") is not None:
        raise ValueError(f"{name}: masked device arrays are not supported")
    strides = iface.get("strides")
    if strides is not None and int(np.prod(shape, dtype=np.int64)) > 1:
        expected = _c_strides(shape, dtype.itemsize)
        if any(s != e for s, e, d in zip(strides, expected, shape) if d > 1):
            raise ValueError(f"{name}: device arrays must be C-contiguous (strides {tuple(strides)}, expected "
                             f"{expected}); make a contiguous copy on the device first")
    # The producer's stream: an op on it needs no wait, one on another stream waits for it.
    return DeviceArray(shape, dtype, iface["data"][0], obj, cai_stream(obj, iface))


def from_dlpack(obj: Any, stream: Any = None) -> DeviceArray:
    """A DeviceArray viewing a GPU tensor of another library through DLPack (``__dlpack__``), without a copy:
    PyTorch, CuPy, JAX, ... The producer orders its work before gpuopt's (DLPack's stream handshake); the tensor
    stays alive while the view does. C-contiguous only (ValueError otherwise); a host tensor: use
    :func:`to_device`. ``stream``: the stream the view will be read on (default the legacy default stream),
    which the producer is asked to order its work before."""
    if isinstance(obj, DeviceArray):
        return obj
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack takes an object with __dlpack__, got {type(obj).__name__}")
    kind, _ = obj.__dlpack_device__()
    if kind not in (_DL_CUDA, _DL_CUDA_MANAGED):
        raise ValueError(f"from_dlpack: the tensor is not in CUDA device memory (DLPack device type {kind}); use "
                         "gpuopt.to_device for host data")
    cuda = require_cuda("gpuopt.from_dlpack")
    on = stream_handle(stream) or 0
    ptr, shape, strides, code, bits, lanes, _, _, owner = cuda.dlpack_import(obj.__dlpack__(stream=on or 1))
    if lanes != 1 or code not in _DL_KINDS or bits % 8:
        raise ValueError(f"from_dlpack: unsupported DLPack dtype (code {code}, {bits} bits, {lanes} lanes)")
    dtype = np.dtype(f"{_DL_KINDS[code]}{bits // 8}") if code != 6 else np.dtype(bool)
    if strides is not None and math.prod(shape) > 1:
        expected = _c_strides(shape, 1)
        if any(s != e for s, e, d in zip(strides, expected, shape) if d > 1):
            raise ValueError(f"from_dlpack: the tensor must be C-contiguous (strides {strides} elements, expected "
                             f"{expected}); make a contiguous copy first")
    return DeviceArray(shape, dtype, ptr, owner, on)


def to_device(array: Any) -> DeviceArray:
    """Copy a host array (anything ``np.asarray`` accepts) to a new device array.

    The dtype is kept; the data is made C-contiguous first. A device array is returned
    as is (no copy); use :meth:`DeviceArray.copy` for a copy. Large copies (2 MiB and up) go
    through pinned staging buffers filled by several host threads, about 2.5x the driver's
    pageable copy; like ``cudaMemcpy``, the host array may be changed as soon as this returns.
    """
    if is_device_array(array):
        return as_device_array(array, "array")
    return to_device_checked(array)[0]


def to_device_checked(array: Any, check_finite: bool = False) -> tuple[DeviceArray, bool]:
    """:func:`to_device` of a host array, and with ``check_finite`` (float32 only) whether every value is
    finite, checked as the data is staged (no second pass over host memory); else the flag is True."""
    host = np.ascontiguousarray(np.asarray(array))
    if host.dtype.kind not in "biuf":
        raise TypeError(f"to_device takes numeric arrays, got dtype {host.dtype}")
    if check_finite and host.dtype != np.float32:
        raise TypeError(f"check_finite needs float32 data, got dtype {host.dtype}")
    out = DeviceArray.empty(host.shape, host.dtype)
    finite = True
    if host.nbytes:
        finite = require_cuda("gpuopt.to_device").copy_h2d(out.ptr, host, host.nbytes, check_finite)
    return out, bool(finite)


def empty(shape: Sequence[int], dtype: Any = np.float32) -> DeviceArray:
    """Uninitialised device array of ``shape`` and ``dtype``."""
    return DeviceArray.empty(shape, dtype)


def synchronize(stream: Any = None) -> None:
    """Wait for all queued GPU work (``stream``: only that stream's, see :func:`stream_handle`); raises RuntimeError
    if a kernel failed, and the ValueError an op found on the device and deferred (see the module docstring)."""
    handle = stream_handle(stream)
    if handle is None:
        require_cuda("gpuopt.cuda.synchronize").synchronize()
    else:
        require_cuda("gpuopt.cuda.synchronize").stream_synchronize(handle)
    if _DEFERRED:
        _raise_deferred(None)


def empty_cache() -> None:
    """Return the device memory cached by gpuopt's pool, and its pinned staging buffers, to the driver."""
    require_cuda("gpuopt.cuda.empty_cache").pool_release_cached()
