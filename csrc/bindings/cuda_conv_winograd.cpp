// conv2d winograd (conv2d_winograd.cu): its binding, its check and its kernels' resources. m: 0 picks the default
// tile (gpuopt's "auto").
#include <pybind11/stl.h>

#include <vector>

#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"

namespace gpuopt::bind {

void bind_conv_winograd(py::module_& m) {
    // conv2d's winograd has no pool and no products parameter: the products table's default (auto).
    constexpr auto products = static_cast<conv::WinogradProducts>(conv::kWinogradProducts.default_index);
    def_conv2d(m, "winograd", [](const Conv2dArgs& a, int tile) {
        run_conv(a, [&](auto... p) { conv::conv2d_winograd(p..., tile, conv::WinogradPool::None, products); });
    }, [](const conv::Conv2dShape& s, int tile) {
        conv::conv2d_winograd_check(s, tile, conv::WinogradPool::None, products);
    }, py::arg("m"));

    m.def("conv2d_winograd_kernel_info", [] { return kernel_info_list(conv::conv2d_winograd_kernel_info()); },
          "Registers, shared memory, local memory (stack + spills) and occupancy of every winograd kernel.");
}

}  // namespace gpuopt::bind
