"""Readers, writers and generators for the data of gpuopt's source reports.

The five GPU-optimisation course reports gpuopt reproduces worked on real
data in specific file formats.  This package reads and writes those formats
exactly, and makes seeded synthetic data of the same shapes where the real
data is not public.

Data location
    :func:`data_dir`, :func:`data_path` -- the reference data is *not* in the
    repository; it is found through ``$GPUOPT_DATA_DIR`` or a ``shared/data``
    folder beside the checkout.  Nothing is ever downloaded.
MNIST / IDX (:mod:`~gpuopt.datasets.mnist`)
    :func:`read_idx`, :func:`write_idx`, :func:`load_mnist`.
ECE408 Fall 2016 CNN, HDF5 (:mod:`~gpuopt.datasets.ece408`; needs h5py)
    :func:`load_ece408_model`, :func:`save_ece408_model`,
    :func:`load_ece408_test`, :func:`save_ece408_test`.
Liao's k-means package (:mod:`~gpuopt.datasets.liao`)
    :func:`read_liao`, :func:`read_liao_binary_rows` (a shard), :func:`write_liao`, :func:`write_liao_output`,
    :func:`read_liao_centres`, :func:`read_liao_membership`.
NCTU sparse-convolution lab (:mod:`~gpuopt.datasets.nctu`)
    :func:`read_nctu_neurons_txt`, :func:`write_nctu_neurons_txt`,
    :func:`read_nctu_neurons_coo`, :func:`write_nctu_neurons_coo`,
    :func:`read_nctu_filters_txt`, :func:`write_nctu_filters_txt`,
    :func:`read_nctu_filters_coo`, :func:`write_nctu_filters_coo`.
Synthetic data (:mod:`~gpuopt.datasets.synthetic`)
    :data:`KMEANS_SHAPES`, :func:`make_kmeans_blobs`,
    :func:`make_nctu_filters`, :func:`make_nctu_neurons`.

Conventions: readers return new, writable, C-contiguous arrays in native byte
order; writers return the path written.  Bad input raises ``TypeError``
(wrong dtype or argument type), ``ValueError`` (wrong shape, out-of-range
values, malformed file; the message names the argument or the file and line)
or ``FileNotFoundError`` (missing file).  Runtime dependency: NumPy only;
h5py is imported lazily by the ECE408 functions.

Examples
--------
>>> from gpuopt import datasets
>>> images, labels = datasets.load_mnist("t10k")  # doctest: +SKIP
>>> images.shape, images.dtype  # doctest: +SKIP
((10000, 28, 28), dtype('uint8'))
>>> w = datasets.make_nctu_filters(4, 8, seed=1)
>>> w.shape, w.dtype.name, int((w != 0).sum())
((4, 8, 3, 3), 'int16', 32)
"""

from __future__ import annotations

from ._paths import DATA_DIR_ENV, data_dir, data_path
from .ece408 import load_ece408_model, load_ece408_test, save_ece408_model, save_ece408_test
from .liao import (
    read_liao,
    read_liao_binary_rows,
    read_liao_centres,
    read_liao_membership,
    write_liao,
    write_liao_output,
)
from .mnist import load_mnist, read_idx, write_idx
from .nctu import (
    read_nctu_filters_coo,
    read_nctu_filters_txt,
    read_nctu_neurons_coo,
    read_nctu_neurons_txt,
    write_nctu_filters_coo,
    write_nctu_filters_txt,
    write_nctu_neurons_coo,
    write_nctu_neurons_txt,
)
from .synthetic import KMEANS_SHAPES, make_kmeans_blobs, make_nctu_filters, make_nctu_neurons

__all__ = [
    "DATA_DIR_ENV",
    "KMEANS_SHAPES",
    "data_dir",
    "data_path",
    "load_ece408_model",
    "load_ece408_test",
    "load_mnist",
    "make_kmeans_blobs",
    "make_nctu_filters",
    "make_nctu_neurons",
    "read_idx",
    "read_liao",
    "read_liao_binary_rows",
    "read_liao_centres",
    "read_liao_membership",
    "read_nctu_filters_coo",
    "read_nctu_filters_txt",
    "read_nctu_neurons_coo",
    "read_nctu_neurons_txt",
    "save_ece408_model",
    "save_ece408_test",
    "write_idx",
    "write_liao",
    "write_liao_output",
    "write_nctu_filters_coo",
    "write_nctu_filters_txt",
    "write_nctu_neurons_coo",
    "write_nctu_neurons_txt",
]
