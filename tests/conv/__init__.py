"""Tests of gpuopt.conv (a package, so that test file names may repeat across the folders of tests/)."""
