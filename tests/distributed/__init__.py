"""Tests of gpuopt.distributed (a package, so that test file names may repeat across the folders of tests/)."""
