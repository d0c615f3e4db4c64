"""gpuopt's ops as PyTorch custom ops (``torch.library``), for models that stay in PyTorch.

``import gpuopt.torch`` (needs PyTorch 2.4 or later; gpuopt itself never imports torch) registers, under the
``gpuopt`` namespace, ``conv2d``, ``conv2d_pool``, ``matmul``, ``sparse_conv2d``, ``relu``, ``tanh``,
``max_pool2d``, ``avg_pool2d``, ``fully_connected``, ``argmax`` and ``softmax``, each with a fake (meta)
implementation, so they run inside ``torch.compile(fullgraph=True)`` models (as opaque calls) and pass
``torch.library.opcheck``. Call them as ``gpuopt.torch.conv2d(x, w, ...)`` (the functions below, with defaults)
or ``torch.ops.gpuopt.conv2d``.

CUDA tensors run gpuopt's GPU variants on PyTorch's current stream (graph capture included) and come back as
CUDA tensors that share the result's memory (no copy); CPU tensors run the same op on NumPy. Inputs are made
contiguous first; float ops return float32, ``argmax`` int64, ``sparse_conv2d`` int32. No autograd: these are
inference ops (a backward is not registered, so ``requires_grad`` inputs raise in training).

Example: the ECE408 MNIST network as a ``torch.nn.Module`` on gpuopt's ops, compiled whole::

    import torch, gpuopt.torch as gt
    from gpuopt.models import MnistCNN

    class Mnist(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            for k, v in net.weights.items():
                self.register_buffer(k, torch.from_numpy(v.copy()).cuda())
        def forward(self, x):                       # (N, 1, 28, 28) float32
            x = gt.conv2d_pool(x, self.conv1, activation="relu", pool="avg")
            x = gt.conv2d_pool(x, self.conv2, activation="relu", pool="avg")
            x = gt.fully_connected(x.flatten(1), self.fc1, activation="relu")
            return gt.fully_connected(x, self.fc2)

    model = torch.compile(Mnist(MnistCNN.from_file()), fullgraph=True)
"""

from typing import Optional, Sequence  # (no `from __future__ import annotations`: torch.library reads them)

import numpy as np
import torch
from torch import Tensor

import gpuopt
import gpuopt.nn

__all__ = ["conv2d", "conv2d_pool", "matmul", "sparse_conv2d", "relu", "tanh", "max_pool2d", "avg_pool2d",
           "fully_connected", "argmax", "softmax"]

if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
    raise ImportError(f"gpuopt.torch needs torch.library.custom_op (PyTorch 2.4+); this is torch {torch.__version__}")


def _in(t: Optional[Tensor]):
    """A tensor as gpuopt takes it: CUDA tensors as they are (contiguous), CPU tensors as NumPy."""
    if t is None:
        return None
    t = t.contiguous()
    return t if t.is_cuda else t.numpy()


def _out(y, like: Tensor) -> Tensor:
    """gpuopt's result as a tensor on ``like``'s device: a DeviceArray shared without a copy (its memory lives as
    long as the tensor), NumPy wrapped."""
    if isinstance(y, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(y))
    return torch.as_tensor(y, device=like.device)


def _act(activation: str):
    return None if activation == "none" else activation


def _f32(t: Tensor, shape) -> Tensor:
    return t.new_empty(tuple(int(s) for s in shape), dtype=torch.float32)


# ---------------------------------------------------------------- conv2d

@torch.library.custom_op("gpuopt::conv2d", mutates_args=())
def _conv2d(x: Tensor, w: Tensor, bias: Optional[Tensor], stride: Sequence[int], padding: Sequence[int],
            activation: str) -> Tensor:
    return _out(gpuopt.conv2d(_in(x), _in(w), stride=tuple(stride), padding=tuple(padding), bias=_in(bias),
                              activation=_act(activation)), x)


@_conv2d.register_fake
def _(x, w, bias, stride, padding, activation):
    n, _, h, wd = x.shape
    k, _, r, s = w.shape
    return _f32(x, (n, k, (h + 2 * padding[0] - r) // stride[0] + 1, (wd + 2 * padding[1] - s) // stride[1] + 1))


def _pair(v) -> list:
    return [int(v), int(v)] if isinstance(v, int) else [int(v[0]), int(v[1])]


def conv2d(x: Tensor, w: Tensor, bias: Optional[Tensor] = None, *, stride=1, padding=0,
           activation: str = "none") -> Tensor:
    """:func:`gpuopt.conv2d` on tensors: x (N, C, H, W), w (K, C, R, S) -> float32 (N, K, P, Q)."""
    return _conv2d(x, w, bias, _pair(stride), _pair(padding), activation)


# ---------------------------------------------------------------- conv2d_pool

@torch.library.custom_op("gpuopt::conv2d_pool", mutates_args=())
def _conv2d_pool(x: Tensor, w: Tensor, bias: Optional[Tensor], activation: str, pool: str, pool_size: int,
                 input_divisor: float) -> Tensor:
    return _out(gpuopt.nn.conv2d_pool(_in(x), _in(w), _in(bias), activation=activation, pool=pool,
                                      pool_size=pool_size, input_divisor=input_divisor), x)


@_conv2d_pool.register_fake
def _(x, w, bias, activation, pool, pool_size, input_divisor):
    n, _, h, wd = x.shape
    k, _, r, s = w.shape
    return _f32(x, (n, k, (h - r + 1) // pool_size, (wd - s + 1) // pool_size))


def conv2d_pool(x: Tensor, w: Tensor, bias: Optional[Tensor] = None, *, activation: str = "none", pool: str = "max",
                pool_size: int = 2, input_divisor: float = 1.0) -> Tensor:
    """:func:`gpuopt.nn.conv2d_pool` on tensors: valid stride-1 convolution, activation, pooling."""
    return _conv2d_pool(x, w, bias, activation, pool, pool_size, input_divisor)


# ---------------------------------------------------------------- matmul, fully_connected

@torch.library.custom_op("gpuopt::matmul", mutates_args=())
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """:func:`gpuopt.matmul` on tensors: a (M, K) @ b (K, N) -> float32 (M, N), strict FP32."""
    return _out(gpuopt.matmul(_in(a), _in(b)), a)


@matmul.register_fake
def _(a, b):
    return _f32(a, (a.shape[0], b.shape[1]))


@torch.library.custom_op("gpuopt::fully_connected", mutates_args=())
def _fully_connected(x: Tensor, w: Tensor, bias: Optional[Tensor], activation: str) -> Tensor:
    return _out(gpuopt.nn.fully_connected(_in(x), _in(w), _in(bias), activation=_act(activation)), x)


@_fully_connected.register_fake
def _(x, w, bias, activation):
    return _f32(x, (x.shape[0], w.shape[1]))


def fully_connected(x: Tensor, w: Tensor, bias: Optional[Tensor] = None, *, activation: str = "none") -> Tensor:
    """:func:`gpuopt.nn.fully_connected` on tensors: x (N, I) @ w (I, O) + bias, activation -> float32 (N, O)."""
    return _fully_connected(x, w, bias, activation)


# ---------------------------------------------------------------- sparse_conv2d

@torch.library.custom_op("gpuopt::sparse_conv2d", mutates_args=())
def sparse_conv2d(x: Tensor, w: Tensor) -> Tensor:
    """:func:`gpuopt.sparse_conv2d` on tensors: x int16 (C, H, W), dense filters w int16 (M, C, R, S) -> int32
    (M, H // 2, W // 2) (the filters are encoded on every call: for a loop, call gpuopt.sparse_conv2d with
    FASTFilters kept on the device)."""
    return _out(gpuopt.sparse_conv2d(_in(x), _in(w)), x)


@sparse_conv2d.register_fake
def _(x, w):
    return x.new_empty((w.shape[0], x.shape[1] // 2, x.shape[2] // 2), dtype=torch.int32)


# ---------------------------------------------------------------- the layer ops

@torch.library.custom_op("gpuopt::relu", mutates_args=())
def relu(x: Tensor) -> Tensor:
    """:func:`gpuopt.nn.relu` on a tensor (float32 out)."""
    return _out(gpuopt.nn.relu(_in(x)), x)


@torch.library.custom_op("gpuopt::tanh", mutates_args=())
def tanh(x: Tensor) -> Tensor:
    """:func:`gpuopt.nn.tanh` on a tensor (float32 out)."""
    return _out(gpuopt.nn.tanh(_in(x)), x)


@torch.library.custom_op("gpuopt::softmax", mutates_args=())
def softmax(x: Tensor) -> Tensor:
    """:func:`gpuopt.nn.softmax` of each row of x (N, D) (float32 out)."""
    return _out(gpuopt.nn.softmax(_in(x)), x)


for _op in (relu, tanh, softmax):
    _op.register_fake(lambda x: _f32(x, x.shape))


@torch.library.custom_op("gpuopt::argmax", mutates_args=())
def argmax(x: Tensor) -> Tensor:
    """:func:`gpuopt.nn.argmax` of each row of x (N, D) -> int64 (N,)."""
    return _out(gpuopt.nn.argmax(_in(x)), x)


@argmax.register_fake
def _(x):
    return x.new_empty((x.shape[0],), dtype=torch.int64)


@torch.library.custom_op("gpuopt::max_pool2d", mutates_args=())
def max_pool2d(x: Tensor, size: int) -> Tensor:
    """:func:`gpuopt.nn.max_pool2d` on a tensor (..., H, W) -> float32 (..., H // size, W // size)."""
    return _out(gpuopt.nn.max_pool2d(_in(x), size), x)


@torch.library.custom_op("gpuopt::avg_pool2d", mutates_args=())
def avg_pool2d(x: Tensor, size: int) -> Tensor:
    """:func:`gpuopt.nn.avg_pool2d` on a tensor (..., H, W) -> float32 (..., H // size, W // size)."""
    return _out(gpuopt.nn.avg_pool2d(_in(x), size), x)


for _op in (max_pool2d, avg_pool2d):
    _op.register_fake(lambda x, size: _f32(x, (*x.shape[:-2], x.shape[-2] // size, x.shape[-1] // size)))
