"""gpuopt.torch: gpuopt's ops as torch.library custom ops -- the same results as the gpuopt calls, opcheck's
schema / fake-tensor / dispatch tests, and a compiled (fullgraph) MNIST module equal to gpuopt's own forward."""

import numpy as np
import pytest

import gpuopt
import gpuopt.nn

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
    pytest.skip("torch without torch.library.custom_op", allow_module_level=True)
gt = pytest.importorskip("gpuopt.torch")


@pytest.fixture(autouse=True)
def strict_fp32():
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def _t(rng, *shape, device="cuda"):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(device)


def _cases(rng, device):
    x, w, b = _t(rng, 2, 3, 12, 12, device=device), _t(rng, 4, 3, 3, 3, device=device), _t(rng, 4, device=device)
    rows, fw = _t(rng, 9, 31, device=device), _t(rng, 31, 6, device=device)
    xs = torch.from_numpy(rng.integers(0, 30, size=(3, 10, 10)).astype(np.int16)).to(device)
    ws = torch.from_numpy(rng.integers(-3, 4, size=(5, 3, 3, 3)).astype(np.int16)).to(device)
    n = lambda t: t.cpu().numpy()  # noqa: E731
    return [
        (torch.ops.gpuopt.conv2d, (x, w, b, [1, 1], [1, 1], "relu"),
         lambda: gpuopt.conv2d(n(x), n(w), bias=n(b), padding=1, activation="relu", variant="cpu")),
        (torch.ops.gpuopt.conv2d_pool, (x, w, b, "relu", "avg", 2, 1.0),
         lambda: gpuopt.nn.conv2d_pool(n(x), n(w), n(b), activation="relu", pool="avg", variant="cpu")),
        (torch.ops.gpuopt.matmul, (rows, fw), lambda: n(rows) @ n(fw)),
        (torch.ops.gpuopt.fully_connected, (rows, fw, None, "tanh"),
         lambda: gpuopt.nn.fully_connected(n(rows), n(fw), activation="tanh", variant="cpu")),
        (torch.ops.gpuopt.sparse_conv2d, (xs, ws), lambda: gpuopt.sparse_conv2d(n(xs), n(ws), variant="cpu")),
        (torch.ops.gpuopt.relu, (rows,), lambda: np.maximum(n(rows), 0)),
        (torch.ops.gpuopt.tanh, (rows,), lambda: gpuopt.nn.tanh(n(rows), variant="cpu")),
        (torch.ops.gpuopt.softmax, (rows,), lambda: gpuopt.nn.softmax(n(rows), variant="cpu")),
        (torch.ops.gpuopt.argmax, (rows,), lambda: np.argmax(n(rows), axis=1)),
        (torch.ops.gpuopt.max_pool2d, (x, 2), lambda: gpuopt.nn.max_pool2d(n(x), 2, variant="cpu")),
        (torch.ops.gpuopt.avg_pool2d, (x, 2), lambda: gpuopt.nn.avg_pool2d(n(x), 2, variant="cpu")),
    ]


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_every_op_equals_the_reference_and_passes_opcheck(rng, device):
    for op, args, ref in _cases(rng, device):
        out = op(*args)
        assert out.device.type == device, op
        want = ref()
        got = out.cpu().numpy()
        if got.dtype.kind in "iu":
            np.testing.assert_array_equal(got, want, err_msg=str(op))
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(op))
        torch.library.opcheck(op, args)


def test_the_wrappers_take_defaults(rng):
    x, w = _t(rng, 1, 3, 9, 9), _t(rng, 2, 3, 3, 3)
    np.testing.assert_allclose(gt.conv2d(x, w, padding=1).cpu().numpy(),
                               gpuopt.conv2d(x.cpu().numpy(), w.cpu().numpy(), padding=1, variant="cpu"),
                               rtol=1e-4, atol=1e-4)
    assert tuple(gt.conv2d_pool(x, w).shape) == (1, 2, 3, 3)


class _Mnist(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        for k, v in net.weights.items():
            self.register_buffer(k, torch.from_numpy(np.array(v)).cuda())

    def forward(self, x):
        x = gt.conv2d_pool(x, self.conv1, activation="relu", pool="avg")
        x = gt.conv2d_pool(x, self.conv2, activation="relu", pool="avg")
        x = gt.fully_connected(x.flatten(1), self.fc1, activation="relu")
        return gt.fully_connected(x, self.fc2)


def test_a_compiled_mnist_module_equals_gpuopts_forward():
    from gpuopt.models import MnistCNN

    net = MnistCNN.random(11)
    images = np.random.default_rng(2).random((64, 28, 28), dtype=np.float32)
    want = net.forward(images, variant="fast")
    model = torch.compile(_Mnist(net), fullgraph=True)
    got = model(torch.from_numpy(images).cuda().reshape(64, 1, 28, 28))
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-4, atol=1e-4)
