// Bindings of conv2d direct_regblock (conv2d_direct.cu): the arguments of conv2d_basic (device addresses x, w,
// bias (0: none), y; the shape in the reports' names; the activation) followed by its keyword parameters, as
// gpuopt.conv's _gpu_conv2d passes them; its host-side plan; its kernels' resources.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "../common/activation.hpp"
#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

void bind_conv_direct(py::module_& m) {
    using std::int64_t;
    using std::uintptr_t;

    m.def("conv2d_direct_regblock",
          [](uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t C, int64_t H, int64_t W,
             int64_t K, int64_t R, int64_t S, int64_t u, int64_t v, int64_t ph, int64_t pw,
             const std::string& activation, int k_tile, int pixels) {
              const conv::Conv2dShape s = conv_shape(N, C, H, W, K, R, S, u, v, ph, pw);
              const Activation act = activation_from_string(activation);
              py::gil_scoped_release release;
              conv::conv2d_direct_regblock(dptr<const float>(x), dptr<const float>(w), dptr<const float>(bias),
                                           dptr<float>(y), s, act, k_tile, pixels);
          },
          py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("y"), GPUOPT_CONV_SHAPE_ARGS, py::arg("activation"),
          py::arg("k_tile") = 0, py::arg("pixels") = 0, "k_tile, pixels: 0 picks per shape (see conv2d_direct.cu).");

    m.def("conv2d_direct_regblock_plan",
          [](int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S, int64_t u, int64_t v,
             int64_t ph, int64_t pw, int k_tile, int pixels, int multiprocessors) {
              const auto p = conv::conv2d_direct_regblock_plan(conv_shape(N, C, H, W, K, R, S, u, v, ph, pw), k_tile,
                                                               pixels, multiprocessors);
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
          GPUOPT_CONV_SHAPE_ARGS, py::arg("k_tile") = 0, py::arg("pixels") = 0, py::arg("multiprocessors") = 132,
          "What conv2d_direct_regblock runs for this shape (host only; multiprocessors: the GPU's).");

    m.def("conv2d_direct_kernel_info", [] {
        std::vector<py::dict> out;
        for (const auto& k : conv::conv2d_direct_kernel_info()) out.push_back(kernel_info_dict(k));
        return out;
    }, "Registers, shared memory, local memory (stack + spills) and occupancy of every direct_regblock kernel.");
}

}  // namespace gpuopt::bind
