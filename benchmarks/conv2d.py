#!/usr/bin/env python3
"""The conv2d sweep: every GPU conv2d variant against cuDNN (strict FP32) on the CS6235 configurations.

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
    sys.exit(main(["conv2d", *sys.argv[1:]], default_out=HERE / "results"))
