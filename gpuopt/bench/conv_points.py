"""The conv2d machinery the conv2d, cs6235, ece408, tune_conv_auto and conv_layers studies share: the reports'
eight layers, the CS6235 configurations, the batch cap per plan, and the points (problem, variant, parameters) of the
report studies, each measured once against cuDNN."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

import gpuopt

from .baselines import cudnn_algorithm
from .harness import Progress, measure
from .study import (RunSettings, StudyResult, add_note, error_text, finite_number, per_level, relative_error,
                    release_gpu_cache, repeats, to_host)

__all__ = ["REPORT_LAYERS", "CONV_CONFS", "CONV_MAX_N", "REPORT_CONV_REPEATS", "CONV_CHECK_ELEMS", "ConvProblem",
           "ConvEntry", "host_rows", "is_reference", "usable_entries", "ConvPoints", "run_points"]

#: The reports' eight conv2d layers (auto is held to them; the conv_layers study measures them too), name: (x
#: shape, w shape, stride), no padding.
REPORT_LAYERS: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]] = {
    "conf1": ((1, 3, 112, 112), (64, 3, 3, 3), 2),
    "conf2": ((1, 832, 7, 7), (128, 832, 1, 1), 1),
    "conf3": ((128, 3, 112, 112), (64, 3, 3, 3), 2),
    "conf4": ((128, 832, 7, 7), (128, 832, 1, 1), 1),
    "fashion_conv1": ((10000, 1, 64, 64), (6, 1, 5, 5), 1),
    "fashion_conv2": ((10000, 6, 30, 30), (16, 6, 5, 5), 1),
    "mnist_conv1": ((10000, 1, 28, 28), (32, 1, 5, 5), 1),
    "mnist_conv2": ((10000, 32, 12, 12), (64, 32, 5, 5), 1),
}


#: The CS6235 report's configurations: N C K H W R S u v (no padding).
CONV_CONFS: dict[str, tuple[int, ...]] = {
    "conf1": (1, 3, 64, 112, 112, 3, 3, 2, 2),
    "conf2": (1, 832, 128, 7, 7, 1, 1, 1, 1),
    "conf3": (128, 3, 64, 112, 112, 3, 3, 2, 2),
    "conf4": (128, 832, 128, 7, 7, 1, 1, 1, 1),
}
# Largest batch N run per plan (None: the report's N).
CONV_MAX_N: dict[Any, int | None] = per_level(gpu_full=None, gpu_quick=None, cpu_full=32, cpu_quick=8, tiny=1)


# --------------------------------------------------------------------------- the report studies' points
#
# The cs6235 and ece408 studies measure many (problem, variant, parameters) points; a point
# two figures share is measured once (its row appears in both). Per problem the inputs are
# drawn and uploaded once, and the output of cuDNN in strict FP32 (variant "cudnn",
# precise algorithms) on its first images is the reference every other output is compared
# with (rel_err). Times are kernel times from measure() on device-resident inputs with the
# L2 flushed before every run; the convolution alone (no padding, no bias, no activation).

#: measure() keywords of the report studies. Each has ~100-130 points; the big ones (N=128,
#: B=10,000: ~1-20 ms a run) are capped by max_time_s, so on an H200 the two full studies
#: together should take about 2-3 minutes (estimated from the kernels' expected times).
REPORT_CONV_REPEATS: dict[Any, dict[str, Any]] = per_level(gpu_full=repeats(3, 30, 0.3, flush_l2=True),
    gpu_quick=repeats(2, 10, 0.1, flush_l2=True), cpu_full=repeats(1, 5, 1.0), cpu_quick=repeats(1, 3, 0.3),
    tiny=repeats(0, 2, 0.05))
#: Outputs of more elements than this are compared with the reference on their first images only.
CONV_CHECK_ELEMS = 1 << 22


@dataclass(frozen=True)
class ConvProblem:
    """One convolution of a report study: N C H W, K R S, stride u v (no padding)."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    u: int = 1
    v: int = 1

    @property
    def p(self) -> int:
        return (self.h - self.r) // self.u + 1

    @property
    def q(self) -> int:
        return (self.w - self.s) // self.v + 1

    @property
    def flops(self) -> float:
        """2 N K P Q C R S (one multiply and one add per tap)."""
        return 2.0 * self.n * self.k * self.p * self.q * self.c * self.r * self.s

    def fields(self) -> dict[str, int]:
        return dict(N=self.n, C=self.c, K=self.k, H=self.h, W=self.w, R=self.r, S=self.s, u=self.u, v=self.v,
                    P=self.p, Q=self.q)


@dataclass(frozen=True)
class ConvEntry:
    """One row of a figure or table: its label, the variant and parameters, more row fields."""

    label: str
    variant: str
    params: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


def host_rows(out: Any, n: int) -> np.ndarray:
    """The first ``n`` images of a result (device or host) as a NumPy array."""
    rows = getattr(out, "rows", None)
    if isinstance(out, gpuopt.DeviceArray) and callable(rows):
        return rows(n)
    return np.asarray(to_host(out))[:n]


def is_reference(variant: str, params: Mapping[str, Any]) -> bool:
    """Whether a point is the reference: cuDNN in strict FP32 (``cudnn``, precise algorithms)."""
    return variant == "cudnn" and params.get("algorithms", "precise") == "precise"


def usable_entries(entries: Sequence[ConvEntry], plan: RunSettings, notes: list[str], where: str) -> list[ConvEntry]:
    """The entries this build can run here; the others named in a note (variant or parameter missing)."""
    table = gpuopt.variants("conv2d")
    out = []
    for e in entries:
        v = table.get(e.variant)
        if v is None:
            add_note(notes, f"{where}: variant conv2d/{e.variant} is not registered in this build: skipped "
                         f"(registered: {', '.join(table)})")
            continue
        if not v.available:
            add_note(notes, f"{where}: variant conv2d/{e.variant} is not usable here "
                         f"({gpuopt.cuda_unavailable_reason()}): skipped")
            continue
        bad = None
        for key, value in e.params.items():
            if key not in v.params:
                bad = f"conv2d/{e.variant} has no parameter {key!r} (has: {', '.join(v.params) or 'none'})"
                break
            try:
                v.params[key].check(value, f"conv2d/{e.variant}")
            except ValueError as exc:
                bad = str(exc)
                break
        if bad:
            add_note(notes, f"{where}: {bad}: '{e.label}' skipped")
            continue
        out.append(e)
    return out


class ConvPoints:
    """Measures conv2d points of one problem at a time, each (problem, variant, parameters) once."""

    def __init__(self, plan: RunSettings, reps: Mapping[str, Any], notes: list[str], desc: str) -> None:
        self.plan, self.reps, self.notes, self.desc = plan, dict(reps), notes, desc
        self.table = gpuopt.variants("conv2d")
        self.rng = np.random.default_rng(plan.seed)
        self.cache: dict[tuple, dict[str, Any]] = {}
        ref = self.table.get("cudnn")
        self.with_reference = bool(plan.gpu and ref is not None and ref.available)
        self.key: str | None = None
        self.problem: ConvProblem | None = None
        self.x = self.w = self.dev = self.ref = None
        self.ref_name: str | None = None
        self.n_check = 0

    def _random(self, shape: tuple[int, ...]) -> np.ndarray:
        a = self.rng.random(shape, dtype=np.float32)
        a *= 2.0
        a -= 1.0  # uniform [-1, 1)
        return a

    def full_params(self, e: ConvEntry) -> dict[str, Any]:
        """The entry's parameters over its variant's registered defaults."""
        v = self.table.get(e.variant)
        return {**(v.defaults() if v is not None else {}), **e.params}

    def cache_key(self, key: str, e: ConvEntry) -> tuple:
        """What makes a point: the problem's key, the variant and its full parameters."""
        return (key, e.variant, tuple(sorted(self.full_params(e).items())))

    def load(self, key: str, prob: ConvProblem) -> None:
        """Draw (and on a GPU upload) the problem's inputs and compute the cuDNN reference of its first images."""
        self.key, self.problem = key, prob
        self.x = self._random((prob.n, prob.c, prob.h, prob.w))
        self.w = self._random((prob.k, prob.c, prob.r, prob.s))
        self.dev = (gpuopt.to_device(self.x), gpuopt.to_device(self.w)) if self.plan.gpu else None
        per_image = max(prob.k * prob.p * prob.q, 1)
        self.n_check = max(1, min(prob.n, CONV_CHECK_ELEMS // per_image))
        self.ref, self.ref_name = None, None
        if self.with_reference:
            try:
                out = gpuopt.conv2d(*self.dev, stride=(prob.u, prob.v), padding=0, variant="cudnn")
                self.ref = host_rows(out, self.n_check)
                del out
                self.ref_name = "cudnn" + (f" (first {self.n_check} of {prob.n} images)" if self.n_check < prob.n
                                           else "")
            except Exception as exc:  # noqa: BLE001 - the cudnn row records the failure itself
                add_note(self.notes, f"{self.desc} {key}: no cuDNN reference ({error_text(exc)})")

    def release(self) -> None:
        """Drop the loaded problem's arrays and give the device memory back."""
        self.x = self.w = self.dev = self.ref = None
        release_gpu_cache(self.plan)

    def measure(self, e: ConvEntry) -> dict[str, Any]:
        """The measurement fields of entry ``e`` on the loaded problem (from the cache when done before)."""
        ck = self.cache_key(self.key, e)
        if ck in self.cache:
            return dict(self.cache[ck])
        prob = self.problem
        params = self.full_params(e)
        gpu = self.table[e.variant].needs_cuda
        out: dict[str, Any] = {"params": params, "device": "gpu" if gpu else "cpu",
                               "flush_l2": bool(gpu and self.reps.get("flush_l2"))}
        reps = dict(self.reps) if gpu else {k: v for k, v in self.reps.items() if k != "flush_l2"}
        if e.variant == "cudnn" and gpu and self.plan.gpu:
            out["algorithm"] = cudnn_algorithm((prob.n, prob.c, prob.h, prob.w), (prob.k, prob.c, prob.r, prob.s),
                                               (prob.u, prob.v), (0, 0), params.get("algorithms", "precise"))
        ins = self.dev if gpu else (self.x, self.w)

        def fn(ins=ins, variant=e.variant, kw=dict(e.params), stride=(prob.u, prob.v)):
            return gpuopt.conv2d(*ins, stride=stride, padding=0, variant=variant, **kw)

        try:
            st = measure(fn, device=out["device"], **reps)
            out.update(st.row(), gflops=prob.flops / (st.median_ms * 1e6), spin_us=st.spin_us,
                       overhead_hidden=st.overhead_hidden)
            if self.ref is not None and not is_reference(e.variant, params):
                got = host_rows(fn(), self.n_check)
                out["rel_err"], out["reference"] = relative_error(got, self.ref), self.ref_name
        except ValueError as exc:  # the variant rejects this shape up front (e.g. 64 KB of constant memory)
            out["skipped"] = error_text(exc)
            add_note(self.notes, f"{self.desc} {self.key} {e.label}: not applicable: {out['skipped']}")
        except Exception as exc:  # noqa: BLE001 - recorded, the study goes on
            out["error"] = error_text(exc)
            add_note(self.notes, f"{self.desc} {self.key} {e.label}: {out['error']}")
        self.cache[ck] = out
        return dict(out)


def run_points(plan: RunSettings, res: StudyResult, reps: Mapping[str, Any],
               work: Sequence[tuple[dict[str, Any], str, ConvEntry]], problems: Mapping[str, ConvProblem],
               desc: str) -> list[dict[str, Any]]:
    """Measure every ``(row fields, problem key, entry)`` of ``work``; one row each, in ``work``'s order.

    Problems are loaded in order of first appearance; ``speedup_vs_cudnn`` = the strict
    cuDNN time of the same problem in this run / the row's time (> 1: faster than cuDNN);
    ``speedup_vs_cudnn_any`` the same against cuDNN free to pick FFT/Winograd, where the work has it
    (fast algorithms, which trade FP32 accuracy for speed, are compared with cuDNN's fast ones).
    """
    points = ConvPoints(plan, reps, res.notes, desc)
    unique = {points.cache_key(pk, e) for _, pk, e in work}
    rows: list[dict[str, Any] | None] = [None] * len(work)
    cudnn_ms: dict[str, float] = {}
    cudnn_any_ms: dict[str, float] = {}
    with Progress(len(unique), desc, enabled=plan.progress) as prog:
        for pk in dict.fromkeys(pk for _, pk, _ in work):
            prob = problems[pk]
            points.load(pk, prob)
            try:
                for i, (base, key, e) in enumerate(work):
                    if key != pk:
                        continue
                    fresh = points.cache_key(pk, e) not in points.cache
                    m = points.measure(e)
                    if fresh:
                        prog.update(f"{pk} {e.label}")
                    rows[i] = {**base, **prob.fields(), "label": e.label, "variant": e.variant, **e.extra, **m}
                    if is_reference(e.variant, m["params"]) and finite_number(m.get("median_ms")):
                        cudnn_ms[pk] = m["median_ms"]
                    elif (e.variant == "cudnn" and m["params"].get("algorithms") == "any"
                          and finite_number(m.get("median_ms"))):
                        cudnn_any_ms[pk] = m["median_ms"]
            finally:
                points.release()
    for (_, pk, _), row in zip(work, rows):
        t_ref = cudnn_ms.get(pk)
        if t_ref and finite_number(row.get("median_ms")):
            row["speedup_vs_cudnn"] = t_ref / row["median_ms"]
        t_any = cudnn_any_ms.get(pk)
        if t_any and finite_number(row.get("median_ms")):
            row["speedup_vs_cudnn_any"] = t_any / row["median_ms"]
    return [r for r in rows if r is not None]
