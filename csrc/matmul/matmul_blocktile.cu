// Ladder steps 5-7, "blocktile_1d", "blocktile_2d", "vectorized", after siboehm's SGEMM_CUDA
// kernels 4-6: register blocking (each thread computes several outputs from values it holds in
// registers), first along a column (blocktile_1d), then over a TM x TN patch (blocktile_2d), then
// with 16-byte loads and a transposed A tile so the inner loop reads float4 from shared memory
// (vectorized).
// Tile shapes are template parameters; the tile names the launchers accept map to them.
#include "matmul_kernels.cuh"

namespace gpuopt::matmul {

namespace {

// ------------------------------------------------------------------------- blocktile_1d
// BM x BN block tile, BK-deep k-steps, BM*BN/TM threads: thread t computes rows
// (t / BN)*TM .. +TM-1 of column t % BN. Each b value read from shared memory feeds TM
// multiply-adds; a warp shares one row group, so its reads of a_tile are broadcasts.
template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(BM* BN / TM) matmul_blocktile_1d_kernel(const float* __restrict__ a,
                                                                         const float* __restrict__ b,
                                                                         float* __restrict__ c, int M, int N, int K) {
    constexpr int THREADS = BM * BN / TM;
    static_assert(THREADS == BM * BK && THREADS == BK * BN, "each thread stages one element of each tile");
    __shared__ float a_tile[BM][BK];
    __shared__ float b_tile[BK][BN];
    const dev::TileCoord tile = dev::tile_of_block<1>(static_cast<int>(blockIdx.x), ceil_div(M, BM), ceil_div(N, BN));
    const int block_m = tile.m * BM, block_n = tile.n * BN;
    const int t = threadIdx.x;
    // Staging: consecutive threads take consecutive k of a row of A (a warp: 4 rows x 32
    // bytes) and consecutive columns of a row of B (128 bytes).
    const int a_row = t / BK, a_col = t % BK, b_row = t / BN, b_col = t % BN;
    const int out_col = t % BN, out_row = (t / BN) * TM;
    const bool a_row_ok = block_m + a_row < M, b_col_ok = block_n + b_col < N;
    const float* a_src = a + static_cast<std::int64_t>(block_m + a_row) * K + a_col;
    const float* b_src = b + static_cast<std::int64_t>(b_row) * N + block_n + b_col;
    float acc[TM] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        a_tile[a_row][a_col] = a_row_ok && k0 + a_col < K ? a_src[k0] : 0.f;
        b_tile[b_row][b_col] = b_col_ok && k0 + b_row < K ? b_src[static_cast<std::int64_t>(k0) * N] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b_k = b_tile[k][out_col];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] = fmaf(a_tile[out_row + i][k], b_k, acc[i]);
        }
        __syncthreads();
    }
    const int col = block_n + out_col;
    if (col >= N) return;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = block_m + out_row + i;
        if (row < M) c[static_cast<std::int64_t>(row) * N + col] = acc[i];
    }
}

// ------------------------------------------------------------------------- blocktile_2d
// (BM/TM) x (BN/TN) threads; thread (tr, tc) computes the TM x TN patch at rows tr*TM..,
// columns tc*TN..: per k it reads TM values of A and TN of B into registers and does
// TM*TN multiply-adds (8x8: 16 shared loads for 64 FMAs, against 2 for 1 in "shared").
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN)) matmul_blocktile_2d_kernel(const float* __restrict__ a,
                                                                                   const float* __restrict__ b,
                                                                                   float* __restrict__ c, int M, int N,
                                                                                   int K) {
    constexpr int THREADS = (BM / TM) * (BN / TN);
    static_assert(BM * BK % THREADS == 0 && BK * BN % THREADS == 0, "tiles split evenly over the threads");
    __shared__ float a_tile[BM][BK];
    __shared__ float b_tile[BK][BN];
    const dev::TileCoord tile = dev::tile_of_block<1>(static_cast<int>(blockIdx.x), ceil_div(M, BM), ceil_div(N, BN));
    const int block_m = tile.m * BM, block_n = tile.n * BN;
    const int t = threadIdx.x;
    const int out_row = (t / (BN / TN)) * TM, out_col = (t % (BN / TN)) * TN;
    // Staging: pass p of thread t takes A row t/BK + p*THREADS/BK, column t%BK (a warp reads
    // 32-byte runs of 32/BK rows) and B row t/BN + p*THREADS/BN, column t%BN.
    constexpr int A_ROWS = THREADS / BK, B_ROWS = THREADS / BN;  // rows staged per pass
    static_assert(THREADS % BK == 0 && THREADS % BN == 0, "whole rows per pass");
    const int a_row = t / BK, a_col = t % BK, b_row = t / BN, b_col = t % BN;
    const float* a_src = a + static_cast<std::int64_t>(block_m + a_row) * K + a_col;
    const float* b_src = b + static_cast<std::int64_t>(b_row) * N + block_n + b_col;
    const bool b_col_ok = block_n + b_col < N;
    float acc[TM][TN] = {};
    float a_frag[TM], b_frag[TN];
    for (int k0 = 0; k0 < K; k0 += BK, a_src += BK, b_src += static_cast<std::int64_t>(BK) * N) {
#pragma unroll
        for (int p = 0; p < BM / A_ROWS; ++p) {
            const bool ok = block_m + a_row + p * A_ROWS < M && k0 + a_col < K;
            a_tile[a_row + p * A_ROWS][a_col] = ok ? a_src[static_cast<std::int64_t>(p * A_ROWS) * K] : 0.f;
        }
#pragma unroll
        for (int p = 0; p < BK / B_ROWS; ++p) {
            const bool ok = b_col_ok && k0 + b_row + p * B_ROWS < K;
            b_tile[b_row + p * B_ROWS][b_col] = ok ? b_src[static_cast<std::int64_t>(p * B_ROWS) * N] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a_frag[i] = a_tile[out_row + i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b_frag[j] = b_tile[k][out_col + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = block_m + out_row + i;
        if (row >= M) break;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = block_n + out_col + j;
            if (col < N) c[static_cast<std::int64_t>(row) * N + col] = acc[i][j];
        }
    }
}

// ------------------------------------------------------------------------- vectorized
// blocktile_2d with 16-byte traffic: A and B tiles come in as float4 (VEC_K / VEC_N: the
// rows of a / of b and c are 16-byte aligned; otherwise checked scalar loads fill the same
// float4). A is stored transposed (a_t[k][m]), so a thread's TM values of A for one k are
// contiguous and, like its TN values of B, arrive in TM/4 and TN/4 float4 shared loads.
// Registers are capped at 128 (65536 / 512 threads' worth of blocks) so two 256-thread
// blocks share a multiprocessor; blocktile_2d, without the float4 fragments, would spill.
template <int BM, int BN, int BK, int TM, int TN, bool VEC_K, bool VEC_N>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 512 / ((BM / TM) * (BN / TN)))
    matmul_vectorized_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int M,
                             int N, int K) {
    constexpr int THREADS = (BM / TM) * (BN / TN);
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 fragments");
    static_assert(BM * BK / 4 % THREADS == 0 && BK * BN / 4 % THREADS == 0, "tiles split evenly over the threads");
    __shared__ __align__(16) float a_t[BK][BM];
    __shared__ __align__(16) float b_tile[BK][BN];
    const dev::TileCoord tile = dev::tile_of_block<1>(static_cast<int>(blockIdx.x), ceil_div(M, BM), ceil_div(N, BN));
    const int block_m = tile.m * BM, block_n = tile.n * BN;
    const int t = threadIdx.x;
    const int out_row = (t / (BN / TN)) * TM, out_col = (t % (BN / TN)) * TN;
    // Staging: pass p of thread t takes the float4 at A row t/(BK/4) + p*A_ROWS, k
    // (t%(BK/4))*4 and at B row t/(BN/4) + p*B_ROWS, column (t%(BN/4))*4.
    constexpr int A_ROWS = THREADS / (BK / 4), B_ROWS = THREADS / (BN / 4);  // rows staged per pass
    static_assert(THREADS % (BK / 4) == 0 && THREADS % (BN / 4) == 0, "whole rows per pass");
    const int a_row = t / (BK / 4), a_k = t % (BK / 4) * 4, b_row = t / (BN / 4), b_col = t % (BN / 4) * 4;
    const float* a_src = a + static_cast<std::int64_t>(block_m + a_row) * K;
    const float* b_src = b + static_cast<std::int64_t>(b_row) * N;
    float acc[TM][TN] = {};
    float a_frag[TM], b_frag[TN];
    for (int k0 = 0; k0 < K; k0 += BK, b_src += static_cast<std::int64_t>(BK) * N) {
#pragma unroll
        for (int p = 0; p < BM / A_ROWS; ++p) {
            const int r = a_row + p * A_ROWS;
            const float4 v = dev::load4<VEC_K>(a_src + static_cast<std::int64_t>(p * A_ROWS) * K, k0 + a_k, K, block_m + r < M);
            a_t[a_k + 0][r] = v.x;
            a_t[a_k + 1][r] = v.y;
            a_t[a_k + 2][r] = v.z;
            a_t[a_k + 3][r] = v.w;
        }
#pragma unroll
        for (int p = 0; p < BK / B_ROWS; ++p) {
            const int k = b_row + p * B_ROWS;
            *reinterpret_cast<float4*>(&b_tile[k][b_col]) =
                dev::load4<VEC_N>(b_src + static_cast<std::int64_t>(p * B_ROWS) * N, block_n + b_col, N, k0 + k < K);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&a_t[k][out_row + i]);
                a_frag[i] = v.x, a_frag[i + 1] = v.y, a_frag[i + 2] = v.z, a_frag[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&b_tile[k][out_col + j]);
                b_frag[j] = v.x, b_frag[j + 1] = v.y, b_frag[j + 2] = v.z, b_frag[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = block_m + out_row + i;
        if (row >= M) break;
        float* c_row = c + static_cast<std::int64_t>(row) * N;
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            dev::store4<VEC_N>(c_row, block_n + out_col + j, N,
                               make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
    }
}

template <int BM, int BN, int BK>
std::string tile_name(const char* family, int TM, int TN) {
    return std::string(family) + "<" + std::to_string(BM) + "x" + std::to_string(BN) + "x" + std::to_string(BK) +
           " t" + std::to_string(TM) + "x" + std::to_string(TN);
}

template <int BM, int BN, int BK, int TM, int TN>
MatmulLaunch launch_2d(std::int64_t M, std::int64_t N) {
    MatmulLaunch l;
    l.kernel = matmul_blocktile_2d_kernel<BM, BN, BK, TM, TN>;
    l.threads = (BM / TM) * (BN / TN);
    l.blocks = tile_count(M, N, BM, BN, "blocktile_2d");
    l.name = tile_name<BM, BN, BK>("blocktile_2d", TM, TN) + ">";
    return l;
}

template <int BM, int BN, int BK, int TM, int TN>
MatmulLaunch launch_vec(bool vec_k, bool vec_n, std::int64_t M, std::int64_t N) {
    MatmulLaunch l;
    if (vec_k && vec_n) l.kernel = matmul_vectorized_kernel<BM, BN, BK, TM, TN, true, true>;
    else if (vec_k) l.kernel = matmul_vectorized_kernel<BM, BN, BK, TM, TN, true, false>;
    else if (vec_n) l.kernel = matmul_vectorized_kernel<BM, BN, BK, TM, TN, false, true>;
    else l.kernel = matmul_vectorized_kernel<BM, BN, BK, TM, TN, false, false>;
    l.threads = (BM / TM) * (BN / TN);
    l.blocks = tile_count(M, N, BM, BN, "vectorized");
    l.name = tile_name<BM, BN, BK>("vectorized", TM, TN) + (vec_k ? " vecK" : " scalarK") + (vec_n ? " vecN>" : " scalarN>");
    return l;
}

void check_tile(const char* family, Tile2d tile) {
    GPUOPT_REQUIRE(static_cast<std::size_t>(tile) < kTiles2d.size(),
                   std::string("matmul ") + family + ": tile must be an index into kTiles2d, got " +
                       std::to_string(static_cast<int>(tile)));
}

// The instantiation of kTiles2d entry I (sizes read off its name at compile time), 8x8 outputs per thread.
template <std::size_t I>
constexpr TileDims kTile2dDims = tile_dims(kTiles2d.names[I]);

}  // namespace

MatmulLaunch launch_blocktile_1d(std::int64_t M, std::int64_t N) {
    MatmulLaunch l;
    l.kernel = matmul_blocktile_1d_kernel<64, 64, 8, 8>;
    l.threads = 64 * 64 / 8;
    l.blocks = tile_count(M, N, 64, 64, "blocktile_1d");
    l.name = "blocktile_1d<64x64x8 t8x1>";
    return l;
}

MatmulLaunch launch_blocktile_2d(std::int64_t M, std::int64_t N, Tile2d tile) {
    check_tile("blocktile_2d", tile);
    return at_index<kTiles2d.size()>(static_cast<std::size_t>(tile), [&](auto e) {
        constexpr TileDims d = kTile2dDims<decltype(e)::value>;
        return launch_2d<d.bm, d.bn, d.bk, 8, 8>(M, N);
    });
}

MatmulLaunch launch_vectorized(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N,
                             std::int64_t K, Tile2d tile) {
    // float4 along k needs every row of a 16-byte aligned: K % 4 == 0 and an aligned base;
    // along n the same for b and c with N.
    const bool vec_k = K % 4 == 0 && aligned16(a);
    const bool vec_n = N % 4 == 0 && aligned16(b) && aligned16(c);
    check_tile("vectorized", tile);
    return at_index<kTiles2d.size()>(static_cast<std::size_t>(tile), [&](auto e) {
        constexpr TileDims d = kTile2dDims<decltype(e)::value>;
        return launch_vec<d.bm, d.bn, d.bk, 8, 8>(vec_k, vec_n, M, N);
    });
}

void matmul_blocktile_1d(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K) {
    require_shape(M, N, K, "blocktile_1d");
    run_launch(launch_blocktile_1d(M, N), a, b, c, M, N, K);
}

void matmul_blocktile_2d(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                         Tile2d tile) {
    require_shape(M, N, K, "blocktile_2d");
    run_launch(launch_blocktile_2d(M, N, tile), a, b, c, M, N, K);
}

void matmul_vectorized(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                       Tile2d tile) {
    require_shape(M, N, K, "vectorized");
    run_launch(launch_vectorized(a, b, c, M, N, K, tile), a, b, c, M, N, K);
}

}  // namespace gpuopt::matmul
