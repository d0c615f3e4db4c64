// Device and library queries. Declared in a plain C++ header so host-only code (the
// bindings) can call them; defined in device.cu.
#pragma once

#include <cstdint>
#include <string>

namespace gpuopt {

// Number of usable CUDA devices; 0 (never an exception, never output) when there is
// no driver, no device, or the driver is too old for this build.
int cuda_device_count() noexcept;

// Why cuda_device_count() is 0, in words ("" when devices are present).
std::string cuda_unavailable_reason();

struct DeviceInfo {
    int index = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;
    int multiprocessors = 0;
    std::int64_t total_memory_bytes = 0;
    std::int64_t l2_cache_bytes = 0;
    std::int64_t shared_memory_per_block_bytes = 0;        // default limit (48 KiB)
    std::int64_t shared_memory_per_block_optin_bytes = 0;  // after cudaFuncSetAttribute
    std::int64_t shared_memory_per_sm_bytes = 0;
    std::int64_t constant_memory_bytes = 0;
    int registers_per_block = 0;
    int max_threads_per_block = 0;
    int max_threads_per_sm = 0;
    int warp_size = 0;
    int clock_rate_khz = 0;
    int memory_clock_rate_khz = 0;
    int memory_bus_width_bits = 0;
    int driver_version = 0;   // e.g. 13000 for 13.0
    int runtime_version = 0;  // the statically linked runtime
};

// Properties of device `index`; throws CudaError if it cannot be queried.
DeviceInfo device_info(int index);

// Multiprocessors of the current device, cached per device: launchers that size persistent or split grids
// ask on every call.
int multiprocessor_count();

// Versions of the libraries loaded at run time (0 when not built with them).
int cublas_runtime_version();
int cudnn_runtime_version();

}  // namespace gpuopt
