"""python -m gpuopt.kmeans: Liao's switches, his output files and his timing block; bad input is a usage error."""

import subprocess
import sys

import numpy as np
import pytest

import gpuopt
from gpuopt import datasets
from gpuopt.kmeans.__main__ import main


@pytest.fixture
def blobs(tmp_path):
    x = datasets.make_kmeans_blobs(500, 6, k=4, seed=3)[0]
    return x, datasets.write_liao(tmp_path / "blobs.txt", x, binary=False), \
        datasets.write_liao(tmp_path / "blobs.bin", x, binary=True)


def _expected(x, k, threshold=0.001, variant="cpu"):
    return gpuopt.kmeans(x, k, threshold=threshold, variant=variant)


@pytest.mark.parametrize("binary", [False, True])
def test_files_and_timing_block_as_liao(blobs, capsys, binary):
    x, txt, binf = blobs
    path = binf if binary else txt
    x = datasets.read_liao(path, binary=binary)  # what the program clusters (ASCII is re-read as float32)
    assert main(["-i", str(path), "-n", "4", "-o", *(["-b"] if binary else [])]) == 0
    ref = _expected(x, 4)
    centres = datasets.read_liao_centres(f"{path}.cluster_centres")
    np.testing.assert_allclose(centres, ref.centroids, rtol=0, atol=1e-6)  # written with %f: 6 decimals
    np.testing.assert_array_equal(datasets.read_liao_membership(f"{path}.membership"), ref.membership)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "Performing **** Regular Kmeans (sequential version) ****"
    assert lines[2:8] == [f"Input file:     {path}", "numObjs       = 500", "numCoords     = 6", "numClusters   = 4",
                          "threshold     = 0.0010", f"Loop iterations    = {ref.iterations}"]
    assert lines[8].startswith("I/O time           = ") and lines[8].endswith(" sec")
    assert lines[9].startswith("Computation timing = ") and float(lines[9].split()[3]) > 0
    assert lines[10].startswith("(gpuopt kmeans/cpu; gpuopt ")


def test_quiet_without_o_and_debug_deltas(blobs, capsys):
    x, txt, _ = blobs
    assert main(["-i", str(txt), "-n", "3", "-t", "0.05"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["-i", str(txt), "-n", "3", "-t", "0.05", "-d"]) == 0
    ref = _expected(datasets.read_liao(txt), 3, 0.05)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == ref.iterations and out[0] == "loop 0: delta = 1.000000"


@pytest.mark.parametrize("argv,message", [
    (["-n", "3"], "the following arguments are required: -i"),
    (["-i", "{txt}"], "the following arguments are required: -n"),
    (["-i", "{txt}", "-n", "1"], "number of clusters must be > 1"),
    (["-i", "{txt}", "-n", "x"], "invalid int value"),
    (["-i", "{txt}", "-n", "501"], "501 clusters for 500 objects"),
    (["-i", "{txt}", "-n", "3", "-t", "-1"], "threshold must be finite and >= 0"),
    (["-i", "{txt}", "-n", "3", "-t", "nan"], "threshold must be finite and >= 0"),
    (["-i", "{txt}", "-n", "3", "--max-iter", "0"], "--max-iter must be >= 1"),
    (["-i", "{missing}", "-n", "3"], "no such file"),
    (["-i", "{bin}", "-n", "3"], "a binary file needs -b"),
    (["-i", "{txt}", "-n", "3", "-b"], "-i "),
    (["-i", "{txt}", "-n", "3", "--variant", "nope"], "invalid choice"),
    (["-i", "{txt}", "-n", "3", "--init", "nope"], "invalid choice"),
    (["-i", "{txt}", "-n", "3", "--init", "random", "--seed", "-2"], "--seed must be >= 0"),
])
def test_bad_arguments_are_usage_errors(blobs, tmp_path, capsys, argv, message):
    _, txt, binf = blobs
    argv = [a.format(txt=txt, bin=binf, missing=tmp_path / "missing.txt") for a in argv]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_gpu_variant_without_gpu_is_an_error_not_a_traceback(blobs, capsys):
    if gpuopt.cuda_available():
        pytest.skip("a GPU is present")
    _, txt, _ = blobs
    assert main(["-i", str(txt), "-n", "3", "--variant", "liao"]) == 1
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_init_and_seed(blobs):
    x, txt, _ = blobs
    x = datasets.read_liao(txt)
    assert main(["-i", str(txt), "-n", "5", "--init", "kmeans++", "--seed", "4"]) == 0
    ref = gpuopt.kmeans(x, 5, init="kmeans++", seed=4, variant="cpu")
    np.testing.assert_array_equal(datasets.read_liao_membership(f"{txt}.membership"), ref.membership)


def test_runs_as_a_module(blobs, tmp_path):
    _, txt, _ = blobs
    # (cwd: not the checkout, whose gpuopt/ folder has no compiled modules and would shadow the installed package)
    run = subprocess.run([sys.executable, "-m", "gpuopt.kmeans", "-i", str(txt), "-n", "2", "-o"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Performing **** Regular Kmeans" in run.stdout


@pytest.mark.gpu
def test_liao_variant_writes_what_seq_main_writes(blobs, tmp_path, capsys):
    """Liao's CUDA port (his cuda_main) and seq_main give the same files, bit for bit."""
    _, txt, _ = blobs
    assert main(["-i", str(txt), "-n", "4", "--variant", "cpu"]) == 0
    seq = (open(f"{txt}.cluster_centres").read(), open(f"{txt}.membership").read())
    assert main(["-i", str(txt), "-n", "4", "--variant", "liao", "-o"]) == 0
    assert (open(f"{txt}.cluster_centres").read(), open(f"{txt}.membership").read()) == seq
    assert "Regular Kmeans (CUDA version)" in capsys.readouterr().out
