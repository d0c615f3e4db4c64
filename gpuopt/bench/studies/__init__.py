"""The studies, one module each, collected in display order in :data:`STUDIES`.

Each module holds its study's report numbers, its run, its tables and figures, and its
:class:`~gpuopt.bench.study.Study` record (``STUDY``), which declares the files it writes
and the variants each shows; :func:`shown_in` answers from those declarations alone.
"""

from __future__ import annotations

from ..study import Study
from . import (conv2d, conv_layers, cs6235, ece408, kmeans, kmeans_loop, kmeans_map, kmeans_multi, matmul,
               matmul_report, networks, overhead, sparse, sparse_density, tune_conv_auto)

__all__ = ["STUDIES", "DEFAULT_STUDIES", "shown_in"]

#: Every study by name, in display order (the default ones first, then the opt-in ones).
STUDIES: dict[str, Study] = {m.STUDY.name: m.STUDY for m in (matmul, matmul_report, conv2d, cs6235, ece408, kmeans,
                                                              kmeans_loop, sparse, networks, overhead, sparse_density,
                                                              kmeans_map, kmeans_multi, conv_layers,
                                                              tune_conv_auto)}
#: What runs when no study is named (or "all").
DEFAULT_STUDIES: tuple[str, ...] = tuple(name for name, s in STUDIES.items() if not s.opt_in)


def shown_in(op: str, variant: str) -> tuple[str, ...]:
    """The figures and tables (file names in the results folder, e.g. ``"cs6235_fig3.png"``,
    ``"matmul_ladder.md"``) that show ``variant`` of ``op``, in display order.

    Answered from the studies' declarations (:attr:`Study.outputs`): per figure where a study
    declares it (the CS6235 figures, the ECE408 figures), else every variant the study
    compares (the matmul and conv2d studies discover theirs in the registry). Runs nothing
    and needs no GPU. An unknown op or variant gives ``()``.
    """
    return tuple(dict.fromkeys(o.file for s in STUDIES.values() for o in s.outputs
                               if (s.op == op and variant in s.shows(o))
                               or any(op == other and variant in names for other, names in o.ops)))
