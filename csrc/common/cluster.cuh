// Thread-block clusters (sm_90) behind three calls, so that kernels using them also compile for older targets
// (the default build is for sm_80 and sm_90). Below sm_90 the launchers never form clusters (split 1): a cluster
// is then the block itself, which is what these calls do there.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

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

}  // namespace gpuopt::cluster
