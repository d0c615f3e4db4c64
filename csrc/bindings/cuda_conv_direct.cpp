// conv2d direct_regblock (conv2d_direct.cu): its binding, its check (the plan, host only), the plan itself and
// its kernels' resources. k_tile and pixels: 0 picks per shape (gpuopt's "auto").
#include <pybind11/stl.h>

#include <vector>

#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"

namespace gpuopt::bind {

void bind_conv_direct(py::module_& m) {
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

    m.def("conv2d_direct_kernel_info", [] {
        std::vector<py::dict> out;
        for (const auto& k : conv::conv2d_direct_kernel_info()) out.push_back(kernel_info_dict(k));
        return out;
    }, "Registers, shared memory, local memory (stack + spills) and occupancy of every direct_regblock kernel.");
}

}  // namespace gpuopt::bind
