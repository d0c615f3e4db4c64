"""gpuopt.models on the CPU: the serial stage against independent NumPy forwards, the real ECE408 model's
accuracy, chunking, weight files, input checks."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import gpuopt
from gpuopt.models import DEFAULT_MEMORY_BUDGET, FASHION_KEYS, FashionCNN, MnistCNN, synthetic_images
from gpuopt.models.mnist import nhwc_to_nchw_rows

from .support import data_file, fashion_forward, mnist_forward, needs_h5py, rel_to_max, softmax


def _mnist_arrays(rng):
    """Weights of the reference shapes, fc1 in the file's NHWC row order."""
    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    return he((32, 1, 5, 5), 25), he((64, 32, 5, 5), 800), he((1024, 128), 1024), he((128, 10), 128)


def _fashion_arrays(rng):
    def lecun(shape, fan_in):
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)

    return {"conv1": lecun((6, 1, 5, 5), 25), "conv2": lecun((16, 6, 5, 5), 150), "fc1": lecun((10816, 140), 10816),
            "fc1_bias": rng.uniform(-0.1, 0.1, 140).astype(np.float32), "fc2": lecun((140, 10), 140),
            "fc2_bias": rng.uniform(-0.1, 0.1, 10).astype(np.float32)}


# ----------------------------------------------------------------------------------------- MNIST network


def test_mnist_serial_equals_the_nhwc_definition(rng):
    conv1, conv2, fc1, fc2 = _mnist_arrays(rng)
    net = MnistCNN(conv1, conv2, fc1, fc2)
    x = rng.random((7, 28, 28)).astype(np.float32)
    logits = net.forward(x, variant="serial")
    ref = mnist_forward(conv1, conv2, fc1, fc2, x)
    assert logits.dtype == np.float32 and logits.shape == (7, 10)
    assert rel_to_max(logits, ref) < 1e-5
    pred = net.predict(x, variant="serial")
    assert pred.dtype == np.int64 and pred.shape == (7,)
    np.testing.assert_array_equal(pred, np.argmax(logits, axis=1))


def test_fc1_rows_are_permuted_once_for_the_nchw_flatten(rng):
    conv1, conv2, fc1, fc2 = _mnist_arrays(rng)
    net = MnistCNN(conv1, conv2, fc1, fc2)
    h = rng.standard_normal((5, 64, 4, 4))
    nchw = h.reshape(5, -1) @ net.weights["fc1"].astype(np.float64)
    nhwc = h.transpose(0, 2, 3, 1).reshape(5, -1) @ fc1.astype(np.float64)
    np.testing.assert_allclose(nchw, nhwc, rtol=1e-12, atol=1e-12)
    perm = nhwc_to_nchw_rows(4, 4, 64)
    assert perm[1] == 64 and perm[16] == 1  # NCHW row (c=0, y=0, x=1) is NHWC row 64; (c=1, 0, 0) is row 1
    back = net.file_weights()
    for name, arr in zip(("conv1", "conv2", "fc1", "fc2"), (conv1, conv2, fc1, fc2)):
        np.testing.assert_array_equal(back[name], arr)
    assert not net.weights["fc1"].flags.writeable


def test_file_layout_weights_equal_kcrs_weights(rng):
    conv1, conv2, fc1, fc2 = _mnist_arrays(rng)
    a = MnistCNN(conv1, conv2, fc1, fc2)
    b = MnistCNN(conv1.transpose(2, 3, 1, 0), conv2.transpose(2, 3, 1, 0), fc1, fc2, layout="file")
    x = rng.random((3, 1, 28, 28)).astype(np.float32)
    np.testing.assert_array_equal(a.forward(x, variant="serial"), b.forward(x, variant="serial"))


def test_random_weights_are_seeded():
    a, b, c = MnistCNN.random(5), MnistCNN.random(5), MnistCNN.random(6)
    for key in ("conv1", "conv2", "fc1", "fc2"):
        np.testing.assert_array_equal(a.weights[key], b.weights[key])
        assert not np.array_equal(a.weights[key], c.weights[key])
    assert "seed 5" in repr(a) and "not trained" in repr(a)
    assert [s.output_shape for s in a.layers][:6] == [(32, 24, 24)] * 2 + [(32, 12, 12), (64, 8, 8), (64, 8, 8),
                                                                             (64, 4, 4)]
    assert "seed 5" in a.describe("serial") and "Arg Max" in a.describe("serial")


@pytest.mark.parametrize("shape", [(4, 28, 28), (4, 28, 28, 1), (4, 1, 28, 28)])
def test_input_layouts_and_dtypes_agree(rng, shape):
    net = MnistCNN.random(1)
    raw = rng.integers(0, 256, (4, 28, 28), dtype=np.uint8)
    ref = net.forward(raw.astype(np.float32) / np.float32(255), variant="serial")
    np.testing.assert_array_equal(net.forward(raw.reshape(shape), variant="serial"), ref)  # uint8: / 255 on the host
    as64 = (raw.astype(np.float32) / np.float32(255)).astype(np.float64).reshape(shape)
    np.testing.assert_array_equal(net.forward(as64, variant="serial"), ref)  # float64 converted exactly


def test_chunking_does_not_change_results(rng):
    net = MnistCNN.random(2)
    x = rng.random((11, 28, 28)).astype(np.float32)
    whole = net.forward(x, variant="serial")
    np.testing.assert_array_equal(net.forward(x, variant="serial", max_batch=3), whole)
    tiny = MnistCNN.from_arrays(net.file_weights(), memory_budget_bytes=1)
    assert tiny.chunk_images() == 1
    out, t = tiny.predict(x, variant="serial", timing=True)
    np.testing.assert_array_equal(out, np.argmax(whole, axis=1))
    assert (t.images, t.chunks, t.chunk_images) == (11, 11, 1)
    unlimited = MnistCNN.from_arrays(net.file_weights(), memory_budget_bytes=None)
    assert unlimited.chunk_images() is None and unlimited.chunk_images(4) == 4
    assert MnistCNN.random(0).chunk_images() == DEFAULT_MEMORY_BUDGET // MnistCNN.random(0).activation_bytes_per_image()
    assert MnistCNN.random(0).chunk_images() >= 10000  # the MNIST test set in one chunk


def test_timing_rows_follow_the_stage(rng):
    net = MnistCNN.random(3)
    x = rng.random((5, 28, 28)).astype(np.float32)
    logits, t = net.forward(x, variant="serial", timing=True, max_batch=2)
    stage = gpuopt.models.stages("mnist")["serial"]
    assert [r.name for r in t.layers] == [s.name for s in stage.steps]
    assert [(r.op, r.variant) for r in t.layers] == [(s.op, s.variant) for s in stage.steps]
    assert all(r.kernel_ms > 0 and r.h2d_ms == 0 and r.d2h_ms == 0 for r in t.layers)
    assert t.chunks == 3 and t.wall_ms >= t.kernel_ms > 0 and t.clock == "cpu"
    text = t.table()
    assert "Convolution Forward Valid (2)" in text and "798,785" in text and "Tesla K80" in text
    _, tp = net.predict(x, variant="serial", timing=True)
    assert tp.layers[-1].name == "Arg Max" and len(tp.layers) == len(stage.steps) + 1


# ----------------------------------------------------------------------------------------- the real model


@pytest.fixture(scope="module")
def reference_net():
    pytest.importorskip("h5py")
    return MnistCNN.from_file(data_file("ece408_2016fa", "model.hdf5"))


@needs_h5py
def test_default_model_file(reference_net):
    data_file("ece408_2016fa", "model.hdf5")
    net = MnistCNN.from_file()
    assert "model.hdf5" in net.source
    for key in ("conv1", "conv2", "fc1", "fc2"):
        np.testing.assert_array_equal(net.weights[key], reference_net.weights[key])


@needs_h5py
@pytest.mark.parametrize("n,correct", [(2, 2), (10, 10), (100, 95)])
def test_reference_test_files(reference_net, n, correct):
    x, y = gpuopt.datasets.load_ece408_test(data_file("ece408_2016fa", f"test{n}.hdf5"), layout="nhwc",
                                            onehot=True)
    acc, got, total = reference_net.evaluate(x, y, variant="serial", return_counts=True)  # NHWC, one-hot labels
    assert (got, total) == (correct, n) and acc == correct / n
    if n <= 10:
        np.testing.assert_array_equal(reference_net.predict(x, variant="serial"), np.argmax(y, axis=1))


@needs_h5py
def test_reference_mnist_first_100(reference_net):
    images, labels = gpuopt.datasets.load_mnist("t10k", data_file("mnist"))
    assert reference_net.evaluate(images[:100], labels[:100], variant="serial") == 0.95
    assert reference_net.evaluate(images[:10], labels[:10], variant="serial") == 1.0
    a = reference_net.forward(images[:20], variant="serial")
    b = reference_net.forward(images[:20].astype(np.float32) / np.float32(255), variant="serial")
    np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------------------- Fashion network


def test_fashion_serial_equals_the_definition(rng):
    w = _fashion_arrays(rng)
    net = FashionCNN.from_arrays(w)
    x = synthetic_images(3, seed=int(rng.integers(1 << 30)))
    logits = net.forward(x, variant="serial")
    ref = fashion_forward(w, x)
    assert logits.shape == (3, 10) and rel_to_max(logits, ref) < 1e-5
    np.testing.assert_array_equal(net.predict(x, variant="serial"), np.argmax(logits, axis=1))
    if ("softmax", "cpu") in {(op, v) for op, vs in gpuopt.variants().items() for v in vs}:
        p = net.proba(x, variant="serial")
        np.testing.assert_allclose(p, softmax(ref), rtol=1e-4, atol=1e-6)


def test_fashion_random_chunks_and_file_round_trip(rng, tmp_path):
    net = FashionCNN.random(4)
    assert "seed 4" in net.source and net.layers[4].output_shape == (10816,)
    x = synthetic_images(5, seed=1)
    assert x.dtype == np.uint8 and x.shape == (5, 64, 64)
    np.testing.assert_array_equal(synthetic_images(5, seed=1), x)
    whole = net.forward(x, variant="serial")
    np.testing.assert_array_equal(net.forward(x, variant="serial", max_batch=2), whole)
    path = net.save(tmp_path / "fashion.npz")
    again = FashionCNN.from_file(path)
    np.testing.assert_array_equal(again.forward(x, variant="serial"), whole)


def test_fashion_file_errors(rng, tmp_path):
    w = _fashion_arrays(rng)
    np.savez(tmp_path / "missing.npz", **{k: v for k, v in w.items() if k != "fc1_bias"})
    with pytest.raises(ValueError, match="fc1_bias"):
        FashionCNN.from_file(tmp_path / "missing.npz")
    np.savez(tmp_path / "shape.npz", **{**w, "fc2": w["fc2"][:100]})
    with pytest.raises(ValueError, match="fc2"):
        FashionCNN.from_file(tmp_path / "shape.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="npz"):
        FashionCNN.from_file(tmp_path / "junk.npz")
    np.save(tmp_path / "single.npy", w["conv1"])
    with pytest.raises(ValueError, match="npz"):
        FashionCNN.from_file(tmp_path / "single.npy")
    with pytest.raises(FileNotFoundError):
        FashionCNN.from_file(tmp_path / "absent.npz")
    with pytest.raises(ValueError, match="conv2 has 5 input channels"):
        FashionCNN.from_arrays({**w, "conv2": w["conv2"][:, :5]})
    with pytest.raises(ValueError, match="fc1_bias"):
        FashionCNN.from_arrays({**w, "fc1_bias": w["fc1_bias"][:3]})
    with pytest.raises(ValueError, match=r"lack \['fc2_bias'\]"):
        FashionCNN.from_arrays({k: v for k, v in w.items() if k != "fc2_bias"})
    assert set(FASHION_KEYS) == set(w)


# ----------------------------------------------------------------------------------------- bad weights


@needs_h5py
@pytest.mark.parametrize("name,bad,match", [
    ("fc2", None, "missing dataset /fc2"),
    ("conv2", np.zeros((5, 5, 16, 64), np.float32), "conv2"),
    ("fc1", np.zeros((1000, 128), np.float32), "fc1"),
    ("conv1", np.zeros((5, 5, 32), np.float32), "conv1"),
])
def test_bad_model_files(tmp_path, rng, name, bad, match):
    import h5py

    conv1, conv2, fc1, fc2 = _mnist_arrays(rng)
    stored = {"conv1": conv1.transpose(2, 3, 1, 0), "conv2": conv2.transpose(2, 3, 1, 0), "fc1": fc1, "fc2": fc2}
    path = tmp_path / "model.hdf5"
    with h5py.File(path, "w") as f:
        for key, arr in stored.items():
            if key != name:
                f.create_dataset(key, data=arr)
            elif bad is not None:
                f.create_dataset(key, data=bad)
    with pytest.raises(ValueError, match=match):
        MnistCNN.from_file(path)


def test_without_h5py_the_error_says_so(tmp_path, monkeypatch):
    (tmp_path / "model.hdf5").write_bytes(b"\x89HDF\r\n\x1a\n")
    monkeypatch.setitem(sys.modules, "h5py", None)  # "import h5py" raises ImportError
    with pytest.raises(ImportError, match="h5py"):
        MnistCNN.from_file(tmp_path / "model.hdf5")


def test_bad_weight_arrays(rng):
    conv1, conv2, fc1, fc2 = _mnist_arrays(rng)
    with pytest.raises(ValueError, match="fc2 has 64 inputs"):
        MnistCNN(conv1, conv2, fc1, fc2[:64])
    with pytest.raises(ValueError, match="conv1 must have 1 input channel"):
        MnistCNN(np.zeros((32, 3, 5, 5), np.float32), conv2, fc1, fc2)
    with pytest.raises(ValueError, match="fc1 has 1024 inputs"):
        MnistCNN(conv1, conv2[:, :, :3, :3], fc1, fc2)
    with pytest.raises(TypeError, match="conv1"):
        MnistCNN(conv1.astype(complex), conv2, fc1, fc2)
    with pytest.raises(ValueError, match="fc1 contains NaN"):
        MnistCNN(conv1, conv2, np.full_like(fc1, np.nan), fc2)
    with pytest.raises(ValueError, match="layout"):
        MnistCNN(conv1, conv2, fc1, fc2, layout="nhwc")
    with pytest.raises(ValueError, match=r"lack \['fc1'\]"):
        MnistCNN.from_arrays({"conv1": conv1, "conv2": conv2, "fc2": fc2})
    with pytest.raises(ValueError, match="max_batch"):
        MnistCNN(conv1, conv2, fc1, fc2, max_batch=0)


# ----------------------------------------------------------------------------------------- bad images


@pytest.mark.parametrize("images,error,match", [
    (np.zeros((2, 28, 27), np.float32), ValueError, r"\(N, 28, 28\)"),
    (np.zeros((28, 28), np.float32), ValueError, "must have shape"),
    (np.zeros((2, 3, 28, 28), np.float32), ValueError, "must have shape"),
    (np.zeros((0, 28, 28), np.float32), ValueError, "empty batch"),
    (np.zeros((2, 28, 28), np.int32), TypeError, "uint8"),
    (np.zeros((2, 28, 28), bool), TypeError, "uint8"),
    (np.zeros((2, 28, 28), np.complex64), TypeError, "float"),
    ("images", TypeError, "numeric"),
    (None, TypeError, "None"),
])
def test_bad_images(images, error, match):
    with pytest.raises(error, match=match):
        MnistCNN.random(0).forward(images, variant="serial")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_images(bad):
    x = np.zeros((3, 28, 28), np.float32)
    x[2, 5, 5] = bad
    with pytest.raises(ValueError, match=r"images\[2\] contains NaN or infinity"):
        MnistCNN.random(0).predict(x, variant="serial")
    with pytest.raises(ValueError, match="must have shape"):
        FashionCNN.random(0).forward(np.zeros((1, 28, 28), np.float32), variant="serial")


def test_bad_labels_variant_and_flags():
    net = MnistCNN.random(0)
    x = np.zeros((3, 28, 28), np.uint8)
    with pytest.raises(ValueError, match="3 entries for 3 images|entries"):
        net.evaluate(x, np.zeros(2, np.int64), variant="serial")
    with pytest.raises(TypeError, match="integer class indices"):
        net.evaluate(x, np.zeros(3, np.float32), variant="serial")
    with pytest.raises(ValueError, match="classes 0..9"):
        net.evaluate(x, np.array([0, 1, 10]), variant="serial")
    onehot = np.eye(10)[[6, 6, 6]]
    assert net.evaluate(x, onehot, variant="serial", return_counts=True)[1:] == (
        int((net.predict(x, variant="serial") == 6).sum()), 3)
    with pytest.raises(ValueError, match="unknown stage 'turbo'; stages: \\['serial', 'basic'"):
        net.forward(x, variant="turbo")
    with pytest.raises(TypeError, match="stage name"):
        net.forward(x, variant=3)
    with pytest.raises(TypeError, match="timing"):
        net.forward(x, variant="serial", timing=1)
    with pytest.raises(ValueError, match="no 'proba' head"):
        gpuopt.models.stages("mnist")["serial"].chain("proba")


@pytest.mark.skipif(gpuopt.cuda_available(), reason="checks the message without a GPU")
def test_gpu_stage_without_gpu_says_why():
    net = MnistCNN.random(0)
    x = np.zeros((1, 28, 28), np.float32)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU|not register"):
        net.forward(x, variant="hybrid")
    assert net.default_stage() == "serial"
    assert net.forward(x).shape == (1, 10)  # the default stage runs here


def test_the_callers_weights_are_copied(rng):
    conv1, conv2, fc1, fc2 = _mnist_arrays(rng)
    net = MnistCNN(conv1, conv2, fc1, fc2)
    assert conv1.flags.writeable and fc2.flags.writeable
    conv1[:] = 0  # does not reach the network
    assert np.abs(net.weights["conv1"]).max() > 0
