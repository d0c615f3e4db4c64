"""Loading of the compiled modules, and what this build and machine can do.

``gpuopt._core`` (CPU references) is always built. ``gpuopt._cuda`` exists when nvcc
was found at install time; it links the CUDA runtime statically, so it imports on
machines without a driver and then reports that no device is usable. It is imported
on first use, never at ``import gpuopt``.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import sys
from types import ModuleType
from typing import Any, NamedTuple, Sequence

from . import _core

__all__ = ["cuda_available", "cuda_unavailable_reason", "require_cuda", "cpu_choices_hint", "build_info",
           "device_info", "cuda_module", "cuda_host_module", "launcher", "planner", "host_check", "kernel_limits",
           "kernel_choices",
           "DriverProbe", "probe_driver", "no_device_reason"]

#: The NVIDIA driver's user-space library, which the (statically linked) CUDA runtime loads at its first call.
LIBCUDA = "libcuda.so.1"


class DriverProbe(NamedTuple):
    """What loading the NVIDIA driver library with ctypes found.

    ``loaded``: whether :data:`LIBCUDA` could be loaded; ``error``: the loader's message when it could not;
    ``version``: its ``cuDriverGetVersion`` (the newest CUDA the driver supports, 1000 * major + 10 * minor,
    e.g. 12040 = CUDA 12.4), None where it could not be read.
    """

    loaded: bool
    error: str = ""
    version: int | None = None


def probe_driver() -> DriverProbe | None:
    """Load :data:`LIBCUDA` with ctypes and ask its driver version; None off Linux (not probed there).

    Only called once no device is usable, to say why. Never raises.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        lib = ctypes.CDLL(LIBCUDA)
    except OSError as exc:
        return DriverProbe(False, str(exc) or "the dynamic loader gave no reason")
    try:  # callable before cuInit: the version this driver supports, without touching a GPU
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value > 0:
            return DriverProbe(True, "", int(version.value))
    except Exception:  # a library without the symbol, or one that misbehaves: the version stays unknown
        pass
    return DriverProbe(True)


def _cuda_text(version: int) -> str:
    """A driver API version (12040) as CUDA's "12.4"."""
    return f"{version // 1000}.{version % 1000 // 10}"


def no_device_reason(runtime_reason: str, probe: DriverProbe | None, build_cuda: str | None) -> str:
    """Why no CUDA device is usable, in words: the runtime's reason (``unavailable_reason()`` of the CUDA module,
    e.g. "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version") read
    with what :func:`probe_driver` found and the CUDA version this build was compiled with (``"13.0.88"``).

    The CUDA runtime reports a missing driver library as an insufficient driver; with no library to load this
    says so, and it keeps the driver-version message for a driver that loads but is older than the build needs.
    """
    if probe is not None and not probe.loaded:
        return f"no NVIDIA driver found ({LIBCUDA} could not be loaded: {probe.error})"
    if "InsufficientDriver" in runtime_reason:
        version = probe.version if probe is not None else None
        parts = (build_cuda or "").split(".")
        major = int(parts[0]) if len(parts) >= 2 and parts[0].isdigit() else None
        # The runtime runs on any driver of its major version or newer (CUDA's minor version compatibility).
        need = (f"this build of gpuopt uses the CUDA {build_cuda} runtime, which needs a driver for CUDA {major}.0 or "
                "newer" if major is not None else "")
        if version is None:
            found = "the NVIDIA driver found is too old" + (f": {need}" if need else " for this build of gpuopt")
        elif major is None or version // 1000 < major:
            found = f"the NVIDIA driver found supports CUDA up to {_cuda_text(version)}"
            found += f", but {need}" if need else ""
        else:  # a driver new enough by its version: the runtime's word stands, with what was found
            found = (f"the CUDA runtime ({build_cuda}) rejected the NVIDIA driver found, which supports CUDA up to "
                     f"{_cuda_text(version)}")
        return f"{found} ({runtime_reason}); upgrade the NVIDIA driver"
    return f"no usable CUDA device: {runtime_reason}"


@functools.lru_cache(maxsize=None)
def _load_cuda() -> tuple[ModuleType | None, str]:
    if not _core.build_info()["cuda"]:
        return None, "gpuopt was built without CUDA (no nvcc at install time, or GPUOPT_ENABLE_CUDA=OFF)"
    try:
        mod = importlib.import_module("gpuopt._cuda")
    except ImportError as exc:  # e.g. cuBLAS/cuDNN shared libraries missing on this machine
        return None, f"the CUDA module of gpuopt could not be loaded: {exc}"
    if mod.device_count() == 0:
        runtime_reason = mod.unavailable_reason()
        try:
            return None, no_device_reason(runtime_reason, probe_driver(), _core.build_info()["cuda_version"])
        except Exception:  # cuda_available() never raises: the runtime's own words then
            return None, f"no usable CUDA device: {runtime_reason}"
    return mod, ""


def cuda_available() -> bool:
    """True when gpuopt was built with CUDA and a usable GPU is present.

    Never raises and prints nothing: on a machine without a driver or GPU it is False.
    """
    return _load_cuda()[0] is not None


def cuda_unavailable_reason() -> str:
    """Why :func:`cuda_available` is False, in words ("" when it is True)."""
    return _load_cuda()[1]


def cpu_choices_hint(choices: Sequence[str], argument: str = "variant") -> str:
    """The sentence pointing to the values of ``argument`` that run on the CPU ("" when there are none):
    `` Use variant='cpu' to run it on the CPU.``, or for a command-line option (``"--variant"``)
    `` Use --variant cpu to run it on the CPU.``"""
    options = [f"{argument} {c}" if argument.startswith("-") else f"{argument}={c!r}" for c in choices]
    return f" Use {' or '.join(options)} to run it on the CPU." if options else ""


def require_cuda(what: str, cpu_choices: Sequence[str] = (), argument: str = "variant") -> ModuleType:
    """The CUDA module, or RuntimeError saying why ``what`` cannot run here.

    ``cpu_choices``: the values of the caller's ``argument`` that run on the CPU instead (an op's CPU variants,
    a network's CPU stages), named in the message; none where the call has no CPU alternative.
    """
    mod, reason = _load_cuda()
    if mod is None:
        raise RuntimeError(f"{what} needs a CUDA GPU, but {reason}.{cpu_choices_hint(cpu_choices, argument)}")
    return mod


def cuda_module() -> ModuleType:
    """The compiled CUDA module (RuntimeError when unusable)."""
    return require_cuda("this operation")


@functools.lru_cache(maxsize=None)
def _load_cuda_host() -> tuple[ModuleType | None, str]:
    if not _core.build_info()["cuda"]:
        return None, "gpuopt was built without CUDA (no nvcc at install time, or GPUOPT_ENABLE_CUDA=OFF)"
    try:  # imports without a driver: the CUDA runtime is linked statically
        return importlib.import_module("gpuopt._cuda"), ""
    except ImportError as exc:
        return None, f"the CUDA module of gpuopt could not be loaded: {exc}"


def cuda_host_module(what: str = "this operation") -> ModuleType:
    """The compiled CUDA module whether or not a GPU is usable, for host-side work (the launchers'
    checks, planners, limits): RuntimeError only when gpuopt was built without CUDA."""
    mod, reason = _load_cuda_host()
    if mod is None:
        raise RuntimeError(f"{what} needs gpuopt's CUDA module, but {reason}")
    return mod


def launcher(variant: Any) -> Any:
    """The compiled launcher of a GPU :class:`~gpuopt.registry.Variant` (``<op>_<name>``); needs a usable GPU."""
    if variant.binding is None:
        raise ValueError(f"{variant.op}/{variant.name} has no launcher of its own")
    mod = _load_cuda()[0]  # on every call's path: the message is only built when there is no module
    if mod is None:
        mod = require_cuda(f"{variant.op}/{variant.name}", getattr(variant, "cpu_alternatives", ()))
    return getattr(mod, variant.binding)


def planner(variant: Any) -> Any:
    """The planner of a GPU variant's launcher (``plan.<op>_<name>``: its arguments but the device addresses ->
    a ``LaunchPlan``), or None where the loaded module has none (gpuopt._plan then packs the arguments itself)."""
    mod = _load_cuda()[0]
    if variant.binding is None or mod is None:
        return None
    return getattr(getattr(mod, "plan", None), variant.binding, None)


def host_check(variant: Any) -> Any:
    """The host-side checks of a GPU variant's launcher (``check.<op>_<name>``), or None where its launcher has
    none; they need the CUDA module, not a GPU, and reject what the launcher would before anything is copied."""
    if variant.binding is None:
        return None
    return getattr(cuda_host_module(f"{variant.op}/{variant.name}").check, variant.binding, None)


@functools.lru_cache(maxsize=None)
def _kernel_limits() -> dict[str, int]:
    return dict(_core.kernel_limits())


def kernel_limits() -> dict[str, int]:
    """The GPU kernels' limits, read from the headers they are compiled with (every build has them, CUDA or not):
    ``conv2d_constant_weight_bytes`` (unroll_constmem's constant bank), ``conv2d_general_min_images`` /
    ``_maps`` / ``_channels`` (the CS6235 general variant's switch), ``conv2d_gemm_index_limit`` (the GEMM
    variants' int indices), ``conv2d_unroll_scratch_bytes`` (unroll's scratch budget), ``sparse_conv2d_max_taps``
    (the largest filter side of the sparse kernels), ``kmeans_sum_group`` (objects a group of k-means' chunked sum
    tree: where a shard of :func:`gpuopt.distributed.kmeans` may start)."""
    return dict(_kernel_limits())


@functools.lru_cache(maxsize=None)
def _kernel_choices() -> dict[str, dict[str, Any]]:
    return {key: {"allowed": tuple(t["allowed"]), "default": t["default"]} for key, t in _core.kernel_choices().items()}


def kernel_choices() -> dict[str, dict[str, Any]]:
    """The kernels' parameter tables (``csrc/*/*_choices.hpp``), in every build (CUDA or not):
    ``{"op/variant/param": {"allowed": (...), "default": value}}``, the allowed values in display order. The
    launchers dispatch on these tables and the registry's Params are built from them (``Param.from_kernels``)."""
    return {key: dict(t) for key, t in _kernel_choices().items()}


def build_info() -> dict[str, Any]:
    """What this installation of gpuopt was compiled with.

    Returns
    -------
    dict
        ``version``, ``compiler``, ``openmp`` (bool), ``cpu_threads``, ``cuda`` (bool:
        CUDA kernels compiled), ``cuda_version``, ``cuda_architectures`` (e.g.
        ``"80,90"``), ``cublas`` / ``cublas_version``, ``cudnn`` / ``cudnn_version``
        (versions are None when not built), and ``cuda_usable`` / ``cuda_reason`` for
        this machine.
    """
    info = dict(_core.build_info())
    info["cuda_usable"] = cuda_available()
    info["cuda_reason"] = cuda_unavailable_reason()
    return info


def device_info(index: int = 0) -> dict[str, Any] | None:
    """Properties of CUDA device ``index``, or None when no GPU is usable.

    Keys include ``name``, ``compute_capability`` (major, minor), ``multiprocessors``,
    ``total_memory_bytes``, ``l2_cache_bytes``, shared-memory limits in bytes,
    ``driver_version`` / ``runtime_version`` (e.g. 13000 = 13.0) and the cuBLAS and
    cuDNN versions loaded at run time.
    """
    mod, _ = _load_cuda()
    if mod is None:
        return None
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < mod.device_count():
        raise ValueError(f"index must be a device number in 0..{mod.device_count() - 1}, got {index!r}")
    return dict(mod.device_info(index))
