import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gpuopt
from conftest import relative_error
import oracles

# (N, C, H, W, K, R, S, stride, padding): 1s, primes, non-square, strides > filter,
# padding > filter/2, and the CS6235 configurations scaled down.
SHAPES = [
    (1, 1, 1, 1, 1, 1, 1, 1, 0),
    (1, 1, 5, 5, 1, 5, 5, 1, 0),
    (2, 3, 7, 11, 5, 3, 3, 1, 1),
    (3, 5, 13, 17, 7, 5, 3, (2, 3), (2, 1)),
    (1, 3, 23, 23, 4, 3, 3, 2, 0),
    (2, 7, 9, 9, 3, 1, 1, 1, 0),
    (1, 2, 8, 8, 2, 3, 3, 4, 3),
    (2, 33, 7, 7, 13, 1, 1, 1, 0),
    (1, 1, 28, 28, 32, 5, 5, 1, 0),
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("activation", [None, "relu", "tanh"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_cpu_matches_float64(rng, shape, activation, with_bias):
    n, c, h, w, k, r, s, stride, padding = shape
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((k, c, r, s)).astype(np.float32)
    bias = rng.standard_normal(k).astype(np.float32) if with_bias else None
    y = gpuopt.conv2d(x, wt, stride=stride, padding=padding, bias=bias, activation=activation, variant="cpu")
    st_, pd = (stride, stride) if isinstance(stride, int) else stride, (padding, padding) if isinstance(padding, int) else padding
    ref = oracles.conv2d(x, wt, bias, st_, pd, activation or "none")
    assert y.dtype == np.float32 and y.shape == ref.shape
    assert relative_error(y, ref) < 1e-6
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 6), h=st.integers(1, 12), w=st.integers(1, 12), k=st.integers(1, 5),
       r=st.integers(1, 5), s=st.integers(1, 5), u=st.integers(1, 3), v=st.integers(1, 3),
       ph=st.integers(0, 3), pw=st.integers(0, 3), seed=st.integers(0, 2**31 - 1))
def test_cpu_random_shapes(n, c, h, w, k, r, s, u, v, ph, pw, seed):
    if h + 2 * ph < r or w + 2 * pw < s:
        return
    g = np.random.default_rng(seed)
    x = g.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
    wt = g.uniform(-1, 1, (k, c, r, s)).astype(np.float32)
    y = gpuopt.conv2d(x, wt, stride=(u, v), padding=(ph, pw), variant="cpu")
    ref = oracles.conv2d(x, wt, None, (u, v), (ph, pw))
    assert relative_error(y, ref) < 1e-6


def test_output_shape_formula():
    assert gpuopt.conv2d_output_shape((1, 3, 112, 112), (64, 3, 3, 3), 2, 0) == (1, 64, 55, 55)
    assert gpuopt.conv2d_output_shape((128, 832, 7, 7), (128, 832, 1, 1)) == (128, 128, 7, 7)


def test_float64_and_noncontiguous_inputs_are_converted(rng):
    x = rng.standard_normal((2, 4, 10, 10))  # float64
    w = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)[:, :, ::-1, :]  # negative strides
    x_view = x[:, :, ::-1, :]
    assert not w.flags.c_contiguous and not x_view.flags.c_contiguous
    y = gpuopt.conv2d(x_view, w, variant="cpu")
    assert relative_error(y, oracles.conv2d(x_view.astype(np.float32), w)) < 1e-6


def test_nan_propagates(rng):
    x = rng.standard_normal((1, 1, 5, 5)).astype(np.float32)
    x[0, 0, 2, 2] = np.nan
    y = gpuopt.conv2d(x, np.ones((1, 1, 3, 3), np.float32), padding=1, variant="cpu")
    assert np.isnan(y[0, 0, 1:4, 1:4]).all() and np.isfinite(y[0, 0, 0, :]).all()


def test_default_variant_runs_without_gpu(rng):
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    assert relative_error(gpuopt.conv2d(x, w), oracles.conv2d(x, w)) < 1e-5


# ------------------------------------------------------------------------------------------ groups and dilation

# (N, C, H, W, K, R, S, stride, padding, dilation, groups): odd sizes, stride 2, padding past the filter's half,
# dilation 2 and 3, groups 2, 4 and C (depthwise), C and K not multiples of anything, N = 1.
GENERAL = [
    (1, 4, 9, 11, 6, 3, 3, 1, 1, 2, 2),
    (2, 8, 13, 10, 8, 3, 3, 2, 3, 3, 4),
    (3, 6, 12, 12, 6, 3, 3, 1, 1, 1, 6),          # depthwise
    (2, 6, 15, 9, 12, 5, 3, (2, 1), (4, 2), (2, 3), 3),
    (1, 5, 7, 7, 10, 3, 3, 1, 2, (1, 2), 5),     # depthwise, two maps a channel
    (2, 3, 17, 19, 7, 2, 2, 2, 0, 3, 1),          # dilation alone
    (1, 12, 8, 8, 4, 1, 1, 1, 0, 1, 4),           # pointwise, grouped
]


def _pair(v):
    return (v, v) if isinstance(v, int) else v


@pytest.mark.parametrize("shape", GENERAL, ids=str)
@pytest.mark.parametrize("with_bias", [False, True])
def test_cpu_groups_and_dilation_match_float64(rng, shape, with_bias):
    n, c, h, w, k, r, s, stride, padding, dilation, groups = shape
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((k, c // groups, r, s)).astype(np.float32)
    bias = rng.standard_normal(k).astype(np.float32) if with_bias else None
    y = gpuopt.conv2d(x, wt, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias,
                      activation="relu")
    ref = oracles.conv2d(x, wt, bias, _pair(stride), _pair(padding), "relu", _pair(dilation), groups)
    assert y.shape == ref.shape == gpuopt.conv.conv2d_output_shape(x.shape, wt.shape, stride, padding, dilation,
                                                                   groups)
    assert relative_error(y, ref) < 1e-6


def test_one_group_no_dilation_is_the_plain_convolution(rng):
    x = rng.standard_normal((2, 6, 11, 9)).astype(np.float32)
    wt = rng.standard_normal((4, 6, 3, 3)).astype(np.float32)
    plain = gpuopt.conv2d(x, wt, padding=1, variant="cpu")
    assert gpuopt.conv2d(x, wt, padding=1, dilation=(1, 1), groups=1, variant="cpu").tobytes() == plain.tobytes()
    # groups = G is G independent convolutions on the channel blocks
    split = gpuopt.conv2d(x, np.concatenate([wt[:, :3], wt[:, 3:]])[:, :3], padding=1, groups=2, variant="cpu")
    assert split.shape == (2, 8, 11, 9)
    np.testing.assert_array_equal(split[:, :4], gpuopt.conv2d(x[:, :3], wt[:, :3], padding=1, variant="cpu"))
    np.testing.assert_array_equal(split[:, 4:], gpuopt.conv2d(x[:, 3:], wt[:, 3:], padding=1, variant="cpu"))


@pytest.mark.parametrize("kw, match", [
    (dict(groups=4), "groups=4 must divide both C=6"),
    (dict(groups=0), "groups"),
    (dict(groups=2.0), "groups must be an integer"),
    (dict(dilation=0), "dilation"),
    (dict(dilation=(1, -2)), "dilation"),
    (dict(dilation=9), r"filter 3x3 \(dilated by \(9, 9\): 19x19\) is larger than the padded input 11x9"),
])
def test_bad_groups_and_dilation_are_value_errors(rng, kw, match):
    x = np.zeros((1, 6, 11, 9), np.float32)
    wt = np.zeros((6, 6 // kw.get("groups", 1) if isinstance(kw.get("groups", 1), int) and kw.get("groups", 1) > 0
                   else 6, 3, 3), np.float32)
    with pytest.raises((ValueError, TypeError), match=match):
        gpuopt.conv2d(x, wt, **kw)


def test_w_channels_must_be_c_over_groups():
    with pytest.raises(ValueError, match=r"w must be \(K, C / groups, R, S\) with C / groups = 3 channels"):
        gpuopt.conv2d(np.zeros((1, 6, 8, 8), np.float32), np.zeros((4, 6, 3, 3), np.float32), groups=2)


@pytest.mark.parametrize("variant", ["basic", "implicit_gemm", "direct_regblock", "winograd"])
def test_variants_without_groups_or_dilation_say_so_before_anything_runs(variant):
    if variant not in gpuopt.variants("conv2d"):
        pytest.skip(f"{variant} is not in this build")
    x, wt = np.zeros((1, 4, 8, 8), np.float32), np.zeros((4, 2, 3, 3), np.float32)
    with pytest.raises(ValueError, match=f"conv2d/{variant} takes groups=1 and dilation=1 only \\(got groups=2\\)"):
        gpuopt.conv2d(x, wt, groups=2, variant=variant)
    with pytest.raises(ValueError, match=r"got dilation=\(2, 2\)"):
        gpuopt.conv2d(x, np.zeros((4, 4, 3, 3), np.float32), dilation=2, variant=variant)
