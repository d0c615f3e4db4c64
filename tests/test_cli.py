import json
import subprocess
import sys


def run(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "gpuopt", *args], capture_output=True, text=True, cwd=tmp_path)


def test_info_is_json(tmp_path):
    out = run(tmp_path, "info")
    assert out.returncode == 0
    info = json.loads(out.stdout)
    assert info["build"]["version"] and ("device" in info)


def test_variants_lists_every_op(tmp_path):
    out = run(tmp_path, "variants")
    assert out.returncode == 0
    for op in ("conv2d/cpu", "matmul/cpu", "kmeans/cpu", "sparse_conv2d/cpu", "argmax/cpu"):
        assert op in out.stdout
    bad = run(tmp_path, "variants", "conv3d")
    assert bad.returncode == 2 and "unknown op 'conv3d'" in bad.stderr


def test_check_passes(tmp_path):
    out = run(tmp_path, "check", "--seed", "7")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "seed 7" in out.stdout and "FAIL" not in out.stdout and "conv2d" in out.stdout
