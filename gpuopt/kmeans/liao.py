"""Old name of the k-means variant modules :mod:`.host_loop`, :mod:`.device`, :mod:`.persistent`, :mod:`.gemm`
and :mod:`.stream` (modules are named by technique; the report is each variant's ``report``)."""

from .stream import STREAM_CHUNKS  # noqa: F401  (re-export only: registers nothing new)
