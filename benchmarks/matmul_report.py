#!/usr/bin/env python3
"""The CMU 18-645 report's matmul harness, reproduced: n = 4, 5, 8, 10, 32, 33, 128, 1000, 1024,
30 runs each, GFLOP/s = (2n-1)n^2/t, error < 1e-3 against float64, printed in the report's
Table 4 layout next to the numbers it printed for its GPU (a GTX 480).

Same options as `python -m gpuopt.bench` (--quick, --out DIR, --plot-only, --quiet);
results go to benchmarks/results/ by default (matmul_report.csv/.json/.png/.md).
See benchmarks/README.md.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This folder's scripts (matmul.py, sparse.py, ...) must not shadow modules of the same name.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

from gpuopt.bench.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["matmul_report", *sys.argv[1:]], default_out=HERE / "results"))
