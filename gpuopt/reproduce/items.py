"""The items of the reproduction report: every figure and table of the five reports (and gpuopt's own studies),
each with what its report printed, what the results here measured, the ratio and a computed verdict.

An item names the study that regenerates it and the files it shows; its ``finding(meta, rows)`` reads that study's
results rows (the committed H200 run, or this machine's) and returns a :class:`Finding`. The findings, the report's
claims (quoted with their seed lines) and the verdict logic live in one module per report: :mod:`.ece408_fashion`,
:mod:`.cs6235`, :mod:`.ece408_mnist`, :mod:`.cmu18645`, :mod:`.nctu`, and :mod:`.beyond` for gpuopt's own items
(:mod:`.claims`: how a verdict is computed). Report numbers are the studies' own (``report_ms`` in the rows, the
report tables in the study modules), never copied here twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from . import beyond, cmu18645, cs6235, ece408_fashion, ece408_mnist, nctu
from .finding import Finding

__all__ = ["Item", "Finding", "ITEMS", "CLAIMS", "REPORT_TITLES"]

Rows = Sequence[Mapping[str, Any]]

#: The five reports, in the order the reproduction report shows them (keys of gpuopt.registry.REPORTS).
REPORT_TITLES = {
    "ece408-fashion": "ECE408 Spring 2018: Fashion-MNIST convolution (its GPU unnamed: P100-class)",
    "cs6235": "CS6235: a CNN layer on the GPU (eight figures, K80-class card)",
    "ece408-mnist": "ECE408 Fall 2016: the MNIST CNN end to end (Tesla K80)",
    "cmu18645": "CMU 18-645: k-means and matrix multiply (GeForce GTX 480)",
    "nctu": "NCTU 2016: sparse COO / FAST convolution lab",
    "gpuopt": "Beyond the reports: gpuopt against the libraries and PyTorch",
}


@dataclass(frozen=True)
class Item:
    """One figure or table of a report."""

    report: str                       # REPORT_TITLES key
    title: str                        # e.g. "Tables 1-3: computation time of the four versions"
    study: str | None                 # the gpuopt.bench study that regenerates it (None: not built yet)
    files: tuple[str, ...]            # its figures and tables among the study's outputs
    finding: Callable[[Mapping[str, Any], Rows], Finding]
    claims: tuple[Any, ...] = ()      # what its finding judges (gpuopt.reproduce.claims.Claim), for the tests


ITEMS: tuple[Item, ...] = (
    Item("ece408-fashion", "Op Time table: every optimisation at 10 / 100 / 10,000 images", "ece408",
         ("ece408_op_time.png", "ece408_op_time.md"), ece408_fashion.op_time, ece408_fashion.OP_TIME_CLAIMS),
    Item("ece408-fashion", "TILE_WIDTH sweep", "ece408", ("ece408_tile_width.png",), ece408_fashion.tile_width,
         ece408_fashion.TILE_WIDTH_CLAIMS),
    Item("ece408-fashion", "The network forward (seeded weights: the course's are not public)", "networks",
         ("networks.png", "networks.md"), ece408_fashion.network, ece408_fashion.NETWORK_CLAIMS),
    *(Item("cs6235", f"Figure {n}", "cs6235", (f"cs6235_fig{n}.png", "cs6235.md"), cs6235.figure_finding(n),
           cs6235.CLAIMS[n]) for n in range(1, 9)),
    Item("ece408-mnist", "Tables 2-5: per-layer time of every stage", "networks", ("networks.md",),
         ece408_mnist.tables, ece408_mnist.TABLE_CLAIMS),
    Item("ece408-mnist", "The whole network: time and accuracy (10,000 test images)", "networks",
         ("networks.png", "networks.md"), ece408_mnist.network, ece408_mnist.NETWORK_CLAIMS),
    Item("cmu18645", "k-means Tables 1-3: computation time of the four versions", "kmeans",
         ("kmeans_report.md", "kmeans.png"), cmu18645.kmeans_tables, cmu18645.KMEANS_CLAIMS),
    Item("cmu18645", "matmul Table 4 (shared memory, scheduling, TILE_SZ)", "matmul_report",
         ("matmul_report.png", "matmul_report.md"), cmu18645.matmul_table4, cmu18645.MATMUL_CLAIMS),
    Item("nctu", "COO / FAST / dense / CPU table", "sparse", ("sparse_report.md", "sparse.png"), nctu.table,
         nctu.TABLE_CLAIMS),
    Item("nctu", "Density map (time against filter and input density)", "sparse_density", ("sparse_density.png",),
         nctu.density, nctu.DENSITY_CLAIMS),
    Item("gpuopt", "The matmul ladder against cuBLAS", "matmul", ("matmul.png", "matmul_ladder.md"),
         beyond.matmul_ladder, beyond.MATMUL_CLAIMS),
    Item("gpuopt", "conv2d auto against cuDNN's precise algorithms", "conv2d", ("conv2d.png",), beyond.conv_auto,
         beyond.CONV_CLAIMS),
    Item("gpuopt", "The cost of one call", "overhead", ("overhead.png",), beyond.overhead, beyond.OVERHEAD_CLAIMS),
    Item("gpuopt", "k-means: the loop per iteration against PyTorch", "kmeans_loop", ("kmeans_loop.png",),
         beyond.kmeans_loop, beyond.KMEANS_CLAIMS),
    Item("gpuopt", "conv2d auto on the layers users bring (ResNet-50, VGG-16, MobileNetV2)", "conv_layers",
         ("conv_layers.png",), beyond.conv_layers, beyond.LAYERS_CLAIMS),
    Item("gpuopt", "k-means over the k x D map against PyTorch", "kmeans_map",
         ("kmeans_map_torch.png", "kmeans_map.png"), beyond.kmeans_map, beyond.MAP_CLAIMS),
)

#: Every item's claims, for the tests: (report and item title, the study whose rows they are checked on, claims).
CLAIMS: tuple[tuple[str, str | None, tuple[Any, ...]], ...] = tuple(
    (f"{i.report} {i.title}", i.study, i.claims) for i in ITEMS)
