// conv2d direct_regblock (conv2d_direct.cu): its binding, its check (the plan, host only), the plan itself and
// its kernels' resources. k_tile and pixels: 0 picks per shape (gpuopt's "auto").
// conv2d direct_fused: conv2d_pool's fused kernel (csrc/nn/conv2d_pool.cu) with pool_size 1, for valid stride-1
// 3x3 and 5x5 layers. conv2d depthwise (conv2d_depthwise.cu): groups = C; kernel auto and tile 0 pick per shape.
#include <pybind11/stl.h>

#include <vector>

#include "../conv/conv2d_cuda.hpp"
#include "../nn/conv2d_pool.hpp"
#include "conv_args.hpp"

namespace gpuopt::bind {

namespace {

// The conv2d shape as conv2d_pool's (pool_size 1); only what the fused kernel computes is accepted.
nn::ConvPoolShape fused_shape(const conv::Conv2dShape& s) {
    s.validate();
    GPUOPT_REQUIRE(s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0,
                   "conv2d/direct_fused: computes valid (padding 0), stride-1 convolutions only, got stride (" +
                       std::to_string(s.stride_h) + ", " + std::to_string(s.stride_w) + ") and padding (" +
                       std::to_string(s.pad_h) + ", " + std::to_string(s.pad_w) + ")");
    nn::ConvPoolShape c;
    c.N = s.N, c.C = s.C, c.H = s.H, c.W = s.W, c.K = s.K, c.R = s.R, c.S = s.S, c.pool = 1;
    return c;
}

}  // namespace

void bind_conv_direct(py::module_& m) {
    def_conv2d(m, "direct_fused", [](const Conv2dArgs& a, int channels_per_block, int images) {
        const nn::ConvPoolShape s = fused_shape(a.shape);
        GPUOPT_REQUIRE(a.x != 0 && a.w != 0 && a.y != 0, "conv2d direct_fused: x, w and y must be device pointers");
        run_conv(a, [&](const float* x, const float* w, const float* bias, float* y, const conv::Conv2dShape&,
                        Activation act) {
            nn::conv2d_pool_fused(x, nn::InputType::Float32, 1.f, w, bias, y, s, act, nn::PoolKind::Max,
                                  {channels_per_block, images, 0});
        });
    }, [](const conv::Conv2dShape& s, int channels_per_block, int images) {
        nn::conv2d_pool_plan(fused_shape(s), {channels_per_block, images, 0});
    }, py::arg("channels_per_block"), py::arg("images"));

    def_conv2d(m, "direct_regblock", [](const Conv2dArgs& a, int k_tile, int pixels) {
        run_conv(a, [&](auto... p) { conv::conv2d_direct_regblock(p..., k_tile, pixels); });
    }, [](const conv::Conv2dShape& s, int k_tile, int pixels) {
        // The plan validates; its validity does not depend on the GPU's multiprocessor count (its map grouping does).
        conv::conv2d_direct_regblock_plan(s, k_tile, pixels, 1);
    }, py::arg("k_tile"), py::arg("pixels"));

    m.def("conv2d_direct_regblock_plan",
          [](const conv::Conv2dShape& s, int k_tile, int pixels, int multiprocessors) {
              const auto p = conv::conv2d_direct_regblock_plan(s, k_tile, pixels, multiprocessors);
              py::dict d;
              d["k_tile"] = p.k_tile;
              d["pixels"] = p.pixels;
              d["runs"] = p.runs;
              d["segments"] = p.segments;
              d["maps_per_block"] = p.maps_per_block;
              d["map_groups"] = p.map_groups;
              d["channels_per_chunk"] = p.channels_per_chunk;
              d["input_buffers"] = p.input_buffers;
              d["staged_rows"] = p.rows;
              d["staged_pitch"] = p.pitch;
              d["shared_bytes"] = p.shared_bytes;
              return d;
          },
          py::arg("shape"), py::kw_only(), py::arg("k_tile") = 0, py::arg("pixels") = 0,
          py::arg("multiprocessors") = 132,
          "What conv2d_direct_regblock runs for this shape (host only; multiprocessors: the GPU's).");

    def_conv2d(m, "depthwise", [](const Conv2dArgs& a, const std::string& kernel, int tile) {
        const auto k = choice<conv::DepthwiseKernel>(conv::kDepthwiseKernels, kernel, "conv2d depthwise");
        run_conv(a, [&](auto... p) { conv::conv2d_depthwise(p..., k, tile); });
    }, [](const conv::Conv2dShape& s, const std::string& kernel, int tile) {
        conv::conv2d_depthwise_check(s, choice<conv::DepthwiseKernel>(conv::kDepthwiseKernels, kernel,
                                                                      "conv2d depthwise"), tile);
    }, py::arg("kernel"), py::arg("tile"));

    m.def("conv2d_depthwise_kernel_info", [] { return kernel_info_list(conv::conv2d_depthwise_kernel_info()); },
          "Registers, shared memory, local memory (stack + spills) and occupancy of every depthwise kernel.");

    m.def("conv2d_direct_kernel_info", [] { return kernel_info_list(conv::conv2d_direct_kernel_info()); },
          "Registers, shared memory, local memory (stack + spills) and occupancy of every direct_regblock kernel.");
}

}  // namespace gpuopt::bind
