#include <string>

#include "../common/activation.hpp"
#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

void bind_conv(py::module_& m) {
    using Fn = void (*)(const float*, const float*, const float*, float*, const conv::Conv2dShape&, Activation);
    // x, w, bias (0: none) and y are device addresses; the shape is the caller's (gpuopt
    // validates it against the arrays); y must hold N*K*P*Q floats.
    auto def = [&m](const char* name, Fn fn) {
        m.def(name, [fn](std::uintptr_t x, std::uintptr_t w, std::uintptr_t bias, std::uintptr_t y, std::int64_t N,
                         std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K, std::int64_t R,
                         std::int64_t S, std::int64_t u, std::int64_t v, std::int64_t ph, std::int64_t pw,
                         const std::string& activation) {
            const conv::Conv2dShape s = conv_shape(N, C, H, W, K, R, S, u, v, ph, pw);
            const Activation act = activation_from_string(activation);
            py::gil_scoped_release release;
            fn(dptr<const float>(x), dptr<const float>(w), dptr<const float>(bias), dptr<float>(y), s, act);
        }, py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("y"), GPUOPT_CONV_SHAPE_ARGS, py::arg("activation"));
    };
    def("conv2d_basic", &conv::conv2d_basic);
#if defined(GPUOPT_WITH_CUDNN)
    m.def("conv2d_cudnn", [](std::uintptr_t x, std::uintptr_t w, std::uintptr_t bias, std::uintptr_t y, std::int64_t N,
                             std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K, std::int64_t R,
                             std::int64_t S, std::int64_t u, std::int64_t v, std::int64_t ph, std::int64_t pw,
                             const std::string& activation, const std::string& algorithms) {
        const conv::Conv2dShape s = conv_shape(N, C, H, W, K, R, S, u, v, ph, pw);
        const Activation act = activation_from_string(activation);
        const conv::CudnnAlgorithms algos = conv::cudnn_algorithms_from_string(algorithms);
        py::gil_scoped_release release;
        conv::conv2d_cudnn(dptr<const float>(x), dptr<const float>(w), dptr<const float>(bias), dptr<float>(y), s, act,
                           algos);
    }, py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("y"), GPUOPT_CONV_SHAPE_ARGS, py::arg("activation"),
          py::arg("algorithms") = "precise");
    m.def("conv2d_cudnn_algorithm", [](std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K,
                                       std::int64_t R, std::int64_t S, std::int64_t u, std::int64_t v, std::int64_t ph,
                                       std::int64_t pw, const std::string& algorithms) {
        const conv::Conv2dShape s = conv_shape(N, C, H, W, K, R, S, u, v, ph, pw);
        const conv::CudnnAlgorithms algos = conv::cudnn_algorithms_from_string(algorithms);
        py::gil_scoped_release release;  // the first call for a shape benchmarks the algorithms
        return conv::conv2d_cudnn_algorithm(s, algos);
    }, GPUOPT_CONV_SHAPE_ARGS, py::arg("algorithms") = "precise",
          "Name of the cuDNN forward algorithm conv2d_cudnn uses for this shape.");
#endif
}


}  // namespace gpuopt::bind
