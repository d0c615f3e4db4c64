// The layer ops' launchers (csrc/nn/nn_cuda.hpp): device addresses as integers, shapes as the
// kernels take them, the GIL released around every launch. gpuopt/nn/gpu.py calls them.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "../nn/nn_cuda.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

using std::int64_t;
using std::uintptr_t;

// Every launcher but argmax streams' is bound with def_addressed: its planner, plan.<op>_<variant>(<the values>),
// fixes the values (the activation converted once) for gpuopt's plan cache, which replays it with the addresses.
void bind_nn(py::module_& m) {
    // relu_cuda / tanh_cuda(x, y, n): y[i] = act(x[i]) for n floats.
    auto def_activation = [&m](const char* op, Activation act) {
        def_addressed<2>(m, op, "cuda", [act](uintptr_t x, uintptr_t y, int64_t n) {
            py::gil_scoped_release release;
            nn::activation_cuda(dptr<const float>(x), dptr<float>(y), n, act);
        }, "x", "y", "n");
    };
    def_activation("relu", Activation::Relu);
    def_activation("tanh", Activation::Tanh);

    // <op>_<variant>(x, y, planes, H, W, size): x (planes, H, W) -> y (planes, H // size, W // size).
    using PoolFn = void (*)(const float*, float*, int64_t, int64_t, int64_t, int64_t, nn::PoolKind);
    auto def_pool = [&m](const char* op, const char* variant, PoolFn fn, nn::PoolKind kind) {
        def_addressed<2>(m, op, variant, [fn, kind](uintptr_t x, uintptr_t y, int64_t planes, int64_t H, int64_t W,
                                                   int64_t size) {
            py::gil_scoped_release release;
            fn(dptr<const float>(x), dptr<float>(y), planes, H, W, size, kind);
        }, "x", "y", "planes", "H", "W", "size");
    };
    for (auto [op, kind] : {std::pair{"max_pool2d", nn::PoolKind::Max}, std::pair{"avg_pool2d", nn::PoolKind::Average}}) {
        def_pool(op, "basic", &nn::pool2d_basic, kind);
        def_pool(op, "coalesced", &nn::pool2d_coalesced, kind);
    }

    // fully_connected_<variant>(x, w, bias, y, N, I, O, activation): bias 0 for none; activation
    // "none", "relu" or "tanh". check.fully_connected_<variant>(N, I, O) where the launcher has limits.
    using FcFn = void (*)(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t, Activation);
    auto def_fc = [&m](const char* variant, FcFn fn) {
        def_addressed<4>(m, "fully_connected", variant, [fn](uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y,
                                                             int64_t N, int64_t I, int64_t O, Activation act) {
            py::gil_scoped_release release;
            fn(dptr<const float>(x), dptr<const float>(w), dptr<const float>(bias), dptr<float>(y), N, I, O, act);
        }, "x", "w", "bias", "y", "N", "I", "O", "activation");
    };
    def_fc("basic", &nn::fully_connected_basic);
    def_fc("tiled", &nn::fully_connected_tiled);
    def_fc("matmul", &nn::fully_connected_matmul);
    def_fc("cublas", &nn::fully_connected_cublas);
    def_check(m, "fully_connected", "matmul", &nn::fully_connected_matmul_check, py::arg("N"), py::arg("I"), py::arg("O"));
    def_check(m, "fully_connected", "cublas", &nn::fully_connected_cublas_check, py::arg("N"), py::arg("I"), py::arg("O"));

    // argmax_<variant>(x, out, rows, cols): out (rows,) int64 on the device.
    using ArgmaxFn = void (*)(const float*, int64_t*, int64_t, int64_t);
    auto def_argmax = [&m](const char* variant, ArgmaxFn fn) {
        def_addressed<2>(m, "argmax", variant, [fn](uintptr_t x, uintptr_t out, int64_t rows, int64_t cols) {
            py::gil_scoped_release release;
            fn(dptr<const float>(x), dptr<int64_t>(out), rows, cols);
        }, "x", "out", "rows", "cols");
    };
    def_argmax("basic", &nn::argmax_basic);
    def_argmax("warp", &nn::argmax_warp);
    // argmax_streams(x, out, host_out, rows, cols): host_out a writeable C-contiguous int64 NumPy
    // array of rows entries (filled before the call returns; out is the device scratch), or None for
    // a device result in out.
    def_variant(m, "argmax", "streams", [](uintptr_t x, uintptr_t out, std::optional<py::array_t<int64_t, py::array::c_style>> host_out,
                                           int64_t rows, int64_t cols) {
        int64_t* host = nullptr;
        if (host_out) {
            GPUOPT_REQUIRE(host_out->ndim() == 1 && host_out->shape(0) == rows,
                           "argmax streams: host_out must have shape (rows,)");
            host = host_out->mutable_data();  // raises if the array is read-only
        }
        py::gil_scoped_release release;
        nn::argmax_streams(dptr<const float>(x), dptr<int64_t>(out), host, rows, cols);
    }, py::arg("x"), py::arg("out"), py::arg("host_out").noconvert().none(true), py::arg("rows"), py::arg("cols"));
    // Its planner is for a device result only (the plan cache's case): the launcher without host_out.
    auto streams_on_device = [](uintptr_t x, uintptr_t out, int64_t rows, int64_t cols) {
        py::gil_scoped_release release;
        nn::argmax_streams(dptr<const float>(x), dptr<int64_t>(out), nullptr, rows, cols);
    };
    def_planner(m, "argmax", "streams", make_planner<AddressProblem<2, decltype(streams_on_device)>>(streams_on_device),
                py::arg("rows"), py::arg("cols"));
    auto row_check = [](const char* what) {
        return [what](int64_t rows, int64_t cols) { nn::row_op_check(rows, cols, what); };
    };
    def_check(m, "argmax", "warp", row_check("argmax warp"), py::arg("rows"), py::arg("cols"));
    def_check(m, "argmax", "streams", row_check("argmax streams"), py::arg("rows"), py::arg("cols"));

    // softmax_cuda(x, y, rows, cols).
    def_addressed<2>(m, "softmax", "cuda", [](uintptr_t x, uintptr_t y, int64_t rows, int64_t cols) {
        py::gil_scoped_release release;
        nn::softmax_cuda(dptr<const float>(x), dptr<float>(y), rows, cols);
    }, "x", "y", "rows", "cols");
    def_check(m, "softmax", "cuda", row_check("softmax"), py::arg("rows"), py::arg("cols"));
}

}  // namespace gpuopt::bind
