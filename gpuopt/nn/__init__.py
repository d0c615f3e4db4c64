"""Building blocks of the reports' networks: activations, pooling, fully connected, argmax, and a whole
convolutional layer in one op (``conv2d_pool``).

Each is an op with variants (``gpuopt.variants("max_pool2d")``), like conv2d.

* :mod:`.api`        the public ops
* :mod:`.reference`  their CPU references; mirrors csrc/nn/.
* :mod:`.conv_pool`  conv2d_pool: convolution + bias + activation + pooling (``fused``: one kernel)
"""

from __future__ import annotations

from .api import argmax, avg_pool2d, fully_connected, max_pool2d, relu, tanh
from . import reference  # noqa: F401  (registers the variants)
from .conv_pool import conv2d_pool, conv2d_pool_plan

__all__ = ["relu", "tanh", "max_pool2d", "avg_pool2d", "fully_connected", "argmax", "conv2d_pool", "conv2d_pool_plan"]
