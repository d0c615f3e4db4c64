"""k-means clustering (``gpuopt.kmeans``), compatible with Wei-keng Liao's parallel k-means.

* :mod:`.api`   the public :func:`kmeans` and :class:`KMeansResult`
* the variants, one module per technique, registered in this order; mirrors csrc/kmeans/ (the report a variant
  reproduces is its ``report``):
  :mod:`.host_loop` the loop driven from the host: ``cpu`` (Liao's seq_kmeans), ``liao`` (his CUDA port) and the
  CMU 18-645 report's steps over it; :mod:`.device` the whole loop on the device; :mod:`.persistent` the run in
  one cooperative launch; :mod:`.gemm` the assignment by the dot form; :mod:`.stream` points streamed from host
  memory. :mod:`.liao` is their old module name, kept as a re-export (it registers nothing).
* :mod:`.auto`  ``auto``, what ``variant=None`` runs on a GPU: the fastest variant for the shape
* :mod:`.init`  initial centres: ``first`` (Liao's), ``random``, ``kmeans++``, seeded
* :mod:`.predict` :func:`kmeans_predict`, the nearest centre of new points
* ``python -m gpuopt.kmeans``: Liao's command line (:mod:`.__main__`)
"""

from __future__ import annotations

from .api import KMeansResult, kmeans
from .predict import kmeans_predict
from . import host_loop, device, persistent, gemm, stream  # noqa: F401  (register, in display order)
from . import auto  # noqa: F401  (variant=None on a GPU; after the variants it picks among)

__all__ = ["kmeans", "KMeansResult", "kmeans_predict"]
