#!/usr/bin/env python3
"""cuBLAS vs gpuopt's async matmul at 1000^3 and 1024^3, for ncu (notes/matmul.md, "the L2 decides"):

    ncu --clock-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,\\
        launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,\\
        smsp__issue_active.avg.pct_of_peak_sustained_active --csv python3 scripts/profile_matmul_1000.py
"""
import numpy as np, gpuopt
rng = np.random.default_rng(0)
for n in (1000, 1024):
    a = gpuopt.to_device(rng.uniform(0, 1, (n, n)).astype(np.float32))
    b = gpuopt.to_device(rng.uniform(0, 1, (n, n)).astype(np.float32))
    for v in ("cublas", "async"):
        for _ in range(3):
            gpuopt.matmul(a, b, variant=v)
        gpuopt.synchronize()
print(gpuopt.matmul_kernel_info("async", shape=(1000, 1000, 1000)))
