// conv2d's binding types (Conv2dShape, Conv2dArgs) and its baselines: basic and cuDNN.
#include <string>

#include "../common/activation.hpp"
#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"

namespace gpuopt::bind {

void bind_conv_types(py::module_& m) {
    using conv::Conv2dShape;
    py::class_<Conv2dShape>(m, "Conv2dShape",
                            "A conv2d problem in the reports' names: x (N, C, H, W), w (K, C / groups, R, S), stride "
                            "(u, v), padding (ph, pw), dilation (dh, dw), groups; P and Q are the output's height and "
                            "width. Launchers validate it (only cudnn takes dilation or groups other than 1).")
        .def(py::init([](std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K,
                         std::int64_t R, std::int64_t S, std::int64_t u, std::int64_t v, std::int64_t ph,
                         std::int64_t pw, std::int64_t dh, std::int64_t dw, std::int64_t groups) {
                 Conv2dShape s;
                 s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = R, s.S = S;
                 s.stride_h = u, s.stride_w = v, s.pad_h = ph, s.pad_w = pw;
                 s.dilation_h = dh, s.dilation_w = dw, s.groups = groups;
                 return s;
             }),
             py::arg("N"), py::arg("C"), py::arg("H"), py::arg("W"), py::arg("K"), py::arg("R"), py::arg("S"),
             py::arg("u") = 1, py::arg("v") = 1, py::arg("ph") = 0, py::arg("pw") = 0, py::arg("dh") = 1,
             py::arg("dw") = 1, py::arg("groups") = 1)
        .def_readonly("N", &Conv2dShape::N)
        .def_readonly("C", &Conv2dShape::C)
        .def_readonly("H", &Conv2dShape::H)
        .def_readonly("W", &Conv2dShape::W)
        .def_readonly("K", &Conv2dShape::K)
        .def_readonly("R", &Conv2dShape::R)
        .def_readonly("S", &Conv2dShape::S)
        .def_readonly("u", &Conv2dShape::stride_h)
        .def_readonly("v", &Conv2dShape::stride_w)
        .def_readonly("ph", &Conv2dShape::pad_h)
        .def_readonly("pw", &Conv2dShape::pad_w)
        .def_readonly("dh", &Conv2dShape::dilation_h)
        .def_readonly("dw", &Conv2dShape::dilation_w)
        .def_readonly("groups", &Conv2dShape::groups)
        .def_property_readonly("P", &Conv2dShape::P)
        .def_property_readonly("Q", &Conv2dShape::Q)
        .def("__repr__", [](const Conv2dShape& s) {
            auto n = [](std::int64_t v) { return std::to_string(v); };
            return "Conv2dShape(N=" + n(s.N) + ", C=" + n(s.C) + ", H=" + n(s.H) + ", W=" + n(s.W) + ", K=" + n(s.K) +
                   ", R=" + n(s.R) + ", S=" + n(s.S) + ", u=" + n(s.stride_h) + ", v=" + n(s.stride_w) +
                   ", ph=" + n(s.pad_h) + ", pw=" + n(s.pad_w) + ")";
        });

    py::class_<Conv2dArgs>(m, "Conv2dArgs",
                           "One conv2d call: device addresses of x, w, bias (0: none) and y (N*K*P*Q floats), the "
                           "shape and the activation ('none', 'relu' or 'tanh').")
        .def(py::init([](std::uintptr_t x, std::uintptr_t w, std::uintptr_t bias, std::uintptr_t y,
                         const conv::Conv2dShape& shape, const std::string& activation) {
                 return Conv2dArgs{x, w, bias, y, shape, activation_from_string(activation)};
             }),
             py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("y"), py::arg("shape"), py::arg("activation"))
        .def_readonly("shape", &Conv2dArgs::shape);
}

void bind_conv(py::module_& m) {
    bind_conv_types(m);
    def_conv2d(m, "basic", [](const Conv2dArgs& a) { run_conv(a, conv::conv2d_basic); }, NoCheck{});
#if defined(GPUOPT_WITH_CUDNN)
    def_conv2d(m, "cudnn", [](const Conv2dArgs& a, const std::string& algorithms) {
        const auto algos = conv::cudnn_algorithms(choice_index(conv::kCudnnAlgorithms, algorithms, "conv2d cudnn"));
        run_conv(a, [algos](auto... p) { conv::conv2d_cudnn(p..., algos); });
    }, NoCheck{}, py::arg("algorithms"));
    m.def("conv2d_cudnn_algorithm", [](const conv::Conv2dShape& s, const std::string& algorithms) {
        const auto algos = conv::cudnn_algorithms(choice_index(conv::kCudnnAlgorithms, algorithms, "conv2d cudnn"));
        py::gil_scoped_release release;  // the first call for a shape benchmarks the algorithms
        return conv::conv2d_cudnn_algorithm(s, algos);
    }, py::arg("shape"), py::arg("algorithms") = conv::kCudnnAlgorithms.default_name(),
          "Name of the cuDNN forward algorithm conv2d_cudnn uses for this shape.");
#endif
}

}  // namespace gpuopt::bind
