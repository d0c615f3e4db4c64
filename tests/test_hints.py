"""Every hint names a valid choice: a missing GPU points each op to its CPU variants and each network to its CPU
stages (read from the registry and the stage table), and the conversions the messages suggest run as written."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest

import gpuopt
from conftest import REPO
from gpuopt import _ext, registry
from gpuopt.models import STAGES, FashionCNN, MnistCNN
from gpuopt.models.stages import cpu_stages

NO_GPU = "no GPU in this test"


@pytest.fixture
def no_gpu(monkeypatch):
    """gpuopt as on a machine without a usable GPU, whatever this one has."""
    monkeypatch.setattr(_ext, "_load_cuda", lambda: (None, NO_GPU))


def _named(message: str, argument: str = "variant") -> list[str]:
    """The values of ``argument`` a message's hint names (``variant='cpu'`` or ``--variant cpu``)."""
    if argument.startswith("-"):
        return re.findall(rf"{argument} (\w+)", message)
    return re.findall(rf"{argument}='(\w+)'", message)


def _gpu_variants():
    return [(op, name) for op in gpuopt.ops() for name, v in gpuopt.variants(op).items() if v.needs_cuda]


@pytest.mark.parametrize("op,variant", _gpu_variants())
def test_each_gpu_variant_points_to_its_ops_cpu_variants(no_gpu, op, variant):
    with pytest.raises(RuntimeError, match=f"{op}/{variant} needs a CUDA GPU, but {NO_GPU}") as err:
        registry.resolve(op, variant, {})
    named = _named(str(err.value))
    table = gpuopt.variants(op)
    assert named == registry.cpu_variants(op) and named, str(err.value)
    assert all(name in table and not table[name].needs_cuda for name in named)


@pytest.mark.parametrize("op,variant", [(op, v) for op, v in _gpu_variants()
                                        if gpuopt.variants(op)[v].binding is not None][:3])
def test_a_launcher_without_a_gpu_points_the_same_way(no_gpu, op, variant):
    with pytest.raises(RuntimeError) as err:
        _ext.launcher(gpuopt.variants(op)[variant])
    assert _named(str(err.value)) == registry.cpu_variants(op)


def test_every_op_has_a_cpu_variant_to_point_to():
    assert all(registry.cpu_variants(op) for op in gpuopt.ops())


def _gpu_stages():
    return [(net, name) for net, table in STAGES.items() for name, st in table.items() if st.gpu]


@pytest.mark.parametrize("network,stage", _gpu_stages())
def test_each_gpu_stage_points_to_the_networks_cpu_stages(no_gpu, network, stage):
    net = MnistCNN.random(0) if network == "mnist" else FashionCNN.random(0)
    images = np.zeros((1, net.side, net.side), np.uint8)
    with pytest.raises(RuntimeError, match=f"{network} stage '{stage}' needs a CUDA GPU, but {NO_GPU}") as err:
        net.forward(images, variant=stage)
    named = _named(str(err.value))
    assert named == cpu_stages(network) == ["serial"], str(err.value)
    assert "variant='cpu'" not in str(err.value)  # "cpu" is an op's variant, not a stage


def test_stage_gpu_follows_the_registry():
    for table in STAGES.values():
        for stage in table.values():
            for step in (*stage.steps, *stage.heads.values()):
                assert step.gpu == gpuopt.variants(step.op)[step.variant].needs_cuda, (stage.name, step.name)


def test_the_command_lines_name_their_own_option(no_gpu, tmp_path, capsys):
    from gpuopt.kmeans.__main__ import main as kmeans_main
    from gpuopt.models.__main__ import main as models_main

    x = gpuopt.datasets.make_kmeans_blobs(20, 2, k=2, seed=0)[0]
    path = tmp_path / "blobs.txt"
    path.write_text("".join(f"{i} {a} {b}\n" for i, (a, b) in enumerate(x)))
    assert kmeans_main(["-i", str(path), "-n", "2", "--variant", "liao"]) == 1
    err = capsys.readouterr().err.partition("error: ")[2]
    assert "--variant liao needs a CUDA GPU" in err and _named(err.partition("Use ")[2], "--variant") == ["cpu"]
    with pytest.raises(SystemExit):
        models_main(["fashion", "--variant", "fast", "--images", "1"])
    err = capsys.readouterr().err.partition("error: ")[2]
    assert "stage 'fast' needs a CUDA GPU" in err and _named(err, "--variant") == ["serial"]


def test_measure_points_to_its_own_argument(no_gpu):
    from gpuopt.bench.harness import _resolve_device

    with pytest.raises(RuntimeError) as err:
        _resolve_device("gpu")
    assert _named(str(err.value).partition("Use ")[2], "device") == ["cpu"] and _resolve_device("cpu") == "cpu"


def test_calls_without_a_cpu_choice_get_no_hint(no_gpu):
    with pytest.raises(RuntimeError) as err:
        gpuopt.synchronize()
    assert "Use " not in str(err.value) and "variant" not in str(err.value)


# ------------------------------------------------------------------ conversions


@pytest.mark.parametrize("value", [np.ones((1, 1, 2, 2), np.int32), [[[[1, 2], [3, 4]]]], np.ones((1, 1, 2, 2), bool)])
def test_the_suggested_conversion_runs(value):
    with pytest.raises(TypeError, match=r"convert explicitly, e\.g\. ") as err:
        gpuopt.conv2d(value, np.ones((1, 1, 1, 1), np.float32), variant="cpu")
    suggestion = re.search(r"e\.g\. (.+)\)$", str(err.value)).group(1)
    converted = eval(suggestion, {"np": np, "x": value})  # noqa: S307 (the message's own text, on test data)
    assert converted.dtype == np.float32
    assert gpuopt.conv2d(converted, np.ones((1, 1, 1, 1), np.float32), variant="cpu").shape == (1, 1, 2, 2)


def test_device_arrays_of_another_dtype_get_their_librarys_conversion():
    from gpuopt._validate import float_array

    class Foreign:
        def __init__(self, dtype):
            self.__cuda_array_interface__ = {"shape": (2, 2), "typestr": np.dtype(dtype).str, "data": (256, False),
                                             "strides": None, "version": 3}

        def astype(self, dtype):
            return Foreign(dtype)

    ours = gpuopt.DeviceArray((2, 2), np.int32, 256, None)  # a view: nothing is read
    with pytest.raises(TypeError, match=r"gpuopt\.to_device\(x\.numpy\(\)\.astype\(np\.float32\)\)"):
        float_array(ours, "x", 2)
    with pytest.raises(TypeError, match=r"x\.astype\(np\.float32\)"):
        float_array(Foreign(np.float64), "x", 2)


def test_network_images_conversion_hint_runs():
    net = MnistCNN.random(0)
    images = [[[300 - 45] * 28] * 28]  # Python ints: int64 pixels
    with pytest.raises(TypeError, match="convert explicitly") as err:
        net.forward(images, variant="serial")
    suggestion = re.search(r"e\.g\. (.+) for raw pixels", str(err.value)).group(1)
    converted = eval(suggestion, {"np": np, "images": images})  # noqa: S307
    assert net.forward(converted, variant="serial").shape == (1, 10)


# ------------------------------------------------------------------ hints written as text


_HINT = re.compile(r"variant ?=? ?'(\w+)'|--variant (\w+)")


def _message_strings():
    """(where, text) of every string in a raise statement or an argparse error of gpuopt/ (f-strings: their
    literal parts), and of every C++ source of csrc/ (its messages and comments): where hints are written."""
    for path in sorted((REPO / "gpuopt").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            is_error = isinstance(node, ast.Raise) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "error")
            if is_error:
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        yield f"{path.relative_to(REPO)}:{sub.lineno}", sub.value
    for path in sorted((REPO / "csrc").rglob("*")):
        if path.suffix in (".cu", ".cpp", ".hpp", ".cuh"):
            yield str(path.relative_to(REPO)), path.read_text()


def test_every_written_hint_names_a_variant_or_stage():
    names = {name for op in gpuopt.ops() for name in gpuopt.variants(op)}
    names |= {name for table in STAGES.values() for name in table}
    found, bad = 0, []
    for where, text in _message_strings():
        for match in _HINT.finditer(text):
            found += 1
            name = match.group(1) or match.group(2)
            if name not in names:
                bad.append(f"{where}: {match.group(0)}")
    assert found >= 5, "the scan found no hints: has the message style changed?"
    assert not bad, f"hints naming no variant or stage: {bad}"
