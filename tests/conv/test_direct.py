"""conv2d ``direct_regblock`` in the registry, and its launch plan (host-side C++, no GPU needed): how runs of
pixels, maps per block, staged channels and shared memory follow from the shape."""

import numpy as np
import pytest

import gpuopt
from conftest import cuda_build, needs_cuda_build
from gpuopt import registry


def plan(shape, k_tile=0, pixels=0, multiprocessors=132):
    """The C++ plan of a (N, C, H, W, K, R, S, u, v, ph, pw) shape; the CUDA module imports without a driver."""
    cuda = cuda_build()
    return cuda.conv2d_direct_regblock_plan(cuda.Conv2dShape(*shape), k_tile=k_tile, pixels=pixels,
                                            multiprocessors=multiprocessors)


def test_registered_with_its_parameters():
    v = gpuopt.variants("conv2d")["direct_regblock"]
    assert v.report == "gpuopt" and v.needs_cuda and v.description
    assert v.defaults() == {"k_tile": "auto", "pixels": "auto"}
    assert v.params["k_tile"].allowed == ("auto", 8, 16) and v.params["pixels"].allowed == ("auto", 1, 2, 4)
    names = list(gpuopt.variants("conv2d"))
    assert names.index("implicit_gemm_fast") < names.index("direct_regblock") < names.index("auto")


@pytest.mark.parametrize("param,bad", [("k_tile", [4, 32, 0, "8", True, 16.5]), ("pixels", [3, 8, 0, "4", None])])
def test_bad_parameters_rejected_before_the_gpu(param, bad):
    for value in bad:
        with pytest.raises(ValueError, match=rf"conv2d/direct_regblock: parameter {param}=.* is not allowed"):
            registry.resolve("conv2d", "direct_regblock", {param: value}, require_device=False)


@needs_cuda_build
def test_plan_of_cs6235_conf3():
    """128 images of 55 x 55 outputs (3025 pixels, 12 runs of 256 crossing rows, 98.5% of the slots used);
    all 64 maps per block (1536 runs fill 132 multiprocessors 8 blocks deep); all 3 channels staged at once:
    13 rows ((6 output rows - 1) * stride 2 + 3) x 2 phases x 56 slots, one input and two filter buffers."""
    p = plan((128, 3, 112, 112, 64, 3, 3, 2, 2, 0, 0))
    assert p == dict(k_tile=16, pixels=2, runs=12, segments=0, maps_per_block=64, map_groups=1, channels_per_chunk=3,
                     input_buffers=1, staged_rows=13, staged_pitch=112, shared_bytes=4 * 3 * (13 * 112 + 2 * 16 * 9))
    # 4 pixels per thread on request: 6 runs of 512, the maps in two groups of 32 to fill the GPU.
    p = plan((128, 3, 112, 112, 64, 3, 3, 2, 2, 0, 0), pixels=4)
    assert (p["runs"], p["maps_per_block"], p["map_groups"], p["staged_rows"]) == (6, 32, 2, 23)


@needs_cuda_build
def test_plan_pixels_and_k_tile_auto():
    # MNIST conv1: 24 x 24 = 576 pixels: runs of 256 would waste 25%, runs of 128 waste 10%.
    assert plan((10000, 1, 28, 28, 32, 5, 5, 1, 1, 0, 0))["pixels"] == 1
    # 16 maps or more: 2 pixels per thread (Fashion-MNIST conv2, 26 x 26 = 676 pixels: 3 runs of 256, 12% waste).
    assert plan((10000, 6, 30, 30, 16, 5, 5, 1, 1, 0, 0))["pixels"] == 2
    # Fashion-MNIST conv1: 6 maps -> k_tile 8 and 4 pixels; 3600 pixels: runs of 512 waste 12% (<= 1/8).
    p = plan((10000, 1, 64, 64, 6, 5, 5, 1, 1, 0, 0))
    assert (p["k_tile"], p["pixels"], p["maps_per_block"], p["map_groups"]) == (8, 4, 8, 1)
    # Explicit values are kept.
    p = plan((10000, 1, 64, 64, 6, 5, 5, 1, 1, 0, 0), k_tile=16, pixels=2)
    assert (p["k_tile"], p["pixels"]) == (16, 2)


@needs_cuda_build
def test_plan_wide_rows_are_cut_into_segments():
    """Rows wider than a run: each run is a segment of one row, so the staged input is one segment's columns
    (512 + 2 for a 3-wide filter), however wide the image."""
    p = plan((1, 2, 5, 100000, 4, 3, 3, 1, 1, 1, 1))
    assert p["segments"] == -(-100000 // 512) and p["runs"] == 5 * p["segments"]
    assert p["staged_rows"] == 3 and p["staged_pitch"] == 514
    # Stride 4 > S = 3: only 3 of the 4 column phases are staged; stride 5 > R = 2: 2 rows per output row.
    p = plan((1, 1, 40, 3000, 8, 2, 3, 5, 4, 0, 0), pixels=4)
    assert p["segments"] == 2 and p["staged_rows"] == 2 and p["staged_pitch"] == 3 * 512


@needs_cuda_build
def test_plan_chunks_channels_and_map_groups():
    # 832 channels of 7 x 7 (1 x 1 filter): two buffers of 49 floats and two of 16 weights per channel,
    # 78 channels per chunk.
    p = plan((128, 832, 7, 7, 128, 1, 1, 1, 1, 0, 0))
    assert p["channels_per_chunk"] == 10240 // (2 * 49 + 2 * 16) == 78 and p["input_buffers"] == 2
    assert p["shared_bytes"] == 4 * 78 * 130
    # One image, 2^20 + 1 maps: grid y stays <= 65535.
    p = plan((1, 1, 1, 1, 65535 * 16 + 1, 1, 1, 1, 1, 0, 0))
    assert p["map_groups"] <= 65535 and p["maps_per_block"] * p["map_groups"] >= 65535 * 16 + 1


@needs_cuda_build
def test_plan_rejects_bad_arguments():
    with pytest.raises(ValueError, match="k_tile must be 0 \\(auto\\), 8 or 16"):
        plan((1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0), k_tile=4)
    with pytest.raises(ValueError, match="pixels must be 0 \\(auto\\), 1, 2 or 4"):
        plan((1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0), pixels=3)
    with pytest.raises(ValueError, match="filter larger than the padded input"):
        plan((1, 1, 5, 5, 1, 7, 3, 1, 1, 0, 0))
    with pytest.raises(ValueError, match="too large for 32-bit positions"):
        plan((1, 1, 2**16, 2**16, 1, 1, 1, 1, 1, 0, 0))
    with pytest.raises(ValueError, match="far beyond any GPU's shared memory"):  # 46340 rows x 46339 phases x 513
        plan((1, 1, 46340, 24000000, 1, 46340, 46340, 1, 46339, 0, 0))
    # The CPU path of the variant's inputs is unaffected: registry and shape checks run without a GPU.
    assert np.isfinite(gpuopt.conv2d(np.ones((1, 1, 5, 5), np.float32), np.ones((1, 1, 3, 3), np.float32),
                                     variant="cpu")).all()
