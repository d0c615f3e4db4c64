#!/usr/bin/env python3
"""The ECE408 reports on the H200: the Fashion-MNIST report's "Op Time" of every optimisation on
its two layers at 10, 100 and 10,000 images next to the numbers it printed, its TILE_WIDTH
sweep 4..32, and the MNIST report's two layers at 10,000 images (kernel ms, GFLOP/s)
-> ece408.csv/.json, ece408_op_time.md/.png, ece408_tile_width.png.

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
    sys.exit(main(["ece408", *sys.argv[1:]], default_out=HERE / "results"))
