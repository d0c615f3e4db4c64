"""gpuopt: hand-written GPU kernels, their CPU references, and the reports they come from.

NumPy in, NumPy out. Every op takes ``variant=`` (see :func:`variants`); ``"cpu"`` is
the C++ reference every GPU variant is tested against and works without a GPU.

>>> import numpy as np, gpuopt
>>> x = np.random.rand(1, 3, 32, 32).astype(np.float32)
>>> w = np.random.rand(8, 3, 3, 3).astype(np.float32)
>>> gpuopt.conv2d(x, w, padding=1, variant="cpu").shape
(1, 8, 32, 32)
"""

from __future__ import annotations

from pathlib import Path as _Path

from ._compiled import compiled_files as _compiled_files, use_installed as _use_installed

if "_core" not in _compiled_files(_Path(__file__).parent):  # a source checkout: the installed build's modules
    _use_installed(_Path(__file__).parent)
from . import _core  # noqa: E402

from ._ext import build_info, cuda_available, cuda_unavailable_reason, device_info
from .registry import ops, variants
from .conv import conv2d, conv2d_output_shape
from .matmul import matmul, matmul_kernel_info
from .kmeans import KMeansResult, kmeans, kmeans_predict
from .sparse import sparse_conv2d
from ._exec import Timing
from .cuda import DeviceArray, from_dlpack, synchronize, to_device
from . import cuda, datasets, distributed, nn, sparse
from . import models

__version__: str = _core.build_info()["version"]

__all__ = [
    "conv2d",
    "conv2d_output_shape",
    "matmul",
    "matmul_kernel_info",
    "kmeans",
    "KMeansResult",
    "kmeans_predict",
    "sparse_conv2d",
    "to_device",
    "DeviceArray",
    "synchronize",
    "from_dlpack",
    "Timing",
    "cuda",
    "nn",
    "models",
    "sparse",
    "datasets",
    "distributed",
    "variants",
    "ops",
    "cuda_available",
    "cuda_unavailable_reason",
    "build_info",
    "device_info",
    "__version__",
]
