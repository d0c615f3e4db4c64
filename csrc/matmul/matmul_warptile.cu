// Ladder step 8, "warptile" (siboehm's kernel 10): the block tile is split into warp
// tiles and each warp's 32 thread tiles are interleaved so that a quarter warp's float4
// reads of A^T and B hit distinct banks or one address. Tiles reach shared memory through
// registers (16-byte global loads, A transposed on the way in); one buffer, two barriers
// per k-step. Blocks are ordered in groups of 8 tile rows for L2 reuse.
#include "matmul_kernels.cuh"
#include "matmul_warptile.cuh"

namespace gpuopt::matmul {

namespace {

template <class T, bool VEC_K, bool VEC_N>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS) matmul_warptile_kernel(const float* __restrict__ a,
                                                                                   const float* __restrict__ b,
                                                                                   float* __restrict__ c, int M, int N,
                                                                                   int K) {
    constexpr int BM = T::BM, BN = T::BN, BK = T::BK, THREADS = T::THREADS;
    __shared__ __align__(16) float a_t[T::A_FLOATS];
    __shared__ __align__(16) float b_s[T::B_FLOATS];
    const dev::TileCoord tile = dev::tile_of_block<8>(static_cast<int>(blockIdx.x), ceil_div(M, BM), ceil_div(N, BN));
    const int block_m = tile.m * BM, block_n = tile.n * BN;
    const int t = threadIdx.x;

    // A staging, float4 number e = t + p*THREADS of the BM x BK tile: two neighbouring
    // threads read the two halves of a 32-byte run of one row (k (e%2)*4 + 8*(e/(2*BM)),
    // row (e/2)%BM), so a warp's transposing stores cover 16 rows x 2 k: distinct banks.
    constexpr int A_VECS = BM * BK / 4 / THREADS, A_ROWS = THREADS / 2, A_ROW_PASSES = BM / A_ROWS;
    static_assert(BM * BK / 4 % THREADS == 0 && BM % A_ROWS == 0, "A tile splits evenly over the threads");
    const int a_row = t / 2, a_k = (t % 2) * 4;
    const float* a_src = a + static_cast<std::int64_t>(block_m + a_row) * K;
    // B staging: float4 e = t + p*THREADS at row e/(BN/4), column (e%(BN/4))*4 (a warp
    // reads 512 contiguous bytes of a row).
    constexpr int B_VECS = BK * BN / 4 / THREADS, B_ROWS = THREADS / (BN / 4);
    static_assert(BK * BN / 4 % THREADS == 0 && THREADS % (BN / 4) == 0, "B tile splits evenly over the threads");
    const int b_row = t / (BN / 4), b_col = (t % (BN / 4)) * 4;
    const float* b_src = b + static_cast<std::int64_t>(b_row) * N;

    const ThreadTile<T> th;
    float acc[T::TM][T::TN] = {};
    float4 a_reg[A_VECS], b_reg[B_VECS];
    for (int k0 = 0; k0 < K; k0 += BK, b_src += static_cast<std::int64_t>(BK) * N) {
#pragma unroll
        for (int p = 0; p < A_VECS; ++p) {
            const int r = a_row + (p % A_ROW_PASSES) * A_ROWS;
            const int k = a_k + (p / A_ROW_PASSES) * 8;
            a_reg[p] = dev::load4<VEC_K>(a_src + static_cast<std::int64_t>((p % A_ROW_PASSES) * A_ROWS) * K, k0 + k, K,
                                         block_m + r < M);
        }
#pragma unroll
        for (int p = 0; p < B_VECS; ++p)
            b_reg[p] = dev::load4<VEC_N>(b_src + static_cast<std::int64_t>(p * B_ROWS) * N, block_n + b_col, N,
                                         k0 + b_row + p * B_ROWS < K);
#pragma unroll
        for (int p = 0; p < A_VECS; ++p) {
            const int r = a_row + (p % A_ROW_PASSES) * A_ROWS;
            const int k = a_k + (p / A_ROW_PASSES) * 8;
            a_t[(k + 0) * T::LDA + r] = a_reg[p].x;
            a_t[(k + 1) * T::LDA + r] = a_reg[p].y;
            a_t[(k + 2) * T::LDA + r] = a_reg[p].z;
            a_t[(k + 3) * T::LDA + r] = a_reg[p].w;
        }
#pragma unroll
        for (int p = 0; p < B_VECS; ++p)
            *reinterpret_cast<float4*>(b_s + (b_row + p * B_ROWS) * T::LDB + b_col) = b_reg[p];
        __syncthreads();
        warp_tile_fma<T>(a_t, b_s, th, acc);
        __syncthreads();  // before the next k-step overwrites the tiles
    }
    store_thread_tile<T, VEC_N>(c, M, N, block_m, block_n, th, acc);
}

template <class T>
MatmulLaunch plan(bool vec_k, bool vec_n, std::int64_t M, std::int64_t N) {
    MatmulLaunch l;
    if (vec_k && vec_n) l.kernel = matmul_warptile_kernel<T, true, true>;
    else if (vec_k) l.kernel = matmul_warptile_kernel<T, true, false>;
    else if (vec_n) l.kernel = matmul_warptile_kernel<T, false, true>;
    else l.kernel = matmul_warptile_kernel<T, false, false>;
    l.threads = T::THREADS;
    l.blocks = tile_count(M, N, T::BM, T::BN, "warptile");
    l.name = "warptile<" + warp_tiling_name<T>() + (vec_k ? " vecK" : " scalarK") + (vec_n ? " vecN>" : " scalarN>");
    return l;
}

// Instantiated first in the order the kernels were always emitted: ptxas's output for the 128x128 vecK/vecN kernels
// depends on it (measured: the table's order below changed their register allocation).
template MatmulLaunch plan<Tiling128x128x8>(bool, bool, std::int64_t, std::int64_t);
template MatmulLaunch plan<Tiling128x128x16>(bool, bool, std::int64_t, std::int64_t);

// The tilings of kWarpTiles (matmul_choices.hpp), entry by entry.
using WarpTilings = std::tuple<Tiling128x128x16, Tiling128x128x8, Tiling128x64x16, Tiling64x64x16>;
static_assert(tilings_match<WarpTilings>(kWarpTiles), "WarpTilings must have kWarpTiles' BM x BN x BK, in its order");

}  // namespace

MatmulLaunch launch_warptile(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N,
                           std::int64_t K, WarpTile tile) {
    const bool vec_k = K % 4 == 0 && aligned16(a);
    const bool vec_n = N % 4 == 0 && aligned16(b) && aligned16(c);
    const auto i = static_cast<std::size_t>(tile);
    GPUOPT_REQUIRE(i < kWarpTiles.size(), "matmul warptile: tile must be an index into kWarpTiles, got " +
                                              std::to_string(static_cast<int>(tile)));
    return at_index<kWarpTiles.size()>(
        i, [&](auto e) { return plan<std::tuple_element_t<decltype(e)::value, WarpTilings>>(vec_k, vec_n, M, N); });
}

void matmul_warptile(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                     WarpTile tile) {
    require_shape(M, N, K, "warptile");
    run_launch(launch_warptile(a, b, c, M, N, K, tile), a, b, c, M, N, K);
}

}  // namespace gpuopt::matmul
