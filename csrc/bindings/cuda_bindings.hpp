// One binding function per op family, all registered by cuda_module.cpp. Device pointers
// cross the boundary as integers (the __cuda_array_interface__ convention).
//
// The binding rule, the one place that joins a GPU variant to its launcher: variant V of op O
// is launched by `O_V` (def_variant), and where its launcher has host-side checks that need no
// device memory, they are `check.O_V` (def_check), with the same keyword parameters. Every `O_V`
// is listed in the module's `variant_bindings` ({op: [variant, ...]}), which gpuopt's registry
// is tested against.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <utility>

#include "../matmul/matmul_cuda.hpp"

namespace gpuopt::bind {

namespace py = pybind11;

template <typename T>
T* dptr(std::uintptr_t p) {
    return reinterpret_cast<T*>(p);
}

// Registers/shared memory/spills of one kernel instantiation as a dict (matmul_kernel_info,
// conv2d_gemm_kernel_info).
py::dict kernel_info_dict(const matmul::KernelInfo& k);

inline std::string binding_name(const char* op, const char* variant) { return std::string(op) + "_" + variant; }

// Creates the `variant_bindings` table and the `check` submodule; cuda_module.cpp calls it first.
inline void init_variant_tables(py::module_& m) {
    m.attr("variant_bindings") = py::dict();
    m.def_submodule("check", "Host-side checks of the GPU variants' launchers (no device memory, nothing runs): "
                             "check.<op>_<variant>(shape, **params) raises ValueError for what the launcher rejects.");
}

// Binds the launcher of GPU variant `variant` of `op` as `<op>_<variant>` and lists it in `variant_bindings`.
template <typename Fn, typename... Extra>
void def_variant(py::module_& m, const char* op, const char* variant, Fn&& fn, const Extra&... extra) {
    const std::string name = binding_name(op, variant);
    m.def(name.c_str(), std::forward<Fn>(fn), extra...);
    py::dict table = m.attr("variant_bindings");
    if (!table.contains(op)) table[op] = py::list();
    py::list(table[op]).append(variant);
}

// Binds the host-side checks of that launcher as `check.<op>_<variant>`.
template <typename Fn, typename... Extra>
void def_check(py::module_& m, const char* op, const char* variant, Fn&& fn, const Extra&... extra) {
    py::module_ check = m.attr("check");
    check.def(binding_name(op, variant).c_str(), std::forward<Fn>(fn), extra...);
}

void bind_runtime(py::module_& m);
void bind_matmul(py::module_& m);
void bind_conv(py::module_& m);
void bind_conv_cs6235(py::module_& m);
void bind_conv_ece408(py::module_& m);
void bind_conv_gemm(py::module_& m);
void bind_conv_direct(py::module_& m);
void bind_conv_winograd(py::module_& m);
void bind_kmeans(py::module_& m);
void bind_sparse(py::module_& m);
void bind_nn(py::module_& m);            // cuda_nn.cpp: the layer ops
void bind_nn_conv_pool(py::module_& m);  // cuda_nn_conv_pool.cpp: fused convolution + activation + pooling

}  // namespace gpuopt::bind
