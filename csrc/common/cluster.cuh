// Thread-block clusters (sm_90) behind three calls, so that kernels using them also compile for older targets
// (the default build is for sm_80 and sm_90). Below sm_90 the launchers never form clusters (split 1): a cluster
// is then the block itself, which is what these calls do there.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "cuda_check.cuh"
#include "stream.hpp"

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
// dependent: a programmatic dependent launch; its blocks may start while the previous kernel of the stream is still
// running (from that kernel's allow_dependents()), and must call wait_for_previous() before reading its results.
template <typename... Params, typename... Args>
void launch_ex(void (*kernel)(Params...), unsigned blocks, unsigned threads, std::size_t smem, int split,
               bool dependent, Args&&... args) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem;
    config.stream = current_stream();
    cudaLaunchAttribute attrs[2];
    unsigned n = 0;
    if (split > 1) {
        attrs[n].id = cudaLaunchAttributeClusterDimension;
        attrs[n].val.clusterDim.x = static_cast<unsigned>(split), attrs[n].val.clusterDim.y = 1;
        attrs[n++].val.clusterDim.z = 1;
    }
    if (dependent) {
        attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attrs[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    config.attrs = attrs;
    config.numAttrs = n;
    cudaError_t err = cudaLaunchKernelEx(&config, kernel, args...);
    if (err != cudaSuccess && dependent) {  // a dependent launch refused (not a sticky error): an ordinary one
        (void)cudaGetLastError();
        config.numAttrs = n - 1;
        err = cudaLaunchKernelEx(&config, kernel, args...);
    }
    GPUOPT_CUDA_CHECK(err);
}

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), unsigned blocks, unsigned threads, std::size_t smem, int split,
            Args&&... args) {
    launch_ex(kernel, blocks, threads, smem, split, false, static_cast<Args&&>(args)...);
}

// Programmatic dependent launch, device side (sm_90; no-ops where the launch was not dependent): the previous
// kernel lets the next one's blocks start; the next one waits for the previous one's completion and memory.
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace gpuopt::cluster
