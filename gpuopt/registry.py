"""Variant registry: every implementation of every op, selectable by name.

Each op (``"conv2d"``, ``"matmul"``, ...) has named variants. A variant carries a
one-line description, the report it comes from, whether it needs CUDA, and its
tunable parameters with their allowed values and defaults. Ops look their variant up
here, so an unknown variant or parameter is rejected in one place with the valid
choices listed.

>>> import gpuopt
>>> list(gpuopt.variants("matmul"))            # doctest: +SKIP
['cpu', ...]
>>> gpuopt.variants("matmul")["cpu"].description  # doctest: +SKIP
'CPU reference (C++, OpenMP), float64 accumulation'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np

from . import _ext
from ._ext import kernel_choices

__all__ = ["Param", "Variant", "register", "variants", "ops", "resolve", "lookup", "cpu_variants", "REPORTS", "markdown"]

#: Short keys of the reports variants come from (the texts are in ../shared/seeds/).
REPORTS: Mapping[str, str] = MappingProxyType(
    {
        "reference": "gpuopt's CPU reference (the oracle every variant is tested against)",
        "cs6235": "CS6235 CNN-on-GPU convolution report",
        "ece408-fashion": "ECE408 Fashion-MNIST convolution report",
        "ece408-mnist": "ECE408 MNIST CNN report (2016 project)",
        "cmu18645": "CMU 18-645 k-means and matrix-multiply report",
        "nctu": "NCTU 2016 sparse COO/FAST convolution lab notes",
        "liao": "Wei-keng Liao's parallel k-means package",
        "gpuopt": "beyond the reports: gpuopt's own optimisation",
        "library": "vendor library baseline (cuBLAS / cuDNN)",
    }
)


@dataclass(frozen=True)
class Param:
    """A tunable parameter of a variant.

    Attributes
    ----------
    name : str
        Keyword name, passed to the op as ``op(..., name=value)``.
    default : Any
        Value used when the caller does not pass one.
    allowed : tuple
        The values the kernel can run (checked before any launch).
    doc : str
        One line: what the parameter changes.
    native : str
        ``"op/variant/param"`` when the allowed values and the default are the kernels' (a C++ table of a
        ``csrc/*/*_choices.hpp`` header, read from ``gpuopt._ext.kernel_choices()``: see :meth:`from_kernels`);
        empty for parameters only Python knows.
    """

    name: str
    default: Any
    allowed: tuple
    doc: str = ""
    native: str = ""

    @classmethod
    def from_kernels(cls, key: str, doc: str = "") -> "Param":
        """The parameter whose values pick a kernel instantiation or code path: its allowed values and default
        are the C++ table's (``key``: ``"op/variant/param"``, e.g. ``"conv2d/implicit_gemm_fast/tile"``), which
        the launchers dispatch on; written once, there. Every build has the tables (``gpuopt._core``)."""
        table = kernel_choices()[key]
        return cls(key.rsplit("/", 1)[-1], table["default"], tuple(table["allowed"]), doc, key)

    def __post_init__(self) -> None:
        if self.default not in self.allowed:
            raise ValueError(f"default {self.default!r} of parameter {self.name!r} is not among {self.allowed!r}")

    def check(self, value: Any, where: str) -> Any:
        """Return the canonical allowed value equal to ``value``, or raise ValueError."""
        for allowed in self.allowed:
            if _same_value(value, allowed):
                return allowed
        raise ValueError(f"{where}: parameter {self.name}={value!r} is not allowed; choose one of {list(self.allowed)}")


def _same_value(value: Any, allowed: Any) -> bool:
    # bool is an int in Python, but a flag passed as a tile size is a mistake; NumPy
    # integers are fine where ints are expected.
    if isinstance(value, (bool, np.bool_)) or isinstance(allowed, bool):
        return type(value) is type(allowed) and value == allowed
    if isinstance(allowed, int):
        return isinstance(value, (int, np.integer)) and value == allowed
    if isinstance(allowed, str):
        return isinstance(value, str) and value == allowed
    return value == allowed


@dataclass(frozen=True)
class Variant:
    """One implementation of an op.

    Attributes
    ----------
    op, name : str
        ``gpuopt.<op>(..., variant=name)`` selects it.
    description : str
        One line: what the variant does differently.
    report : str
        Key of :data:`REPORTS`: where the variant comes from.
    needs_cuda : bool
        True when it runs on the GPU.
    params : Mapping[str, Param]
        Tunable parameters by name.
    kernel : str
        Where it is implemented, relative to the repository root: the ``.cu`` file of its kernels, the
        ``.cpp`` of a CPU reference, or the Python module of a variant that only composes others (``auto``).
    test : str
        The test file that checks it against the CPU reference, relative to the repository root.
    binding : str or None
        The name of its launcher in the compiled CUDA module, ``<op>_<name>`` by the one binding rule
        (csrc/bindings/cuda_bindings.hpp); its host-side checks, where it has some, are
        ``check.<op>_<name>``. None for CPU variants and for GPU variants without a launcher of their own.
    tolerance : float or None
        The relative error it is held to against the CPU reference where it is not FP32-accurate by design
        (a baseline in TF32, say); None for FP32-level variants (the tests' and ``gpuopt check``'s bound).
    """

    op: str
    name: str
    description: str
    report: str
    needs_cuda: bool
    params: Mapping[str, Param] = field(default_factory=dict)
    kernel: str = ""
    test: str = ""
    binding: str | None = None
    impl: Callable[..., Any] | None = field(default=None, repr=False, compare=False)
    tolerance: float | None = None

    @property
    def available(self) -> bool:
        """Whether it can run here (CPU variants always; CUDA ones need a usable GPU)."""
        if not self.needs_cuda:
            return True
        from ._ext import cuda_available

        return cuda_available()

    @property
    def cpu_alternatives(self) -> list[str]:
        """The variants of this variant's op that run on the CPU (:func:`cpu_variants`): what a message about a
        missing GPU points to."""
        return cpu_variants(self.op)

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params.values()}

    def __str__(self) -> str:
        where = "CUDA" if self.needs_cuda else "CPU"
        params = ", ".join(f"{p.name}={p.default!r} in {list(p.allowed)}" for p in self.params.values())
        return f"{self.op}/{self.name} [{where}, {self.report}] {self.description}" + (f" ({params})" if params else "")


_REGISTRY: dict[str, dict[str, Variant]] = {}
_PREFERRED: dict[str, list[str]] = {}
_GENERATION = [0]  # registrations so far: cached plans (gpuopt._plan) made before a registration are not used


def generation() -> int:
    """How many variants have been registered: changes whenever an op's table or default may have changed."""
    return _GENERATION[0]


def register(
    op: str,
    name: str,
    *,
    description: str,
    report: str,
    needs_cuda: bool,
    kernel: str,
    test: str,
    params: tuple[Param, ...] = (),
    preferred: bool = False,
    launcher: bool = True,
    tolerance: float | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering ``impl`` as variant ``name`` of ``op``.

    ``kernel`` and ``test`` say where the variant lives (see :class:`Variant`). A GPU variant has a
    launcher ``<op>_<name>`` in the CUDA module unless ``launcher=False`` (a variant that only picks
    among others). ``preferred`` marks the variants an op uses when called with ``variant=None``
    (the first available one wins, in registration order; ``"cpu"`` is the fallback). ``tolerance``: see
    :class:`Variant` (None: FP32 level). The order of
    registration is the order :func:`variants` lists, simple to fast (the matmul ladder's steps).
    """
    if report not in REPORTS:
        raise ValueError(f"unknown report {report!r}; known: {sorted(REPORTS)}")
    for what, path in (("kernel", kernel), ("test", test)):
        if not isinstance(path, str) or not path or path.startswith("/"):
            raise ValueError(f"variant {op}/{name}: {what} must be a path relative to the repository root, "
                             f"got {path!r}")

    def deco(impl: Callable[..., Any]) -> Callable[..., Any]:
        table = _REGISTRY.setdefault(op, {})
        if name in table:
            raise ValueError(f"variant {op}/{name} registered twice")
        table[name] = Variant(op, name, description, report, needs_cuda,
                              MappingProxyType({p.name: p for p in params}), kernel, test,
                              f"{op}_{name}" if needs_cuda and launcher else None, impl, tolerance)
        if preferred:
            _PREFERRED.setdefault(op, []).append(name)
        _GENERATION[0] += 1
        return impl

    return deco


def ops() -> list[str]:
    """Names of the ops that have variants."""
    return list(_REGISTRY)


def variants(op: str | None = None) -> Mapping[str, Variant] | Mapping[str, Mapping[str, Variant]]:
    """The variants of ``op`` by name (simple to fast), or of every op when ``op`` is None.

    Each :class:`Variant` has ``description``, ``params`` (name -> :class:`Param` with
    ``default`` and ``allowed``), ``needs_cuda``, ``report`` and ``available``.
    """
    if op is None:
        return MappingProxyType({o: MappingProxyType(dict(t)) for o, t in _REGISTRY.items()})
    _check_op(op)
    return MappingProxyType(dict(_REGISTRY[op]))


def markdown(full: bool = False) -> str:
    """The variant tables as Markdown, from this registry: per op its variants simple to fast, GPU ones in bold
    (``full=False``: one row an op, for the README); or one table an op with every variant's report, device,
    parameters (default first) and description (``full=True``: ``docs/variants.md``). ``python -m gpuopt variants
    --markdown [--full]`` prints them; a test keeps the committed copies current."""
    if not full:
        rows = ["| op | variants (**GPU**, simple to fast; `None` picks the fastest usable here) |", "| --- | --- |"]
        for op, table in _REGISTRY.items():
            names = ", ".join(f"**`{n}`**" if v.needs_cuda else f"`{n}`" for n, v in table.items())
            rows.append(f"| `{op}` | {names} |")
        return "\n".join(rows) + "\n"
    out = []
    for op, table in _REGISTRY.items():
        out += [f"## `{op}`", "", "| variant | from | runs on | parameters (default first) | what it does |",
                "| --- | --- | --- | --- | --- |"]
        for name, v in table.items():
            params = "; ".join(
                f"`{q.name}` {q.default!r}" + (f" (of {', '.join(repr(a) for a in q.allowed if a != q.default)})"
                                                 if len(q.allowed) > 1 else "") for q in v.params.values()) or "-"
            desc = v.description.replace("|", "\\|")
            out.append(f"| `{name}` | {v.report} | {'GPU' if v.needs_cuda else 'CPU'} | {params} | {desc} |")
        out.append("")
    return "\n".join(out)


def lookup(op: str, name: str) -> Variant:
    """Variant ``name`` of ``op`` as registered, without checking parameters or the GPU (:func:`resolve` does):
    for a variant that picks another after the call's one resolve (k-means ``auto``)."""
    _check_op(op)
    table = _REGISTRY[op]
    if name not in table:
        raise ValueError(f"{op}: unknown variant {name!r}; valid variants: {list(table)}")
    return table[name]


def _check_op(op: str) -> None:
    if op not in _REGISTRY:
        raise ValueError(f"unknown op {op!r}; ops with variants: {ops()}")


def cpu_variants(op: str) -> list[str]:
    """The variants of ``op`` that run on the CPU (no GPU needed), in registration order: what a message
    about a missing GPU points to."""
    _check_op(op)
    return [name for name, v in _REGISTRY[op].items() if not v.needs_cuda]


def default_variant(op: str) -> str:
    """The variant ``op`` runs when called with ``variant=None``."""
    _check_op(op)
    for name in _PREFERRED.get(op, []):
        if _REGISTRY[op][name].available:
            return name
    return "cpu"


#: resolve()'s answers: (op, variant, params with their types) -> (the op's table, the Variant, the resolved
#: parameters, the name used in errors). It is on every call's path; an entry counts only while the op's table
#: is the same object holding the same Variant (tests that swap a table get fresh answers; the entry keeps the
#: table alive, so its identity cannot be reused).
_RESOLVED: dict[tuple, tuple[dict, "Variant", dict[str, Any], str]] = {}


def resolve(op: str, variant: str | None, params: Mapping[str, Any], *,
            require_device: bool = True) -> tuple[Variant, dict[str, Any]]:
    """Look up ``variant`` of ``op`` and complete ``params`` with defaults.

    Raises
    ------
    ValueError
        Unknown variant (valid ones listed), unknown parameter or disallowed value.
    TypeError
        ``variant`` is not a string.
    RuntimeError
        The variant needs CUDA and no usable GPU is present (the reason is given);
        not checked with ``require_device=False`` (for planning without a GPU).
    """
    _check_op(op)
    if variant is None:
        variant = default_variant(op)
    table = _REGISTRY[op]
    try:  # the value's type is part of the key: 1, 1.0 and True are equal (and hash alike) in Python
        key: tuple | None = (op, variant, tuple([(k, type(x), x) for k, x in params.items()]) if params else ())
        hit = _RESOLVED.get(key)
    except TypeError:  # an unhashable parameter value: checked the long way, and rejected there
        key, hit = None, None
    if hit is not None and hit[0] is table and table.get(variant) is hit[1]:
        v, resolved, where = hit[1], dict(hit[2]), hit[3]
    else:
        if not isinstance(variant, str):
            raise TypeError(f"{op}: variant must be a string, got {type(variant).__name__}")
        if variant not in table:
            raise ValueError(f"{op}: unknown variant {variant!r}; valid variants: {list(table)}")
        v = table[variant]
        unknown = sorted(set(params) - set(v.params))
        if unknown:
            valid = list(v.params) or "none"
            raise ValueError(f"{op}/{variant}: unknown parameter(s) {unknown}; valid parameters: {valid}")
        resolved = v.defaults()
        for name, value in params.items():
            resolved[name] = v.params[name].check(value, f"{op}/{variant}")
        where = f"{op}/{variant}"
        if key is not None:
            _RESOLVED[key] = (table, v, dict(resolved), where)
    if v.needs_cuda and require_device and _ext._load_cuda()[0] is None:  # (cached) the message only on failure
        _ext.require_cuda(where, cpu_variants(op))
    return v, resolved
