"""Per-layer timing of a network call: one row per op call of the stage, summed over chunks.

With ``timing=True`` every op's :class:`gpuopt.Timing` (its host-to-device, kernel and device-to-host
phases: CUDA events on the GPU, ``perf_counter`` on the CPU) is added to the row named as the report's
table names that layer; the copies the network itself makes (a device input brought to the host for a
round-trip stage, the result copied back or up) get rows of their own, op ``"copy"``. The rows, the whole
call's wall time and the batch's chunking make a :class:`ForwardTiming`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np

from .._exec import ExecContext, Timing
from ..cuda import DeviceArray, to_device_checked
from .stages import REPORT_SETTING, Step, stages

__all__ = ["LayerTime", "ForwardTiming", "Recorder"]


class LayerTime(NamedTuple):
    """One row of a per-layer timing table, summed over chunks, in ms.

    ``name`` is the row's name in the report's table ("Average Pool (1)"), ``op`` / ``variant`` the gpuopt
    op that ran it (``"copy"`` for the network's own copies).
    """

    name: str
    op: str
    variant: str
    kernel_ms: float
    h2d_ms: float
    d2h_ms: float

    @property
    def total_ms(self) -> float:
        return self.kernel_ms + self.h2d_ms + self.d2h_ms


@dataclass
class ForwardTiming:
    """Per-layer times of one forward / predict / evaluate call.

    Attributes
    ----------
    network, stage : str
    images, chunks, chunk_images : int
        Batch size, chunks it ran in, images per chunk.
    layers : list of LayerTime
        One row per op call of the stage (and per copy the network made), in order, summed over chunks.
    wall_ms : float
        Host wall-clock time of the whole call (input checks, every op, copies; the GPU waited for).
    clock : str
        "gpu" (op phases from CUDA events) or "cpu" (``perf_counter``).
    """

    network: str
    stage: str
    images: int
    chunks: int
    chunk_images: int
    layers: list[LayerTime] = field(default_factory=list)
    wall_ms: float = 0.0
    clock: str = "cpu"

    kernel_ms = property(lambda self: sum(r.kernel_ms for r in self.layers), doc="sum of the layers' kernel time")
    h2d_ms = property(lambda self: sum(r.h2d_ms for r in self.layers), doc="sum of host-to-device copies")
    d2h_ms = property(lambda self: sum(r.d2h_ms for r in self.layers), doc="sum of device-to-host copies")

    def table(self) -> str:
        """The table as text: one row per layer, with the report's time where it printed one."""
        stage = stages(self.network)[self.stage]
        report = {s.name: s.report_ms for s in (*stage.steps, *stage.heads.values())}
        has_report = any(report.get(r.name) is not None for r in self.layers)
        head = f"{'layer':40s} {'op/variant':32s} {'kernel ms':>11s} {'h2d ms':>10s} {'d2h ms':>10s}"
        lines = [head + (f" {'report ms':>11s}" if has_report else ""), "-" * (len(head) + 12 * has_report)]
        for r in self.layers:
            ms = report.get(r.name)
            extra = f" {_fmt(ms):>11s}" if has_report else ""
            lines.append(f"{r.name:40s} {r.op + '/' + r.variant:32s} {_fmt(r.kernel_ms):>11s} {_fmt(r.h2d_ms):>10s} "
                         f"{_fmt(r.d2h_ms):>10s}{extra}")
        lines.append("-" * len(lines[1]))
        total = f" {_fmt(stage.report_total_ms):>11s}" if has_report else ""
        lines.append(f"{'sum of the rows':40s} {'':32s} {_fmt(self.kernel_ms):>11s} {_fmt(self.h2d_ms):>10s} "
                     f"{_fmt(self.d2h_ms):>10s}")
        lines.append(f"{'wall time of the call':40s} {'':32s} {_fmt(self.wall_ms):>11s}{' ' * 22}{total}")
        lines.append(f"{self.images:,} images in {self.chunks} chunk(s) of up to {self.chunk_images:,}; op phases "
                     f"timed by {'CUDA events' if self.clock == 'gpu' else 'the host clock'}")
        if has_report:
            lines.append(f"report ms: {stage.table}; {REPORT_SETTING[self.network]}")
        return "\n".join(lines)


def _fmt(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.4g}" if ms < 1 else f"{ms:,.3f}"


class Recorder:
    """Runs the ops of one call and, with timing, sums their Timing per row name."""

    def __init__(self, timing: bool) -> None:
        self.timing = timing
        self.rows: dict[str, list[Any]] = {}
        self.gpu = False

    def _add(self, name: str, op: str, variant: str, t: Timing | None) -> None:
        if t is None:
            return
        self.gpu |= t.device == "gpu"
        row = self.rows.setdefault(name, [op, variant, 0.0, 0.0, 0.0])
        row[2] += t.kernel_ms
        row[3] += t.h2d_ms
        row[4] += t.d2h_ms

    def call(self, step: Step, fn: Callable[..., Any], x: Any, kwargs: dict[str, Any]) -> Any:
        if not self.timing:
            return fn(x, variant=step.variant, **kwargs)
        out, t = fn(x, variant=step.variant, timing=True, **kwargs)
        self._add(step.name, step.op, step.variant, t)
        return out

    def to_host(self, a: DeviceArray, name: str) -> np.ndarray:
        ctx = ExecContext(timing=self.timing, device_result=False, gpu=True)
        out = ctx.host(a)
        self._add(name, "copy", "d2h", ctx.record())
        return out

    def to_device(self, a: np.ndarray, name: str, check_finite: bool = False) -> tuple[DeviceArray, bool]:
        """``a`` copied to the device (a row of its own) and, with ``check_finite`` (float32), whether every
        value is finite (checked as it is staged; else True)."""
        ctx = ExecContext(timing=self.timing, device_result=True, gpu=True)
        with ctx.h2d():
            out, finite = to_device_checked(a, check_finite)
        self._add(name, "copy", "h2d", ctx.record())
        return out, finite

    def layers(self) -> list[LayerTime]:
        return [LayerTime(name, *row) for name, row in self.rows.items()]
