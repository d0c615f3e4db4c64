#include "../matmul/matmul_cuda.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

void bind_matmul(py::module_& m) {
    using Fn = void (*)(const float*, const float*, float*, std::int64_t, std::int64_t, std::int64_t);
    auto def = [&m](const char* name, Fn fn) {
        m.def(name, [fn](std::uintptr_t a, std::uintptr_t b, std::uintptr_t c, std::int64_t M, std::int64_t N, std::int64_t K) {
            py::gil_scoped_release release;
            fn(dptr<const float>(a), dptr<const float>(b), dptr<float>(c), M, N, K);
        }, py::arg("a"), py::arg("b"), py::arg("c"), py::arg("M"), py::arg("N"), py::arg("K"));
    };
    def("matmul_naive", &matmul::matmul_naive);
    def("matmul_cublas", &matmul::matmul_cublas);
}

}  // namespace gpuopt::bind
