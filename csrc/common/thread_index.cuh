// threadIdx.x re-read where a kernel wants it recomputed rather than kept live.
#pragma once

#include <cuda_runtime.h>

namespace gpuopt::dev {

// threadIdx.x read afresh (an opaque asm the compiler cannot merge with earlier reads):
// for values needed only after the main loop, so they are recomputed there instead of
// occupying a register (or a spill slot) through it.
__device__ __forceinline__ int fresh_thread_index() {
    unsigned t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return static_cast<int>(t);
}

}  // namespace gpuopt::dev
