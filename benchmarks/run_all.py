#!/usr/bin/env python3
"""Every sweep (matmul, matmul_report, conv2d, cs6235, ece408, kmeans, sparse), or the ones named: CSV + JSON + PNG each.

    python benchmarks/run_all.py [names...] [--quick] [--out DIR] [--plot-only] [--quiet]

The same as `python -m gpuopt.bench`, with results in benchmarks/results/ by default
wherever it is started from. See benchmarks/README.md.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This folder's scripts (matmul.py, sparse.py, ...) must not shadow modules of the same name.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

from gpuopt.bench.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], default_out=HERE / "results"))
