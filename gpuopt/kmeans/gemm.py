"""k-means by the dot form (gpuopt's): the nearest centre from ||c||^2 - 2 x.c, a matrix product, with Liao's
distance recomputed where the form's rounding cannot separate the two nearest: ``device_gemm`` and its
register-tiled rebuild ``device_tiled``; the rest of the loop is :mod:`.device`'s."""

from __future__ import annotations

from ..registry import Param, register
from .device import DEVICE, blocks, kmeans_device, loops_per_sync

__all__: list[str] = []

register("kmeans", "device_gemm", description="device for k*D <= 4096: the nearest centre by the dot form "
         "||c||^2 - 2 x.c (one FMA a centre coordinate), Liao's distances recomputed where the form's rounding bound "
         "cannot separate the two nearest: Liao's memberships; sums and finish as device; the same bits as device and "
         "cpu(summation='chunked')",
         params=(loops_per_sync("device_gemm"), blocks("device_gemm")),
         **DEVICE)(kmeans_device)

register("kmeans", "device_tiled", description="device_gemm with its two halves rebuilt: the dot form as a "
         "register-tiled SGEMM (256 points x all k centres a block, a 4 x 8 points x centres tile a thread, float4 "
         "shared-memory loads) with a row-argmin epilogue (Liao's distance for the candidates where the form's "
         "rounding bound cannot separate the two nearest, such points queued and run a tile's worth at once: Liao's "
         "memberships), then the chunk sums from a stable sort of each chunk's memberships (work by members, not "
         "k*D per leaf); finish as device; any k*D (past 4096 centre coordinates the centres are streamed through "
         "shared memory in blocks; past D = 64, and past 32 with tf32x3 products, a tiled SGEMM on points and "
         "centres shifted by the centres' mean whose K loop runs over D, 128 points x 128 centres a block (256 x 64 "
         "for k <= 64), its near ties resolved by the same tiles over the queued points), k <= 8192; the screen's "
         "products in FP32 FMAs or on "
         "the tensor cores in 3xTF32 (m16n8k8 mma.sync, with its own rounding bound for the near-tie test; by "
         "default for 5 <= D <= 16, and past D = 32 with more than 64 centres); the same bits as device_gemm and "
         "cpu(summation='chunked')",
         params=(loops_per_sync("device_tiled"), blocks("device_tiled"),
                 Param.from_kernels("kmeans/device_tiled/products",
                       "the screen's dot products: 'tf32x3' on the tensor cores (split operands, three mma products), "
                       "'ffma' FP32 FMAs, 'auto' by shape (kmeans_tiled.cu's resolve); memberships Liao's either way")),
         **dict(DEVICE, kernel="csrc/kmeans/kmeans_tiled.cu"))(kmeans_device)
