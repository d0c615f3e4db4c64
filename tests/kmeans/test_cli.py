"""python -m gpuopt.kmeans: Liao's switches, loop cap and loop count, his printed lines, output files, timing block
and exit statuses (his seq_main / cuda_main: usage() exits 255, a file file_read cannot read exits 1)."""

import subprocess
import sys

import numpy as np
import pytest

import gpuopt
from gpuopt import datasets
from gpuopt.kmeans.__main__ import _line_buffer, main


@pytest.fixture
def blobs(tmp_path):
    x = datasets.make_kmeans_blobs(500, 6, k=4, seed=3)[0]
    return x, datasets.write_liao(tmp_path / "blobs.txt", x, binary=False), \
        datasets.write_liao(tmp_path / "blobs.bin", x, binary=True)


def _expected(x, k, threshold=0.001, variant="cpu", max_iter=501):
    return gpuopt.kmeans(x, k, threshold=threshold, variant=variant, max_iter=max_iter)


def _writing_lines(prefix, k, n):
    return [f'Writing coordinates of K={k} cluster centers to file "{prefix}.cluster_centres"',
            f'Writing membership of N={n} data objects to file "{prefix}.membership"']


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


# ----------------------------------------------------------------------------- printout and files


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
    # His order: file_write's two lines, then the -o block (it opens with a newline).
    assert lines[:3] == [*_writing_lines(path, 4, 500), ""]
    assert lines[3] == "Performing **** Regular Kmeans (sequential version) ****"
    assert lines[4:10] == [f"Input file:     {path}", "numObjs       = 500", "numCoords     = 6", "numClusters   = 4",
                           "threshold     = 0.0010", f"Loop iterations    = {ref.iterations}"]
    assert lines[10].startswith("I/O time           = ") and lines[10].endswith(" sec")
    assert lines[11].startswith("Computation timing = ") and float(lines[11].split()[3]) > 0
    assert lines[12].startswith("(gpuopt kmeans/cpu; gpuopt ") and len(lines) == 13


def test_writing_lines_name_the_file_as_given(blobs, tmp_path, monkeypatch, capsys):
    """His file_write prints filename + suffix verbatim: a relative "./name" stays so."""
    monkeypatch.chdir(tmp_path)
    assert main(["-i", "./blobs.txt", "-n", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == _writing_lines("./blobs.txt", 3, 500)
    assert (tmp_path / "blobs.txt.cluster_centres").is_file() and (tmp_path / "blobs.txt.membership").is_file()


def test_out_dir_writes_there_and_nothing_beside_the_input(blobs, tmp_path, capsys):
    _, txt, _ = blobs
    assert main(["-i", str(txt), "-n", "4"]) == 0
    beside = [open(f"{txt}{suffix}").read() for suffix in (".cluster_centres", ".membership")]
    capsys.readouterr()
    (tmp_path / "in").mkdir()
    src = tmp_path / "in" / "blobs.txt"
    src.write_bytes(txt.read_bytes())
    out = tmp_path / "results" / "run1"  # missing, parents too: created
    assert main(["-i", str(src), "-n", "4", "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == _writing_lines(out / "blobs.txt", 4, 500)
    assert sorted(p.name for p in out.iterdir()) == ["blobs.txt.cluster_centres", "blobs.txt.membership"]
    assert [p.name for p in (tmp_path / "in").iterdir()] == ["blobs.txt"]  # nothing beside the input
    assert [(out / f"blobs.txt{suffix}").read_text() for suffix in (".cluster_centres", ".membership")] == beside
    assert main(["-i", str(src), "-n", "4", "--out", str(out)]) == 0  # an existing folder is fine


def test_debug_prints_his_reader_lines_then_gpuopts_deltas(blobs, capsys):
    x, txt, binf = blobs
    assert main(["-i", str(txt), "-n", "3", "-t", "0.05"]) == 0
    assert capsys.readouterr().out.splitlines() == _writing_lines(txt, 3, 500)
    assert main(["-i", str(txt), "-n", "3", "-t", "0.05", "-d"]) == 0
    ref = _expected(datasets.read_liao(txt), 3, 0.05)
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["lineLen = 128", f"File {txt} numObjs   = 500", f"File {txt} numCoords = 6"]
    assert out[3:-2] == [f"loop {i}: delta = {d:.6f}" for i, d in enumerate(ref.delta.tolist())]
    assert out[3] == "loop 0: delta = 1.000000" and out[-2:] == _writing_lines(txt, 3, 500)
    assert main(["-i", str(binf), "-n", "3", "-b", "-d"]) == 0  # binary: no line buffer to report
    assert capsys.readouterr().out.splitlines()[:3] == [f"File {binf} numObjs   = 500", f"File {binf} numCoords = 6",
                                                        "loop 0: delta = 1.000000"]


def test_line_buffer_grows_as_his_reader():
    """fgets into 128 bytes, grown by 128 while a line (newline included) fills all but the last byte."""
    assert _line_buffer(b"1 2 3\n") == 128
    assert _line_buffer(b"x" * 125 + b"\n") == 128  # 126 bytes fit
    assert _line_buffer(b"x" * 126 + b"\n") == 256  # 127 fill the buffer: he grows it
    assert _line_buffer(b"1 2\n" + b"x" * 126) == 128  # a last line without newline: 126 fit
    assert _line_buffer(b"1 2\n" + b"x" * 127) == 256
    assert _line_buffer(b"x" * 254 + b"\n1 2\n") == 384


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


@pytest.mark.data
@pytest.mark.parametrize("name,binary,line_buffer", [("color100.txt", False, 128), ("texture100.txt", False, 256),
                                                     ("edge17695.bin", True, None)])
def test_liao_data(tmp_path, capsys, name, binary, line_buffer):
    """His reference files (copied: the outputs go beside the input)."""
    src = datasets.data_path("kmeans_liao", name, required=False)
    if src is None:
        pytest.skip(f"reference data kmeans_liao/{name} not found")
    path = tmp_path / name
    path.write_bytes(src.read_bytes())
    x = datasets.read_liao(path, binary=binary)
    assert main(["-i", str(path), "-n", "4", "-o", "-d", *(["-b"] if binary else [])]) == 0
    out = capsys.readouterr().out
    ref = _expected(x, 4)
    assert _loop_count(out) == ref.iterations and ref.converged
    if line_buffer:
        assert out.startswith(f"lineLen = {line_buffer}\n")
    assert _writing_lines(path, 4, len(x))[1] + "\n\nPerforming" in out
    expected = datasets.write_liao_output(tmp_path / "expected", ref.centroids, ref.membership)
    assert open(f"{path}.cluster_centres").read() == expected[0].read_text()
    assert open(f"{path}.membership").read() == expected[1].read_text()


# ----------------------------------------------------------------------------- exit statuses, nothing written


@pytest.mark.parametrize("argv", [["-h"], ["--help"], ["-i", "{txt}", "-n", "3", "-h"]])
def test_help_exits_255_on_stderr_as_his_usage(blobs, capsys, argv):
    _, txt, _ = blobs
    with pytest.raises(SystemExit) as e:
        main([a.format(txt=txt) for a in argv])
    captured = capsys.readouterr()
    assert e.value.code == 255 and captured.out == ""
    for text in ("-i filename", "-n num_clusters", "--out DIR", "--max-iter N", "501 loops", "502", "255"):
        assert text in captured.err


@pytest.mark.parametrize("argv,message", [
    (["-n", "3"], "the following arguments are required: -i"),
    (["-i", "{txt}"], "the following arguments are required: -n"),
    (["-i", "{txt}", "-n", "1"], "number of clusters must be > 1"),
    (["-i", "{txt}", "-n", "x"], "invalid int value"),
    (["-i", "{txt}", "-n"], "expected one argument"),
    (["-i", "{txt}", "-n", "501"], "501 clusters for 500 objects"),
    (["-i", "{txt}", "-n", "3", "-t", "x"], "argument -t: invalid float value"),
    (["-i", "{txt}", "-n", "3", "-t", "-1"], "threshold must be finite and >= 0"),
    (["-i", "{txt}", "-n", "3", "-t", "nan"], "threshold must be finite and >= 0"),
    (["-i", "{txt}", "-n", "3", "-q"], "unrecognized arguments: -q"),
    (["-i", "{txt}", "-n", "3", "--max-iter", "0"], "--max-iter must be >= 1"),
    (["-i", "{txt}", "-n", "3", "--variant", "nope"], "invalid choice"),
    (["-i", "{txt}", "-n", "3", "--init", "nope"], "invalid choice"),
    (["-i", "{txt}", "-n", "3", "--init", "random", "--seed", "-2"], "--seed must be >= 0"),
    (["-i", "{txt}", "-n", "3", "--out", "{txt}"], "exists and is not a folder"),
])
def test_usage_errors_exit_255_and_write_nothing(blobs, tmp_path, capsys, argv, message):
    _, txt, _ = blobs
    before = sorted(tmp_path.iterdir())
    argv = [a.format(txt=txt) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as e:
        main(argv)
    captured = capsys.readouterr()
    assert e.value.code == 255 and message in captured.err and captured.out == ""
    assert sorted(tmp_path.iterdir()) == before  # no outputs, no --out folder


@pytest.mark.parametrize("argv,message", [
    (["-i", "{missing}", "-n", "3"], "-i {missing}: no such file"),
    (["-i", "{tmp}", "-n", "3"], "a folder, not a data file"),
    (["-i", "{bin}", "-n", "3"], "a binary file needs -b"),
    (["-i", "{txt}", "-n", "3", "-b"], "not a k-means file"),
    (["-i", "{text}", "-n", "3"], "not a k-means file"),
    (["-i", "{empty}", "-n", "3"], "not a k-means file"),
])
def test_unreadable_input_exits_1_and_writes_nothing(blobs, tmp_path, capsys, argv, message):
    _, txt, binf = blobs
    (tmp_path / "notes.txt").write_text("object one: red\nobject two: blue\n")
    (tmp_path / "empty.txt").write_text("")
    names = dict(txt=txt, bin=binf, missing=tmp_path / "missing.txt", tmp=tmp_path, text=tmp_path / "notes.txt",
                 empty=tmp_path / "empty.txt")
    before = sorted(tmp_path.iterdir())
    assert main([a.format(**names) for a in argv] + ["--out", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert message.format(**names) in captured.err and captured.out == ""
    assert sorted(tmp_path.iterdir()) == before


def test_gpu_variant_without_gpu_is_an_error_not_a_traceback(blobs, tmp_path, capsys):
    if gpuopt.cuda_available():
        pytest.skip("a GPU is present")
    _, txt, _ = blobs
    before = sorted(tmp_path.iterdir())
    assert main(["-i", str(txt), "-n", "3", "--variant", "liao"]) == 1
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert sorted(tmp_path.iterdir()) == before


def test_init_and_seed(blobs):
    x, txt, _ = blobs
    x = datasets.read_liao(txt)
    assert main(["-i", str(txt), "-n", "5", "--init", "kmeans++", "--seed", "4"]) == 0
    ref = gpuopt.kmeans(x, 5, init="kmeans++", seed=4, variant="cpu")
    np.testing.assert_array_equal(datasets.read_liao_membership(f"{txt}.membership"), ref.membership)


def test_runs_as_a_module(blobs, tmp_path):
    _, txt, _ = blobs

    def run(*argv):
        # (cwd: not the checkout, whose gpuopt/ folder has no compiled modules and would shadow the installed package)
        return subprocess.run([sys.executable, "-m", "gpuopt.kmeans", *argv], capture_output=True, text=True,
                              cwd=tmp_path)

    done = run("-i", str(txt), "-n", "2", "-o")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Writing coordinates of K=2") and "Performing **** Regular Kmeans" in done.stdout
    # The statuses the shell sees, as his: usage() exit(-1) is 255, a file file_read cannot open exit(1).
    assert run("-h").returncode == 255
    assert run("-i", str(txt), "-n", "1").returncode == 255
    assert run("-i", str(tmp_path / "missing.txt"), "-n", "2").returncode == 1


@pytest.mark.gpu
def test_liao_variant_writes_what_seq_main_writes(blobs, tmp_path, capsys):
    """Liao's CUDA port (his cuda_main) and seq_main give the same files, bit for bit."""
    _, txt, _ = blobs
    assert main(["-i", str(txt), "-n", "4", "--variant", "cpu"]) == 0
    seq = (open(f"{txt}.cluster_centres").read(), open(f"{txt}.membership").read())
    assert main(["-i", str(txt), "-n", "4", "--variant", "liao", "-o"]) == 0
    assert (open(f"{txt}.cluster_centres").read(), open(f"{txt}.membership").read()) == seq
    assert "Regular Kmeans (CUDA version)" in capsys.readouterr().out
