// The ECE408 Fashion-MNIST report's conv2d variants (conv2d_ece408.cu) and their checks.
#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"

namespace gpuopt::bind {

namespace {

using TiledFn = void (*)(const float*, const float*, const float*, float*, const conv::Conv2dShape&, Activation, int);
using TiledCheck = void (*)(const conv::Conv2dShape&, int);

// The variants whose one parameter is tile_width.
void def_tiled(py::module_& m, const char* name, TiledFn launch, TiledCheck check) {
    def_conv2d(m, name, [launch](const Conv2dArgs& a, int tile_width) {
        run_conv(a, [&](auto... p) { launch(p..., tile_width); });
    }, check, py::arg("tile_width"));
}

}  // namespace

void bind_conv_ece408(py::module_& m) {
    def_tiled(m, "tiled", &conv::conv2d_tiled, &conv::conv2d_tiled_check);
    def_tiled(m, "tiled_unrolled", &conv::conv2d_tiled_unrolled, &conv::conv2d_tiled_unrolled_check);
    def_tiled(m, "tiled_corner_turn", &conv::conv2d_tiled_corner_turn, &conv::conv2d_tiled_corner_turn_check);

    def_conv2d(m, "tiled_channels", [](const Conv2dArgs& a, int tile_width, int channels_per_block) {
        run_conv(a, [&](auto... p) { conv::conv2d_tiled_channels(p..., tile_width, channels_per_block); });
    }, &conv::conv2d_tiled_channels_check, py::arg("tile_width"), py::arg("channels_per_block"));

    def_conv2d(m, "unroll_constmem", [](const Conv2dArgs& a) { run_conv(a, conv::conv2d_unroll_constmem); },
               &conv::conv2d_unroll_constmem_check);
}

}  // namespace gpuopt::bind
