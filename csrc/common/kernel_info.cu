// kernel_info: the resource report of any kernel (common/kernel_info.hpp).
#include <cuda_runtime.h>

#include "cuda_check.cuh"
#include "kernel_info.hpp"
#include "launch.cuh"

namespace gpuopt {

KernelInfo kernel_info(const void* kernel, const std::string& name, int threads, std::size_t dynamic_smem) {
    // Raises the kernel's dynamic shared-memory limit first where it needs more than 48 KiB,
    // as a launch would; the occupancy API answers 0 otherwise.
    if (dynamic_smem > 0) require_shared_memory(kernel, dynamic_smem, name.c_str());
    cudaFuncAttributes attr{};
    GPUOPT_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    int blocks = 0;
    GPUOPT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic_smem));
    KernelInfo info;
    info.kernel = name;
    info.threads_per_block = threads;
    info.registers_per_thread = attr.numRegs;
    info.static_shared_bytes = attr.sharedSizeBytes;
    info.dynamic_shared_bytes = dynamic_smem;
    info.local_bytes_per_thread = attr.localSizeBytes;
    info.max_active_blocks_per_sm = blocks;
    return info;
}

}  // namespace gpuopt
