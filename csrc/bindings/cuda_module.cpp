// gpuopt._cuda: the CUDA side. Imported lazily by gpuopt; a machine without a driver can
// still import it (the CUDA runtime is linked statically) and is told why no device is usable.
#include <pybind11/pybind11.h>

#include "../common/device.hpp"

namespace py = pybind11;

namespace {

py::dict device_info(int index) {
    const gpuopt::DeviceInfo d = gpuopt::device_info(index);
    py::dict out;
    out["index"] = d.index;
    out["name"] = d.name;
    out["compute_capability"] = py::make_tuple(d.cc_major, d.cc_minor);
    out["multiprocessors"] = d.multiprocessors;
    out["total_memory_bytes"] = d.total_memory_bytes;
    out["l2_cache_bytes"] = d.l2_cache_bytes;
    out["shared_memory_per_block_bytes"] = d.shared_memory_per_block_bytes;
    out["shared_memory_per_block_optin_bytes"] = d.shared_memory_per_block_optin_bytes;
    out["shared_memory_per_sm_bytes"] = d.shared_memory_per_sm_bytes;
    out["constant_memory_bytes"] = d.constant_memory_bytes;
    out["registers_per_block"] = d.registers_per_block;
    out["max_threads_per_block"] = d.max_threads_per_block;
    out["max_threads_per_sm"] = d.max_threads_per_sm;
    out["warp_size"] = d.warp_size;
    out["clock_rate_khz"] = d.clock_rate_khz;
    out["memory_clock_rate_khz"] = d.memory_clock_rate_khz;
    out["memory_bus_width_bits"] = d.memory_bus_width_bits;
    out["driver_version"] = d.driver_version;
    out["runtime_version"] = d.runtime_version;
    out["cublas_runtime_version"] = gpuopt::cublas_runtime_version();
    out["cudnn_runtime_version"] = gpuopt::cudnn_runtime_version();
    return out;
}

}  // namespace

PYBIND11_MODULE(_cuda, m) {
    m.doc() = "gpuopt CUDA kernels (internal; use the gpuopt package API)";
    m.def("device_count", &gpuopt::cuda_device_count, "Usable CUDA devices (0 without driver or GPU).");
    m.def("unavailable_reason", &gpuopt::cuda_unavailable_reason, "Why no device is usable ('' if one is).");
    m.def("device_info", &device_info, py::arg("index") = 0, "Properties of one device.");
}
