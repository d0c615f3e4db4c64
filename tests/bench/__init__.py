"""The benchmark layer's tests (gpuopt.bench). A package: tests/ has files of the same basenames."""
