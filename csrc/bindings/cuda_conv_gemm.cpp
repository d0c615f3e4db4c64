// Bindings of the GEMM-based conv2d variants (conv2d_gemm.cu): the arguments of conv2d_basic (device
// addresses x, w, bias (0: none), y; the shape in the reports' names; the activation) followed by each
// variant's keyword parameters, as gpuopt.conv's _gpu_conv2d passes them.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "../common/activation.hpp"
#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"
#include "cuda_bindings.hpp"

#define GPUOPT_GEMM_CONV_ARGS py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("y"), GPUOPT_CONV_SHAPE_ARGS, \
                              py::arg("activation")

namespace gpuopt::bind {

void bind_conv_gemm(py::module_& m) {
    using std::int64_t;
    using std::uintptr_t;

    m.def("conv2d_unroll",
          [](uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t C, int64_t H, int64_t W,
             int64_t K, int64_t R, int64_t S, int64_t u, int64_t v, int64_t ph, int64_t pw,
             const std::string& activation, const std::string& gemm, int64_t scratch_limit_bytes) {
              const conv::Conv2dShape s = conv_shape(N, C, H, W, K, R, S, u, v, ph, pw);
              const Activation act = activation_from_string(activation);
              py::gil_scoped_release release;
              conv::conv2d_unroll(dptr<const float>(x), dptr<const float>(w), dptr<const float>(bias), dptr<float>(y),
                                  s, act, gemm, scratch_limit_bytes);
          },
          GPUOPT_GEMM_CONV_ARGS, py::arg("gemm") = "async", py::arg("scratch_limit_bytes") = conv::kUnrollScratchBytes,
          "im2col into pool scratch, one gpuopt matmul per chunk of images, permute + bias + activation. "
          "scratch_limit_bytes (not a registry parameter): the budget that decides how many images share a GEMM.");

    m.def("conv2d_unroll_chunk_images",
          [](int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S, int64_t u, int64_t v,
             int64_t ph, int64_t pw, int64_t scratch_limit_bytes) {
              return conv::conv2d_unroll_chunk_images(conv_shape(N, C, H, W, K, R, S, u, v, ph, pw),
                                                      scratch_limit_bytes);
          },
          GPUOPT_CONV_SHAPE_ARGS, py::arg("scratch_limit_bytes") = conv::kUnrollScratchBytes,
          "Images per GEMM of conv2d_unroll for this shape and scratch budget (host only).");
    m.attr("conv2d_unroll_scratch_bytes") = conv::kUnrollScratchBytes;

    m.def("conv2d_implicit_gemm",
          [](uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t C, int64_t H, int64_t W,
             int64_t K, int64_t R, int64_t S, int64_t u, int64_t v, int64_t ph, int64_t pw,
             const std::string& activation, int tile) {
              const conv::Conv2dShape s = conv_shape(N, C, H, W, K, R, S, u, v, ph, pw);
              const Activation act = activation_from_string(activation);
              py::gil_scoped_release release;
              conv::conv2d_implicit_gemm(dptr<const float>(x), dptr<const float>(w), dptr<const float>(bias),
                                         dptr<float>(y), s, act, tile);
          },
          GPUOPT_GEMM_CONV_ARGS, py::arg("tile") = 16);

    m.def("conv2d_implicit_gemm_fast",
          [](uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t C, int64_t H, int64_t W,
             int64_t K, int64_t R, int64_t S, int64_t u, int64_t v, int64_t ph, int64_t pw,
             const std::string& activation, const std::string& tile) {
              const conv::Conv2dShape s = conv_shape(N, C, H, W, K, R, S, u, v, ph, pw);
              const Activation act = activation_from_string(activation);
              py::gil_scoped_release release;
              conv::conv2d_implicit_gemm_fast(dptr<const float>(x), dptr<const float>(w), dptr<const float>(bias),
                                              dptr<float>(y), s, act, tile);
          },
          GPUOPT_GEMM_CONV_ARGS, py::arg("tile") = "64x64x8");

    m.def("conv2d_gemm_kernel_info", [] {
        std::vector<py::dict> out;
        for (const auto& k : conv::conv2d_gemm_kernel_info()) out.push_back(kernel_info_dict(k));
        return out;
    }, "Registers, shared memory, local memory (stack + spills) and occupancy of every kernel instantiation of "
       "the GEMM-based conv2d variants (im2col, permute, implicit_gemm tiles, implicit_gemm_fast tiles x W loaders).");
}

}  // namespace gpuopt::bind

#undef GPUOPT_GEMM_CONV_ARGS
