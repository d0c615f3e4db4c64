"""2-D convolution (``gpuopt.conv2d``) and its variants, one module per family.

* :mod:`.problem`  the validated call (:class:`Conv2dProblem`) and the shape rules
* :mod:`.api`      the public :func:`conv2d`
* :mod:`.launch`   how a GPU variant runs (its launcher and host-side checks, by the binding rule)
* :mod:`.baseline` ``cpu`` (the reference), ``basic`` (both reports' first kernel), ``cudnn``
* :mod:`.unroll_jam`, :mod:`.constmem`, :mod:`.tiled`, :mod:`.gemm`, :mod:`.direct`, :mod:`.winograd`,
  :mod:`.auto`: the families, one module per technique, registered in this order (simplest to fastest), mirroring
  csrc/conv/; the report a variant reproduces is its ``report`` (``gpuopt.variants("conv2d")[name].report``).
  :mod:`.winograd` holds the fast-algorithm ``winograd`` variant, which only ``auto(algorithms="fast")`` picks.
* :mod:`.winograd_math` F(m x m, r x r): exact transforms and a NumPy reference of the algorithm (its float32
  error per tile size is in notes/winograd.md), which the ``winograd`` kernel's transforms come from.
* :mod:`.cs6235`, :mod:`.ece408`, :mod:`.fast`: the old module names, kept as re-exports (they register nothing).

Importing this package registers every variant; the family modules import only the modules
above them in this list, never this package.
"""

from __future__ import annotations

from .api import conv2d
from .problem import Conv2dProblem, conv2d_output_shape
from .baseline import cudnn_algorithm
from . import unroll_jam, constmem, tiled, gemm, direct, depthwise, winograd  # noqa: F401  (register, in display order)
from .auto import auto_choice, autotune_cache, clear_autotune_cache
from .unroll_jam import cs6235_plan

__all__ = ["conv2d", "conv2d_output_shape", "Conv2dProblem", "cudnn_algorithm", "cs6235_plan", "auto_choice",
           "autotune_cache", "clear_autotune_cache"]
