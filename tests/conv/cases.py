"""What the conv2d GPU test files share: random inputs, the reports' problems, awkward shapes, the check
against the CPU reference and the more-than-2**31-elements input.

Shapes are (N, C, H, W, K, R, S, stride, padding) tuples; stride and padding are an int or a pair.
"""

from __future__ import annotations

import numpy as np

import gpuopt
from conftest import conv_call, relative_error

# The CS6235 report's four configurations, its `cnn-gpu N C K H W R S u v` arguments.
CS6235 = {
    "conf1": (1, 3, 64, 112, 112, 3, 3, 2, 2),
    "conf2": (1, 832, 128, 7, 7, 1, 1, 1, 1),
    "conf3": (128, 3, 64, 112, 112, 3, 3, 2, 2),
    "conf4": (128, 832, 128, 7, 7, 1, 1, 1, 1),
}

# (x shape, w shape) of the ECE408 layers at a batch of 10: Fashion-MNIST and the MNIST CNN.
ECE408 = {
    "fashion-conv1": ((10, 1, 64, 64), (6, 1, 5, 5)),
    "fashion-conv2": ((10, 6, 30, 30), (16, 6, 5, 5)),
    "mnist-conv1": ((10, 1, 28, 28), (32, 1, 5, 5)),
    "mnist-conv2": ((10, 32, 12, 12), (64, 32, 5, 5)),
}

# Awkward shapes every tiled and GEMM kernel must get right: 1s, primes, H and W no multiple of any tile,
# N*P*Q = 1, strides 2, 3 and larger than the filter, padding up to the filter size (whole windows in the
# padding), R != S, C = 1 and large C, wide and tall images, N beyond the 65535 grid limit. Files add
# their own (K beyond a grid limit, C*R*S beyond 65535, ...).
AWKWARD_SHAPES = [
    (1, 1, 1, 1, 1, 1, 1, 1, 0),
    (1, 1, 5, 5, 1, 5, 5, 1, 0),
    (1, 1, 1, 1, 3, 3, 3, 1, 1),
    (2, 3, 7, 11, 5, 3, 3, 1, 1),
    (3, 5, 13, 17, 7, 5, 3, (2, 3), (2, 1)),
    (1, 3, 23, 23, 4, 3, 3, 2, 0),
    (2, 1, 33, 47, 13, 5, 5, 3, 2),
    (1, 2, 8, 8, 2, 3, 3, 4, 3),
    (1, 3, 17, 19, 2, 2, 2, (5, 7), 0),
    (2, 4, 6, 6, 3, 4, 2, 1, (3, 0)),
    (1, 1, 31, 29, 3, 3, 5, 1, (1, 2)),
    (5, 1, 37, 41, 11, 7, 1, (1, 2), (3, 0)),
    (1, 300, 9, 9, 5, 3, 3, 1, 1),
    (2, 832, 7, 7, 2, 1, 1, 1, 0),
    (1, 2, 3, 250, 3, 3, 3, 1, 0),
    (1, 13, 257, 3, 2, 3, 3, 1, 1),
    (7, 3, 64, 64, 17, 5, 5, 1, 2),
    (70000, 1, 1, 1, 1, 1, 1, 1, 0),
]

# Shapes at the grids' limits: a stride of 1000, C*R*S > 65535 (grids over taps or many channel chunks),
# 257 maps (map-tile tails), K = 65535 * 16 + 1 (grids over maps of 16 loop or group them).
GRID_LIMIT_SHAPES = [
    (1, 2, 3, 3, 5, 3, 3, 1000, 0),
    (1, 70001, 1, 1, 3, 1, 1, 1, 0),
    (1, 2, 9, 9, 257, 3, 3, 1, 1),
    (1, 1, 1, 1, 65535 * 16 + 1, 1, 1, 1, 0),
]


def uniform(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def ident(variant, params):
    """Test id of a variant and its parameters: ``unroll_k-unroll=4-loop_order=rsc``."""
    return "-".join([variant] + [f"{k}={v}" for k, v in params.items()])


def check_against_cpu(y, x, w, *, stride=1, padding=0, bias=None, activation=None, what=""):
    """y against the CPU reference, the error measured relative to the sums of |terms| (conv of |x| and |w|,
    + |bias|): float32 sums in another order differ by ~eps * sum|terms|, which a small output made of
    cancelling terms (a single 5x5 window, say) turns into a large error relative to the output itself.
    Activations are 1-Lipschitz, so the bound holds after them too. A wrong index still shows as an error of
    the order of the values."""
    y = np.asarray(y)
    assert y.dtype == np.float32 and y.shape == gpuopt.conv2d_output_shape(x.shape, w.shape, stride, padding), what
    assert np.isfinite(y).all(), f"{what}: unwritten (poisoned) or non-finite outputs"
    kw = dict(stride=stride, padding=padding, variant="cpu")
    ref = gpuopt.conv2d(x, w, bias=bias, activation=activation, **kw)
    scale = gpuopt.conv2d(np.abs(x), np.abs(w), bias=None if bias is None else np.abs(bias), **kw)
    err = float(np.linalg.norm(y.astype(np.float64) - ref) / max(np.linalg.norm(scale), 1e-30))
    assert err < 1e-5, f"{what}: error {err:.3g} relative to the sums of |terms|"


def run_and_check(variant, x, w, *, stride=1, padding=0, bias=None, activation=None, images=None, **params):
    """``variant`` on the whole batch (NumPy in, NumPy out) against the CPU reference on ``images`` (all by
    default; every output is checked for poison)."""
    y = gpuopt.conv2d(x, w, stride=stride, padding=padding, bias=bias, activation=activation, variant=variant,
                      **params)
    assert isinstance(y, np.ndarray)
    assert np.isfinite(y).all(), f"{variant} {params}: unwritten (poisoned) or non-finite outputs"
    if images is not None:
        x, y = x[images], y[images]
    check_against_cpu(y, x, w, stride=stride, padding=padding, bias=bias, activation=activation,
                      what=f"{variant} {params}")
    return y


def check_shape(rng, variant, shape, **params):
    """``variant`` on fresh random inputs of ``shape`` against the CPU reference."""
    n, c, h, w, k, r, s, stride, padding = shape
    return run_and_check(variant, uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s)), stride=stride,
                         padding=padding, **params)


def cs6235_problems(rng, confs=tuple(CS6235)):
    """Device inputs (x, w, bias) of CS6235 configurations, their stride, the images the CPU reference checks
    (all for N = 1; the first, the last and one random image for N = 128) and those images' host inputs."""
    problems = {}
    for conf in confs:
        n, c, k, h, w, r, s, u, v = CS6235[conf]
        x, wt, bias = uniform(rng, (n, c, h, w)), uniform(rng, (k, c, r, s)), uniform(rng, k)
        images = list(range(n)) if n == 1 else [0, int(rng.integers(1, n - 1)), n - 1]
        problems[conf] = (tuple(gpuopt.to_device(a) for a in (x, wt, bias)), (u, v), images, (x[images], wt, bias))
    return problems


def check_cs6235_problem(problem, variant, params):
    """``variant`` on one of cs6235_problems' device inputs (bias, relu; device array out) against the CPU."""
    (dx, dw, dbias), stride, images, (x, w, bias) = problem
    dy = gpuopt.conv2d(dx, dw, stride=stride, bias=dbias, activation="relu", variant=variant, **params)
    assert isinstance(dy, gpuopt.DeviceArray)
    y = dy.numpy()
    assert np.isfinite(y).all(), f"{variant} {params}: unwritten (poisoned) or non-finite outputs"
    check_against_cpu(y[images], x, w, stride=stride, bias=bias, activation="relu", what=f"{variant} {params}")


#: Variants that compute only valid (padding 0), stride-1 convolutions with 3x3 or 5x5 filters, and refuse
#: every other problem up front with a ValueError.
VALID_STRIDE1_ONLY = {"direct_fused"}


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


#: implicit_gemm_tf32x3's staging: the whole padded image twice (TF32 hi and lo) and the split filters must fit
#: the H200's opt-in shared memory per block (227 KB).
TF32X3_SMEM_LIMIT = 232448


def refusal(variant, w_shape, stride=1, padding=0, x_shape=None):
    """The message (a regex) with which ``variant`` must refuse this problem up front, or None if it runs it."""
    if variant == "implicit_gemm_tf32x3":
        k, c, r, s = w_shape
        if k > 32:
            return "at most 32 output maps"
        if x_shape is not None:
            ph, pw = _pair(padding)
            plane = c * (x_shape[2] + 2 * ph) * (x_shape[3] + 2 * pw)
            crs_pad, nt = (c * r * s + 7) // 8 * 8, 1 if k <= 8 else 2 if k <= 16 else 4
            if 4 * (2 * ((plane + 3) // 4 * 4) + 2 * crs_pad * 8 * nt + crs_pad) > TF32X3_SMEM_LIMIT:
                return "stages one whole"
    if variant == "pointwise_tf32x3" and (tuple(w_shape[2:]) != (1, 1) or _pair(padding) != (0, 0)):
        return "takes 1x1 filters without padding"
    if variant == "depthwise" and w_shape[1] != 1:
        return "takes depthwise layers only"  # these problems have groups = 1: depthwise only where C = 1
    if variant == "winograd":  # stride 1, 3x3/5x5 filters, any padding
        r, s = w_shape[2:]
        if _pair(stride) != (1, 1):
            return "winograd: stride must be 1"
        if r != s or r not in (3, 5):
            return "winograd: filters must be 3x3 or 5x5"
    if variant in VALID_STRIDE1_ONLY:
        r, s = w_shape[2:]
        if _pair(stride) != (1, 1) or _pair(padding) != (0, 0):
            return "valid .*stride-1"
        if r != s or r not in (3, 5):
            return "3x3 or 5x5"
    return None


def check_fp32_level(err, x, w, ref, *, stride=1, padding=0, bias=None, activation=None):
    """A 3xTF32 variant's error against float64 ``ref`` is FP32-level: at most 2x cuDNN FP32's own (strict, TF32
    off) on the same inputs, or 2x 2^-22 of the terms' scale where both are a few ulps. 3xTF32 drops the lo*lo
    product and each split's residual, ~2^-22 of each product, so its error follows the root sum of squares of an
    output's terms (products and bias), not the output: a 27-term layer sits at 2.4e-7 against cuDNN's 7.8e-8, and
    a one-term layer whose product nearly cancels its bias at several times 2^-22 of the output (the terms' scale
    is the output's for long random sums, so the floor stays 2^-21 there)."""
    if "cudnn" not in gpuopt.variants("conv2d"):
        return
    import oracles  # (tests/ is on the path of every test module)
    y_cudnn = gpuopt.conv2d(x, w, stride=stride, padding=padding, bias=bias, activation=activation, variant="cudnn")
    cudnn_err = relative_error(y_cudnn, ref)
    x64, w64 = np.asarray(x, np.float64), np.asarray(w, np.float64)
    b2 = None if bias is None else np.asarray(bias, np.float64) ** 2
    terms = np.sqrt(oracles.conv2d(x64 ** 2, w64 ** 2, b2, _pair(stride), _pair(padding)))
    terms[np.asarray(ref) == 0] = 0  # outputs an activation clipped to zero carry no error
    scale = np.linalg.norm(terms) / max(np.linalg.norm(ref), np.finfo(np.float64).tiny)
    assert err <= 2 * max(cudnn_err, 2.0 ** -22 * scale), (err, cudnn_err, scale)


def require_hopper(variant):
    """Skip unless GPU 0 is a Hopper GPU: the 3xTF32 warpgroup-MMA variants run there only."""
    import pytest
    if tuple(gpuopt.device_info()["compute_capability"]) != (9, 0):
        pytest.skip(f"{variant} runs on Hopper GPUs only")


def check_tf32x3_against_float64(rng, variant, shape):
    """``variant`` on a random (N, C, H, W, K, R, S, stride, padding) layer with a bias and relu, against the float64
    oracle: under 1e-5 relative and FP32-level (check_fp32_level)."""
    import oracles  # (tests/ is on the path of every test module)
    n, c, h, w, k, r, s, stride, padding = shape
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((k, c, r, s)).astype(np.float32)
    bias = rng.standard_normal(k).astype(np.float32)
    y = gpuopt.conv2d(x, wt, stride=stride, padding=padding, bias=bias, activation="relu", variant=variant)
    ref = oracles.conv2d(x, wt, bias, (stride, stride), (padding, padding), "relu")
    assert y.shape == ref.shape
    err = relative_error(y, ref)
    assert err < 1e-5, err
    check_fp32_level(err, x, wt, ref, stride=stride, padding=padding, bias=bias, activation="relu")


def check_activation_and_bias(rng, variant, x_shape, w_shape, activation, with_bias, padding=0):
    """``variant`` with ``activation`` and with or without a bias, against the float64 oracle (1e-5 relative)."""
    import oracles  # (tests/ is on the path of every test module)
    x = rng.standard_normal(x_shape).astype(np.float32)
    wt = rng.standard_normal(w_shape).astype(np.float32)
    bias = rng.standard_normal(w_shape[0]).astype(np.float32) if with_bias else None
    y = gpuopt.conv2d(x, wt, padding=padding, bias=bias, activation=activation, variant=variant)
    ref = oracles.conv2d(x, wt, bias, (1, 1), (padding, padding), activation)
    assert relative_error(y, ref) < 1e-5, (variant, activation, with_bias)


def check_device_and_torch_inputs(rng, variant, x_shape, w_shape, **kw):
    """``variant`` on DeviceArrays returns a DeviceArray within 1e-5 of the float64 oracle, bitwise the same on a
    second call, and on torch tensors the same answer (skipped without torch)."""
    import pytest

    import oracles

    x = rng.standard_normal(x_shape).astype(np.float32)
    wt = rng.standard_normal(w_shape).astype(np.float32)
    stride, padding = _pair(kw.get("stride", 1)), _pair(kw.get("padding", 0))
    ref = oracles.conv2d(x, wt, None, stride, padding, "none")
    dx, dw = gpuopt.to_device(x), gpuopt.to_device(wt)
    y = gpuopt.conv2d(dx, dw, variant=variant, **kw)
    assert isinstance(y, gpuopt.cuda.DeviceArray) and relative_error(y.numpy(), ref) < 1e-5
    assert gpuopt.conv2d(dx, dw, variant=variant, **kw).numpy().tobytes() == y.numpy().tobytes()
    torch = pytest.importorskip("torch")
    yt = gpuopt.conv2d(torch.from_numpy(x).cuda(), torch.from_numpy(wt).cuda(), variant=variant, **kw)
    assert relative_error(np.asarray(yt.cpu()) if hasattr(yt, "cpu") else yt.numpy(), ref) < 1e-5


def check_device_arrays(rng, variant, *, exact=True, **params):
    """``variant`` with device inputs returns a DeviceArray equal to its NumPy result (bitwise when ``exact``:
    same kernel, same inputs; else to 1e-6, for atomics or library kernels), one device input is enough, and
    a device output chains into the next layer (checked against the CPU reference). N = 6, K = 9: tails for
    the unrolled kernels."""
    x, w, bias = uniform(rng, (6, 3, 15, 13)), uniform(rng, (9, 3, 3, 3)), uniform(rng, 9)
    valid_only = variant in VALID_STRIDE1_ONLY  # then: padding 0, and a 3x3 stride-1 second layer
    w2 = uniform(rng, (5, 9, 3, 3) if valid_only else (5, 9, 2, 2))
    pad, stride2 = (0, 1) if valid_only else (1, 2)
    kw = dict(padding=pad, bias=bias, activation="tanh", variant=variant, **params)
    same = np.testing.assert_array_equal if exact else (
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6))
    y = gpuopt.conv2d(x, w, **kw)
    dx, dw, dbias = gpuopt.to_device(x), gpuopt.to_device(w), gpuopt.to_device(bias)
    dy = gpuopt.conv2d(dx, dw, **{**kw, "bias": dbias})
    assert isinstance(dy, gpuopt.DeviceArray) and dy.shape == y.shape and dy.dtype == np.float32
    same(dy.numpy(), y)
    dmixed = gpuopt.conv2d(x, dw, **kw)  # one device input is enough for a device result
    assert isinstance(dmixed, gpuopt.DeviceArray)
    same(dmixed.numpy(), y)
    dz = gpuopt.conv2d(dy, gpuopt.to_device(w2), stride=stride2, variant=variant, **params)
    assert isinstance(dz, gpuopt.DeviceArray)
    ref = gpuopt.conv2d(gpuopt.conv2d(x, w, padding=pad, bias=bias, activation="tanh", variant="cpu"), w2,
                        stride=stride2, variant="cpu")
    assert relative_error(dz.numpy(), ref) < 1e-5


# The launchers' own checks, called directly (bypassing gpuopt's Python checks): a good problem
# (N, C, H, W, K, R, S, u, v, ph, pw) and bad shapes with the message each must raise.
LAUNCH_GOOD = (1, 2, 5, 5, 3, 3, 3, 1, 1, 0, 0)
LAUNCH_BAD = {
    "filter larger than the padded input": (1, 2, 5, 5, 3, 7, 3, 1, 1, 0, 0),
    "stride must be positive": (1, 2, 5, 5, 3, 3, 3, 0, 1, 0, 0),
    "padding must be non-negative": (1, 2, 5, 5, 3, 3, 3, 1, 1, -1, 0),
    "every dimension must be positive": (0, 2, 5, 5, 3, 3, 3, 1, 1, 0, 0),
}


def check_launcher_rejects_bad_arguments(fn, rng, more=(), what="", **params):
    """The binding ``fn`` (one Conv2dArgs: x, w, bias, y pointers, the shape, the activation; then the keyword
    parameters ``params``) fails with ValueError on LAUNCH_BAD's shapes, a null pointer, an unknown activation
    and ``more``'s (match, shape, kwargs) calls, launching nothing; then the process is still usable:
    LAUNCH_GOOD runs and is right."""
    import pytest

    from gpuopt._ext import cuda_module

    cuda = cuda_module()
    x, w = gpuopt.to_device(uniform(rng, (1, 2, 5, 5))), gpuopt.to_device(uniform(rng, (3, 2, 3, 3)))
    y = gpuopt.cuda.empty((1, 3, 3, 3))
    calls = [(match, (x.ptr, w.ptr, 0, y.ptr, shape, "none"), {}) for match, shape in LAUNCH_BAD.items()]
    calls += [("must be device pointers", (0, w.ptr, 0, y.ptr, LAUNCH_GOOD, "none"), {}),
              ("activation must be", (x.ptr, w.ptr, 0, y.ptr, LAUNCH_GOOD, "sigmoid"), {})]
    calls += [(match, (x.ptr, w.ptr, 0, y.ptr, shape, "none"), kwargs) for match, shape, kwargs in more]
    for match, args, kwargs in calls:
        with pytest.raises(ValueError, match=match):
            fn(conv_call(cuda, *args), **{**params, **kwargs})
    fn(conv_call(cuda, x.ptr, w.ptr, 0, y.ptr, LAUNCH_GOOD), **params)
    check_against_cpu(y.numpy(), x.numpy(), w.numpy(), what=what)


def misaligned_copy(a):
    """A device copy of a whose base address is 4 bytes past a 16-byte boundary."""
    from gpuopt._ext import cuda_module

    a = np.ascontiguousarray(a, np.float32)
    view = misaligned_empty(a.shape)
    cuda_module().copy_h2d(view.ptr, a, a.nbytes)
    return view


def misaligned_empty(shape):
    """An uninitialised device array whose base address is 4 bytes past a 16-byte boundary."""
    buf = gpuopt.cuda.DeviceArray.empty((int(np.prod(shape)) + 1,), np.float32)
    view = gpuopt.cuda.DeviceArray(tuple(shape), np.float32, buf.ptr + 4, owner=buf)
    assert view.ptr % 16 == 4
    return view


# x with more than 2**31 elements (10.5 GB): the kernels need 64-bit offsets. The input is zero except the
# rows the strided windows read, which are random; the same rows packed densely (stride R over them) give
# the reference on the CPU.
BIG = dict(N=1, C=2, H=20011, W=65539, K=5, R=2, S=3, u=2501, v=8191)


def check_more_than_2_31_input_elements(rng, runs):
    """Each (variant, params) of ``runs`` on BIG's input (bias, relu) against the CPU reference."""
    from gpuopt._ext import cuda_module

    cuda = cuda_module()
    b = BIG
    n, c, h, wd = b["N"], b["C"], b["H"], b["W"]
    assert n * c * h * wd > 2**31
    P = (h - b["R"]) // b["u"] + 1
    rows = [p * b["u"] + dr for p in range(P) for dr in range(b["R"])]
    assert rows[-1] >= h - 3  # the last windows reach the end of the image
    x_rows = uniform(rng, (n, c, len(rows), wd))
    w, bias = uniform(rng, (b["K"], c, b["R"], b["S"])), uniform(rng, b["K"])
    ref = gpuopt.conv2d(x_rows, w, stride=(b["R"], b["v"]), bias=bias, activation="relu", variant="cpu")
    x = gpuopt.cuda.empty((n, c, h, wd))
    try:
        cuda.memset(x.ptr, 0, x.nbytes)
        for ci in range(c):
            for i, row in enumerate(rows):
                line = np.ascontiguousarray(x_rows[0, ci, i])
                cuda.copy_h2d(x.ptr + ((ci * h + row) * wd) * 4, line, line.nbytes)
        for variant, params in runs:
            y = gpuopt.conv2d(x, w, stride=(b["u"], b["v"]), bias=bias, activation="relu", variant=variant, **params)
            assert isinstance(y, gpuopt.DeviceArray) and y.shape == ref.shape, (variant, params)
            out = y.numpy()
            assert np.isfinite(out).all(), (variant, params)
            assert relative_error(out, ref) < 1e-5, (variant, params)
    finally:
        del x
        gpuopt.cuda.synchronize()
        gpuopt.cuda.empty_cache()


def plain_tf32x3_tests(variant):
    """The tests a Hopper 3xTF32 variant that takes any plain layer shares with the others (bind them in its test
    module: ``test_activations_and_bias, test_device_inputs_and_deterministic, test_only_plain_layers =
    plain_tf32x3_tests(VARIANT)``): every activation with and without bias, DeviceArray and torch inputs (bitwise
    reproducible), and groups or dilation refused with a ValueError naming the variant."""
    import pytest

    @pytest.mark.parametrize("activation", ["none", "relu", "tanh"])
    @pytest.mark.parametrize("with_bias", [False, True])
    def test_activations_and_bias(rng, activation, with_bias):
        require_hopper(variant)
        check_activation_and_bias(rng, variant, (2, 20, 9, 9), (36, 20, 3, 3), activation, with_bias, padding=1)

    def test_device_inputs_and_deterministic(rng):
        require_hopper(variant)
        check_device_and_torch_inputs(rng, variant, (4, 24, 14, 14), (40, 24, 3, 3), padding=1)

    @pytest.mark.parametrize("kw, w_shape", [(dict(groups=3), (3, 1, 3, 3)), (dict(dilation=2), (4, 3, 3, 3))])
    def test_only_plain_layers(rng, kw, w_shape):
        x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
        wt = rng.standard_normal(w_shape).astype(np.float32)
        with pytest.raises(ValueError, match=variant):
            gpuopt.conv2d(x, wt, variant=variant, **kw)

    return test_activations_and_bias, test_device_inputs_and_deterministic, test_only_plain_layers
