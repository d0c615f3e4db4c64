"""k-means clustering (``gpuopt.kmeans``), compatible with Wei-keng Liao's parallel k-means.

* :mod:`.api`   the public :func:`kmeans` and :class:`KMeansResult`
* :mod:`.liao`  the variants: ``cpu`` (his seq_kmeans) and ``liao`` (his CUDA port); mirrors csrc/kmeans/.
"""

from __future__ import annotations

from .api import KMeansResult, kmeans
from . import liao  # noqa: F401  (registers the variants)

__all__ = ["kmeans", "KMeansResult"]
