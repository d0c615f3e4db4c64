// The warp-tiled core shared by the "warptile" and "async" kernels: tile shapes, where each thread's outputs
// lie, the shared-memory -> register -> FMA inner loop, and the store of c. The two kernels differ only in how
// tiles reach shared memory. One of matmul's public headers: conv2d's implicit_gemm_fast is this core with
// convolution tile loaders (it includes nothing of matmul's internals).
#pragma once

#include <cstdint>
#include <string>

#include "../common/thread_index.cuh"
#include "../common/vec4.cuh"

namespace gpuopt::matmul {

// Block tile BM x BN, k-step BK; warp tile WM x WN; thread tile TM x TN. MIN_BLOCKS goes
// to __launch_bounds__: the register cap (65536 / (threads * MIN_BLOCKS)) that lets that
// many blocks share a multiprocessor. SLICE_K > 1 ("sliced k"): SLICE_K groups of warps
// each cover the whole block tile, group s taking k-steps s*BK/SLICE_K .. of every tile;
// their sums are added through shared memory at the end. More warps per tile, same tile
// count: for shapes with too few tiles to keep the multiprocessors' schedulers busy.
// FRAG_BUFFERS 2 (async kernel only): fragments double-buffered in registers.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int MIN_BLOCKS_, int SLICE_K_ = 1,
          int FRAG_BUFFERS_ = 1>
struct WarpTiling {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, TM = TM_, TN = TN_;
    static constexpr int MIN_BLOCKS = MIN_BLOCKS_, SLICE_K = SLICE_K_, FRAG_BUFFERS = FRAG_BUFFERS_;
    static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
    static constexpr int SLICE_THREADS = WARPS_M * WARPS_N * 32, THREADS = SLICE_THREADS * SLICE_K;
    static constexpr int KS = BK / SLICE_K;  // k-steps of a tile per slice
    // A warp's 32 lanes form a LANES_M x LANES_N grid over its warp tile.
    static constexpr int LANES_M = WM / TM, LANES_N = WN / TN;
    // A thread's TM rows are FRAG_M groups of 4 consecutive rows, FRAG_STRIDE_M apart (and
    // likewise for columns): lanes read consecutive float4 of a shared row, so a quarter
    // warp covers 32 distinct banks (or shares addresses): conflict-free.
    static constexpr int FRAG_M = TM / 4, FRAG_N = TN / 4;
    static constexpr int FRAG_STRIDE_M = WM / FRAG_M, FRAG_STRIDE_N = WN / FRAG_N;
    // A is stored transposed, a_t[k][m], rows padded by 4 floats: row stride = 4 banks (mod
    // 32), so the transposing stores of 8 consecutive k (or of k and k+4) land in distinct
    // banks, and rows stay 16-byte aligned for the float4 reads. B rows need no padding.
    static constexpr int LDA = BM + 4, LDB = BN;
    static constexpr int A_FLOATS = BK * LDA, B_FLOATS = BK * LDB;

    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles cover the block tile");
    static_assert(WM % TM == 0 && WN % TN == 0 && LANES_M * LANES_N == 32, "a warp's 32 thread tiles cover its warp tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are made of float4 fragments");
    static_assert(BK % 8 == 0, "k-steps of whole 8-float runs");
    static_assert(BK % SLICE_K == 0 && KS % 2 == 0, "each slice takes an even number of k-steps per tile");
    static_assert(THREADS <= 1024, "at most 1024 threads per block");
    static_assert(FRAG_BUFFERS == 1 || FRAG_BUFFERS == 2, "one or two fragment buffers");
};

// Where this thread's outputs lie: first row and column within the block tile, and the
// first k-step of its slice.
template <class T>
struct ThreadTile {
    int m, n, slice, k0;
    __device__ __forceinline__ ThreadTile() : ThreadTile(static_cast<int>(threadIdx.x)) {}
    __device__ __forceinline__ explicit ThreadTile(int thread) {
        const int warp = thread / 32, lane = thread % 32;
        const int warp_in_slice = warp % (T::WARPS_M * T::WARPS_N);
        slice = warp / (T::WARPS_M * T::WARPS_N);
        k0 = slice * T::KS;
        m = (warp_in_slice / T::WARPS_N) * T::WM + (lane % T::LANES_M) * 4;
        n = (warp_in_slice % T::WARPS_N) * T::WN + (lane / T::LANES_M) * 4;
    }
};

// One k-step's operands of a thread: TM values of A's column k, TN of B's row k.
template <class T>
struct Fragments {
    float a[T::TM], b[T::TN];
};

// FRAG_M + FRAG_N float4 shared loads (8x8: 4 loads for the 64 FMAs that follow).
template <class T>
__device__ __forceinline__ void load_fragments(const float* __restrict__ a_t, const float* __restrict__ b_s, int k,
                                               const ThreadTile<T>& th, Fragments<T>& f) {
#pragma unroll
    for (int i = 0; i < T::FRAG_M; ++i) {
        const float4 v = *reinterpret_cast<const float4*>(a_t + k * T::LDA + th.m + i * T::FRAG_STRIDE_M);
        f.a[4 * i + 0] = v.x, f.a[4 * i + 1] = v.y, f.a[4 * i + 2] = v.z, f.a[4 * i + 3] = v.w;
    }
#pragma unroll
    for (int j = 0; j < T::FRAG_N; ++j) {
        const float4 v = *reinterpret_cast<const float4*>(b_s + k * T::LDB + th.n + j * T::FRAG_STRIDE_N);
        f.b[4 * j + 0] = v.x, f.b[4 * j + 1] = v.y, f.b[4 * j + 2] = v.z, f.b[4 * j + 3] = v.w;
    }
}

template <class T>
__device__ __forceinline__ void fma_fragments(const Fragments<T>& f, float (&acc)[T::TM][T::TN]) {
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
        for (int j = 0; j < T::TN; ++j) acc[i][j] = fmaf(f.a[i], f.b[j], acc[i][j]);
}

// acc += this slice's k-steps of (a_t tile)^T x (b tile).
template <class T>
__device__ __forceinline__ void warp_tile_fma(const float* __restrict__ a_t, const float* __restrict__ b_s,
                                              const ThreadTile<T>& th, float (&acc)[T::TM][T::TN]) {
#pragma unroll
    for (int k = 0; k < T::KS; ++k) {
        Fragments<T> f;
        load_fragments<T>(a_t, b_s, th.k0 + k, th, f);
        fma_fragments<T>(f, acc);
    }
}

// Sliced k: slices 1.. leave their sums in shared memory (`scratch`, at least
// (SLICE_K-1) * BM * BN floats, free for reuse: the caller has synchronised) and return
// false; slice 0 adds them, in slice order, and returns true (it stores c).
template <class T>
__device__ __forceinline__ bool reduce_slices(float* scratch, const ThreadTile<T>& th, float (&acc)[T::TM][T::TN]) {
    if constexpr (T::SLICE_K == 1) {
        return true;
    } else {
        // float4 e of thread t of slice s at [(s-1)*V + e][t]: consecutive threads write
        // consecutive 16-byte words, no bank conflicts.
        constexpr int V = T::TM * T::TN / 4;
        float4* red = reinterpret_cast<float4*>(scratch);
        const int t = dev::fresh_thread_index() % T::SLICE_THREADS;
        if (th.slice > 0) {
#pragma unroll
            for (int e = 0; e < V; ++e) {
                const float* r = &acc[e / (T::TN / 4)][(e % (T::TN / 4)) * 4];
                red[((th.slice - 1) * V + e) * T::SLICE_THREADS + t] = make_float4(r[0], r[1], r[2], r[3]);
            }
        }
        __syncthreads();
        if (th.slice > 0) return false;
#pragma unroll
        for (int s = 1; s < T::SLICE_K; ++s)
#pragma unroll
            for (int e = 0; e < V; ++e) {
                const float4 v = red[((s - 1) * V + e) * T::SLICE_THREADS + t];
                float* r = &acc[e / (T::TN / 4)][(e % (T::TN / 4)) * 4];
                r[0] += v.x, r[1] += v.y, r[2] += v.z, r[3] += v.w;
            }
        return true;
    }
}

// c[block_m + row][block_n + col] = acc for this thread's outputs inside M x N; float4
// stores when VEC_N (c's rows 16-byte aligned).
template <class T, bool VEC_N>
__device__ __forceinline__ void store_thread_tile(float* __restrict__ c, int M, int N, int block_m, int block_n,
                                                  const ThreadTile<T>& th, const float (&acc)[T::TM][T::TN]) {
#pragma unroll
    for (int fm = 0; fm < T::FRAG_M; ++fm)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int row = block_m + th.m + fm * T::FRAG_STRIDE_M + i;
            if (row >= M) continue;
            float* c_row = c + static_cast<std::int64_t>(row) * N;
            const float(&r)[T::TN] = acc[4 * fm + i];
#pragma unroll
            for (int fn = 0; fn < T::FRAG_N; ++fn)
                dev::store4<VEC_N>(c_row, block_n + th.n + fn * T::FRAG_STRIDE_N, N,
                                   make_float4(r[4 * fn + 0], r[4 * fn + 1], r[4 * fn + 2], r[4 * fn + 3]));
        }
}

// The warptile kernel's tile configurations, by name "BMxBNxBK": 256 threads (8 warps of
// 64x32, 8x8 per thread, two blocks per multiprocessor), or 128 threads (4 warps) for
// shapes with too few 128x128 tiles to fill the multiprocessors.
using Tiling128x128x8 = WarpTiling<128, 128, 8, 64, 32, 8, 8, 2>;
using Tiling128x128x16 = WarpTiling<128, 128, 16, 64, 32, 8, 8, 2>;
using Tiling128x64x16 = WarpTiling<128, 64, 16, 64, 32, 8, 8, 4>;
using Tiling64x64x16 = WarpTiling<64, 64, 16, 32, 32, 8, 4, 4>;

template <class T>
std::string warp_tiling_name() {
    return std::to_string(T::BM) + "x" + std::to_string(T::BN) + "x" + std::to_string(T::BK) + " w" +
           std::to_string(T::WM) + "x" + std::to_string(T::WN) + " t" + std::to_string(T::TM) + "x" +
           std::to_string(T::TN) + (T::SLICE_K > 1 ? " k" + std::to_string(T::SLICE_K) : "") +
           (T::FRAG_BUFFERS > 1 ? " db" : "");
}

}  // namespace gpuopt::matmul
