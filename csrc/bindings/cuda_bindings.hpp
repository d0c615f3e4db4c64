// One binding function per op family, all registered by cuda_module.cpp. Device pointers
// cross the boundary as integers (the __cuda_array_interface__ convention).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

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

void bind_runtime(py::module_& m);
void bind_matmul(py::module_& m);
void bind_conv(py::module_& m);
void bind_conv_cs6235(py::module_& m);
void bind_conv_ece408(py::module_& m);
void bind_conv_gemm(py::module_& m);
void bind_conv_direct(py::module_& m);
void bind_kmeans(py::module_& m);
void bind_sparse(py::module_& m);

}  // namespace gpuopt::bind
