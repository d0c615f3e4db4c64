"""What a study is and the machinery every study shares.

A :class:`Study` names an op, the variants it compares, how to run it (``run(plan)`` ->
:class:`StudyResult`), its CSV columns, its printed table and the files it writes beside
``<name>.csv`` / ``<name>.json``: figures and Markdown tables, each declared with the
variants it shows (:class:`Output`), so that ``gpuopt.bench.studies.shown_in`` can say where
a variant appears without running anything.

Variants are looked up by name; one that is not registered in this build (or not usable
here) is skipped with a note, so the studies run on any build. A measurement that raises
is recorded with its ``error`` and the study goes on.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

import gpuopt

__all__ = ["RunSettings", "Output", "Study", "StudyResult", "per_level", "repeats", "CALL_REPEATS", "select_variants",
           "error_text", "relative_error", "to_host", "release_gpu_cache", "timed_calls", "finite_number",
           "entry_label", "row_label", "add_note"]


@dataclass(frozen=True)
class RunSettings:
    """How big and how long: GPU or CPU mode, quick, tiny (tests), seed, progress line."""

    gpu: bool
    quick: bool = False
    tiny: bool = False
    seed: int = 0
    progress: bool = True

    @property
    def mode(self) -> str:
        """"gpu" or "cpu"."""
        return "gpu" if self.gpu else "cpu"

    @property
    def level(self) -> str:
        """"tiny", "quick" or "full"."""
        return "tiny" if self.tiny else "quick" if self.quick else "full"

    def pick(self, table: Mapping[Any, Any]) -> Any:
        """``table["tiny"]`` in tiny mode, else ``table[(mode, "quick"|"full")]`` (a :func:`per_level` table)."""
        if self.tiny:
            return table["tiny"]
        return table[(self.mode, self.level)]

    def as_dict(self) -> dict[str, Any]:
        """The plan as the results' ``meta["plan"]``."""
        return {"mode": self.mode, "level": self.level, "quick": self.quick, "tiny": self.tiny, "seed": self.seed}


Plan = RunSettings  # the name before "plan" meant only the call plan (docs/glossary.md)


@dataclass
class StudyResult:
    """What a study produced: rows (one per measurement), notes, extra metadata."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Output:
    """A figure or table a study writes into the results folder, and the variants it shows.

    ``file`` is the name in the results folder (``"cs6235_fig3.png"``); ``variants`` the
    variants drawn or tabulated there, None for every variant the study compares. ``ops``:
    variants of other ops it shows too, as ``(op, (variant, ...))`` pairs (a network study
    shows the layer ops its stages run).
    """

    file: str
    variants: tuple[str, ...] | None = None
    ops: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Study:
    """One study: its name, the op and variants it compares, its columns, table and files.

    ``gpu_variants`` is a tuple or a function returning one (the matmul and conv2d studies
    discover theirs in the registry). ``table(rows, meta)`` is the text printed after a run;
    ``figures(meta, rows, path)`` draws into ``path`` (``<out>/<name>.png``) or beside it and
    returns the path(s); ``extras(meta, rows, out_dir)`` writes further files (Markdown
    tables) and returns their paths. ``outputs`` declares every file those two write.
    ``opt_in`` studies are not in the default set; ``gpu_only`` ones do not run without a GPU.
    """

    name: str
    op: str
    title: str
    description: str
    gpu_variants: tuple[str, ...] | Callable[[], tuple[str, ...]]
    columns: tuple[str, ...]
    run: Callable[[RunSettings], StudyResult] = field(repr=False)
    table: Callable[..., str] = field(repr=False)
    extras: Callable[..., list[Any]] | None = field(default=None, repr=False)
    figures: Callable[..., Any] | None = field(default=None, repr=False)
    outputs: tuple[Output, ...] = ()
    opt_in: bool = False
    gpu_only: bool = False

    def variant_names(self) -> tuple[str, ...]:
        """The GPU variants this study compares (for ``--list``)."""
        v = self.gpu_variants
        return tuple(v() if callable(v) else v)

    def shows(self, output: Output) -> tuple[str, ...]:
        """The variants ``output`` shows."""
        return output.variants if output.variants is not None else self.variant_names()

    def files(self) -> tuple[str, ...]:
        """Every file a run writes into the results folder: CSV, JSON, then :attr:`outputs`."""
        return (f"{self.name}.csv", f"{self.name}.json", *(o.file for o in self.outputs))


_ABSENT = object()  # a level a per_level table has no value for (None is a value: "no cap")


def per_level(*, gpu_full: Any, gpu_quick: Any, tiny: Any, cpu_full: Any = _ABSENT, cpu_quick: Any = _ABSENT
              ) -> dict[Any, Any]:
    """A table :meth:`RunSettings.pick` reads: a value per (mode, level) and one for ``tiny``; a GPU-only study
    leaves the CPU ones out."""
    table = {("gpu", "full"): gpu_full, ("gpu", "quick"): gpu_quick, ("cpu", "full"): cpu_full,
             ("cpu", "quick"): cpu_quick, "tiny": tiny}
    return {key: value for key, value in table.items() if value is not _ABSENT}


def repeats(warmup: int, repeat: int, max_time_s: float | None = None, *, flush_l2: bool = False) -> dict[str, Any]:
    """:func:`~gpuopt.bench.harness.measure`'s keywords of one plan level: warm-up calls, recorded calls, time
    budget (s, left out when None), L2 flushed before each call (left out when False)."""
    out: dict[str, Any] = dict(warmup=warmup, repeat=repeat)
    if max_time_s is not None:
        out["max_time_s"] = max_time_s
    if flush_l2:
        out["flush_l2"] = True
    return out


# Repeats of whole calls on NumPy input (kmeans, sparse): warm-up, runs, time budget (s).
CALL_REPEATS: dict[Any, dict[str, Any]] = per_level(
    gpu_full=repeats(2, 10, 10.0), gpu_quick=repeats(1, 5, 3.0), cpu_full=repeats(1, 5, 5.0),
    cpu_quick=repeats(1, 3, 2.0), tiny=repeats(1, 2, 0.5))


# --------------------------------------------------------------------------- helpers


def select_variants(op: str, gpu_names: Sequence[str], plan: RunSettings, notes: list[str]) -> list[str]:
    """The variants of ``op`` to run: ``gpu_names`` on a GPU, ``cpu`` without; missing ones noted."""
    table = gpuopt.variants(op)
    if plan.gpu:
        names = list(gpu_names)
    else:
        names = ["cpu"]
        skipped = [n for n in gpu_names if n != "cpu"]
        if skipped:
            notes.append(f"{op} GPU variants not run here: {', '.join(skipped)}")
    chosen = []
    for name in names:
        v = table.get(name)
        if v is None:
            notes.append(f"variant {op}/{name} is not registered in this build of gpuopt: skipped "
                         f"(registered: {', '.join(table)})")
        elif not v.available:
            notes.append(f"variant {op}/{name} is not usable here ({gpuopt.cuda_unavailable_reason()}): skipped")
        else:
            chosen.append(name)
    return chosen


def error_text(exc: BaseException) -> str:
    """An exception as a row's ``error`` / ``skipped`` text: its type and message, cut at 500 characters."""
    msg = f"{type(exc).__name__}: {exc}".strip()
    return msg if len(msg) <= 500 else msg[:497] + "..."


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref|| / ||ref|| in float64 (inf when the shapes differ)."""
    out64, ref64 = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    if out64.shape != ref64.shape:
        return math.inf
    denom = float(np.linalg.norm(ref64))
    return float(np.linalg.norm(out64 - ref64) / (denom if denom > 0 else 1.0))


def to_host(out: Any) -> np.ndarray:
    """A result as a NumPy array (a :class:`gpuopt.DeviceArray` copied back)."""
    return out.numpy() if isinstance(out, gpuopt.DeviceArray) else np.asarray(out)


def release_gpu_cache(plan: RunSettings) -> None:
    """On a GPU run: wait for the device and give gpuopt's cached device memory back (between big problems)."""
    if plan.gpu:
        try:
            gpuopt.cuda.synchronize()
            gpuopt.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - cleanup only; a real fault shows up in the next row
            pass


def timed_calls(fn: Callable[[], tuple[Any, Any]], *, warmup: int, repeat: int,
                max_time_s: float) -> tuple[list[Any], list[float], Any]:
    """Run ``fn`` (returning ``(result, Timing)``) ``warmup`` + up to ``repeat`` times.

    Returns the recorded Timings, the wall time of each recorded call (ms) and the
    last result. Stops early (after at least one recorded call) past ``max_time_s``.
    """
    for _ in range(warmup):
        fn()
    timings, walls, result = [], [], None
    started = time.perf_counter()
    for _ in range(repeat):
        t0 = time.perf_counter()
        result, timing = fn()
        walls.append((time.perf_counter() - t0) * 1e3)
        timings.append(timing)
        if time.perf_counter() - started >= max_time_s:
            break
    return timings, walls, result


def finite_number(value: Any) -> float | None:
    """A finite number as a float, else None (missing cells, NaN, booleans, text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def entry_label(name: str, params: Mapping[str, Any] | None = None) -> str:
    """Row label: the variant, then the parameters measured separately (``"shared block=32"``)."""
    return " ".join([name, *(f"{k}={v}" for k, v in (params or {}).items())])


def row_label(row: Mapping[str, Any]) -> str:
    """What names a result row in tables and legends: its ``label``, else its ``variant``."""
    return str(row.get("label") or row.get("variant"))


def add_note(notes: list[str], text: str) -> None:
    """Append ``text`` to ``notes`` unless it is there already."""
    if text not in notes:
        notes.append(text)
