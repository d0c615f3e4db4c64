"""Where each variant lives: its kernel source, its launcher, its test and the figures and tables that show it.

The first three are the variant's own facts, written once at its registration (:class:`gpuopt.registry.Variant`);
the figures are the benchmark studies' facts, written once in each study (``gpuopt.bench.studies.shown_in``).
This module joins the two layers, so neither imports the other for it. Paths are relative to the repository
root; figures and tables are in :data:`RESULTS` (the committed H200 results).

>>> from gpuopt.where import where
>>> w = where("sparse_conv2d")["fast"]          # doctest: +SKIP
>>> w.kernel, w.binding, w.test, w.figures      # doctest: +SKIP
('csrc/sparse/sparse_conv.cu', 'sparse_conv2d_fast', 'tests/sparse/test_gpu_sparse.py', ('benchmarks/results/sparse.png',))
"""

from __future__ import annotations

from dataclasses import dataclass

from .bench.studies import shown_in
from .registry import variants

__all__ = ["Where", "where", "RESULTS"]

#: Where the studies' committed figures and tables are, relative to the repository root.
RESULTS = "benchmarks/results"


@dataclass(frozen=True)
class Where:
    """Where one variant lives (paths relative to the repository root).

    Attributes
    ----------
    op, variant : str
    kernel : str
        Its implementation: the ``.cu`` of its kernels, the ``.cpp`` of a CPU reference, or the Python module of
        a variant that picks among others.
    binding : str or None
        Its launcher in the compiled CUDA module (``<op>_<variant>``); None for CPU variants and pickers.
    test : str
        The test file that checks it against the CPU reference.
    figures : tuple of str
        The committed figures and tables that show it (empty when no study measures it).
    """

    op: str
    variant: str
    kernel: str
    binding: str | None
    test: str
    figures: tuple[str, ...]


def where(op: str) -> dict[str, Where]:
    """Where every variant of ``op`` lives, by variant name (registration order). ValueError for an unknown op."""
    return {name: Where(op, name, v.kernel, v.binding, v.test,
                        tuple(f"{RESULTS}/{name_}" for name_ in shown_in(op, name)))
            for name, v in variants(op).items()}
