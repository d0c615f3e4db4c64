import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gpuopt
from gpuopt.matmul import ladder, ladder_step
from conftest import REPO, relative_error
import oracles

# 1, primes, non-multiples of every tile size (16/32/64/128), tall-skinny, and the
# CMU report's cases.
SIZES = [(1, 1, 1), (1, 7, 1), (5, 5, 5), (8, 8, 8), (10, 10, 10), (33, 33, 33), (31, 37, 41), (127, 1, 129),
         (1, 257, 3), (257, 131, 67), (1000, 17, 3), (128, 128, 128)]


@pytest.mark.parametrize("m,k,n", SIZES, ids=str)
def test_cpu_matches_float64(rng, m, k, n):
    a = rng.uniform(0, 1, (m, k)).astype(np.float32)
    b = rng.uniform(0, 1, (k, n)).astype(np.float32)
    c = gpuopt.matmul(a, b, variant="cpu")
    ref = oracles.matmul(a, b)
    assert c.dtype == np.float32 and c.shape == (m, n)
    assert relative_error(c, ref) < 1e-7
    np.testing.assert_allclose(c, ref, rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 70), k=st.integers(1, 70), n=st.integers(1, 70), seed=st.integers(0, 2**31 - 1))
def test_cpu_random_shapes(m, k, n, seed):
    g = np.random.default_rng(seed)
    a = g.standard_normal((m, k)).astype(np.float32)
    b = g.standard_normal((k, n)).astype(np.float32)
    assert relative_error(gpuopt.matmul(a, b, variant="cpu"), oracles.matmul(a, b)) < 1e-6


def test_accepts_float16_and_transposed_views(rng):
    a = rng.standard_normal((20, 30)).astype(np.float16)
    b = rng.standard_normal((40, 30)).astype(np.float32).T  # Fortran-ordered view
    c = gpuopt.matmul(a, b, variant="cpu")
    assert relative_error(c, oracles.matmul(a.astype(np.float32), b)) < 1e-6


def test_cancellation_is_accurate():
    # float64 accumulation: a float32 running sum would lose the 1.0 here.
    a = np.array([[1e8, 1.0, -1e8]], dtype=np.float32)
    b = np.ones((3, 1), dtype=np.float32)
    assert gpuopt.matmul(a, b, variant="cpu")[0, 0] == 1.0


# ----------------------------------------------------------------- the GPU ladder's registry entries (no GPU needed)

def test_ladder_is_the_registrys_order():
    """The ladder's one owner is the registration order: every GPU variant with a kernel of its own is a step,
    from the report's starting kernel (step 1) to the fastest; cuBLAS, the reference, is none."""
    table = gpuopt.variants("matmul")
    steps = ladder()
    assert steps == tuple(n for n, v in table.items() if v.needs_cuda and n not in ("cublas", "cublas_tf32"))
    assert steps[0] == "naive" and steps[-1] == "tf32x3_wgmma" and "cublas" in table
    assert [ladder_step(name) for name in steps] == list(range(1, len(steps) + 1))
    for name in ("cublas", "cublas_tf32", "cpu", "nope"):
        with pytest.raises(ValueError, match="not a step of the matmul ladder"):
            ladder_step(name)
    for name in steps + ("cublas", "cublas_tf32"):
        v = table[name]
        assert v.description and v.report in ("cmu18645", "gpuopt", "library")
        for p in v.params.values():
            assert p.doc and p.default in p.allowed


def test_kernel_files_name_their_ladder_steps():
    """Each kernel file's header ("Ladder step 8, "warptile"" or "Ladder steps 5-7, "a", "b", "c"") gives the
    step numbers the registry gives, and every step is named in exactly one file."""
    named = {}
    for path in sorted((REPO / "csrc" / "matmul").glob("*.cu")):
        head = path.read_text().split("\n#", 1)[0]
        m = re.search(r"Ladder steps? (\d+)(?:-(\d+))?, ((?:\"\w+\"(?:, )?)+)", head)
        if m is None:
            continue
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        names = re.findall(r'"(\w+)"', m.group(3))
        assert [ladder_step(n) for n in names] == list(range(first, last + 1)), path.name
        for n in names:
            assert n not in named, f"step {n} named in {named.get(n)} and {path.name}"
            named[n] = path.name
            assert gpuopt.variants("matmul")[n].kernel == f"csrc/matmul/{path.name}"
    assert sorted(named) == sorted(ladder())


def test_ladder_parameters():
    table = gpuopt.variants("matmul")

    def allowed(variant, param):
        p = table[variant].params[param]
        return p.allowed, p.default

    assert allowed("shared", "block") == ((16, 32), 16)
    assert allowed("tile_buffer", "tile_sz")[0] == (1, 2, 4)
    assert allowed("coalesced", "warp_layout") == (("row", "column"), "row")
    assert allowed("blocktile_2d", "tile")[0] == ("128x128x8", "64x64x8")
    assert allowed("vectorized", "tile")[0] == ("128x128x8", "64x64x8")
    assert set(allowed("warptile", "tile")[0]) == {"128x128x16", "128x128x8", "128x64x16", "64x64x16"}
    tiles, default = allowed("async", "tile")
    assert "auto" in tiles and default in tiles and "128x256x16" in tiles
    assert allowed("async", "stages")[0] == (2, 3, 4)
    assert allowed("async", "split_k") == (("auto", 1, 2, 4), "auto")
    assert not table["blocktile_1d"].params and not table["naive"].params and not table["cublas"].params


def test_default_gpu_variant_is_registered_first_of_the_preferred():
    from gpuopt import registry

    preferred = registry._PREFERRED["matmul"]
    assert preferred[-1] == "cublas" and set(preferred) <= {"async", "cublas"}


@pytest.mark.parametrize("variant,params", [("shared", {"block": 24}), ("tile_buffer", {"tile_sz": 8}),
                                            ("async", {"stages": 1}), ("async", {"tile": "32x32x8"}),
                                            ("async", {"split_k": 8}),
                                            ("warptile", {"tile": "auto"}), ("blocktile_1d", {"tm": 8})])
def test_bad_ladder_parameters_rejected_without_a_gpu(variant, params):
    # Parameters are checked before the GPU is looked for: ValueError on any machine.
    a = np.ones((3, 3), np.float32)
    with pytest.raises(ValueError):
        gpuopt.matmul(a, a, variant=variant, **params)


def test_kernel_info_rejections():
    from gpuopt.matmul import matmul_kernel_info

    for variant in ("cpu", "cublas"):
        with pytest.raises(ValueError, match="no kernel of gpuopt's own"):
            matmul_kernel_info(variant)
    with pytest.raises(ValueError, match="unknown variant 'nope'"):
        matmul_kernel_info("nope")
    with pytest.raises(TypeError):
        matmul_kernel_info(3)
    with pytest.raises(ValueError, match="shape must be"):
        matmul_kernel_info("async", shape=(0, 4, 4))
    with pytest.raises(ValueError, match="stages=7 is not allowed"):
        matmul_kernel_info("async", stages=7)


def test_kernel_info_needs_a_gpu():
    from gpuopt.matmul import matmul_kernel_info

    if gpuopt.cuda_available():
        pytest.skip("a GPU is present (tests/matmul/test_gpu_matmul.py covers this path)")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        matmul_kernel_info("async")
