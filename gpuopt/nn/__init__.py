"""Building blocks of the reports' networks: activations, pooling, fully connected, argmax, softmax, and a
whole convolutional layer in one op (``conv2d_pool``).

Each is an op with variants (``gpuopt.variants("max_pool2d")``), like conv2d.

* :mod:`.api`        the public ops
* :mod:`.reference`  their CPU references
* :mod:`.gpu`        their GPU variants (the ECE408 MNIST report's kernels, then gpuopt's); mirrors csrc/nn/.
* :mod:`.conv_pool`  conv2d_pool: convolution + bias + activation + pooling (``fused``: one kernel)
"""

from __future__ import annotations

from .api import argmax, avg_pool2d, fully_connected, max_pool2d, relu, softmax, tanh
from . import reference  # noqa: F401  (registers the variants: the CPU references first)
from . import gpu  # noqa: F401
from .conv_pool import conv2d_pool, conv2d_pool_plan, conv2d_pool_smallc_plan

__all__ = ["relu", "tanh", "max_pool2d", "avg_pool2d", "fully_connected", "argmax", "softmax", "conv2d_pool",
           "conv2d_pool_plan", "conv2d_pool_smallc_plan"]
