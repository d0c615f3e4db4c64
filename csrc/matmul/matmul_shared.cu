// Ladder steps 3-4, "shared", "tile_buffer": the CMU report's two shared-memory steps. "shared"
// (square tiles of A and B staged in shared memory; 16x16 vs 32x32 is its occupancy experiment)
// and "tile_buffer" (its Figure 3: one block computes TILE_SZ consecutive output tiles of a row
// stripe, so each A tile it loads serves TILE_SZ B tiles).
#include "matmul_kernels.cuh"

namespace gpuopt::matmul {

namespace {

// Thread (ty, tx) = (t / BLOCK, t % BLOCK) of block `tile` computes c[tile.m*BLOCK + ty]
// [tile.n*BLOCK*TILE_SZ + j*BLOCK + tx] for j < TILE_SZ. Per k-step of BLOCK, the block
// stages one BLOCK x BLOCK tile of A and TILE_SZ tiles of B; out-of-range elements are
// staged as zeros, so edge tiles need no special inner loop. Reads of a_tile[ty][k] are
// broadcasts, of b_tile[k][tx] consecutive words: no bank conflicts.
template <int BLOCK, int TILE_SZ>
__global__ void __launch_bounds__(BLOCK* BLOCK) matmul_shared_kernel(const float* __restrict__ a,
                                                                    const float* __restrict__ b,
                                                                    float* __restrict__ c, int M, int N, int K) {
    constexpr int BN = BLOCK * TILE_SZ;  // columns of c per block
    __shared__ float a_tile[BLOCK][BLOCK];
    __shared__ float b_tile[BLOCK][BN];
    const dev::TileCoord tile = dev::tile_of_block<1>(static_cast<int>(blockIdx.x), ceil_div(M, BLOCK), ceil_div(N, BN));
    const int tx = threadIdx.x % BLOCK, ty = threadIdx.x / BLOCK;
    const int row = tile.m * BLOCK + ty;
    const int col0 = tile.n * BN + tx;  // column of this thread's first output
    float sum[TILE_SZ] = {};
    for (int k0 = 0; k0 < K; k0 += BLOCK) {
        a_tile[ty][tx] = (row < M && k0 + tx < K) ? a[static_cast<std::int64_t>(row) * K + k0 + tx] : 0.f;
#pragma unroll
        for (int j = 0; j < TILE_SZ; ++j) {
            const int col = col0 + j * BLOCK;
            b_tile[ty][j * BLOCK + tx] =
                (k0 + ty < K && col < N) ? b[static_cast<std::int64_t>(k0 + ty) * N + col] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK; ++k) {
            const float a_k = a_tile[ty][k];  // loaded once, used TILE_SZ times
#pragma unroll
            for (int j = 0; j < TILE_SZ; ++j) sum[j] = fmaf(a_k, b_tile[k][j * BLOCK + tx], sum[j]);
        }
        __syncthreads();  // before the next k-step overwrites the tiles
    }
    if (row >= M) return;
#pragma unroll
    for (int j = 0; j < TILE_SZ; ++j) {
        const int col = col0 + j * BLOCK;
        if (col < N) c[static_cast<std::int64_t>(row) * N + col] = sum[j];
    }
}

template <int BLOCK, int TILE_SZ>
MatmulLaunch plan(std::int64_t M, std::int64_t N, const char* name) {
    MatmulLaunch l;
    l.kernel = matmul_shared_kernel<BLOCK, TILE_SZ>;
    l.threads = BLOCK * BLOCK;
    l.blocks = tile_count(M, N, BLOCK, BLOCK * TILE_SZ, name);
    l.name = std::string(name) + "<" + std::to_string(BLOCK) + "x" + std::to_string(BLOCK) + " threads, " +
             std::to_string(BLOCK) + "x" + std::to_string(BLOCK * TILE_SZ) + " outputs per block>";
    return l;
}

}  // namespace

MatmulLaunch launch_shared(std::int64_t M, std::int64_t N, int block) {
    require_choice(kSharedBlocks, block, "matmul shared");
    return at_value<kSharedBlocks>(block, [&](auto b) { return plan<decltype(b)::value, 1>(M, N, "shared"); });
}

MatmulLaunch launch_tile_buffer(std::int64_t M, std::int64_t N, int tile_sz) {
    require_choice(kTileBufferSizes, tile_sz, "matmul tile_buffer");
    return at_value<kTileBufferSizes>(tile_sz, [&](auto t) { return plan<16, decltype(t)::value>(M, N, "tile_buffer"); });
}

void matmul_shared(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                   int block) {
    require_shape(M, N, K, "shared");
    run_launch(launch_shared(M, N, block), a, b, c, M, N, K);
}

void matmul_tile_buffer(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                        int tile_sz) {
    require_shape(M, N, K, "tile_buffer");
    run_launch(launch_tile_buffer(M, N, tile_sz), a, b, c, M, N, K);
}

}  // namespace gpuopt::matmul
