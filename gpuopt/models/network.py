"""What the networks share: input checks, chunking, running a stage.

A network (:class:`Network`) holds its weights (float32, on the host; uploaded to the device once, on the
first device-resident call, and kept) and runs one of its stages (:mod:`.stages`) on a batch:

1. The images are checked (:func:`prepare_images`): shape (N, S, S), (N, S, S, 1) or (N, 1, S, S);
   float32 in [0, 1] or uint8 raw pixels; NumPy or a device array (``__cuda_array_interface__``).
2. The batch runs in chunks of at most :meth:`Network.chunk_images` images, which keeps the activations
   of one chunk within ``memory_budget_bytes`` (and ``max_batch``). Every op computes each image on its
   own, so chunking does not change the results: bit for bit with the CPU references; GPU variants that
   pick their kernel or summation order by the batch's shape (conv2d ``auto``, the GEMM's split-k) may
   round differently in the last bits, never more.
3. Each chunk goes through the stage's steps. Round-trip stages pass NumPy from layer to layer (each op
   copies its input and weights in and its output back); device-resident stages pass device arrays.
4. The results come back in the caller's form: NumPy for NumPy images, a device array for device images.

With ``timing=True`` the per-layer times are collected as :mod:`.timing` describes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from .. import nn, registry
from .._ext import cuda_available, require_cuda
from .._validate import Buffer, _as_array, _convert_hint, check_memory
from ..conv import conv2d
from ..cuda import DeviceArray, as_device_array, is_device_array, synchronize, to_device
from .stages import Stage, cpu_stages, get_stage, missing, stages
from .timing import ForwardTiming, Recorder

__all__ = ["Network", "LayerSpec", "prepare_images", "check_finite_images", "prepare_labels",
           "DEFAULT_MEMORY_BUDGET", "op_function"]

#: Default activation memory of one chunk: 2 GiB, so the 10,000-image MNIST test set is one chunk (512 MiB made
#: four chunks of 2,543, whose kernels each filled the H200 for only a few waves: conv2 1.90 ms against 1.57 ms
#: for one call on all 10,000).
DEFAULT_MEMORY_BUDGET = 2 * 2**30
_U8_SCALE = np.float32(255)


class LayerSpec(NamedTuple):
    """One layer of a network's architecture: ``name``, what it computes, its output shape per image."""

    name: str
    description: str
    output_shape: tuple[int, ...]


# ------------------------------------------------------------------------------------------ inputs


@dataclass(frozen=True)
class _Images:
    data: Any  # numpy.ndarray or DeviceArray, (N, 1, S, S), float32 or uint8
    device: bool
    checked: bool = True  # NumPy float32 images: finiteness checked already (else: as they are uploaded)

    @property
    def n(self) -> int:
        return int(self.data.shape[0])


def _check_image_shape(shape: tuple[int, ...], side: int, name: str) -> int:
    ok = ((len(shape) == 3 and shape[1:] == (side, side))
          or (len(shape) == 4 and shape[1:] in ((side, side, 1), (1, side, side))))
    if not ok:
        raise ValueError(f"{name} must have shape (N, {side}, {side}), (N, {side}, {side}, 1) (NHWC, as the ECE408 "
                         f"test files) or (N, 1, {side}, {side}) (NCHW); got {tuple(shape)}")
    if shape[0] == 0:
        raise ValueError(f"{name} is an empty batch (shape {tuple(shape)}); give at least one image")
    return int(shape[0])


def prepare_images(images: Any, side: int, name: str = "images", *, check_finite: bool = True) -> _Images:
    """Check a batch of images and view it as (N, 1, side, side).

    NumPy (or anything ``np.asarray`` takes): uint8 (raw pixels 0-255) is kept as it is; float32 is used
    as it is, other float dtypes (float16, float64) are converted to float32; both must be finite
    (ValueError naming the first bad image). Integer dtypes other than uint8, bool and non-numeric dtypes
    raise TypeError. Device arrays must be float32 or uint8 and C-contiguous (TypeError / ValueError); they
    are used in place and their values are not scanned (gpuopt's rule for device inputs), so a NaN pixel of
    a device array gives NaN logits for its image instead of an error. ``check_finite=False`` leaves the
    finiteness check of float32 NumPy images to the caller (``_Images.checked`` is False): device-resident
    stages check each chunk as it is copied to the device, which saves a pass over the images.
    """
    if is_device_array(images):
        arr = as_device_array(images, name)
        if arr.dtype not in (np.float32, np.uint8):
            raise TypeError(f"{name} is a device array of dtype {arr.dtype}; device images must be float32 (values in "
                            f"[0, 1]) or uint8 (raw pixels); convert on the device first")
        n = _check_image_shape(arr.shape, side, name)
        return _Images(DeviceArray((n, 1, side, side), arr.dtype, arr.ptr, arr), True)
    a = _as_array(images, name)
    if a.dtype == np.uint8:
        pass
    elif a.dtype.kind == "f":
        a = a.astype(np.float32, copy=False)
    else:
        raise TypeError(f"{name} must be float (values in [0, 1]) or uint8 (raw pixels 0-255); got dtype {a.dtype}"
                        + (f" (convert explicitly, e.g. {_convert_hint(images, name, np.uint8)} for raw pixels)"
                           if a.dtype.kind in "iu" else ""))
    n = _check_image_shape(a.shape, side, name)
    a = np.ascontiguousarray(a).reshape(n, 1, side, side)
    if a.dtype == np.float32 and check_finite:
        check_finite_images(a, name)
    return _Images(a, False, checked=check_finite or a.dtype != np.float32)


def check_finite_images(a: np.ndarray, name: str = "images") -> None:
    """ValueError naming the first image of ``a`` (N, ...) float32 with a NaN or infinity, and how many there are."""
    n = a.shape[0]
    finite = np.isfinite(a).reshape(n, -1).all(axis=1)
    if not finite.all():
        bad = int(np.argmin(finite))
        raise ValueError(f"{name}[{bad}] contains NaN or infinity ({int((~finite).sum())} bad image(s)); images "
                         "must be finite")


def prepare_labels(labels: Any, n: int, classes: int) -> np.ndarray:
    """Labels as int64 (n,): class indices (any integer dtype) or one-hot rows (n, classes), as the test files.

    Device arrays are copied to the host. TypeError for non-integer indices; ValueError for a wrong length
    or shape or a class outside 0..classes-1.
    """
    if is_device_array(labels):
        labels = as_device_array(labels, "labels").numpy()
    y = _as_array(labels, "labels")
    if y.ndim == 2 and y.shape[1] == classes and y.dtype.kind in "fiub":
        y = np.argmax(y, axis=1)
    elif y.ndim != 1:
        raise ValueError(f"labels must be class indices (N,) or one-hot (N, {classes}); got shape {y.shape}")
    elif y.dtype.kind not in "iu":
        raise TypeError(f"labels must be integer class indices, got dtype {y.dtype}")
    if y.shape[0] != n:
        raise ValueError(f"labels has {y.shape[0]} entries for {n} images")
    if y.size and (int(y.min()) < 0 or int(y.max()) >= classes):
        raise ValueError(f"labels must be classes 0..{classes - 1}; got values in [{int(y.min())}, {int(y.max())}]")
    return y.astype(np.int64)


# ------------------------------------------------------------------------------------------ running


def op_function(op: str) -> Callable[..., Any]:
    """The public function of a gpuopt op used by the stages (``conv2d`` or one of ``gpuopt.nn``)."""
    if op == "conv2d":
        return conv2d
    fn = getattr(nn, op, None)
    if fn is None:
        raise RuntimeError(f"gpuopt.nn.{op} is not in this build of gpuopt (it arrives with the layer-op kernels)")
    return fn


def _rows(a: Any, start: int, stop: int) -> Any:
    """Rows [start, stop) of a C-contiguous NumPy or device array, without a copy."""
    if isinstance(a, np.ndarray):
        return a[start:stop]
    row = a.nbytes // a.shape[0] if a.shape[0] else 0
    return DeviceArray((stop - start, *a.shape[1:]), a.dtype, a.ptr + start * row, a)


def _flatten(a: Any) -> Any:
    """(N, ...) -> (N, features), C order (NCHW flatten), without a copy."""
    shape = (a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64)))
    if isinstance(a, np.ndarray):
        return a.reshape(shape)
    return DeviceArray(shape, a.dtype, a.ptr, a)


def _concat_device(parts: list[DeviceArray]) -> DeviceArray:
    if len(parts) == 1:
        return parts[0]
    cuda, offset, stream = require_cuda("gpuopt.models"), 0, parts[0]._stream or 0  # (the chunks' stream)
    previous = cuda.set_stream(stream)
    try:
        out = DeviceArray.empty((sum(p.shape[0] for p in parts), *parts[0].shape[1:]), parts[0].dtype)
        for p in parts:
            if p.nbytes:
                cuda.copy_d2d(out.ptr + offset, p.ptr, p.nbytes, stream)
            offset += p.nbytes
    finally:
        cuda.set_stream(previous)
    return out


def _scale_on_host(x: Any, rec: Recorder) -> np.ndarray:
    """A chunk as float32 NumPy: a device chunk copied out, uint8 pixels divided by 255 (NumPy float32 division)."""
    if isinstance(x, DeviceArray):
        x = rec.to_host(x, "Copy to host (images)")
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / _U8_SCALE
    return x


class Network:
    """Base class of the networks: weights, stages, chunked forward with per-layer timing.

    Subclasses set ``network`` (the key of :data:`~gpuopt.models.STAGES`), ``side`` (the image side),
    ``title``, and build ``self._weights`` (name -> float32 array, the names the stages' steps use) and
    ``self.layers`` (:class:`LayerSpec` tuple) before calling :meth:`_setup`.
    """

    network: str = ""
    side: int = 0
    title: str = ""
    layers: tuple[LayerSpec, ...] = ()
    classes: int = 10

    def _setup(self, weights: Mapping[str, np.ndarray], layers: tuple[LayerSpec, ...], *, classes: int,
               max_batch: int | None, memory_budget_bytes: int | None, source: str) -> None:
        from .._validate import integer

        self._weights = {}
        for key, value in weights.items():
            arr = np.array(value, dtype=np.float32, order="C")  # a copy: the caller's array stays writable
            arr.flags.writeable = False  # the device copy is made once: the host weights must not change
            self._weights[key] = arr
        self.layers = layers
        self.classes = int(classes)
        self.max_batch = None if max_batch is None else integer(max_batch, "max_batch", 1)
        self.memory_budget_bytes = (None if memory_budget_bytes is None
                                    else integer(memory_budget_bytes, "memory_budget_bytes", 1))
        self.source = source
        self._device: dict[str, DeviceArray] | None = None
        self._graphs: dict[tuple, Any] = {}  # batch shape -> its captured forward (gpuopt.models.graph)
        self._stages: dict[tuple, tuple] = {}  # (variant, head) -> (stage, registry generation, runs on the GPU)

    # ---------------------------------------------------------------- facts

    @property
    def weights(self) -> Mapping[str, np.ndarray]:
        """The arrays the stages compute with (read-only float32; see the subclass for layouts)."""
        return dict(self._weights)

    @property
    def stages(self) -> Mapping[str, Stage]:
        """This network's stages by name (:data:`gpuopt.models.STAGES`)."""
        return stages(self.network)

    def activation_bytes_per_image(self) -> int:
        """Bytes of one image's input (float32) and every layer output: what a chunk budgets for."""
        elems = self.side * self.side + sum(int(np.prod(s.output_shape, dtype=np.int64)) for s in self.layers)
        return 4 * elems

    def chunk_images(self, max_batch: int | None = None) -> int | None:
        """Images per chunk: within ``memory_budget_bytes`` and ``max_batch`` (the call's, else the network's);
        None when neither limits it."""
        from .._validate import integer

        limit = self.max_batch if max_batch is None else integer(max_batch, "max_batch", 1)
        if self.memory_budget_bytes is not None:
            fit = max(1, self.memory_budget_bytes // self.activation_bytes_per_image())
            limit = fit if limit is None else min(limit, fit)
        return limit

    def describe(self, variant: str | None = None) -> str:
        """The architecture, and with ``variant`` which op and variant runs each step of that stage."""
        lines = [f"{self.title} ({self.source})"]
        lines += [f"  {s.name:9s} {s.description:70s} -> {s.output_shape}" for s in self.layers]
        if variant is not None:
            st = get_stage(self.network, variant)
            lines.append(f"stage {st.name!r}: {st.description} [{st.table}]")
            for head in (None, *st.heads):
                for step in st.chain(head)[len(st.steps) if head else 0:]:
                    params = ", ".join(f"{k}={v!r}" for k, v in step.params.items())
                    lines.append(f"  {step.name:40s} {step.op}/{step.variant}" + (f" ({params})" if params else ""))
        return "\n".join(lines)

    def default_stage(self) -> str:
        """``"fast"`` where it can run (its ops registered and a usable GPU), else ``"serial"``."""
        fast = self.stages.get("fast")
        return "fast" if fast is not None and not missing(fast, "*") and cuda_available() else "serial"

    def _stage(self, variant: str | None, head: str | None) -> Stage:
        return self._stage_on(variant, head)[0]

    def _stage_on(self, variant: str | None, head: str | None) -> tuple[Stage, bool]:
        """The stage and whether it runs on the GPU (RuntimeError naming the CPU stages when it does and there is
        no GPU)."""
        # The stage and what the registry says of it, kept while the registry is unchanged: a graph replay's whole
        # host cost before its launch is a few µs, and these lookups walked every step's variants (and every
        # stage's, for a message) on each call.
        key = (variant, head) if variant is None or type(variant) is str else None
        memo = self._stages.get(key) if key is not None else None
        if memo is not None and memo[1] == registry.generation():
            stage, gpu = memo[0], memo[2]
        else:
            stage = get_stage(self.network, self.default_stage() if variant is None else variant)
            absent = missing(stage, head)
            if absent:
                raise RuntimeError(f"{self.network} stage {stage.name!r} needs {', '.join(absent)}, which this build "
                                   "of gpuopt does not register (they arrive with the layer-op kernels)")
            gpu = stage.gpu
            if key is not None:
                self._stages[key] = (stage, registry.generation(), gpu)
        if gpu and not cuda_available():  # (the CPU stages named only in the message)
            require_cuda(f"{self.network} stage {stage.name!r}", cpu_stages(self.network))
        return stage, gpu

    def _check_chunk(self, stage: Stage, size: int, max_batch: int | None) -> None:
        """ValueError naming ``max_batch`` and ``memory_budget_bytes`` when one chunk of ``size`` images needs
        more activation memory (:meth:`activation_bytes_per_image`, what the chunks are budgeted by) than the
        machine has: the host's for stages that pass NumPy between layers, the GPU's for device-resident ones."""
        per_image = self.activation_bytes_per_image()
        batch = self.max_batch if max_batch is None else max_batch
        check_memory(f"{self.network} stage {stage.name!r}",
                     lambda: f"a chunk of {size:,} images (max_batch={batch}, memory_budget_bytes="
                             f"{self.memory_budget_bytes})",
                     [Buffer(lambda: f"the chunk's activations (input and every layer's output, float32, "
                                     f"{per_image:,} bytes an image)", size * per_image,
                             "device" if stage.resident else "host")],
                     gpu=stage.gpu, device_result=stage.resident)

    def _device_weights(self) -> dict[str, DeviceArray]:
        """The weights on the device, uploaded on the first call and kept for this network's lifetime; complete
        (DeviceArray.synchronize), so calls on any stream, and graph captures, read them without waiting."""
        if self._device is None:
            self._device = {key: to_device(arr).synchronize() for key, arr in self._weights.items()}
        return self._device

    def _run(self, images: Any, head: str | None, variant: str | None, timing: bool, max_batch: int | None):
        if not isinstance(timing, bool):
            raise TypeError(f"timing must be True or False, got {timing!r}")
        started = time.perf_counter()
        stage = self._stage(variant, head)
        imgs = images if isinstance(images, _Images) else prepare_images(images, self.side, check_finite=False)
        if not imgs.checked and not stage.resident:
            check_finite_images(imgs.data)
        n = imgs.n
        size = min(n, self.chunk_images(max_batch) or n)
        self._check_chunk(stage, size, max_batch)
        rec = Recorder(timing)
        weights = self._device_weights() if stage.resident else self._weights
        chain = stage.chain(head)
        parts = []
        for start in range(0, n, size):
            x = _rows(imgs.data, start, min(n, start + size))
            if not stage.resident or (x.dtype == np.uint8 and not chain[0].raw_input):
                x = _scale_on_host(x, rec)
            if stage.resident and isinstance(x, np.ndarray):
                # One staged copy of the chunk, checked for NaN/inf on the way (the images' only pass on the host).
                x, finite = rec.to_device(x, "Copy to device (images)", check_finite=not imgs.checked)
                if not finite:
                    check_finite_images(imgs.data)  # names the first bad image of the whole batch
            for step in chain:
                kwargs: dict[str, Any] = dict(step.params)
                if step.w is not None:
                    kwargs["w"] = weights[step.w]
                if step.bias is not None:
                    kwargs["bias"] = weights[step.bias]
                if step.flatten:
                    x = _flatten(x)
                if step.raw_input:
                    kwargs["input_divisor"] = 255.0 if x.dtype == np.uint8 else 1.0
                x = rec.call(step, op_function(step.op), x, kwargs)
            what = "predictions" if head == "predict" else "probabilities" if head == "proba" else "logits"
            if imgs.device and isinstance(x, np.ndarray):
                x = rec.to_device(x, f"Copy to device ({what})")[0]
            elif not imgs.device and isinstance(x, DeviceArray):
                x = rec.to_host(x, f"Copy back ({what})")
            parts.append(x)
        out = _concat_device(parts) if imgs.device else (parts[0] if len(parts) == 1 else np.concatenate(parts))
        if head == "predict" and isinstance(out, np.ndarray):
            out = out.astype(np.int64, copy=False)
        if not timing:
            return out
        if stage.gpu or imgs.device:
            synchronize()
        t = ForwardTiming(self.network, stage.name, n, -(-n // size), size, rec.layers(),
                          (time.perf_counter() - started) * 1e3, "gpu" if rec.gpu else "cpu")
        return out, t

    # ---------------------------------------------------------------- the public calls

    def forward(self, images: Any, *, variant: str | None = None, timing: bool = False,
                max_batch: int | None = None, graph: bool = False):
        """The logits of a batch.

        Parameters
        ----------
        images : array_like or device array
            (N, S, S), (N, S, S, 1) or (N, 1, S, S); float32 in [0, 1] or uint8 raw pixels (divided by 255:
            on the device by stages whose first kernel takes them, else on the host, as NumPy float32
            ``x / np.float32(255)``). See :func:`prepare_images`.
        variant : str, optional
            The stage (``self.stages``); default: :meth:`default_stage`.
        timing : bool
            Also return a :class:`ForwardTiming`.
        max_batch : int, optional
            Largest chunk for this call (also limited by ``memory_budget_bytes``).
        graph : bool
            Replay the forward from a CUDA graph captured for this batch shape on its first call (one launch
            instead of a host loop of op calls; same results; device-resident GPU stages only, not with
            ``timing``). See :mod:`gpuopt.models.graph`.

        Returns
        -------
        numpy.ndarray or DeviceArray
            float32 (N, classes); a DeviceArray when ``images`` is a device array. With ``timing=True``:
            ``(logits, ForwardTiming)``.

        Raises
        ------
        TypeError, ValueError
            Bad images (see :func:`prepare_images`) or an unknown stage; ValueError also when one chunk's
            activations (``max_batch`` images, or as many as ``memory_budget_bytes`` holds; all of them when
            both are None) need more memory than the machine has (the host's, or the GPU's for
            device-resident stages).
        RuntimeError
            The stage needs a GPU or op variants this build does not have.
        """
        return self._forward(images, None, variant, timing, max_batch, graph)

    def predict(self, images: Any, *, variant: str | None = None, timing: bool = False,
                max_batch: int | None = None, graph: bool = False):
        """The predicted class of each image: int64 (N,) (the stage's argmax of the logits; ties to the first
        class). Arguments and placement as :meth:`forward`; with ``timing=True``: ``(classes, ForwardTiming)``."""
        return self._forward(images, "predict", variant, timing, max_batch, graph)

    def _forward(self, images: Any, head: str | None, variant: str | None, timing: bool, max_batch: int | None,
                 graph: bool) -> Any:
        if graph is False:
            return self._run(images, head, variant, timing, max_batch)
        if graph is not True:
            raise TypeError(f"graph must be True or False, got {graph!r}")
        if timing is not False:
            raise ValueError("graph=True replays the whole forward as one graph: it has no per-layer timing; time "
                             "the call with CUDA events instead (timing=False)")
        from .graph import graph_forward

        imgs = images if isinstance(images, _Images) else prepare_images(images, self.side, check_finite=False)
        return graph_forward(self, imgs, head, variant, max_batch, self._run, check_finite_images)

    def evaluate(self, images: Any, labels: Any, *, variant: str | None = None, timing: bool = False,
                 max_batch: int | None = None, return_counts: bool = False):
        """Accuracy of :meth:`predict` against ``labels`` (int (N,) classes or one-hot (N, classes)).

        Returns
        -------
        float, or ``(accuracy, correct, total)`` with ``return_counts=True``; with ``timing=True`` a
        ``(that, ForwardTiming)`` pair.
        """
        imgs = prepare_images(images, self.side, check_finite=False)
        y = prepare_labels(labels, imgs.n, self.classes)
        result = self._run(imgs, "predict", variant, timing, max_batch)
        pred, t = result if timing else (result, None)
        if isinstance(pred, DeviceArray):
            pred = pred.numpy()
        correct = int(np.count_nonzero(np.asarray(pred) == y))
        out: Any = (correct / imgs.n, correct, imgs.n) if return_counts else correct / imgs.n
        return (out, t) if timing else out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.source})"
