// The launcher and resource report shared by every kernel family of the ladder.
#include <string>

#include "../common/cuda_check.cuh"
#include "../common/error.hpp"
#include "matmul_kernels.cuh"

namespace gpuopt::matmul {

void require_shape(std::int64_t M, std::int64_t N, std::int64_t K, const char* what) {
    GPUOPT_REQUIRE(M > 0 && N > 0 && K > 0, "matmul: M, N and K must be positive");
    // Kernels index rows and columns with int, offsets with 64 bits; the margin keeps
    // "index + tile" from overflowing.
    constexpr std::int64_t kLimit = (1LL << 31) - 1024;
    GPUOPT_REQUIRE(M < kLimit && N < kLimit && K < kLimit,
                   std::string("matmul ") + what + ": M, N and K must be < 2^31 - 1024");
}

unsigned tile_count(std::int64_t M, std::int64_t N, int BM, int BN, const char* what) {
    const std::int64_t tiles = ceil_div<std::int64_t>(M, BM) * ceil_div<std::int64_t>(N, BN);
    GPUOPT_REQUIRE(tiles < (1LL << 31), std::string("matmul ") + what + ": " + std::to_string(tiles) + " output tiles of " +
                                            std::to_string(BM) + "x" + std::to_string(BN) +
                                            "; the grid allows at most 2^31-1 blocks");
    return static_cast<unsigned>(tiles);
}

void run_launch(const MatmulLaunch& l, const float* a, const float* b, float* c, std::int64_t M, std::int64_t N,
                std::int64_t K) {
    check_block_threads(l.threads, true);
    if (l.dynamic_smem > 0) require_shared_memory(l.kernel, l.dynamic_smem, l.name.c_str());
    if (l.cluster == 1) {
        l.kernel<<<l.blocks, l.threads, l.dynamic_smem>>>(a, b, c, static_cast<int>(M), static_cast<int>(N),
                                                          static_cast<int>(K));
        GPUOPT_CUDA_CHECK(cudaGetLastError());
        return;
    }
    // Split-k: clusters of l.cluster consecutive blocks (a launch attribute, so the same
    // kernel template serves any split).
    GPUOPT_REQUIRE(l.blocks % l.cluster == 0, "matmul: the grid must be a whole number of clusters");
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(l.blocks);
    config.blockDim = dim3(static_cast<unsigned>(l.threads));
    config.dynamicSmemBytes = l.dynamic_smem;
    config.stream = nullptr;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = static_cast<unsigned>(l.cluster);
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    GPUOPT_CUDA_CHECK(cudaLaunchKernelEx(&config, l.kernel, a, b, c, static_cast<int>(M), static_cast<int>(N),
                                         static_cast<int>(K)));
}

bool device_has_clusters() {
    static int cached[64] = {};  // 0 unknown, 1 no, 2 yes
    int device = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    auto query = [device] {
        int major = 0;
        GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
        return major >= 9;
    };
    if (device < 0 || device >= 64) return query();
    if (cached[device] == 0) cached[device] = query() ? 2 : 1;
    return cached[device] == 2;
}

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

KernelInfo launch_info(const MatmulLaunch& l) {
    return kernel_info(reinterpret_cast<const void*>(l.kernel), l.name, l.threads, l.dynamic_smem);
}

KernelInfo matmul_kernel_info(const std::string& variant, const KernelParams& p, std::int64_t M, std::int64_t N,
                              std::int64_t K) {
    require_shape(M, N, K, variant.c_str());
    // The fast path: 16-byte aligned operands (any address 256-byte aligned stands for them).
    const float* aligned = reinterpret_cast<const float*>(std::uintptr_t{256});
    MatmulLaunch l;
    if (variant == "coalesced") l = plan_coalesced(M, N, p.warp_layout);
    else if (variant == "shared") l = plan_shared(M, N, p.block);
    else if (variant == "tile_buffer") l = plan_tile_buffer(M, N, p.tile_sz);
    else if (variant == "blocktile_1d") l = plan_blocktile_1d(M, N);
    else if (variant == "blocktile_2d") l = plan_blocktile_2d(M, N, p.tile);
    else if (variant == "vectorized") l = plan_vectorized(aligned, aligned, aligned, M, N, K, p.tile);
    else if (variant == "warptile") l = plan_warptile(aligned, aligned, aligned, M, N, K, p.tile);
    else if (variant == "async") l = plan_async(aligned, aligned, aligned, M, N, K, p.tile, p.stages, p.split_k);
    else if (variant == "tf32x3") l = plan_tf32x3(aligned, aligned, aligned, M, N, K, p.stages, p.flush_k, p.split);
    else if (variant == "tf32x3_wgmma") return tf32x3_wgmma_info();
    else if (variant == "naive") l = plan_naive();
    else
        GPUOPT_REQUIRE(false, "matmul_kernel_info: variant '" + variant +
                                  "' has no kernel of gpuopt's own (cublas and cpu have none)");
    return launch_info(l);
}

}  // namespace gpuopt::matmul
