// What every conv2d binding takes: the shape in the reports' names (N, C, H, W, K, R, S,
// stride u, v, padding ph, pw), shared by the basic/cuDNN, CS6235 and ECE408 bindings.
#pragma once

#include <cstdint>

#include "../conv/conv2d.hpp"

namespace gpuopt::bind {

inline conv::Conv2dShape conv_shape(std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K,
                                    std::int64_t R, std::int64_t S, std::int64_t u, std::int64_t v, std::int64_t ph,
                                    std::int64_t pw) {
    conv::Conv2dShape s;
    s.N = N, s.C = C, s.H = H, s.W = W;
    s.K = K, s.R = R, s.S = S;
    s.stride_h = u, s.stride_w = v, s.pad_h = ph, s.pad_w = pw;
    return s;
}

}  // namespace gpuopt::bind

#define GPUOPT_CONV_SHAPE_ARGS                                                                                     \
    py::arg("N"), py::arg("C"), py::arg("H"), py::arg("W"), py::arg("K"), py::arg("R"), py::arg("S"), py::arg("u"), \
        py::arg("v"), py::arg("ph"), py::arg("pw")
