"""2-D convolution (``gpuopt.conv2d``) and its variants, one module per family.

* :mod:`.problem`  the validated call (:class:`Conv2dProblem`) and the shape rules
* :mod:`.api`      the public :func:`conv2d`
* :mod:`.launch`   how a GPU variant runs (its launcher and host-side checks, by the binding rule)
* :mod:`.baseline` ``cpu`` (the reference), ``basic`` (both reports' first kernel), ``cudnn``
* :mod:`.cs6235`, :mod:`.ece408`, :mod:`.gemm`, :mod:`.direct`, :mod:`.fast`, :mod:`.auto`: the families,
  registered in this order (simple to fast), mirroring csrc/conv/; :mod:`.fast` holds the fast-algorithm
  ``winograd`` variant, which only ``auto(algorithms="fast")`` picks.
* :mod:`.winograd` F(m x m, r x r): exact transforms and a NumPy reference of the algorithm (its float32
  error per tile size is in notes/winograd.md), which the ``winograd`` kernel's transforms come from.

Importing this package registers every variant; the family modules import only the modules
above them in this list, never this package.
"""

from __future__ import annotations

from .api import conv2d
from .problem import Conv2dProblem, conv2d_output_shape
from .baseline import cudnn_algorithm
from . import cs6235, ece408, gemm, direct, fast  # noqa: F401  (register, in display order)
from .auto import auto_choice, autotune_cache, clear_autotune_cache
from .cs6235 import cs6235_plan

__all__ = ["conv2d", "conv2d_output_shape", "Conv2dProblem", "cudnn_algorithm", "cs6235_plan", "auto_choice",
           "autotune_cache", "clear_autotune_cache"]
