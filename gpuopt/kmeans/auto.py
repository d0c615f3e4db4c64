"""kmeans ``auto`` (what ``variant=None`` runs on a GPU): the variant predicted fastest for the shape.

The loop-on-the-GPU variants sum the centres as ``cpu(summation="chunked")`` (float64 over a fixed tree), not
in Liao's float32 object order: their centres differ from Liao's in rounding only (notes/kmeans.md). The rules
were read off the H200's kmeans_loop study (6f14c66, µs per loop):

1. The chunk sums the loop's finish reads, k*D x ceil(N / 1024), at most 65,536 (kmeans04: 11,472) and
   k*D <= 1024: ``device_persistent``, the whole run in one cooperative launch (every block closes each loop
   itself, so its finish reads grow with the grid: only small finishes). Round 6 (H200, marginal µs a loop at
   kmeans04, two runs): 14.4-15.7 against device_fused 17.1-17.4 and device 17.3-17.5 (10-loop call / 10: 18.7
   against 20.3); Liao's three sets, whole call: 0.42-0.61 ms against device_fused's 0.50-0.73. At 1M x 16, k=64
   (past the limit) it lost: 265 against device_tiled's 215. Before: ``device_fused`` (kmeans04 22.6 against
   device 25.8; round 5 fused 17.9 / 17.6 against device 18.6 / 17.0).
2. k*D <= 1024 and D <= 16, or k <= 2 and D <= 256: ``device`` (1M x 16, k=64: 235 against device_gemm 264 and
   device_fused 304).
   Longer points with more centres go to device_tiled (rule 3): its register tile re-reads no centre per point,
   where device's per-point loop and its finish over k*D chunk sums grow with D (H200, 1M uniform points,
   marginal ms a loop, development probe at 6332d19: D=32, k=8: 0.37 against device's 1.23; D=32, k=32: 0.35
   against 4.65; D=64, k=8: 0.62 against 2.49; D=128, k=8: 1.91 against 4.83). At k=2 device stays ahead up to
   D = 256 (D=64: 0.62 against 0.85; D=256: 2.37 against 2.56); past it device_tiled's deep path wins since its
   queue is resolved by tiles (probe at ee4fbfd: D=512 4.17 against device's 5.33; D=1024 12.6 against
   device_gemm's 27.0, the rule before).
3. Otherwise ``device_tiled`` (any k*D, k <= 8192: past 4096 centre coordinates the centres are streamed through
   shared memory in blocks; D > 64 a tiled SGEMM with its K loop over D), the dot form register-tiled with sorted sums
   (10M x 16, k=256, marginal loop
   on the H200 in round 4: 3.89 ms against device_gemm's 7.56 in the same run; predict's Liao-form pass 4.84).
   At 1M x 16, k=64 (k*D = 1024) device stayed ahead of the FFMA tile (228.8 against 237.5 with the 4 x 4 tile);
   with the screen on the tensor cores (round 6, H200 at c2976f6, marginal µs a loop) device_tiled 211.7 against
   device 231.0: ``device_tiled`` also for k*D <= 1024 where its tensor-core screen runs, 9 <= D <= 16, k >= 64.
   Past D = 64 device_tiled runs its deep path (the K loop over D); past D = 32 with more than 64 centres the deep
   path with its products on the tensor cores in 3xTF32 (kmeans_tiled.cu's resolve: H200 at 7028975, 1M uniform
   points, marginal ms a loop: D=256, k=1000 13.9 against FFMA's 17.1; D=1024, k=512 38.3 against 44.9).
4. Past device_tiled's limits ``liao_vec`` (Liao's port, update on the host; equal to ``cpu``) where its centres
   fit, else ``cpu``.
"""

from __future__ import annotations

from typing import Any

from .._exec import ExecContext
from .._ext import host_check
from ..registry import lookup, register
from .api import KMeansProblem

#: rule 1's limit on k*D x chunks (the chunk sums a loop's finish reads; device_persistent's blocks each read their
#: group sums)
SMALL_LOOP_SUMS = 65_536


def fits(name: str, n: int, d: int, k: int) -> bool:
    """Whether k-means variant ``name`` takes N objects of D coordinates and k clusters (its host-side checks pass)."""
    v = lookup("kmeans", name)  # no resolve: the call's one resolve was of `auto`
    params = v.defaults()
    try:
        host_check(v)(n, d, k, **params)
    except ValueError:  # past this variant's limits
        return False
    return True


def auto_choice(n: int, d: int, k: int) -> str:
    """The variant ``auto`` runs for N objects of D coordinates and k clusters (see the module docstring)."""
    if k * d * -(-n // 1024) <= SMALL_LOOP_SUMS and fits("device_persistent", n, d, k):
        return "device_persistent"
    if 9 <= d <= 16 and k >= 64 and fits("device_tiled", n, d, k):  # rule 3's tensor-core screen, before rule 2
        return "device_tiled"
    if (d <= 16 or (k <= 2 and d <= 256)) and fits("device", n, d, k):  # rule 2, where x in registers beats the tile
        return "device"
    for name in ("device_tiled", "device", "liao_vec"):
        if fits(name, n, d, k):
            return name
    return "cpu"


def _run_auto(ctx: ExecContext, p: KMeansProblem) -> Any:
    n, d = p.x.shape
    v = lookup("kmeans", auto_choice(n, d, p.init.shape[0]))  # auto's GPU check covers it (or it is cpu)
    return ctx.run(v, p, **v.defaults())


register("kmeans", "auto", description="picks the variant predicted fastest for the shape: device_persistent for small "
         "loops (k*D x chunks <= 65,536), else device_tiled for 9 <= D <= 16 and k >= 64, else device (k*D <= 1024 "
         "with D <= 16, or k <= 2 with D <= 256), "
         "else device_tiled (k <= 8192), else "
         "liao_vec, else cpu, as measured on the H200 (gpuopt/kmeans/auto.py)",
         report="gpuopt", needs_cuda=True, preferred=True, kernel="gpuopt/kmeans/auto.py",
         test="tests/kmeans/test_gpu_kmeans_fused.py", launcher=False)(_run_auto)
