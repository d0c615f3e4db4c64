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


def _expected(x, k, threshold=0.001, variant="cpu", max_iter=501):
    return gpuopt.kmeans(x, k, threshold=threshold, variant=variant, max_iter=max_iter)


def _one_switch_per_loop(m):
    """1-D objects on which Liao's k-means with k = 2 and threshold 0 runs m + 2 loops: the first assigns every
    object, each of the next m moves exactly one object of a chain to cluster 0, the last changes nothing.

    Objects 0 and 1 (the initial centres) are 0 and the chain's first point p_1, then 1 and p_2 .. p_m. With
    p_1 .. p_j in cluster 0, the boundary is b_j = (mean{0, p_1..p_j} + mean{1, p_(j+1)..p_m}) / 2, rising with j;
    each p_i (i >= 2) sits midway between b_(i-2) and b_(i-1) (so the loop after state i-2 takes it, not before),
    and p_1 below b_0: a fixed point of that rule, found by iterating it. Returns float32, shape (m + 2, 1)."""
    p = np.linspace(0.2, 0.4, m)
    for _ in range(5000):
        s = np.concatenate(([0.0], np.cumsum(p)))  # the chain's sum in cluster 0, states j = 0..m
        j = np.arange(m + 1)
        b = (s / (1 + j) + (1.0 + s[-1] - s) / (1 + m - j)) / 2
        new = np.concatenate(([0.75 * b[0]], (b[:-2] + b[1:-1]) / 2))
        if np.abs(new - p).max() < 1e-12:
            break
        p = new
    return np.concatenate(([0.0, p[0], 1.0], p[1:])).astype(np.float32)[:, None]


@pytest.fixture
def chain(tmp_path):
    """(x, path of its binary file) for _one_switch_per_loop(m), m given by the test."""
    def make(m):
        x = _one_switch_per_loop(m)
        ref = gpuopt.kmeans(x, 2, threshold=0.0, max_iter=10 * m, variant="cpu")
        assert ref.iterations == m + 2 and (ref.delta[1:-1] * len(x) == 1).all()  # the construction held
        return x, datasets.write_liao(tmp_path / f"chain{m}.bin", x, binary=True)
    return make


def _loop_count(out):
    return int(next(line for line in out.splitlines() if line.startswith("Loop iterations")).split("=")[1])


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


# ----------------------------------------------------------------------------- his loop cap and loop count


@pytest.mark.parametrize("m,printed", [(600, 502), (500, 502), (499, 501), (20, 22)])
def test_loop_cap_and_count_as_liao(chain, tmp_path, capsys, m, printed):
    """His do-while "loop++ < 500" runs at most 501 loops and prints loop + 1: 502 when the cap stops the run (m >=
    500 here: loop 501 still moves an object), the stopping loop otherwise (m = 499 stops at loop 501 exactly)."""
    x, path = chain(m)
    assert main(["-i", str(path), "-b", "-n", "2", "-t", "0", "-o"]) == 0
    assert _loop_count(capsys.readouterr().out) == printed
    ref = gpuopt.kmeans(x, 2, threshold=0.0, max_iter=501, variant="cpu")
    assert ref.iterations == min(m + 2, 501)
    expected = datasets.write_liao_output(tmp_path / "expected", ref.centroids, ref.membership)
    assert open(f"{path}.cluster_centres").read() == expected[0].read_text()
    assert open(f"{path}.membership").read() == expected[1].read_text()
    if m >= 500:  # the 501st loop moved an object: 500 loops would have written other memberships
        short = gpuopt.kmeans(x, 2, threshold=0.0, max_iter=500, variant="cpu")
        assert (short.membership != ref.membership).sum() == 1


def test_max_iter_prints_the_loops_run(chain, capsys):
    x, path = chain(40)
    assert main(["-i", str(path), "-b", "-n", "2", "-t", "0", "-o", "--max-iter", "10"]) == 0
    assert _loop_count(capsys.readouterr().out) == 10
    ref = gpuopt.kmeans(x, 2, threshold=0.0, max_iter=10, variant="cpu")
    np.testing.assert_array_equal(datasets.read_liao_membership(f"{path}.membership"), ref.membership)
    assert main(["-i", str(path), "-b", "-n", "2", "-t", "0", "-o", "--max-iter", "1000"]) == 0
    assert _loop_count(capsys.readouterr().out) == 42  # stopped by the threshold: the loops run


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
