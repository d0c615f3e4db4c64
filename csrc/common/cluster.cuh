// Thread-block clusters (sm_90) behind three calls, so that kernels using them also compile for older targets
// (the default build is for sm_80 and sm_90). Below sm_90 the launchers never form clusters (split 1): a cluster
// is then the block itself, which is what these calls do there.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "cuda_check.cuh"

namespace gpuopt::cluster {

// This block's rank in its cluster.
__device__ __forceinline__ unsigned rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    return cooperative_groups::this_cluster().block_rank();
#else
    return 0;
#endif
}

// A barrier over every thread of the cluster, with its shared-memory writes visible to the cluster.
__device__ __forceinline__ void sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cooperative_groups::this_cluster().sync();
#else
    __syncthreads();
#endif
}

// The address of `p` (this block's shared memory) in the shared memory of rank `r` of the cluster.
template <typename T>
__device__ __forceinline__ T* map(T* p, unsigned r) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    return cooperative_groups::this_cluster().map_shared_rank(p, r);
#else
    (void)r;
    return p;
#endif
}

// Whether the current device forms clusters (compute capability 9.0 and up); host side, for the launchers.
inline bool supported() {
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
        return false;
    return major >= 9;
}

// Launches `kernel` on `blocks` x `threads` with `smem` bytes of dynamic shared memory, in clusters of `split`
// blocks along x (no cluster attribute for split 1, so the launch also runs where there are no clusters).
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), unsigned blocks, unsigned threads, std::size_t smem, int split,
            Args&&... args) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem;
    cudaLaunchAttribute dims;
    dims.id = cudaLaunchAttributeClusterDimension;
    dims.val.clusterDim.x = static_cast<unsigned>(split), dims.val.clusterDim.y = dims.val.clusterDim.z = 1;
    config.attrs = &dims;
    config.numAttrs = split > 1 ? 1 : 0;
    GPUOPT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Args&&>(args)...));
}

}  // namespace gpuopt::cluster
