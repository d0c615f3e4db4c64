// Bindings of the ECE408 Fashion-MNIST report's conv2d variants (conv2d_ece408.cu): the arguments of
// conv2d_basic (device addresses x, w, bias (0: none), y; the shape in the reports' names; the
// activation) followed by each variant's keyword parameters, as gpuopt.conv's _gpu_conv2d passes them.
#include <string>

#include "../common/activation.hpp"
#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"
#include "cuda_bindings.hpp"

#define GPUOPT_ECE408_CONV_ARGS                                                                                  \
    py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("y"), py::arg("N"), py::arg("C"), py::arg("H"),          \
        py::arg("W"), py::arg("K"), py::arg("R"), py::arg("S"), py::arg("u"), py::arg("v"), py::arg("ph"),        \
        py::arg("pw"), py::arg("activation")

namespace gpuopt::bind {

namespace {

// One call: the shape and activation converted while the GIL is held, the launch without it.
template <typename Launch>
void call(std::uintptr_t x, std::uintptr_t w, std::uintptr_t bias, std::uintptr_t y, std::int64_t N, std::int64_t C,
          std::int64_t H, std::int64_t W, std::int64_t K, std::int64_t R, std::int64_t S, std::int64_t u,
          std::int64_t v, std::int64_t ph, std::int64_t pw, const std::string& activation, Launch launch) {
    const conv::Conv2dShape s = conv_shape(N, C, H, W, K, R, S, u, v, ph, pw);
    const Activation act = activation_from_string(activation);
    py::gil_scoped_release release;
    launch(dptr<const float>(x), dptr<const float>(w), dptr<const float>(bias), dptr<float>(y), s, act);
}

}  // namespace

void bind_conv_ece408(py::module_& m) {
    using std::int64_t;
    using std::uintptr_t;
    using conv::Conv2dShape;

    // Variants with one parameter, tile_width (default 16, the report's choice).
    using TiledFn = void (*)(const float*, const float*, const float*, float*, const Conv2dShape&, Activation, int);
    auto def_tiled = [&m](const char* name, TiledFn fn) {
        m.def(name, [fn](uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t C, int64_t H,
                         int64_t W, int64_t K, int64_t R, int64_t S, int64_t u, int64_t v, int64_t ph, int64_t pw,
                         const std::string& activation, int tile_width) {
            call(x, w, bias, y, N, C, H, W, K, R, S, u, v, ph, pw, activation,
                 [&](const float* dx, const float* dw, const float* db, float* dy, const Conv2dShape& s, Activation a) {
                     fn(dx, dw, db, dy, s, a, tile_width);
                 });
        }, GPUOPT_ECE408_CONV_ARGS, py::arg("tile_width") = 16);
    };
    def_tiled("conv2d_tiled", &conv::conv2d_tiled);
    def_tiled("conv2d_tiled_unrolled", &conv::conv2d_tiled_unrolled);
    def_tiled("conv2d_tiled_corner_turn", &conv::conv2d_tiled_corner_turn);

    m.def("conv2d_tiled_channels",
          [](uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t C, int64_t H, int64_t W,
             int64_t K, int64_t R, int64_t S, int64_t u, int64_t v, int64_t ph, int64_t pw,
             const std::string& activation, int tile_width, int channels_per_block) {
              call(x, w, bias, y, N, C, H, W, K, R, S, u, v, ph, pw, activation,
                   [&](const float* dx, const float* dw, const float* db, float* dy, const Conv2dShape& s,
                       Activation a) { conv::conv2d_tiled_channels(dx, dw, db, dy, s, a, tile_width, channels_per_block); });
          },
          GPUOPT_ECE408_CONV_ARGS, py::arg("tile_width") = 16, py::arg("channels_per_block") = 2);

    m.def("conv2d_unroll_constmem",
          [](uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t C, int64_t H, int64_t W,
             int64_t K, int64_t R, int64_t S, int64_t u, int64_t v, int64_t ph, int64_t pw,
             const std::string& activation) {
              call(x, w, bias, y, N, C, H, W, K, R, S, u, v, ph, pw, activation, &conv::conv2d_unroll_constmem);
          },
          GPUOPT_ECE408_CONV_ARGS);
    m.attr("conv2d_constant_weight_bytes") = conv::kConstantWeightBytes;
}

}  // namespace gpuopt::bind

#undef GPUOPT_ECE408_CONV_ARGS
