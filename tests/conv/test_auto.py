"""conv2d `auto`: the heuristic (no GPU needed) and its registration."""

import pytest

import gpuopt
from gpuopt.conv import auto_choice

WGMMA = "implicit_gemm_tf32x3_wgmma"


@pytest.mark.parametrize("x_shape,w_shape,stride,expected,params", [
    ((1, 832, 7, 7), (128, 832, 1, 1), 1, "unroll", {}),            # CS6235 conf2: a plain GEMM
    ((128, 832, 7, 7), (128, 832, 1, 1), 1, "unroll", {}),          # conf4
    ((10000, 1, 64, 64), (6, 1, 5, 5), 1, "direct_fused", {}),      # ECE408 Fashion conv1: one channel, K = 6
    ((10000, 2, 64, 64), (6, 2, 5, 5), 1, "direct_regblock", {}),   # 50 taps, K = 6
    ((32, 3, 230, 230), (64, 3, 7, 7), 2, "implicit_gemm_fast", {"tile": "64x128x8"}),  # ResNet-50's stem (padded)
    ((1, 3, 230, 230), (64, 3, 7, 7), 2, "implicit_gemm_fast", {"tile": "64x64x8"}),    # ... at batch 1
    ((32, 3, 225, 225), (32, 3, 3, 3), 2, "direct_regblock", {}),   # MobileNetV2's stem: 27 taps
    ((10, 1, 20, 20), (6, 1, 5, 5), 1, "tiled_unrolled", {}),       # K = 6, 2560 outputs per map
    ((1, 3, 112, 112), (64, 3, 3, 3), 2, "implicit_gemm", {}),      # conf1: one image
    ((10000, 6, 30, 30), (16, 6, 5, 5), 1, "implicit_gemm_tf32x3", {}),  # ECE408 Fashion conv2: 150 taps, K = 16
    ((128, 3, 112, 112), (64, 3, 3, 3), 2, "direct_regblock", {}),  # conf3: 27 taps, stride 2
    ((10000, 8, 30, 30), (16, 8, 5, 5), 1, "implicit_gemm_tf32x3", {}),  # 200 taps, K = 16
    ((10000, 8, 94, 94), (16, 8, 5, 5), 1, "direct_fused", {}),     # ... on images too large to stage whole
    ((32, 64, 56, 56), (64, 64, 1, 1), 1, "implicit_gemm_fast", {"tile": "64x128x8"}),  # ResNet-50 1x1, C <= 256
    ((32, 32, 112, 112), (16, 32, 1, 1), 1, "implicit_gemm_fast", {"tile": "32x128x8"}),  # MobileNetV2 project
    ((32, 960, 7, 7), (320, 960, 1, 1), 1, "unroll", {}),          # 1x1, C > 256
    ((1, 64, 56, 56), (64, 64, 1, 1), 1, "unroll", {}),             # 1x1, one image
    ((16, 256, 56, 56), (256, 256, 3, 3), 1, "implicit_gemm_fast", {"tile": "64x128x8"}),  # VGG-16: 2**30+ MACs
    ((32, 128, 56, 56), (128, 128, 3, 3), 2, "implicit_gemm_fast", {"tile": "64x128x8"}),  # ResNet-50 3x3/2
    ((1, 128, 56, 56), (128, 128, 3, 3), 2, "implicit_gemm", {}),   # the same at batch 1
    ((10000, 5, 30, 30), (16, 5, 5, 5), 1, "direct_regblock", {}),  # 125 taps, K = 16
    ((10000, 8, 30, 30), (16, 8, 5, 5), 2, "unroll_nk", {}),        # 200 taps, K = 16, strided
    ((100, 20, 61, 61), (24, 20, 3, 3), 2, "unroll_nk", {}),        # 180 taps, stride 2
    ((10000, 1, 28, 28), (32, 1, 5, 5), 1, "direct_fused", {}),     # MNIST conv1: valid, stride 1, 5x5, K = 32
    ((10000, 32, 12, 12), (64, 32, 5, 5), 1, "direct_fused", {}),    # MNIST conv2
    ((10000, 32, 14, 14), (32, 32, 7, 7), 1, "implicit_gemm_fast", {"tile": "32x128x8"}),  # 7x7: not compiled
    ((10000, 32, 12, 12), (64, 32, 5, 5), 2, "unroll_nk", {}),      # strided
])
def test_heuristic_picks(monkeypatch, x_shape, w_shape, stride, expected, params):
    from gpuopt.conv import auto
    monkeypatch.setattr(auto, "_device", lambda: (False, 232448))  # the Hopper-only rules have their own tests
    assert auto_choice(x_shape, w_shape, stride) == (expected, params)
    v = gpuopt.variants("conv2d")[expected]
    assert all(value in v.params[name].allowed for name, value in params.items())


@pytest.mark.parametrize("hopper", [True, False])
@pytest.mark.parametrize("x_shape,w_shape,stride", [((32, 256, 14, 14), (1024, 256, 1, 1), 1),
                                                   ((32, 320, 7, 7), (1280, 320, 1, 1), 1)])
def test_wide_1x1_layers_run_pointwise_on_hopper(monkeypatch, x_shape, w_shape, stride, hopper):
    from gpuopt.conv import auto
    monkeypatch.setattr(auto, "_device", lambda: (hopper, 232448))
    assert (auto_choice(x_shape, w_shape, stride)[0] == "pointwise_tf32x3") == hopper


def test_strided_wide_1x1_layers_run_pointwise_on_hopper(monkeypatch):
    from gpuopt.conv import auto
    monkeypatch.setattr(auto, "_device", lambda: (True, 232448))
    assert auto_choice((32, 256, 56, 56), (512, 256, 1, 1), 2)[0] == "pointwise_tf32x3"  # ResNet-50's shortcut/2
    assert auto_choice((32, 576, 7, 7), (160, 576, 1, 1), 1)[0] == "unroll"  # K < 256: its tiles run part empty
    assert auto_choice((128, 832, 7, 7), (128, 832, 1, 1), 1)[0] == "unroll"  # CS6235 conf4


@pytest.mark.parametrize("x_shape,w_shape,stride,precise,fast", [
    ((16, 256, 56, 56), (256, 256, 3, 3), 1, WGMMA, WGMMA),                      # VGG-16 256 > 256 @56
    ((16, 128, 56, 56), (256, 128, 3, 3), 1, WGMMA, WGMMA),                      # 128 > 256 @56
    ((16, 128, 112, 112), (128, 128, 3, 3), 1, WGMMA, WGMMA),                    # 128 > 128 @112
    ((32, 128, 28, 28), (128, 128, 3, 3), 1, WGMMA, "winograd"),                 # outputs under 56x56: winograd
    ((32, 256, 28, 28), (256, 256, 3, 3), 2, WGMMA, WGMMA),                      # s3 3x3/2: no winograd
    ((32, 512, 28, 28), (128, 512, 1, 1), 1, WGMMA, WGMMA),                      # 1x1, C >= 256, 25,088 pixels
    ((16, 64, 224, 224), (64, 64, 3, 3), 1, "implicit_gemm_fast", "winograd"),  # 64 maps: half-empty tiles
    ((16, 512, 28, 28), (512, 512, 3, 3), 1, "unroll_tf32x3", "unroll_tf32x3"),  # K >= 512 on 28x28 outputs
    ((16, 512, 14, 14), (512, 512, 3, 3), 1, "unroll_tf32x3", "unroll_tf32x3"),  # ... and on 14x14
    ((32, 512, 7, 7), (512, 512, 3, 3), 1, "unroll_tf32x3", "winograd"),         # ResNet-50 s4: 7x7 outputs
    ((1, 512, 7, 7), (512, 512, 3, 3), 1, "unroll_tf32x3", "unroll_tf32x3"),     # batch 1
    ((1, 256, 14, 14), (256, 256, 3, 3), 1, "unroll_tf32x3", "unroll_tf32x3"),   # ... 196 pixels: not the wgmma GEMM
    ((32, 3, 224, 224), (64, 3, 7, 7), 2, "implicit_gemm_fast", "implicit_gemm_fast"),  # the stem: 3 channels
])
def test_wide_layers_run_the_3xtf32_wgmma_kernels_on_hopper(monkeypatch, x_shape, w_shape, stride, precise, fast):
    from gpuopt.conv import auto
    monkeypatch.setattr(auto, "_device", lambda: (True, 232448))
    padding = w_shape[2] // 2
    assert auto_choice(x_shape, w_shape, stride, padding)[0] == precise
    assert auto_choice(x_shape, w_shape, stride, padding, algorithms="fast")[0] == fast
    monkeypatch.setattr(auto, "_device", lambda: (False, 232448))  # not Hopper: never
    assert not {"unroll_tf32x3", WGMMA} & {auto_choice(x_shape, w_shape, stride, padding)[0],
                                           auto_choice(x_shape, w_shape, stride, padding, algorithms="fast")[0]}


@pytest.mark.parametrize("x_shape,w_shape,stride,dilation,groups,expected", [
    ((32, 96, 112, 112), (96, 1, 3, 3), 2, 1, 96, "depthwise"),     # MobileNetV2's depthwise 3x3/2
    ((32, 960, 7, 7), (960, 1, 3, 3), 1, 1, 960, "depthwise"),      # ... its last
    ((32, 96, 56, 56), (96, 1, 7, 7), 1, 1, 96, "depthwise"),       # ConvNeXt's 7x7
    ((32, 16, 48, 48), (32, 1, 5, 5), 1, 1, 16, "depthwise"),       # two maps a channel
    ((1, 960, 7, 7), (960, 1, 3, 3), 1, 1, 960, "cudnn"),           # batch 1, 47,040 inputs: cuDNN's
    ((1, 32, 112, 112), (32, 1, 3, 3), 1, 1, 32, "cudnn"),          # ... 401,408
    ((16, 64, 32, 32), (64, 1, 3, 3), 1, 1, 64, "depthwise"),       # 2**20 inputs exactly
    ((32, 96, 112, 112), (96, 1, 3, 3), 1, 2, 96, "cudnn"),         # dilated: the patch kernel's only
    ((32, 96, 112, 112), (96, 1, 3, 3), 3, 1, 96, "cudnn"),         # stride 3
    ((32, 96, 56, 56), (96, 1, 3, 1), 1, 1, 96, "cudnn"),           # not square
    ((4, 128, 14, 14), (128, 4, 3, 3), 1, 1, 32, "cudnn"),          # ResNeXt's 32 groups
    ((2, 64, 33, 33), (64, 64, 3, 3), 1, 2, 1, "cudnn"),            # dilated, one group
    ((1, 2, 8, 20000), (2, 1, 3, 3), 1, 1, 2, "cudnn"),             # 4 rows of 20,000 past shared memory
])
def test_grouped_and_dilated_layers(monkeypatch, x_shape, w_shape, stride, dilation, groups, expected):
    from gpuopt.conv import auto
    monkeypatch.setattr(auto, "_device", lambda: (True, 232448))
    for algorithms in ("precise", "fast"):  # the rows kernel is exact-order FP32: both classes
        choice = auto_choice(x_shape, w_shape, stride, 1, algorithms, dilation=dilation, groups=groups)
        assert choice == (("depthwise", {"kernel": "rows"}) if expected == "depthwise" else
                          ("cudnn", {"algorithms": algorithms}))
    with pytest.raises(ValueError, match="groups"):
        auto_choice(x_shape, w_shape, stride, 1, groups=groups + 1 if groups > 1 else 3)


def test_auto_is_registered_with_autotune_param():
    v = gpuopt.variants("conv2d")["auto"]
    assert v.needs_cuda and v.report == "gpuopt"
    assert v.params["autotune"].default is False and v.params["autotune"].allowed == (False, True)
    with pytest.raises(ValueError, match="autotune"):
        gpuopt.registry.resolve("conv2d", "auto", {"autotune": 1}, require_device=False)


def test_auto_choice_checks_shapes():
    with pytest.raises(ValueError, match="input channels"):
        auto_choice((1, 3, 8, 8), (4, 2, 3, 3))


@pytest.mark.parametrize("x_shape,w_shape,stride,padding,expected", [
    ((10000, 32, 12, 12), (64, 32, 5, 5), 1, 0, "winograd"),            # MNIST conv2
    ((10000, 6, 30, 30), (16, 6, 5, 5), 1, 0, "implicit_gemm_tf32x3"),  # Fashion conv2: 16 maps, 150 taps
    ((10000, 6, 94, 94), (16, 6, 5, 5), 1, 0, "winograd"),              # ... on images too large to stage whole
    ((64, 16, 32, 32), (32, 16, 3, 3), 1, 1, "winograd"),               # a 3x3 layer, padded
    ((10000, 1, 28, 28), (32, 1, 5, 5), 1, 0, "direct_fused"),          # MNIST conv1: C = 1, transforms dominate
    ((10000, 1, 64, 64), (6, 1, 5, 5), 1, 0, "direct_fused"),           # Fashion conv1
    ((10000, 3, 30, 30), (16, 3, 5, 5), 1, 0, "direct_regblock"),       # C = 3 < 4
    ((128, 3, 112, 112), (64, 3, 3, 3), 2, 0, "direct_regblock"),       # conf3: stride 2
    ((128, 832, 7, 7), (128, 832, 1, 1), 1, 0, "unroll"),               # conf4: 1x1
    ((2, 32, 12, 12), (64, 32, 5, 5), 1, 0, "implicit_gemm"),           # too few outputs to fill the GPU
])
def test_fast_class_may_pick_fast_algorithms(x_shape, w_shape, stride, padding, expected):
    name, _ = auto_choice(x_shape, w_shape, stride, padding, algorithms="fast")
    assert name == expected


@pytest.mark.parametrize("x_shape,w_shape", [((10000, 32, 12, 12), (64, 32, 5, 5)), ((10000, 6, 30, 30), (16, 6, 5, 5)),
                                             ((64, 16, 32, 32), (32, 16, 3, 3))])
def test_precise_class_never_picks_fast_algorithms(x_shape, w_shape):
    assert auto_choice(x_shape, w_shape)[0] != "winograd"
    assert auto_choice(x_shape, w_shape, algorithms="precise") == auto_choice(x_shape, w_shape)


@pytest.mark.skipif("cudnn" not in gpuopt.variants("conv2d"), reason="gpuopt was built without cuDNN")
def test_cudnn_takes_auto_s_precision_classes():
    # one meaning of algorithms=: cuDNN's classes are auto's ("any" stays cuDNN's older name of "fast"), so the
    # default variant (cuDNN) takes algorithms="fast" as auto does
    v = gpuopt.variants("conv2d")["cudnn"]
    assert v.params["algorithms"].allowed == ("precise", "fast", "any")
    assert v.params["algorithms"].default == "precise"
    for name in ("precise", "fast", "any"):
        gpuopt.registry.resolve("conv2d", "cudnn", {"algorithms": name}, require_device=False)


def test_auto_algorithms_param():
    v = gpuopt.variants("conv2d")["auto"]
    assert v.params["algorithms"].default == "precise"
    assert v.params["algorithms"].allowed == ("precise", "fast")
    with pytest.raises(ValueError, match="algorithms"):
        gpuopt.registry.resolve("conv2d", "auto", {"algorithms": "any"}, require_device=False)
    with pytest.raises(ValueError, match="algorithms"):
        auto_choice((1, 3, 8, 8), (4, 3, 3, 3), algorithms="any")
