// The "async" kernel template: the warp-tiled kernel fed by a STAGES-deep cp.async
// pipeline. Copies of k-steps kt+1 .. kt+STAGES-1 are in flight while k-step kt is
// computed, and tiles go global -> shared without passing through registers (fewer
// registers, no load-to-store stall). One barrier per k-step. Instantiated per tile
// configuration in matmul_async_*.cu (several files: they compile in parallel).
//
// A must land transposed (a_t[k][m]) for the float4 reads of the inner loop; a 16-byte
// copy cannot transpose, so A is copied 4 bytes at a time (8 consecutive k of 4 rows per
// warp instruction: 32-byte runs of global memory, distinct banks in shared memory). That
// also makes A's path independent of its alignment. B is copied 16 bytes at a time where
// its rows are 16-byte aligned (VEC_N), else 4 bytes at a time.
//
// SPLIT > 1 (split-k, for shapes with too few tiles to fill the multiprocessors): SPLIT
// blocks of one thread-block cluster compute the same output tile over SPLIT consecutive
// ranges of k, then add their partial tiles through distributed shared memory, in rank
// order (deterministic), each block summing and storing 1/SPLIT of the tile.
#pragma once

#include <cooperative_groups.h>

#include <algorithm>

#include "matmul_kernels.cuh"
#include "matmul_warptile.cuh"

namespace gpuopt::matmul {

namespace async_detail {

template <class T, int STAGES, bool VEC_N, int SPLIT>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS) matmul_async_kernel(const float* __restrict__ a,
                                                                                const float* __restrict__ b,
                                                                                float* __restrict__ c, int M, int N,
                                                                                int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    // Split-k takes thread-block clusters (sm_90): the host never launches it below, where it compiles to a trap
    // and not to a whole pipeline per (tile, stages, split), two thirds of this file's work for such a target.
    if constexpr (SPLIT > 1) {
        __trap();
        return;
    }
#endif
    constexpr int BM = T::BM, BN = T::BN, BK = T::BK, THREADS = T::THREADS;
    constexpr int STAGE_FLOATS = T::A_FLOATS + T::B_FLOATS;  // a_t then b_s, per stage
    static_assert(STAGES >= 2, "a pipeline needs two stages");
    extern __shared__ __align__(16) float smem[];
    // Blocks split*r .. split*r+SPLIT-1 (one cluster) share output tile r.
    const dev::TileCoord tile =
        dev::tile_of_block<8>(static_cast<int>(blockIdx.x) / SPLIT, ceil_div(M, BM), ceil_div(N, BN));
    const int split = static_cast<int>(blockIdx.x) % SPLIT;
    const int block_m = tile.m * BM, block_n = tile.n * BN;
    const int t = threadIdx.x;

    // A copies: element e = t + p*THREADS of the BM x BK tile is k (e%8) + 8*(e/(8*BM)),
    // row (e/8)%BM: a warp copies 8 consecutive k of 4 rows, stored at a_t[k*LDA + m] with
    // LDA = 4 (mod 32) banks: 32 distinct banks.
    constexpr int A_ROWS = THREADS / 8, A_ROW_PASSES = BM / A_ROWS, A_COPIES = BM * BK / THREADS;
    static_assert(THREADS % 8 == 0 && BM % A_ROWS == 0 && A_COPIES == A_ROW_PASSES * (BK / 8), "A tile splits evenly");
    const int a_row = t / 8, a_k = t % 8;
    const float* a_src = a + static_cast<std::int64_t>(block_m + a_row) * K + a_k;
    const std::int64_t a_pass_stride = static_cast<std::int64_t>(A_ROWS) * K;
    // B copies. VEC_N: float4 e = t + p*THREADS at row e/(BN/4), column (e%(BN/4))*4;
    // otherwise element e at row e/BN, column e%BN.
    constexpr int B_GRAIN = VEC_N ? 4 : 1;                    // floats per copy
    constexpr int B_ROW_THREADS = BN / B_GRAIN;               // threads per row of the B tile
    constexpr int B_ROWS = THREADS / B_ROW_THREADS;           // rows per pass
    constexpr int B_COPIES = BK * BN / B_GRAIN / THREADS;
    static_assert(THREADS % B_ROW_THREADS == 0 && B_COPIES * B_ROWS == BK, "B tile splits evenly");
    const int b_row = t / B_ROW_THREADS, b_col = (t % B_ROW_THREADS) * B_GRAIN;
    const float* b_src = b + static_cast<std::int64_t>(b_row) * N + block_n + b_col;
    const std::int64_t b_pass_stride = static_cast<std::int64_t>(B_ROWS) * N;
    const bool b_col_ok = block_n + b_col < N;  // VEC_N: N % 4 == 0, so the float4 is all in
    const int a_rows_left = M - block_m - a_row;  // row pass r is in range iff r*A_ROWS < this
    const bool interior = M - block_m >= BM && N - block_n >= BN;  // (no int overflow)

    // Queue the copies of k-step kt into stage `stage`. Interior tiles copy unchecked; edge
    // tiles zero-fill what lies outside the matrices (src-size 0: nothing is read from the
    // out-of-range source address, which is formed but never dereferenced, as in CUTLASS's
    // predicated zfill copies).
    auto load_stage = [&](int kt, int stage) {
        float* a_dst = smem + stage * STAGE_FLOATS;
        float* b_dst = a_dst + T::A_FLOATS;
        const int k0 = kt * BK;
        const float* a_tile = a_src + k0;
        const float* b_tile = b_src + static_cast<std::int64_t>(k0) * N;
        if (interior && K - k0 >= BK) {
#pragma unroll
            for (int p = 0; p < A_COPIES; ++p) {
                const int r = p % A_ROW_PASSES, kk = (p / A_ROW_PASSES) * 8;
                dev::cp_async_4(a_dst + (a_k + kk) * T::LDA + a_row + r * A_ROWS, a_tile + r * a_pass_stride + kk, 4);
            }
#pragma unroll
            for (int p = 0; p < B_COPIES; ++p) {
                float* dst = b_dst + (b_row + p * B_ROWS) * T::LDB + b_col;
                if constexpr (VEC_N) dev::cp_async_16(dst, b_tile + p * b_pass_stride, 16);
                else dev::cp_async_4(dst, b_tile + p * b_pass_stride, 4);
            }
        } else {
#pragma unroll
            for (int p = 0; p < A_COPIES; ++p) {
                const int r = p % A_ROW_PASSES, kk = (p / A_ROW_PASSES) * 8;
                const bool ok = r * A_ROWS < a_rows_left && k0 + a_k + kk < K;
                dev::cp_async_4(a_dst + (a_k + kk) * T::LDA + a_row + r * A_ROWS, a_tile + r * a_pass_stride + kk,
                                ok ? 4 : 0);
            }
#pragma unroll
            for (int p = 0; p < B_COPIES; ++p) {
                float* dst = b_dst + (b_row + p * B_ROWS) * T::LDB + b_col;
                const bool ok = b_col_ok && k0 + b_row + p * B_ROWS < K;
                if constexpr (VEC_N) dev::cp_async_16(dst, b_tile + p * b_pass_stride, ok ? 16 : 0);
                else dev::cp_async_4(dst, b_tile + p * b_pass_stride, ok ? 4 : 0);
            }
        }
    };

    const ThreadTile<T> th;
    float acc[T::TM][T::TN] = {};
    // This block's k-steps: [kt_begin, kt_begin + n_tiles) of the ceil(K/BK) of the product.
    const int k_tiles_all = ceil_div(K, BK), k_tiles_per_split = ceil_div(k_tiles_all, SPLIT);
    const int kt_begin = split * k_tiles_per_split;
    const int n_tiles = max(0, min(k_tiles_per_split, k_tiles_all - kt_begin));
    // Prologue: k-steps 0 .. STAGES-2 in flight, one commit group each (empty groups past
    // the end keep the group count, and so the waits below, uniform).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < n_tiles) load_stage(kt_begin + s, s);
        dev::cp_async_commit();
    }
    int read_stage = 0, write_stage = STAGES - 1;
    if constexpr (T::FRAG_BUFFERS == 1) {
        for (int i = 0; i < n_tiles; ++i) {
            // Committed so far: STAGES-1+i groups; at most STAGES-2 pending means k-step i
            // has landed for this thread; the barrier makes it so for all threads, and
            // means every thread is done computing k-step i-1, whose stage is refilled next.
            dev::cp_async_wait<STAGES - 2>();
            __syncthreads();
            if (i + STAGES - 1 < n_tiles) load_stage(kt_begin + i + STAGES - 1, write_stage);
            dev::cp_async_commit();
            const float* stage = smem + read_stage * STAGE_FLOATS;
            warp_tile_fma<T>(stage, stage + T::A_FLOATS, th, acc);
            read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
            write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
        }
    } else {
        // Fragments double-buffered in registers: the loads for k-step kk+1 are issued
        // before the FMAs of kk, and those of a tile's first k-step before the FMAs of the
        // previous tile's last, so shared-memory latency hides behind FMAs even across the
        // barrier (CUTLASS's multistage main loop). Costs 2*(TM+TN) registers.
        dev::cp_async_wait<STAGES - 2>();  // k-step 0 has landed (this thread's copies) ...
        __syncthreads();                   // ... and everyone's
        Fragments<T> frag[2];
        load_fragments<T>(smem, smem + T::A_FLOATS, th.k0, th, frag[0]);
        for (int i = 0; i < n_tiles; ++i) {
            const float* stage = smem + read_stage * STAGE_FLOATS;
#pragma unroll
            for (int kk = 0; kk < T::KS; ++kk) {
                if (kk == 0) {
                    // Refill the stage of k-step i-1: every thread's last read of it came
                    // before the barrier at the end of tile i-1.
                    if (i + STAGES - 1 < n_tiles) load_stage(kt_begin + i + STAGES - 1, write_stage);
                    dev::cp_async_commit();
                    write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
                }
                if (kk == T::KS - 1) {
                    // Committed: STAGES + i groups; at most STAGES-2 pending means tile i+1
                    // has landed. The barrier publishes it to all threads and orders every
                    // read of this tile's stage before its refill at the next kk == 0.
                    dev::cp_async_wait<STAGES - 2>();
                    __syncthreads();
                    read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
                    if (i + 1 < n_tiles) {
                        const float* next = smem + read_stage * STAGE_FLOATS;
                        load_fragments<T>(next, next + T::A_FLOATS, th.k0, th, frag[(kk + 1) % 2]);
                    }
                } else {
                    load_fragments<T>(stage, stage + T::A_FLOATS, th.k0 + kk + 1, th, frag[(kk + 1) % 2]);
                }
                fma_fragments<T>(frag[kk % 2], acc);
            }
        }
    }
    dev::cp_async_wait<0>();  // only empty groups remain; leave nothing in flight
    // The epilogue recomputes where this thread's outputs lie rather than keeping it in
    // registers through the main loop (at the 128-register cap it would be spilled).
    const int t_out = dev::fresh_thread_index();
    const ThreadTile<T> th_out(t_out);
    if constexpr (T::SLICE_K == 1 && SPLIT == 1) {
        store_thread_tile<T, VEC_N>(c, M, N, block_m, block_n, th_out, acc);
    } else {
        __syncthreads();  // the pipeline's shared memory becomes scratch
        const bool owner = reduce_slices<T>(smem, th_out, acc);  // slice 0 holds the block's sums
        if constexpr (SPLIT == 1) {
            if (owner) store_thread_tile<T, VEC_N>(c, M, N, block_m, block_n, th_out, acc);
        } else {
            // Each block's partial tile, float4 e of thread t at part[e][t] (conflict-free),
            // then block `split` adds float4s e in [split*V/SPLIT, (split+1)*V/SPLIT) of
            // all SPLIT blocks, in rank order, and stores them. Every thread of every block
            // takes part in both cluster barriers.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
            __trap();  // thread-block clusters need sm_90; the host never launches this there
#else
            namespace cg = cooperative_groups;
            constexpr int V = T::TM * T::TN / 4, PER_RANK = V / SPLIT;
            static_assert(V % SPLIT == 0, "the partial tile splits evenly over the cluster");
            const cg::cluster_group cluster = cg::this_cluster();
            float4* part = reinterpret_cast<float4*>(smem);
            const int t_own = t_out % T::SLICE_THREADS;
            if constexpr (T::SLICE_K > 1) __syncthreads();  // slice scratch was read by slice 0
            if (owner) {
#pragma unroll
                for (int e = 0; e < V; ++e) {
                    const float* r = &acc[e / (T::TN / 4)][(e % (T::TN / 4)) * 4];
                    part[e * T::SLICE_THREADS + t_own] = make_float4(r[0], r[1], r[2], r[3]);
                }
            }
            cluster.sync();  // every block's partial tile is written and visible
            if (owner) {
                const float4* parts[SPLIT];
#pragma unroll
                for (int q = 0; q < SPLIT; ++q) parts[q] = cluster.map_shared_rank(part, q);
#pragma unroll
                for (int j = 0; j < PER_RANK; ++j) {
                    const int e = split * PER_RANK + j;  // run-time: only this block's share
                    float4 sum = parts[0][e * T::SLICE_THREADS + t_own];
#pragma unroll
                    for (int q = 1; q < SPLIT; ++q) {
                        const float4 v = parts[q][e * T::SLICE_THREADS + t_own];
                        sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
                    }
                    const int i = e / (T::TN / 4), fn = e % (T::TN / 4);
                    const int row = block_m + th_out.m + (i / 4) * T::FRAG_STRIDE_M + i % 4;
                    if (row < M)
                        dev::store4<VEC_N>(c + static_cast<std::int64_t>(row) * N, block_n + th_out.n + fn * T::FRAG_STRIDE_N,
                                           N, sum);
                }
            }
            cluster.sync();  // no block leaves while another still reads its shared memory
#endif
        }
    }
}

// The launch of configuration T with STAGES stages (2, 3 or 4) and SPLIT-way split-k.
template <class T, int STAGES, int SPLIT>
MatmulLaunch launch_split(bool vec_n, std::int64_t M, std::int64_t N) {
    MatmulLaunch l;
    l.kernel = vec_n ? matmul_async_kernel<T, STAGES, true, SPLIT> : matmul_async_kernel<T, STAGES, false, SPLIT>;
    l.threads = T::THREADS;
    l.cluster = SPLIT;
    const std::size_t pipeline = static_cast<std::size_t>(STAGES) * (T::A_FLOATS + T::B_FLOATS);
    const std::size_t slices = static_cast<std::size_t>(T::SLICE_K - 1) * T::BM * T::BN;
    const std::size_t partial = SPLIT > 1 ? static_cast<std::size_t>(T::BM) * T::BN : 0;
    l.dynamic_smem = std::max({pipeline, slices, partial}) * sizeof(float);
    const std::int64_t tiles = tile_count(M, N, T::BM, T::BN, "async");
    GPUOPT_REQUIRE(tiles * SPLIT < (1LL << 31), "matmul async: too many blocks for the grid");
    l.blocks = static_cast<unsigned>(tiles * SPLIT);
    l.name = "async<" + warp_tiling_name<T>() + " s" + std::to_string(STAGES) +
             (SPLIT > 1 ? " split" + std::to_string(SPLIT) : "") + (vec_n ? " vecN>" : " scalarN>");
    return l;
}

// split_k and stages: checked against their tables by launch_async; split_k is resolved (not 0, auto) here.
template <class T, int STAGES>
MatmulLaunch launch_stages(int split_k, bool vec_n, std::int64_t M, std::int64_t N) {
    return at_nonzero_value<kAsyncSplitK>(split_k, [&](auto s) {
        return launch_split<T, STAGES, decltype(s)::value>(vec_n, M, N);
    });
}

template <class T>
MatmulLaunch plan(int stages, int split_k, bool vec_n, std::int64_t M, std::int64_t N) {
    return at_value<kAsyncStages>(stages, [&](auto s) {
        return launch_stages<T, decltype(s)::value>(split_k, vec_n, M, N);
    });
}

}  // namespace async_detail

// Tile configurations of the async kernel, by the names its `tile` parameter takes
// ("BMxBNxBK", "_k2": two k-slices). The fields after the thread tile: blocks per
// multiprocessor the registers are capped for (__launch_bounds__), k-slices, fragment
// buffers. 1 block per multiprocessor leaves 255 registers, room for double-buffered
// fragments; 2 or 4 cap them at 128, where double buffering would spill.
//   128x256: large shapes (fewest shared loads per FMA: 16x8 per thread).
//   128x128x32: one block per multiprocessor, for split-k on small shapes.
//   128x128x16, 128x64x16, 64x64x16: middle and small shapes (more, smaller blocks).
using AsyncTiling128x256x32 = WarpTiling<128, 256, 32, 64, 64, 16, 8, 1>;
using AsyncTiling128x256x16 = WarpTiling<128, 256, 16, 64, 64, 16, 8, 1>;
using AsyncTiling128x128x32 = WarpTiling<128, 128, 32, 64, 32, 8, 8, 1, 1, 2>;
using AsyncTiling128x128x16 = WarpTiling<128, 128, 16, 64, 32, 8, 8, 2>;
using AsyncTiling128x64x16 = WarpTiling<128, 64, 16, 64, 32, 8, 8, 4>;
using AsyncTiling64x64x16 = WarpTiling<64, 64, 16, 32, 32, 8, 4, 4, 1, 2>;
using AsyncTiling64x64x16_k2 = WarpTiling<64, 64, 16, 32, 32, 8, 4, 2, 2, 2>;

// kAsyncTiles' entry of that name: each matmul_async_<tile>.cu plans the entries it instantiates (its kernels
// compile in parallel with the others'); a name that is not in the table does not compile.
// (Used to initialise constexpr variables, so an unknown name fails at compile time.)
constexpr AsyncTile async_tile(const char* name) {
    const std::size_t i = kAsyncTiles.find(name);
    return i == 0 || i == kAsyncTiles.size() ? throw InvalidArgument("not a tile of kAsyncTiles")
                                             : static_cast<AsyncTile>(i);
}

// Plans of the configurations compiled in each file: a launch, or one with a null kernel
// when `tile` is not among them.
MatmulLaunch launch_async_128x256(AsyncTile tile, int stages, int split_k, bool vec_n, std::int64_t M,
                                std::int64_t N);
MatmulLaunch launch_async_128x128(AsyncTile tile, int stages, int split_k, bool vec_n, std::int64_t M,
                                std::int64_t N);
MatmulLaunch launch_async_128x64(AsyncTile tile, int stages, int split_k, bool vec_n, std::int64_t M,
                               std::int64_t N);
MatmulLaunch launch_async_64x64(AsyncTile tile, int stages, int split_k, bool vec_n, std::int64_t M,
                              std::int64_t N);

}  // namespace gpuopt::matmul
