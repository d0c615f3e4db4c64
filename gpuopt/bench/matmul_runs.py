"""The matmul rows the two matmul studies (the ladder and the CMU 18-645 report's harness) measure: which variants
(the ladder, then cuBLAS), which of them once per parameter value, how one is called, and the float64 reference."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

import gpuopt
from gpuopt.matmul import ladder

from .study import RunSettings, entry_label

__all__ = ["MATMUL_PARAM_ROWS", "REFERENCES", "matmul_gpu_variants", "matmul_entries", "call_matmul",
           "matmul_reference"]


#: Variants measured once per value of one parameter, each value a separate row, in this
#: order: ``coalesced`` with a warp down a column (strided, the uncoalesced counter-example)
#: then along a row; ``shared`` at the report's 32x32 blocks ("Memory Shared Version") then
#: its 16x16 occupancy fix ("Scheduling Throughput Maximized Version"); ``tile_buffer`` at
#: TILE_SZ 1, 2, 4. Every other variant runs at its registered defaults.
MATMUL_PARAM_ROWS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "coalesced": ("warp_layout", ("column", "row")),
    "shared": ("block", (32, 16)),
    "tile_buffer": ("tile_sz", (1, 2, 4)),
}

#: cuBLAS, the baselines (not steps): strict FP32 (the reference of every "% cuBLAS"), then with TF32 tensor cores
#: allowed (the speed the 3xTF32 steps trade two thirds of for FP32 accuracy).
REFERENCES = ("cublas", "cublas_tf32")


def matmul_gpu_variants() -> tuple[str, ...]:
    """The GPU matmul variants the matmul studies compare: the ladder (``gpuopt.matmul.ladder()``, its
    one owner: the registry's order), then cuBLAS, the reference, when registered."""
    table = gpuopt.variants("matmul")
    return (*ladder(), *(name for name in REFERENCES if name in table))


def matmul_entries(plan: RunSettings, notes: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(label, variant, params) of every row to measure at each size.

    GPU: the ladder's variants then cuBLAS (:func:`matmul_gpu_variants`), ``MATMUL_PARAM_ROWS`` expanded.
    No GPU: the ``cpu`` variant only.
    """
    table = gpuopt.variants("matmul")
    gpu_names = matmul_gpu_variants()
    if not plan.gpu:
        if gpu_names:
            notes.append(f"matmul GPU variants not run here: {', '.join(gpu_names)}")
        return [("cpu", "cpu", {})] if "cpu" in table else []
    entries: list[tuple[str, str, dict[str, Any]]] = []
    for name in gpu_names:
        v = table[name]
        if not v.available:
            notes.append(f"variant matmul/{name} is not usable here ({gpuopt.cuda_unavailable_reason()}): skipped")
            continue
        spec = MATMUL_PARAM_ROWS.get(name)
        if spec is None:
            entries.append((name, name, {}))
            continue
        key, values = spec
        if key not in v.params:
            notes.append(f"matmul/{name} has no parameter {key!r} (has: {', '.join(v.params) or 'none'}): "
                         "measured at its defaults only")
            entries.append((name, name, {}))
            continue
        for value in values:
            try:
                value = v.params[key].check(value, f"matmul/{name}")
            except ValueError as exc:
                notes.append(f"{exc}: that row is skipped")
                continue
            entries.append((entry_label(name, {key: value}), name, {key: value}))
    return entries


def call_matmul(ins: tuple[Any, Any], name: str, params: Mapping[str, Any]) -> Callable[[], Any]:
    """A call of ``gpuopt.matmul`` on ``ins`` with one variant and its parameters, for :func:`measure`."""
    return lambda: gpuopt.matmul(*ins, variant=name, **params)


def matmul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in float64: the reference every matmul variant's output is compared with."""
    return a.astype(np.float64) @ b.astype(np.float64)
