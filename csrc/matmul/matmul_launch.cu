// The launcher and resource report shared by every kernel family of the ladder.
#include <string>

#include "../common/cuda_check.cuh"
#include "../common/error.hpp"
#include "../common/stream.hpp"
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

namespace {

void launch_checked(MatmulKernel kernel, unsigned blocks, int threads, std::size_t smem, int cluster, const float* a,
                    const float* b, float* c, int M, int N, int K) {
    if (cluster == 1) {
        kernel<<<blocks, threads, smem, current_stream()>>>(a, b, c, M, N, K);
        GPUOPT_CUDA_CHECK(cudaGetLastError());
        return;
    }
    // Split-k: clusters of `cluster` consecutive blocks (a launch attribute, so the same
    // kernel template serves any split).
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = smem;
    config.stream = current_stream();
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    GPUOPT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, a, b, c, M, N, K));
}

// What every launch of a planned kernel checks first (and a prepared launch once).
void check_launch(const MatmulLaunch& l) {
    check_block_threads(l.threads, true);
    if (l.dynamic_smem > 0) require_shared_memory(l.kernel, l.dynamic_smem, l.name.c_str());
    GPUOPT_REQUIRE(l.blocks % l.cluster == 0, "matmul: the grid must be a whole number of clusters");
}

}  // namespace

void run_launch(const MatmulLaunch& l, const float* a, const float* b, float* c, std::int64_t M, std::int64_t N,
                std::int64_t K) {
    check_launch(l);
    launch_checked(l.kernel, l.blocks, l.threads, l.dynamic_smem, l.cluster, a, b, c, static_cast<int>(M),
                   static_cast<int>(N), static_cast<int>(K));
}

void run_prepared(const PreparedLaunch& l, const float* a, const float* b, float* c) {
    launch_checked(reinterpret_cast<MatmulKernel>(const_cast<void*>(l.kernel)), l.blocks, l.threads, l.dynamic_smem,
                   l.cluster, a, b, c, l.M, l.N, l.K);
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

KernelInfo launch_info(const MatmulLaunch& l) {
    return kernel_info(reinterpret_cast<const void*>(l.kernel), l.name, l.threads, l.dynamic_smem);
}

namespace {

// The launch `variant` makes for an M x N x K product with 16-byte aligned operands (the fast path; any
// address 256-byte aligned stands for them); `what` names the caller in the refusal.
const char* step_name(Step variant) {
    const auto i = static_cast<std::size_t>(variant);
    GPUOPT_REQUIRE(i < kSteps.size(), "matmul: variant must be an index into kSteps, got " + std::to_string(i));
    return kSteps.names[i];
}

MatmulLaunch launch_aligned(Step variant, const KernelParams& p, std::int64_t M, std::int64_t N, std::int64_t K,
                          const char* what) {
    const char* name = step_name(variant);
    require_shape(M, N, K, name);
    const float* aligned = reinterpret_cast<const float*>(std::uintptr_t{256});
    switch (variant) {
        case Step::Coalesced: return launch_coalesced(M, N, p.warp_layout);
        case Step::Shared: return launch_shared(M, N, p.block);
        case Step::TileBuffer: return launch_tile_buffer(M, N, p.tile_sz);
        case Step::Blocktile1d: return launch_blocktile_1d(M, N);
        case Step::Blocktile2d: return launch_blocktile_2d(M, N, p.tile_2d);
        case Step::Vectorized: return launch_vectorized(aligned, aligned, aligned, M, N, K, p.tile_2d);
        case Step::Warptile: return launch_warptile(aligned, aligned, aligned, M, N, K, p.warp_tile);
        case Step::Async: return launch_async(aligned, aligned, aligned, M, N, K, p.async_tile, p.stages, p.split_k);
        case Step::Tf32x3: return launch_tf32x3(aligned, aligned, aligned, M, N, K, p.stages, p.flush_k, p.split);
        default: break;
    }
    GPUOPT_REQUIRE(false, std::string(what) + ": variant '" + name + "' has no single planned kernel");
    return {};
}

}  // namespace

KernelInfo matmul_kernel_info(Step variant, const KernelParams& p, std::int64_t M, std::int64_t N,
                              std::int64_t K) {
    if (variant == Step::Tf32x3Wgmma) {
        require_shape(M, N, K, step_name(variant));
        return tf32x3_wgmma_info();
    }
    if (variant == Step::Naive) {
        require_shape(M, N, K, step_name(variant));
        return launch_info(launch_naive());
    }
    return launch_info(launch_aligned(variant, p, M, N, K, "matmul_kernel_info"));
}

PreparedLaunch matmul_prepare(Step variant, const KernelParams& p, std::int64_t M, std::int64_t N,
                              std::int64_t K) {
    const MatmulLaunch l = launch_aligned(variant, p, M, N, K, "matmul_prepare");
    check_launch(l);
    PreparedLaunch out;
    out.kernel = reinterpret_cast<const void*>(l.kernel);
    out.blocks = l.blocks;
    out.threads = l.threads;
    out.dynamic_smem = l.dynamic_smem;
    out.cluster = l.cluster;
    out.M = static_cast<int>(M), out.N = static_cast<int>(N), out.K = static_cast<int>(K);
    return out;
}

}  // namespace gpuopt::matmul
