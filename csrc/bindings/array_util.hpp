// Small helpers shared by the bindings: C-contiguous typed arrays and shape checks.
// The Python layer (gpuopt/) validates user input with friendly messages; these checks
// only guarantee that the C++ code never reads or writes out of bounds.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../common/error.hpp"

namespace gpuopt::bind {

namespace py = pybind11;

template <typename T>
using carray = py::array_t<T, py::array::c_style>;

template <typename T>
std::vector<std::int64_t> shape_of(const carray<T>& a, py::ssize_t ndim, const char* name) {
    GPUOPT_REQUIRE(a.ndim() == ndim, std::string(name) + " must have " + std::to_string(ndim) + " dimensions");
    std::vector<std::int64_t> s(static_cast<std::size_t>(ndim));
    for (py::ssize_t i = 0; i < ndim; ++i) s[static_cast<std::size_t>(i)] = a.shape(i);
    return s;
}

template <typename T>
carray<T> empty(std::vector<py::ssize_t> shape) {
    return carray<T>(std::move(shape));
}

}  // namespace gpuopt::bind
