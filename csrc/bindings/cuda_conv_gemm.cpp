// The GEMM-based conv2d variants (conv2d_gemm.cu) and their checks; unroll's chunking rule; the kernels'
// resources.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"

namespace gpuopt::bind {

void bind_conv_gemm(py::module_& m) {
    // scratch_limit_bytes is not a registry parameter: a budget the tests shrink to force chunks of images.
    // String parameters become the launchers' enums here, once (conv2d_choices.hpp's tables).
    def_conv2d(m, "unroll", [](const Conv2dArgs& a, const std::string& gemm, std::int64_t scratch_limit_bytes) {
        const auto g = choice<conv::UnrollGemm>(conv::kUnrollGemms, gemm, "conv2d unroll");
        run_conv(a, [&](auto... p) { conv::conv2d_unroll(p..., g, scratch_limit_bytes); });
    }, [](const conv::Conv2dShape& s, const std::string& gemm, std::int64_t scratch_limit_bytes) {
        conv::conv2d_unroll_check(s, choice<conv::UnrollGemm>(conv::kUnrollGemms, gemm, "conv2d unroll"),
                                  scratch_limit_bytes);
    }, py::arg("gemm"), py::arg("scratch_limit_bytes") = conv::kUnrollScratchBytes);

    def_conv2d(m, "implicit_gemm", [](const Conv2dArgs& a, int tile) {
        run_conv(a, [&](auto... p) { conv::conv2d_implicit_gemm(p..., tile); });
    }, &conv::conv2d_implicit_gemm_check, py::arg("tile"));

    def_conv2d(m, "implicit_gemm_fast", [](const Conv2dArgs& a, const std::string& tile) {
        const auto t = choice<conv::FastTile>(conv::kFastTiles, tile, "conv2d implicit_gemm_fast");
        run_conv(a, [&](auto... p) { conv::conv2d_implicit_gemm_fast(p..., t); });
    }, [](const conv::Conv2dShape& s, const std::string& tile) {
        conv::conv2d_implicit_gemm_fast_check(s, choice<conv::FastTile>(conv::kFastTiles, tile, "conv2d implicit_gemm_fast"));
    }, py::arg("tile"));

    def_conv2d(m, "implicit_gemm_tf32x3", [](const Conv2dArgs& a) {
        run_conv(a, [&](auto... p) { conv::conv2d_implicit_gemm_tf32x3(p...); });
    }, [](const conv::Conv2dShape& s) { conv::conv2d_implicit_gemm_tf32x3_check(s); });

    def_conv2d(m, "pointwise_tf32x3", [](const Conv2dArgs& a) {
        run_conv(a, [&](auto... p) { conv::conv2d_pointwise_tf32x3(p...); });
    }, [](const conv::Conv2dShape& s) { conv::conv2d_pointwise_tf32x3_check(s); });

    def_conv2d(m, "unroll_tf32x3", [](const Conv2dArgs& a, std::int64_t scratch_limit_bytes) {
        run_conv(a, [&](auto... p) { conv::conv2d_unroll_tf32x3(p..., scratch_limit_bytes); });
    }, [](const conv::Conv2dShape& s, std::int64_t scratch_limit_bytes) {
        conv::conv2d_unroll_tf32x3_check(s, scratch_limit_bytes);
    }, py::arg("scratch_limit_bytes") = conv::kUnrollScratchBytes);

    def_conv2d(m, "implicit_gemm_tf32x3_wgmma", [](const Conv2dArgs& a) {
        run_conv(a, [&](auto... p) { conv::conv2d_implicit_gemm_tf32x3_wgmma(p...); });
    }, [](const conv::Conv2dShape& s) { conv::conv2d_implicit_gemm_tf32x3_wgmma_check(s); });

    m.def("conv2d_unroll_tf32x3_chunk_images", &conv::conv2d_unroll_tf32x3_chunk_images, py::arg("shape"),
          py::arg("scratch_limit_bytes") = conv::kUnrollScratchBytes,
          "Images per product of conv2d unroll_tf32x3 for this shape and scratch budget (host only).");

    m.def("conv2d_tf32x3_kernel_info", [] { return kernel_info_list(conv::conv2d_tf32x3_kernel_info()); },
          "Registers, local memory (stack + spills) and occupancy of implicit_gemm_tf32x3's kernels (1, 2, 4 map "
          "tiles; at no dynamic shared memory: it depends on the shape).");

    m.def("conv2d_unroll_chunk_images", &conv::conv2d_unroll_chunk_images, py::arg("shape"),
          py::arg("scratch_limit_bytes") = conv::kUnrollScratchBytes,
          "Images per GEMM of conv2d_unroll for this shape and scratch budget (host only).");

    m.def("conv2d_gemm_kernel_info", [] { return kernel_info_list(conv::conv2d_gemm_kernel_info()); },
          "Registers, shared memory, local memory (stack + spills) and occupancy of every kernel instantiation of "
          "the GEMM-based conv2d variants (im2col, permute, implicit_gemm tiles, implicit_gemm_fast tiles x W loaders).");
}

}  // namespace gpuopt::bind
