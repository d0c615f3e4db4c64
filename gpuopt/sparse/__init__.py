"""Sparse filters (COO and FAST) and the NCTU lab's sparse convolution layer.

* :mod:`.formats`  :class:`COOFilters`, :class:`FASTFilters` and the conversions
* :mod:`.neurons`  :class:`SparseNeurons`: input maps with their non-zeros listed (fast_sparse_input's lists)
* :mod:`.api`      the public :func:`sparse_conv2d`
* :mod:`.nctu`     the variants: ``cpu`` and the lab's ``dense``, ``coo``, ``fast``; mirrors csrc/sparse/.
* :mod:`.auto`     ``auto`` (the default on a GPU): the one-pass variant for the shape.
"""

from __future__ import annotations

from .formats import COOFilters, FASTFilters, to_coo, to_dense, to_fast
from .neurons import SparseNeurons
from .api import sparse_conv2d
from . import nctu  # noqa: F401  (registers the variants)
from . import auto  # noqa: F401  (registers auto, the default)

__all__ = ["COOFilters", "FASTFilters", "SparseNeurons", "sparse_conv2d", "to_coo", "to_fast", "to_dense"]
