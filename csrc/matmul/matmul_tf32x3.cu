// Ladder step 10, "tf32x3": FP32 accuracy from the TF32 tensor cores. Each operand x is split
// into a TF32 high part hi = tf32(x) and a TF32 remainder lo = tf32(x - hi) (x - hi is exact in
// FP32); a*b is then accumulated in FP32 as lo_a*hi_b + hi_a*lo_b + hi_a*hi_b, smallest terms
// first ("3xTF32", as CUTLASS's FastF32). The dropped lo_a*lo_b and the rounding of the
// remainders are about 2^-22 of each product, below FP32's own rounding of the sum. But the
// tensor cores add into their accumulator rounding toward zero (Ootomo and Yokota, 2022): summed
// there over all of K, that bias grows linearly with K (measured on the H200: 2.9e-5 relative
// error at K = 4096, 25x cuBLAS SGEMM's). So the products of FLUSH_K consecutive k (8, 16 or
// 32: 3, 6 or 12 mma) go into a zeroed fragment that is added to the FP32 accumulator by
// ordinary (round-to-nearest) adds: FP32-level error (tests/matmul/test_gpu_matmul.py checks it against float64
// beside the FFMA kernels'), at the cost of 64 more registers (one block per multiprocessor).
//
// Block tile 128 x 128 x 32, 8 warps of 64 x 32 (2 x 4), mma.sync.m16n8k8 (4 x 4 per warp and
// k-step of 8, three products each). Tiles go global -> shared by a STAGES-deep cp.async
// pipeline (16-byte copies where rows are 16-byte aligned, else 4-byte), one barrier per
// k-step of 32. Shared rows are padded so every fragment load is conflict-free: A as [m][k] with a
// row stride of 36 floats (4 mod 32 banks: the 8 rows x 4 columns of a fragment hit 32
// distinct banks), B as [k][n] with 136 (8 mod 32: 4 rows x 8 columns). The split is done on
// the fragments in registers (a cvt and a subtract per element), so shared memory holds FP32
// data only. Deterministic: a fixed order of mma per output.
#include <cstdint>
#include <string>

#include "../common/device.hpp"
#include "../common/tf32.cuh"
#include "matmul_kernels.cuh"

namespace gpuopt::matmul {

namespace {

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int WARPS_M = 2, WARPS_N = 4, THREADS = 32 * WARPS_M * WARPS_N;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;  // 64 x 32 per warp
constexpr int MT = WM / 16, NT = WN / 8;             // m16 x n8 tiles per warp: 4 x 4
constexpr int LDA = BK + 4, LDB = BN + 8;            // padded shared rows (see the header)
constexpr int A_FLOATS = BM * LDA, B_FLOATS = BK * LDB, STAGE_FLOATS = A_FLOATS + B_FLOATS;
// TILE_SPLIT: each landed k-step is split once into (hi, lo) float2 tiles that the fragments load with
// one 8-byte read per element. Rows padded to 4 (mod 16) float2s: each half-warp's 16 fragment loads hit
// 16 distinct 8-byte bank pairs.
constexpr int LDA2 = BK + 4, LDB2 = BN + 4, A_PAIRS = BM * LDA2, B_PAIRS = BK * LDB2;

// Four consecutive floats global -> shared, the first `valid` of them in range (the rest zero-filled).
// VEC: one 16-byte copy (the caller's rows are 16-byte aligned and a multiple of 4 long, so valid is 0 or >= 4).
template <bool VEC>
__device__ __forceinline__ void copy4(float* dst, const float* src, int valid) {
    if constexpr (VEC) {
        dev::cp_async_16(dst, src, valid > 0 ? 16 : 0);
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) dev::cp_async_4(dst + e, src + e, e < valid ? 4 : 0);
    }
}

// x split into (hi, lo) for four consecutive floats, stored as two float4 (hi0, lo0, hi1, lo1), (hi2, ...).
__device__ __forceinline__ void split4(float4* dst, float4 v) {
    const tf32::Split s0 = tf32::split(v.x), s1 = tf32::split(v.y), s2 = tf32::split(v.z), s3 = tf32::split(v.w);
    dst[0] = make_float4(__uint_as_float(s0.hi), __uint_as_float(s0.lo), __uint_as_float(s1.hi), __uint_as_float(s1.lo));
    dst[1] = make_float4(__uint_as_float(s2.hi), __uint_as_float(s2.lo), __uint_as_float(s3.hi), __uint_as_float(s3.lo));
}

template <int STAGES, int FLUSH_K, bool VEC, bool TILE_SPLIT>
__global__ void __launch_bounds__(THREADS, 1) matmul_tf32x3_kernel(const float* __restrict__ a,
                                                                   const float* __restrict__ b,
                                                                   float* __restrict__ c, int M, int N, int K) {
    extern __shared__ __align__(16) float smem[];
    const dev::TileCoord tile = dev::tile_of_block<8>(static_cast<int>(blockIdx.x), ceil_div(M, BM), ceil_div(N, BN));
    const int block_m = tile.m * BM, block_n = tile.n * BN;
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const int g = lane / 4, q = lane % 4;  // fragment row group and column (PTX's groupID, threadID_in_group)
    const int warp_m = (warp / WARPS_N) * WM, warp_n = (warp % WARPS_N) * WN;

    // Copies: the A tile is BM rows of BK floats (8 float4 per row), the B tile BK rows of BN
    // floats (32 float4 per row); thread t takes float4 t + p*THREADS of each. VEC: K % 4 == 0,
    // N % 4 == 0 and 16-byte aligned bases, so a float4 is all in range or all out.
    constexpr int A_COPIES = BM * BK / 4 / THREADS, B_COPIES = BK * BN / 4 / THREADS;
    constexpr int A_ROWS = THREADS / (BK / 4), B_ROWS = THREADS / (BN / 4);
    const int a_row = t / (BK / 4), a_col = (t % (BK / 4)) * 4;
    const int b_row = t / (BN / 4), b_col = (t % (BN / 4)) * 4;
    // One base pointer and one pass stride per operand (not a pointer per copy). Out-of-range
    // copies are zero-filled (src-size 0): their source address is formed, never read.
    const float* a_base = a + static_cast<std::int64_t>(block_m + a_row) * K + a_col;
    const float* b_base = b + static_cast<std::int64_t>(b_row) * N + block_n + b_col;
    const std::int64_t a_pass = static_cast<std::int64_t>(A_ROWS) * K, b_pass = static_cast<std::int64_t>(B_ROWS) * N;
    const int a_rows_left = M - block_m - a_row, b_cols_left = N - block_n - b_col;

    auto load_stage = [&](int kt, int stage) {
        float* as = smem + stage * STAGE_FLOATS + a_row * LDA + a_col;
        float* bs = smem + stage * STAGE_FLOATS + A_FLOATS + b_row * LDB + b_col;
        const int k0 = kt * BK;
        const float* a_src = a_base + k0;
        const float* b_src = b_base + static_cast<std::int64_t>(k0) * N;
        const int k_left = K - k0 - a_col;  // floats of an A row from the copy's first
#pragma unroll
        for (int p = 0; p < A_COPIES; ++p)
            copy4<VEC>(as + p * A_ROWS * LDA, a_src + p * a_pass, p * A_ROWS < a_rows_left ? k_left : 0);
#pragma unroll
        for (int p = 0; p < B_COPIES; ++p)
            copy4<VEC>(bs + p * B_ROWS * LDB, b_src + p * b_pass, k0 + b_row + p * B_ROWS < K ? b_cols_left : 0);
    };

    float acc[MT][NT][4] = {};
    const int k_tiles = ceil_div(K, BK);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        dev::cp_async_commit();
    }
    int read_stage = 0, write_stage = STAGES - 1;
    for (int kt = 0; kt < k_tiles; ++kt) {
        // k-step kt has landed for this thread; the barrier makes it so for all, and orders
        // every read of k-step kt-1's stage before it is refilled just below.
        dev::cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (kt + STAGES - 1 < k_tiles) load_stage(kt + STAGES - 1, write_stage);
        dev::cp_async_commit();
        const float* as = smem + read_stage * STAGE_FLOATS + warp_m * LDA;
        const float* bs = smem + read_stage * STAGE_FLOATS + A_FLOATS + warp_n;
        float2* const a2 = reinterpret_cast<float2*>(smem + STAGES * STAGE_FLOATS);  // TILE_SPLIT only
        float2* const b2 = a2 + A_PAIRS;
        if constexpr (TILE_SPLIT) {
            // Split this k-step once: the elements this thread copied (any mapping would do after the barrier
            // above; every warp is done with the previous k-step's split tiles too).
            const float* st = smem + read_stage * STAGE_FLOATS;
#pragma unroll
            for (int p = 0; p < A_COPIES; ++p) {
                const int row = a_row + p * A_ROWS;
                split4(reinterpret_cast<float4*>(a2 + row * LDA2 + a_col),
                       *reinterpret_cast<const float4*>(st + row * LDA + a_col));
            }
#pragma unroll
            for (int p = 0; p < B_COPIES; ++p) {
                const int row = b_row + p * B_ROWS;
                split4(reinterpret_cast<float4*>(b2 + row * LDB2 + b_col),
                       *reinterpret_cast<const float4*>(st + A_FLOATS + row * LDB + b_col));
            }
            __syncthreads();  // the split tiles are complete before any fragment reads them
        }
        float part[MT][NT][4] = {};  // the products of FLUSH_K consecutive k, summed by the tensor cores
        // Two k8 steps unrolled: fully unrolled, the compiler hoists every fragment load and runs out of registers.
#pragma unroll 2
        for (int kk = 0; kk < BK; kk += 8) {
            std::uint32_t b_hi[NT][2], b_lo[NT][2];
#pragma unroll
            for (int j = 0; j < NT; ++j) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {  // b0: k = q, b1: k = q + 4; column g of the n8 tile
                    if constexpr (TILE_SPLIT) {
                        const float2 v = b2[(kk + q + 4 * h) * LDB2 + warp_n + j * 8 + g];
                        b_hi[j][h] = __float_as_uint(v.x);
                        b_lo[j][h] = __float_as_uint(v.y);
                    } else {
                        const tf32::Split s = tf32::split(bs[(kk + q + 4 * h) * LDB + j * 8 + g]);
                        b_hi[j][h] = s.hi;
                        b_lo[j][h] = s.lo;
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                std::uint32_t a_hi[4], a_lo[4];
#pragma unroll
                for (int r = 0; r < 4; ++r) {  // a0: (g, q), a1: (g+8, q), a2: (g, q+4), a3: (g+8, q+4)
                    if constexpr (TILE_SPLIT) {
                        const float2 v = a2[(warp_m + i * 16 + g + 8 * (r % 2)) * LDA2 + kk + q + 4 * (r / 2)];
                        a_hi[r] = __float_as_uint(v.x);
                        a_lo[r] = __float_as_uint(v.y);
                    } else {
                        const tf32::Split s = tf32::split(as[(i * 16 + g + 8 * (r % 2)) * LDA + kk + q + 4 * (r / 2)]);
                        a_hi[r] = s.hi;
                        a_lo[r] = s.lo;
                    }
                }
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    tf32::mma_m16n8k8(part[i][j], a_lo, b_hi[j]);
                    tf32::mma_m16n8k8(part[i][j], a_hi, b_lo[j]);
                    tf32::mma_m16n8k8(part[i][j], a_hi, b_hi[j]);
                }
            }
            if ((kk + 8) % FLUSH_K == 0) {
#pragma unroll
                for (int i = 0; i < MT; ++i)
#pragma unroll
                    for (int j = 0; j < NT; ++j)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            acc[i][j][e] += part[i][j][e];  // round to nearest
                            part[i][j][e] = 0.f;
                        }
            }
        }
        read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
        write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
    }
    dev::cp_async_wait<0>();  // only empty groups remain; leave nothing in flight

    // d0, d1: row g, columns 2q, 2q+1; d2, d3: row g + 8. VEC: N % 4 == 0 and c 16-byte aligned,
    // so the pair is 8-byte aligned and both columns are in range or neither.
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = block_m + warp_m + i * 16 + g + 8 * h;
            if (row >= M) continue;
            float* c_row = c + static_cast<std::int64_t>(row) * N;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int col = block_n + warp_n + j * 8 + 2 * q;
                const float x = acc[i][j][2 * h], y = acc[i][j][2 * h + 1];
                if constexpr (VEC) {
                    if (col < N) *reinterpret_cast<float2*>(c_row + col) = make_float2(x, y);
                } else {
                    if (col < N) c_row[col] = x;
                    if (col + 1 < N) c_row[col + 1] = y;
                }
            }
        }
    }
}

template <int STAGES, int FLUSH_K, bool TILE_SPLIT>
MatmulLaunch launch_flush(bool vec, std::int64_t M, std::int64_t N) {
    MatmulLaunch l;
    l.kernel = vec ? matmul_tf32x3_kernel<STAGES, FLUSH_K, true, TILE_SPLIT>
                   : matmul_tf32x3_kernel<STAGES, FLUSH_K, false, TILE_SPLIT>;
    l.threads = THREADS;
    l.dynamic_smem = static_cast<std::size_t>(STAGES) * STAGE_FLOATS * sizeof(float) +
                     (TILE_SPLIT ? static_cast<std::size_t>(A_PAIRS + B_PAIRS) * sizeof(float2) : 0);
    l.blocks = tile_count(M, N, BM, BN, "tf32x3");
    l.name = "tf32x3<128x128x32 w64x32 mma16x8x8 s" + std::to_string(STAGES) + " flush" + std::to_string(FLUSH_K) +
             (TILE_SPLIT ? " tile-split" : "") + (vec ? " vec>" : " scalar>");
    return l;
}

template <int STAGES, bool TILE_SPLIT>
MatmulLaunch launch_stages(int flush_k, bool vec, std::int64_t M, std::int64_t N) {
    return at_value<kTf32x3FlushK>(flush_k, [&](auto f) {
        return launch_flush<STAGES, decltype(f)::value, TILE_SPLIT>(vec, M, N);
    });
}

}  // namespace

MatmulLaunch launch_tf32x3(const float* a, const float* b, const float* c, std::int64_t M, std::int64_t N,
                         std::int64_t K, int stages, int flush_k, Tf32x3Split split) {
    const bool vec = K % 4 == 0 && N % 4 == 0 && aligned16(a) && aligned16(b) && aligned16(c);
    GPUOPT_REQUIRE(static_cast<std::size_t>(split) < kTf32x3Splits.size(),
                   "matmul tf32x3: split must be an index into kTf32x3Splits, got " +
                       std::to_string(static_cast<int>(split)));
    const bool tile = split == Tf32x3Split::Tile;
    require_choice(kTf32x3Stages, stages, "matmul tf32x3");
    require_choice(kTf32x3FlushK, flush_k, "matmul tf32x3");
    return at_value<kTf32x3Stages>(stages, [&](auto s) {
        constexpr int S = decltype(s)::value;
        return tile ? launch_stages<S, true>(flush_k, vec, M, N) : launch_stages<S, false>(flush_k, vec, M, N);
    });
}

void matmul_tf32x3(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                   int stages, int flush_k, Tf32x3Split split) {
    require_shape(M, N, K, "tf32x3");
    run_launch(launch_tf32x3(a, b, c, M, N, K, stages, flush_k, split), a, b, c, M, N, K);
}

}  // namespace gpuopt::matmul
