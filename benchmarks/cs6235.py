#!/usr/bin/env python3
"""The CS6235 report's eight figures on the H200: the general kernel (and auto) vs cuDNN, block
size 32..1024, k and c unroll factors, crs vs rsc, thread mapping, shared memory, n,k
unroll-and-jam, on conf1-conf4 (kernel ms) -> cs6235.csv/.json, cs6235_fig1..8.png, cs6235.md.

Same options as `python -m gpuopt.bench` (--quick, --out DIR, --plot-only, --quiet);
results go to benchmarks/results/ by default. See benchmarks/README.md.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This folder's scripts (matmul.py, sparse.py, ...) must not shadow modules of the same name.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

from gpuopt.bench.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["cs6235", *sys.argv[1:]], default_out=HERE / "results"))
