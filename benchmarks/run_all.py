#!/usr/bin/env python3
"""Run gpuopt's benchmark studies, or the ones named: CSV + JSON + figures + tables each.

    python benchmarks/run_all.py [names...] [--quick] [--out DIR] [--plot-only] [--quiet] [--list] [--seed N]

The same as `python -m gpuopt.bench`, with results in benchmarks/results/ (beside this
script) by default, wherever it is started from. Started as a script, Python puts this
folder, not the repository root, first on sys.path, so the installed gpuopt is imported
(this folder holds no other module that could shadow one). See benchmarks/README.md.
"""

import sys
from pathlib import Path

from gpuopt.bench.__main__ import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], default_out=Path(__file__).resolve().parent / "results"))
