// Checked CUDA, cuBLAS and cuDNN calls: every failure becomes a CudaError (a
// std::runtime_error, so Python sees RuntimeError) carrying the file, line, the call
// and the library's own message.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace gpuopt {

class CudaError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] inline void fail_cuda(const char* lib, const char* what, const char* expr,
                                   const char* file, int line) {
    throw CudaError(std::string(lib) + " error: " + what + " in '" + expr + "' at " + file + ":" +
                    std::to_string(line));
}
}  // namespace detail

inline void cuda_check(cudaError_t status, const char* expr, const char* file, int line) {
    if (status != cudaSuccess) {
        // Clear the error so later calls start clean when the error was not sticky
        // (bad launch configuration, out of memory, ...).
        cudaGetLastError();
        std::string what = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
        detail::fail_cuda("CUDA", what.c_str(), expr, file, line);
    }
}

}  // namespace gpuopt

#define GPUOPT_CUDA_CHECK(expr) ::gpuopt::cuda_check((expr), #expr, __FILE__, __LINE__)
// After every kernel launch: catches bad configurations at once. Asynchronous faults
// surface at the next synchronising call, which is checked too.
#define GPUOPT_CHECK_LAUNCH(name) ::gpuopt::cuda_check(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)
