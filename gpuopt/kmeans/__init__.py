"""k-means clustering (``gpuopt.kmeans``), compatible with Wei-keng Liao's parallel k-means.

* :mod:`.api`   the public :func:`kmeans` and :class:`KMeansResult`
* :mod:`.liao`  the variants: ``cpu`` (his seq_kmeans) and ``liao`` (his CUDA port); mirrors csrc/kmeans/.
* :mod:`.auto`  ``auto``, what ``variant=None`` runs on a GPU: the fastest variant for the shape
* :mod:`.init`  initial centres: ``first`` (Liao's), ``random``, ``kmeans++``, seeded
* :mod:`.predict` :func:`kmeans_predict`, the nearest centre of new points
* ``python -m gpuopt.kmeans``: Liao's command line (:mod:`.__main__`)
"""

from __future__ import annotations

from .api import KMeansResult, kmeans
from .predict import kmeans_predict
from . import liao  # noqa: F401  (registers the variants)
from . import auto  # noqa: F401  (variant=None on a GPU; after the variants it picks among)

__all__ = ["kmeans", "KMeansResult", "kmeans_predict"]
