// Resources of one kernel instantiation, as every op family reports them (matmul_kernel_info,
// conv2d_*_kernel_info): what cudaFuncGetAttributes and the occupancy API say at a launch configuration.
#pragma once

#include <cstddef>
#include <string>

namespace gpuopt {

struct KernelInfo {
    std::string kernel;                     // the instantiation, e.g. "async<128x128x16 w64x32 t8x8 s3 vecN>"
    int threads_per_block = 0;
    int registers_per_thread = 0;
    std::size_t static_shared_bytes = 0;
    std::size_t dynamic_shared_bytes = 0;
    std::size_t local_bytes_per_thread = 0;  // stack frame + spills
    int max_active_blocks_per_sm = 0;
};

// Registers, shared memory, spills and occupancy of `kernel` at `threads` per block and `dynamic_smem` bytes of
// dynamic shared memory (raising the kernel's opt-in limit first where it needs more than 48 KiB, as a launch
// would). Defined in kernel_info.cu (CUDA builds only).
KernelInfo kernel_info(const void* kernel, const std::string& name, int threads, std::size_t dynamic_smem);

}  // namespace gpuopt
