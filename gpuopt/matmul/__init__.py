"""Matrix multiply (``gpuopt.matmul``) and its variants.

* :mod:`.api`      the public :func:`matmul`
* :mod:`.kernels`  the variants, registered simple to fast (the ladder's order), :func:`ladder`,
  :func:`ladder_step` and :func:`matmul_kernel_info`; mirrors csrc/matmul/.
"""

from __future__ import annotations

from .api import default_for, matmul
from .kernels import ladder, ladder_step, matmul_kernel_info

__all__ = ["matmul", "matmul_kernel_info", "ladder", "ladder_step", "default_for"]
