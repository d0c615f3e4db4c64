"""Tests of gpuopt.kmeans (a package, so that test file names may repeat across the folders of tests/)."""
