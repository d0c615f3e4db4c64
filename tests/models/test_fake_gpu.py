"""The GPU tests of gpuopt.models, run here on a fake GPU (fake_device.py: host memory at fake addresses, every
GPU variant a copy-in / CPU-reference / copy-out "kernel"): the networks' device paths and the GPU tests'
own logic, on the real model's first 300 MNIST images and 100 synthetic Fashion images."""

from __future__ import annotations

import numpy as np
import pytest

import gpuopt
from gpuopt.models import FashionCNN, MnistCNN, synthetic_images

from . import fake_device
from . import test_gpu_models as gpu_tests
from .support import data_file, rel_to_max


@pytest.fixture
def fake_gpu(monkeypatch):
    return fake_device.install(monkeypatch)


@pytest.fixture(scope="module")
def mnist_300():
    pytest.importorskip("h5py")
    net = MnistCNN.from_file(data_file("ece408_2016fa", "model.hdf5"))
    images, labels = gpuopt.datasets.load_mnist("t10k", data_file("mnist"))
    images, labels = images[:300], labels[:300].astype(np.int64)
    return net, images, labels, net.forward(images, variant="serial")


@pytest.fixture(scope="module")
def fashion_100():
    net = FashionCNN.random(seed=7)
    images = synthetic_images(100, seed=8)
    return net, images, net.forward(images, variant="serial")


def test_the_fake_gpu_is_in_place(fake_gpu):
    assert gpuopt.cuda_available()
    d = gpuopt.to_device(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(d.numpy(), np.arange(6))
    with pytest.raises(RuntimeError, match="outside any live allocation"):
        fake_gpu.copy_d2h(np.empty(7, np.float32), d.ptr, 28)


@pytest.mark.parametrize("n", [10, 100])
@pytest.mark.parametrize("stage", gpu_tests.MNIST_GPU)
def test_mnist_stage_matches_serial(fake_gpu, mnist_300, stage, n):
    gpu_tests.test_mnist_stage_matches_serial(mnist_300, stage, n)


@pytest.mark.parametrize("stage", ["hybrid", "fast"])  # the two kinds: per-layer round trips, device-resident
def test_mnist_device_paths(fake_gpu, mnist_300, stage):
    gpu_tests.test_mnist_device_input_gives_device_output(mnist_300, stage)
    gpu_tests.test_mnist_uint8_equals_float_over_255(mnist_300, stage)
    gpu_tests.test_mnist_batch_sizes(mnist_300, stage)
    gpu_tests.test_mnist_timing_rows(mnist_300, stage)


@pytest.mark.parametrize("stage", gpu_tests.MNIST_GPU)
def test_mnist_fake_results_equal_serial(fake_gpu, mnist_300, stage):
    """On the fake GPU every kernel is the CPU reference, so a stage's logits equal the serial ones up to the
    fused float32 rounding (relu before or after the copy, fc with float64 sums): any wiring mistake (a wrong
    weight, flatten order, activation or pool) would show far above that."""
    net, images, _, serial = mnist_300
    assert rel_to_max(net.forward(images[:100], variant=stage, max_batch=32), serial[:100]) < 1e-6


def test_fast_uploads_the_weights_once(fake_gpu, monkeypatch):
    gpu_tests.test_fast_uploads_the_weights_once(monkeypatch)


@pytest.mark.parametrize("n", [1, 10])
@pytest.mark.parametrize("stage", gpu_tests.FASHION_GPU)
def test_fashion_stage_matches_serial(fake_gpu, fashion_100, stage, n):
    gpu_tests.test_fashion_stage_matches_serial(fashion_100, stage, n)


@pytest.mark.parametrize("stage", gpu_tests.FASHION_GPU)
def test_fashion_proba_placement_and_timing(fake_gpu, fashion_100, stage):
    gpu_tests.test_fashion_proba_placement_and_timing(fashion_100, stage)


@pytest.mark.parametrize("stage", ["basic", "fast"])
def test_cli_mnist(fake_gpu, capsys, stage):
    gpu_tests.test_cli_mnist(capsys, stage)


@pytest.mark.parametrize("stage", ["optimized", "fast"])
def test_cli_fashion(fake_gpu, capsys, stage):
    gpu_tests.test_cli_fashion(capsys, stage)
