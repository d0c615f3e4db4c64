"""gpuopt.models on the GPU: every stage against the serial stage on the real ECE408 model (10 / 100 / 10,000
MNIST test images) and on the Fashion network (seeded weights and images); placement, uint8 input, chunking,
timing. Stages whose op variants are not registered in this build are skipped (the reason names them)."""

from __future__ import annotations

import numpy as np
import pytest

import gpuopt
from gpuopt.cuda import DeviceArray
from gpuopt.models import REFERENCE_ACCURACY, STAGES, FashionCNN, MnistCNN, synthetic_images

from .support import data_file, rel_to_max, require_stage, softmax

pytestmark = pytest.mark.gpu

MNIST_GPU = [name for name in STAGES["mnist"] if name != "serial"]
FASHION_GPU = [name for name in STAGES["fashion"] if name != "serial"]
TOL = 1e-4  # max |logit - serial| / max |serial logit|: float32 kernels against the float64-accumulating references


@pytest.fixture(scope="module")
def mnist():
    """The reference model, MNIST t10k and the serial stage's logits of all 10,000 images (computed once)."""
    pytest.importorskip("h5py")
    net = MnistCNN.from_file(data_file("ece408_2016fa", "model.hdf5"))
    images, labels = gpuopt.datasets.load_mnist("t10k", data_file("mnist"))
    return net, images, labels.astype(np.int64), net.forward(images, variant="serial")


@pytest.fixture(scope="module")
def fashion():
    net = FashionCNN.random(seed=7)
    images = synthetic_images(1000, seed=8)
    return net, images, net.forward(images, variant="serial")


def assert_same_predictions(pred, ref_logits, tol=TOL):
    """Predictions equal to the serial stage's argmax, except where its top two logits are closer than the
    tolerance (a float32 tie: either answer is right); there should be none or very few."""
    pred = np.asarray(pred)
    ref = np.argmax(ref_logits, axis=1)
    top2 = np.sort(ref_logits, axis=1)[:, -2:]
    tie = (top2[:, 1] - top2[:, 0]) <= tol * np.abs(ref_logits).max()
    assert pred.dtype == np.int64
    bad = np.flatnonzero((pred != ref) & ~tie)
    assert bad.size == 0, f"{bad.size} predictions differ from the serial stage, e.g. images {bad[:10].tolist()}"


# ----------------------------------------------------------------------------------------- MNIST


def test_serial_accuracy_on_the_full_test_set(mnist):
    _, _, labels, serial = mnist
    assert np.count_nonzero(np.argmax(serial, axis=1) == labels) == 8722


@pytest.mark.parametrize("n", [10, 100, 10000])
@pytest.mark.parametrize("stage", MNIST_GPU)
def test_mnist_stage_matches_serial(mnist, stage, n):
    require_stage("mnist", stage, "predict")
    net, images, labels, serial = mnist
    logits = net.forward(images[:n], variant=stage)
    assert isinstance(logits, np.ndarray) and logits.dtype == np.float32 and logits.shape == (n, 10)
    assert rel_to_max(logits, serial[:n]) < TOL
    pred = net.predict(images[:n], variant=stage)
    assert_same_predictions(pred, serial[:n])
    acc, correct, total = net.evaluate(images[:n], labels[:n], variant=stage, return_counts=True)
    assert total == n and correct == round(REFERENCE_ACCURACY[n] * n), (stage, n, acc)


@pytest.mark.parametrize("stage", MNIST_GPU)
def test_mnist_device_input_gives_device_output(mnist, stage):
    require_stage("mnist", stage, "predict")
    net, images, _, serial = mnist
    for x in (images[:100], images[:100].astype(np.float32) / np.float32(255),
              (images[:100].astype(np.float32) / np.float32(255)).reshape(100, 28, 28, 1)):
        d = gpuopt.to_device(x)
        logits = net.forward(d, variant=stage)
        assert isinstance(logits, DeviceArray) and logits.shape == (100, 10) and logits.dtype == np.float32
        assert rel_to_max(logits.numpy(), serial[:100]) < TOL
        pred = net.predict(d, variant=stage)
        assert isinstance(pred, DeviceArray) and pred.shape == (100,)
        assert_same_predictions(pred.numpy(), serial[:100])
    # several chunks assembled on the device (allocations are poisoned: a missed row would be NaN)
    chunked = net.forward(gpuopt.to_device(images[:50]), variant=stage, max_batch=7)
    assert isinstance(chunked, DeviceArray) and rel_to_max(chunked.numpy(), serial[:50]) < TOL
    assert net.evaluate(gpuopt.to_device(images[:100]), mnist[2][:100], variant=stage) == 0.95


@pytest.mark.parametrize("stage", MNIST_GPU)
def test_mnist_uint8_equals_float_over_255(mnist, stage):
    require_stage("mnist", stage)
    net, images, _, _ = mnist
    raw = images[:100]
    a = net.forward(raw, variant=stage)
    b = net.forward(raw.astype(np.float32) / np.float32(255), variant=stage)
    if STAGES["mnist"][stage].resident:  # divided on the device, rounded as NumPy's float32 division
        assert rel_to_max(a, b) < 1e-6
    else:  # divided on the host: the same float32 inputs
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("stage", MNIST_GPU)
def test_mnist_batch_sizes(mnist, stage):
    require_stage("mnist", stage)
    net, images, _, serial = mnist
    one = net.forward(images[:1], variant=stage)
    assert one.shape == (1, 10) and rel_to_max(one, serial[:1]) < TOL
    whole = net.forward(images[:100], variant=stage)
    chunked = net.forward(images[:100], variant=stage, max_batch=7)  # 14 chunks of 7 and one of 2
    assert rel_to_max(chunked, whole) < 1e-5 and rel_to_max(chunked, serial[:100]) < TOL
    with pytest.raises(ValueError, match="NaN"):
        net.forward(np.full((2, 28, 28), np.nan, np.float32), variant=stage)


@pytest.mark.parametrize("stage", MNIST_GPU)
def test_mnist_timing_rows(mnist, stage):
    require_stage("mnist", stage, "predict")
    net, images, _, _ = mnist
    st = STAGES["mnist"][stage]
    pred, t = net.predict(images[:300], variant=stage, timing=True, max_batch=128)
    assert pred.shape == (300,) and t.chunks == 3 and t.clock == "gpu" and t.wall_ms > 0
    names = [s.name for s in st.chain("predict")]
    ops = [r for r in t.layers if r.op != "copy"]
    assert [r.name for r in ops] == names
    assert all(r.kernel_ms > 0 for r in ops), t.table()
    if st.resident:  # the images go in once, in a row of their own; only the predictions come back
        assert all(r.h2d_ms == 0 and r.d2h_ms == 0 for r in ops), t.table()
        copies = [r for r in t.layers if r.op == "copy"]
        assert [r.name for r in copies] == ["Copy to device (images)", "Copy back (predictions)"], t.table()
        assert copies[0].h2d_ms > 0 and copies[0].d2h_ms == 0 and copies[1].d2h_ms > 0
    else:  # NumPy in and out of every layer, as the report's code (argmax "streams" overlaps its copy back)
        assert all(r.h2d_ms > 0 and (r.d2h_ms > 0 or r.op == "argmax") for r in ops), t.table()
        assert not any(r.op == "copy" for r in t.layers)
    assert ("report ms" in t.table()) == any(s.report_ms is not None for s in st.chain("predict"))


def test_fast_uploads_the_weights_once(monkeypatch):
    require_stage("mnist", "fast", "predict")
    from gpuopt.models import network

    calls = []
    real = network.to_device
    monkeypatch.setattr(network, "to_device", lambda a: calls.append(a.shape) or real(a))
    net = MnistCNN.random(0)
    x = np.zeros((5, 28, 28), np.uint8)
    net.predict(x, variant="fast")
    net.predict(x, variant="fast")
    net.forward(x, variant="fast")
    assert calls == [(32, 1, 5, 5), (64, 32, 5, 5), (1024, 128), (128, 10)]
    assert net._device_weights() is net._device_weights()


# ----------------------------------------------------------------------------------------- Fashion


@pytest.mark.parametrize("n", [1, 10, 1000])
@pytest.mark.parametrize("stage", FASHION_GPU)
def test_fashion_stage_matches_serial(fashion, stage, n):
    require_stage("fashion", stage, "predict")
    net, images, serial = fashion
    logits = net.forward(images[:n], variant=stage)
    assert logits.shape == (n, 10) and rel_to_max(logits, serial[:n]) < TOL
    assert_same_predictions(net.predict(images[:n], variant=stage), serial[:n])


@pytest.mark.parametrize("stage", FASHION_GPU)
def test_fashion_proba_placement_and_timing(fashion, stage):
    require_stage("fashion", stage, "*")
    net, images, serial = fashion
    p = net.proba(images[:100], variant=stage)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(p, softmax(serial[:100].astype(np.float64)), rtol=1e-3, atol=1e-6)
    d = net.forward(gpuopt.to_device(images[:100]), variant=stage, max_batch=30)
    assert isinstance(d, DeviceArray) and rel_to_max(d.numpy(), serial[:100]) < TOL
    a = net.forward(images[:100], variant=stage)
    b = net.forward(images[:100].astype(np.float32) / np.float32(255), variant=stage)
    assert rel_to_max(a, b) < 1e-6
    _, t = net.predict(images[:100], variant=stage, timing=True)
    ops = [r for r in t.layers if r.op != "copy"]
    assert [r.name for r in ops] == [s.name for s in STAGES["fashion"][stage].chain("predict")]
    assert all(r.kernel_ms > 0 for r in ops), t.table()


# ----------------------------------------------------------------------------------------- command line


@pytest.mark.parametrize("stage", MNIST_GPU)
def test_cli_mnist(capsys, stage):
    require_stage("mnist", stage, "predict")
    pytest.importorskip("h5py")
    data_file("mnist")
    from gpuopt.models.__main__ import main

    assert main(["mnist", "--variant", stage, "--images", "100", "--timing", "--batch", "64"]) == 0
    out = capsys.readouterr().out
    assert "reference 0.9500 for the first 100: OK" in out and "CUDA events" in out
    assert "no GPU" not in out.splitlines()[0]
    assert all(s.name in out for s in STAGES["mnist"][stage].chain("predict"))


@pytest.mark.parametrize("stage", FASHION_GPU)
def test_cli_fashion(capsys, stage):
    require_stage("fashion", stage, "predict")
    from gpuopt.models.__main__ import main

    assert main(["fashion", "--variant", stage, "--images", "200", "--check-images", "50", "--timing"]) == 0
    assert "50 / 50 predictions equal" in capsys.readouterr().out
