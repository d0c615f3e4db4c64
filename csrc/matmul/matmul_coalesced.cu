// Ladder step 2, "coalesced": which way a warp lies over c decides whether its loads are
// coalesced. One thread per output, no shared memory, so only the access pattern differs
// between the two layouts (the report's fixed naive kernel already had the good one).
#include "matmul_kernels.cuh"

namespace gpuopt::matmul {

namespace {
constexpr int kThreads = 256;

// WARP_ALONG_ROW: a block covers 8 rows x 32 columns of c and warp w takes row w: its 32
// threads read one a[row][k] (a broadcast) and 32 consecutive b[k][col] (one 128-byte
// line), and write 32 consecutive c. Otherwise a block covers 32 rows x 8 columns and a
// warp takes 32 rows of one column: 32 a[row][k] K floats apart (32 lines per load) and
// 32 c writes N floats apart.
template <bool WARP_ALONG_ROW>
__global__ void __launch_bounds__(kThreads) matmul_coalesced_kernel(const float* __restrict__ a,
                                                                     const float* __restrict__ b, float* __restrict__ c,
                                                                     int M, int N, int K) {
    constexpr int BM = WARP_ALONG_ROW ? 8 : 32;
    constexpr int BN = WARP_ALONG_ROW ? 32 : 8;
    const dev::TileCoord tile = dev::tile_of_block<1>(static_cast<int>(blockIdx.x), ceil_div(M, BM), ceil_div(N, BN));
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int row = tile.m * BM + (WARP_ALONG_ROW ? warp : lane);
    const int col = tile.n * BN + (WARP_ALONG_ROW ? lane : warp);
    if (row >= M || col >= N) return;
    const float* a_row = a + static_cast<std::int64_t>(row) * K;
    const float* b_col = b + col;
    float sum = 0.f;
    for (int k = 0; k < K; ++k, b_col += N) sum = fmaf(a_row[k], *b_col, sum);
    c[static_cast<std::int64_t>(row) * N + col] = sum;
}
}  // namespace

MatmulLaunch launch_coalesced(std::int64_t M, std::int64_t N, WarpLayout warp_layout) {
    GPUOPT_REQUIRE(static_cast<std::size_t>(warp_layout) < kWarpLayouts.size(),
                   "matmul coalesced: warp_layout must be an index into kWarpLayouts, got " +
                       std::to_string(static_cast<int>(warp_layout)));
    MatmulLaunch l;
    l.threads = kThreads;
    if (warp_layout == WarpLayout::Row) {
        l.kernel = matmul_coalesced_kernel<true>;
        l.blocks = tile_count(M, N, 8, 32, "coalesced");
        l.name = "coalesced<warp along a row of c, 8x32 per block>";
    } else {
        l.kernel = matmul_coalesced_kernel<false>;
        l.blocks = tile_count(M, N, 32, 8, "coalesced");
        l.name = "coalesced<warp along a column of c, 32x8 per block>";
    }
    return l;
}

void matmul_coalesced(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                      WarpLayout warp_layout) {
    require_shape(M, N, K, "coalesced");
    run_launch(launch_coalesced(M, N, warp_layout), a, b, c, M, N, K);
}

}  // namespace gpuopt::matmul
