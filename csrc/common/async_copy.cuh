// cp.async (sm_80+): copy global -> shared memory without passing through registers, in groups a thread commits
// and later waits for. Used by the matmul, conv2d, nn, k-means and sparse kernels that stage tiles.
#pragma once

#include <cuda_runtime.h>

namespace gpuopt::dev {

// src_bytes < size zero-fills the rest (0: nothing is read, the whole destination is zeroed), which is how
// out-of-bounds elements of edge tiles become zeros. 16-byte copies bypass L1 (.cg); 4- and 8-byte copies
// must go through it (.ca).
__device__ __forceinline__ void cp_async_16(float* smem_dst, const float* gmem_src, int src_bytes) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_4(float* smem_dst, const float* gmem_src, int src_bytes) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_8(double* smem_dst, const double* gmem_src, int src_bytes) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Wait until at most PENDING of this thread's committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

}  // namespace gpuopt::dev
