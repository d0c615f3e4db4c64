// Ladder step 1, "naive": one thread per output on a 2-D grid of 16x16 blocks (the CMU report's
// original kernel, with its bug fixed): the starting point every later step is measured against.
#include "../common/stream.hpp"
#include "matmul_kernels.cuh"

namespace gpuopt::matmul {

namespace {
constexpr int kBlock = 16;

// Thread (tx, ty) of block (bx, by) computes c[row = by*16 + ty][col = bx*16 + tx]; a warp
// spans consecutive columns, so reads of b and writes of c are coalesced.
__global__ void matmul_naive_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                    int M, int N, int K) {
    const int col = blockIdx.x * kBlock + threadIdx.x;
    const int row = blockIdx.y * kBlock + threadIdx.y;
    if (row >= M || col >= N) return;
    float sum = 0.f;
    for (int k = 0; k < K; ++k) sum += a[static_cast<std::int64_t>(row) * K + k] * b[static_cast<std::int64_t>(k) * N + col];
    c[static_cast<std::int64_t>(row) * N + col] = sum;
}
}  // namespace

// For matmul_kernel_info only: the launch itself uses a 2-D grid, below.
MatmulLaunch launch_naive() {
    MatmulLaunch l;
    l.kernel = matmul_naive_kernel;
    l.threads = kBlock * kBlock;
    l.name = "naive<16x16>";
    return l;
}

void matmul_naive(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K) {
    GPUOPT_REQUIRE(M > 0 && N > 0 && K > 0, "matmul: M, N and K must be positive");
    GPUOPT_REQUIRE(M <= 65535LL * kBlock, "matmul naive: M must be <= 1048560 (grid y limit of 65535 blocks of 16 rows)");
    GPUOPT_REQUIRE(N < (1LL << 31) && K < (1LL << 31), "matmul naive: N and K must be < 2^31");
    const dim3 block(kBlock, kBlock);
    const dim3 grid(static_cast<unsigned>(ceil_div<std::int64_t>(N, kBlock)), static_cast<unsigned>(ceil_div<std::int64_t>(M, kBlock)));
    matmul_naive_kernel<<<grid, block, 0, current_stream()>>>(a, b, c, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K));
    GPUOPT_CHECK_LAUNCH("matmul_naive_kernel");
}

}  // namespace gpuopt::matmul
