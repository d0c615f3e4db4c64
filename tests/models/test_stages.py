"""The stage table (gpuopt.models.STAGES) and the command line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import gpuopt
from gpuopt.models import STAGES, missing, stages
from gpuopt.models.__main__ import main
from gpuopt.models.network import op_function
from gpuopt.registry import REPORTS, resolve

from .support import HAVE_H5PY, data_file

#: Keyword arguments of each op that are not variant parameters (the op's own arguments).
OP_KWARGS = {"conv2d": {"activation"}, "avg_pool2d": {"size"}, "max_pool2d": {"size"},
             "fully_connected": {"activation"}, "conv2d_pool": {"activation", "pool", "pool_size"},
             "relu": set(), "tanh": set(), "argmax": set(), "softmax": set()}

ALL = [(net, name) for net, table in STAGES.items() for name in table]


@pytest.mark.parametrize("network,name", ALL)
def test_every_step_is_registered(network, name):
    stage = stages(network)[name]
    assert stage.network == network and stage.name == name and stage.report in REPORTS
    steps = (*stage.steps, *stage.heads.values())
    assert len({s.name for s in steps}) == len(steps), "row names must be unique in a stage"
    for step in steps:
        assert step.op in OP_KWARGS, step
        registered = step.op in gpuopt.ops() and step.variant in gpuopt.variants(step.op)
        assert registered, f"{step.op}/{step.variant} is not registered"
        params = {k: v for k, v in step.params.items() if k not in OP_KWARGS[step.op]}
        resolve(step.op, step.variant, params, require_device=False)  # parameters allowed
        op_function(step.op)
    assert missing(stage, "*") == []


@pytest.mark.parametrize("network,name", ALL)
def test_stage_shapes(network, name):
    stage = stages(network)[name]
    assert "predict" in stage.heads and (network != "fashion" or "proba" in stage.heads)
    assert stage.gpu == (name != "serial")
    assert all(s.variant == "cpu" for s in stage.chain("predict")) == (name == "serial")
    if stage.resident:
        assert stage.steps[0].raw_input  # uint8 pixels scaled on the device by the first kernel
    assert not any(s.raw_input for s in stage.steps[1:])
    weights = [s.w for s in stage.steps if s.w] + [s.bias for s in stage.steps if s.bias]
    expected = ["conv1", "conv2", "fc1", "fc2"] + (["fc1_bias", "fc2_bias"] if network == "fashion" else [])
    assert weights == expected
    assert sum(s.flatten for s in stage.steps) == 1


def test_the_reports_numbers():
    mnist = STAGES["mnist"]
    assert list(mnist) == ["serial", "basic", "optimized", "hybrid", "fast", "winograd"]
    assert list(STAGES["fashion"]) == ["serial", "basic", "optimized", "fast", "winograd"]
    assert mnist["serial"].report_total_ms == 1219000.0 and mnist["hybrid"].report_total_ms == 1130.0
    t5 = {s.name: s for s in mnist["hybrid"].chain("predict")}
    assert t5["Unrolled Convolution Reduction"].report_ms == 1057.0
    assert t5["Tiled Convolution Forward Valid"].params["activation"] == "relu"
    t4 = [s.name for s in mnist["optimized"].chain("predict")]
    assert "Rectified Linear Unit" in t4 and not any("4D" in n for n in t4)  # the ReLU fused into the convs
    opt = STAGES["fashion"]["optimized"]
    assert [s.params.get("tile_width") for s in opt.steps if s.op == "conv2d"] == [16, 28]
    # each stage ran end to end by the report: 10 rows in Tables 2 and 3
    assert len(mnist["serial"].chain("predict")) == len(mnist["basic"].chain("predict")) == 10


# ----------------------------------------------------------------------------------------- command line


def _cli(*args, cwd):
    """The command line in a fresh process started in ``cwd``, told where this process found the data."""
    env = dict(os.environ)
    root = gpuopt.datasets.data_dir(required=False)
    if root is not None:
        env[gpuopt.datasets.DATA_DIR_ENV] = str(root)
    return subprocess.run([sys.executable, "-m", "gpuopt.models", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)


def test_cli_help(tmp_path):
    out = _cli("--help", cwd=tmp_path)
    assert out.returncode == 0 and "mnist" in out.stdout and "serial, basic, optimized, hybrid, fast" in out.stdout
    for sub in ("mnist", "fashion"):
        out = _cli(sub, "--help", cwd=tmp_path)
        assert out.returncode == 0 and "--variant" in out.stdout and "--timing" in out.stdout


@pytest.mark.skipif(not HAVE_H5PY, reason="h5py is not installed")
def test_cli_mnist_serial(tmp_path):
    data_file("mnist")
    data_file("ece408_2016fa", "model.hdf5")
    out = _cli("mnist", "--variant", "serial", "--images", "10", "--timing", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "accuracy  1.0000 (10 / 10); reference 1.0000 for the first 10: OK" in out.stdout
    assert "Convolution Forward Valid (2)" in out.stdout and "gpuopt" in out.stdout.splitlines()[0]
    test10 = data_file("ece408_2016fa", "test10.hdf5")
    assert main(["mnist", "--variant", "serial", "--test-file", str(test10), "--batch", "3"]) == 0


def test_cli_fashion_serial(capsys):
    assert main(["fashion", "--variant", "serial", "--images", "4", "--seed", "3", "--timing"]) == 0
    text = capsys.readouterr().out
    assert "seed 3" in text and "NOT Fashion-MNIST" in text and "not public" in text and "Softmax" not in text
    assert "Fully Connected (1)" in text


def test_cli_stages(capsys):
    assert main(["stages"]) == 0
    text = capsys.readouterr().out
    for network, name in ALL:
        assert f"{network}/{name}" in text


@pytest.mark.parametrize("args,match", [
    (["mnist", "--images", "0"], "positive integer"),
    (["mnist", "--images", "ten"], "positive integer"),
    (["mnist", "--variant", "turbo"], "invalid choice"),
    (["mnist", "--variant", "serial", "--model", "/no/such/model.hdf5"], "--model: no such file"),
    (["fashion", "--variant", "serial", "--weights", "/no/such.npz"], "--weights: no such file"),
    (["fashion", "--batch", "-1"], "positive integer"),
    (["bogus"], "invalid choice"),
])
def test_cli_bad_arguments(capsys, args, match):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    assert match in capsys.readouterr().err


@pytest.mark.skipif(not HAVE_H5PY, reason="h5py is not installed")
def test_cli_too_many_images(capsys):
    data_file("mnist")
    with pytest.raises(SystemExit):
        main(["mnist", "--variant", "serial", "--images", "10001"])
    assert "has 10000 images" in capsys.readouterr().err


@pytest.mark.skipif(gpuopt.cuda_available(), reason="checks the message without a GPU")
def test_cli_gpu_stage_without_gpu(capsys):
    with pytest.raises(SystemExit):
        main(["fashion", "--variant", "fast", "--images", "2"])
    assert "fast" in capsys.readouterr().err


def test_models_import_without_h5py_or_gpu(tmp_path):
    code = ("import sys; sys.modules['h5py'] = None; import gpuopt, gpuopt.models; "
            "print(gpuopt.models.MnistCNN.random(0).forward(__import__('numpy').zeros((1, 28, 28), 'uint8'), "
            "variant='serial').shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(1, 10)"
