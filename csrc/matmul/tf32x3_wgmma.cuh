// The 3xTF32 warpgroup-MMA product (matmul's ladder step 11, tf32x3_wgmma; its .cu has the method and the
// measurements) as parts for any op whose product is a GEMM: the operand split kernels, the product kernel with
// the output written through a Store (row-major c for matmul; conv2d_pointwise's NCHW y with bias and activation),
// and run(), which splits, launches and owns the split buffers; run_gathered(), B gathered inside the product
// (conv2d's implicit GEMM: no unrolled input in memory). B may be a gather (element (k, n) of a logical
// K x N matrix from any layout). Each _sm90a translation unit that includes this gets its own kernels (the
// anonymous namespace): the templates are instantiated for that unit's operand and store types. A public header
// of matmul (another family may include it): it includes only common/ headers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "../common/async_copy.cuh"
#include "../common/cuda_check.cuh"
#include "../common/device_buffer.cuh"
#include "../common/error.hpp"
#include "../common/launch.cuh"
#include "../common/stream.hpp"
#include "../common/tf32.cuh"
#include "../common/tile_order.cuh"
#include "../common/wgmma.cuh"

namespace gpuopt::matmul::tf32x3_wgmma {

namespace {

constexpr int BM = 128, BN = 128, BK = 32, STAGES = 3, THREADS = 256;
constexpr int TILE_BYTES = BM * BK * 4;  // 128 rows of 128 bytes (BM == BN)
constexpr int STAGE_BYTES = 4 * TILE_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + alignment of the swizzle atoms
constexpr int GROUP_M = 16;                              // tile rows walked before moving right (L2 reuse)

// B as matmul's b: K x N row-major.
struct RowMajorB {
    const float* b;
    int N;
    __device__ float operator()(int k, int n) const { return __ldg(b + static_cast<std::int64_t>(k) * N + n); }
};

// c as matmul's: M x N row-major; vec: N even and c 8-byte aligned (a pair is aligned, both in range or neither).
struct RowMajorStore {
    float* c;
    int N;
    bool vec;
    __device__ void pair(int row, int col, float x, float y) const {
        float* c_row = c + static_cast<std::int64_t>(row) * N;
        if (vec) {
            if (col < N) *reinterpret_cast<float2*>(c_row + col) = make_float2(x, y);
        } else {
            if (col < N) c_row[col] = x;
            if (col + 1 < N) c_row[col + 1] = y;
        }
    }
};

// a (M x K, row-major) -> hi, lo (Mp x Kp), zero past M and K. A thread writes 4 consecutive k (float4).
__global__ void split_rows(const float* __restrict__ a, int M, int K, float* __restrict__ hi, float* __restrict__ lo,
                           int Mp, int Kp, bool vec) {
    const int k = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (k >= Kp) return;
    for (int m = blockIdx.y; m < Mp; m += gridDim.y) {
        const float* row = a + static_cast<std::int64_t>(m) * K;
        float x[4];
        if (vec && m < M && k + 3 < K) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(row + k));
            x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) x[j] = m < M && k + j < K ? __ldg(row + k + j) : 0.f;
        }
        tf32::Split p[4];  // as step 10's split
#pragma unroll
        for (int j = 0; j < 4; ++j) p[j] = tf32::split(x[j]);
        const std::int64_t o = static_cast<std::int64_t>(m) * Kp + k;
        *reinterpret_cast<uint4*>(hi + o) = make_uint4(p[0].hi, p[1].hi, p[2].hi, p[3].hi);
        *reinterpret_cast<uint4*>(lo + o) = make_uint4(p[0].lo, p[1].lo, p[2].lo, p[3].lo);
    }
}

// b (K x N: element (k, n) = b(k, n), RowMajorB or a gather) -> hi, lo (Np x Kp): transposed through a 32 x 33
// shared tile (coalesced both ways where b's rows are), zero past K and N. Blocks of 32 x 8 threads, one 32 x 32
// tile each (k tiles in y, strided).
template <class B>
__global__ void split_cols(B b, int K, int N, float* __restrict__ hi, float* __restrict__ lo, int Kp) {
    __shared__ float t[32][33];
    const int n0 = blockIdx.x * 32;
    for (int k0 = blockIdx.y * 32; k0 < Kp; k0 += gridDim.y * 32) {
        __syncthreads();  // the previous tile's reads are done
        for (int i = threadIdx.y; i < 32; i += 8) {
            const int k = k0 + i, n = n0 + threadIdx.x;
            t[i][threadIdx.x] = k < K && n < N ? b(k, n) : 0.f;
        }
        __syncthreads();
        for (int i = threadIdx.y; i < 32; i += 8) {
            const std::int64_t o = static_cast<std::int64_t>(n0 + i) * Kp + k0 + threadIdx.x;
            const tf32::Split p = tf32::split(t[threadIdx.x][i]);
            hi[o] = __uint_as_float(p.hi), lo[o] = __uint_as_float(p.lo);
        }
    }
}

// One stage's products into part (part = the stage's 32 k; the first wgmma overwrites it): a warpgroup's 64 rows of
// the A tiles against the 128 columns of the B tiles, stage layout [A hi][A lo][B hi][B lo] at shared address st,
// each 128 rows x 128 bytes, swizzled. Issued and committed; the caller waits.
__device__ __forceinline__ void mma_stage(float (&part)[64], std::uint32_t st, int warpgroup) {
#if GPUOPT_HAS_WGMMA
    const std::uint32_t rows_a = warpgroup * 64 * 128;
    const std::uint32_t ahi = st + rows_a, alo = st + TILE_BYTES + rows_a;
    const std::uint32_t bhi = st + 2 * TILE_BYTES, blo = st + 3 * TILE_BYTES;
    wgmma::fence();
#pragma unroll
    for (int k8 = 0; k8 < BK / 8; ++k8) {  // smallest terms first: lo*hi, hi*lo, then hi*hi
        const std::uint32_t o = 32 * k8;
        if (k8 == 0)
            wgmma::m64n128k8_tf32<0>(part, wgmma::desc_k_major_sw128(alo + o), wgmma::desc_k_major_sw128(bhi + o));
        else
            wgmma::m64n128k8_tf32<1>(part, wgmma::desc_k_major_sw128(alo + o), wgmma::desc_k_major_sw128(bhi + o));
        wgmma::m64n128k8_tf32<1>(part, wgmma::desc_k_major_sw128(ahi + o), wgmma::desc_k_major_sw128(blo + o));
        wgmma::m64n128k8_tf32<1>(part, wgmma::desc_k_major_sw128(ahi + o), wgmma::desc_k_major_sw128(bhi + o));
    }
    wgmma::commit();
#endif
}

// The block's 128 x 128 tile at (m0, n0) through store.pair; rows past M skipped (columns past N: the Store's).
// acc[4i + 2h + e]: row 16w + l/4 + 8h, column 8i + 2(l%4) + e of the warpgroup's 64 x 128 tile.
template <class Store>
__device__ __forceinline__ void store_tile(const float (&acc)[64], const Store& store, int M, int m0, int n0, int tid) {
    const int warpgroup = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
    const int row0 = m0 + warpgroup * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row >= M) continue;
#pragma unroll
        for (int i = 0; i < 16; ++i)
            store.pair(row, n0 + 8 * i + 2 * (lane % 4), acc[4 * i + 2 * h], acc[4 * i + 2 * h + 1]);
    }
}

// Bytes from the dynamic shared memory's start to its stages, which are 1024-byte aligned (the swizzle atoms).
__device__ __forceinline__ std::uint32_t stages_offset(const unsigned char* smem_raw) {
    return (1024 - static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_raw)) % 1024) % 1024;
}

// Queues k-step `kstep` of Tiles K-major tiles (rows of src[t], Kp floats apart) into a stage's first Tiles tiles,
// 128 rows x 128 bytes each, swizzled: 1024 chunks of 16 bytes a tile over the block's threads.
template <int Tiles>
__device__ __forceinline__ void load_tiles(unsigned char* st, const float* const (&src)[Tiles], int Kp, int kstep,
                                           int tid) {
#pragma unroll
    for (int i = 0; i < 4 * Tiles; ++i) {
        const int t = i / 4, e = tid + (i % 4) * THREADS, r = e / 8, chunk = e % 8;
        dev::cp_async_16(reinterpret_cast<float*>(st + t * TILE_BYTES + r * 128 + ((chunk ^ (r % 8)) * 16)),
                         src[t] + static_cast<std::int64_t>(r) * Kp + kstep * BK + 4 * chunk, 16);
    }
}

// c (M x N) = a * b from the split operands: a_hi, a_lo (Mp x Kp), b_hi, b_lo (Np x Kp), all K-major; each output
// pair (row, col), (row, col + 1) (col even) goes through store.pair, which owns c's layout and its bounds past N.
template <class Store>
__global__ void __launch_bounds__(THREADS, 1)
    product_kernel(const float* __restrict__ a_hi, const float* __restrict__ a_lo, const float* __restrict__ b_hi,
                   const float* __restrict__ b_lo, Store store, int M, int Kp, int tiles_m, int tiles_n) {
#if GPUOPT_HAS_WGMMA
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = smem_raw + stages_offset(smem_raw);
    const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));  // for the descriptors

    const dev::TileCoord tile = dev::tile_of_block<GROUP_M>(static_cast<int>(blockIdx.x), tiles_m, tiles_n);
    const int m0 = tile.m * BM, n0 = tile.n * BN;

    const int tid = threadIdx.x, warpgroup = tid / 128;
    // Stage layout: [A hi][A lo][B hi][B lo], each 128 rows x 128 bytes, swizzled.
    const float* const src[4] = {a_hi + static_cast<std::int64_t>(m0) * Kp, a_lo + static_cast<std::int64_t>(m0) * Kp,
                                 b_hi + static_cast<std::int64_t>(n0) * Kp, b_lo + static_cast<std::int64_t>(n0) * Kp};
    auto load = [&](int stage, int kstep) { load_tiles(smem + stage * STAGE_BYTES, src, Kp, kstep, tid); };

    float acc[64], part[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f, part[i] = 0.f;

    const int ksteps = Kp / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ksteps) load(s, s);
        dev::cp_async_commit();
    }
    for (int ks = 0; ks < ksteps; ++ks) {
        dev::cp_async_wait<STAGES - 2>();
        wgmma::fence_proxy_async();
        __syncthreads();  // step ks landed for every thread; every warpgroup is done with step ks - 1's stage
        if (ks + STAGES - 1 < ksteps) load((ks + STAGES - 1) % STAGES, ks + STAGES - 1);
        dev::cp_async_commit();

        mma_stage(part, base + (ks % STAGES) * STAGE_BYTES, warpgroup);
        wgmma::wait<0>();
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] += part[i];  // round to nearest
    }
    dev::cp_async_wait<0>();  // only empty groups remain; leave nothing in flight

    store_tile(acc, store, M, m0, n0, tid);
#endif
}

// c (M x N) = a * b with B gathered inside the product (no split planes of B in memory: an implicit GEMM). a_hi,
// a_lo as product_kernel's; B through a Gather: `Gather::Column column(int n) const` (n may be past N: zeros) and
// `void values(const Column&, int k0, float (&v)[16]) const` (b(k0 .. k0 + 15, n), zeros past K). A thread owns one
// column of a tile and 16 of a stage's 32 k: it loads them into registers a stage ahead (while the stage before runs
// its MMAs), splits them and stores hi and lo as 16-byte rows pieces of the swizzled B tiles, so the loads' latency
// hides under the products. A: cp.async from its split planes, STAGES deep, as product_kernel.
template <class Gather, class Store>
__global__ void __launch_bounds__(THREADS, 1)
    product_gather_kernel(const float* __restrict__ a_hi, const float* __restrict__ a_lo, Gather b, Store store,
                          int M, int Kp, int tiles_m, int tiles_n) {
#if GPUOPT_HAS_WGMMA
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = smem_raw + stages_offset(smem_raw);
    const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));  // for the descriptors

    const dev::TileCoord tile = dev::tile_of_block<GROUP_M>(static_cast<int>(blockIdx.x), tiles_m, tiles_n);
    const int m0 = tile.m * BM, n0 = tile.n * BN;
    const int tid = threadIdx.x, warpgroup = tid / 128;
    const float* const src[2] = {a_hi + static_cast<std::int64_t>(m0) * Kp, a_lo + static_cast<std::int64_t>(m0) * Kp};
    auto load_a = [&](int stage, int kstep) { load_tiles(smem + stage * STAGE_BYTES, src, Kp, kstep, tid); };
    // B: the thread's column n0 + bcol (row bcol of the K-major B tiles) and k bk .. bk + 15 of each stage.
    static_assert(THREADS == 2 * BN && BK == 32, "two threads a column, 16 k each");
    const int bcol = tid % BN, bk = tid / BN * 16;
    const typename Gather::Column column = b.column(n0 + bcol);
    float v[16];
    auto store_b = [&](int stage) {
        unsigned char* st = smem + stage * STAGE_BYTES + 2 * TILE_BYTES + bcol * 128;
#pragma unroll
        for (int c4 = 0; c4 < 4; ++c4) {
            std::uint32_t hi[4], lo[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const tf32::Split p = tf32::split(v[4 * c4 + i]);
                hi[i] = p.hi, lo[i] = p.lo;
            }
            const int off = ((bk / 4 + c4) ^ (bcol % 8)) * 16;
            *reinterpret_cast<uint4*>(st + off) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
            *reinterpret_cast<uint4*>(st + TILE_BYTES + off) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
        }
    };

    float acc[64], part[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f, part[i] = 0.f;

    const int ksteps = Kp / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ksteps) {
            load_a(s, s);
            b.values(column, s * BK + bk, v);
            store_b(s);
        }
        dev::cp_async_commit();
    }
    for (int ks = 0; ks < ksteps; ++ks) {
        dev::cp_async_wait<STAGES - 2>();
        wgmma::fence_proxy_async();  // this thread's B stores (generic proxy) before the MMAs read them (async proxy)
        __syncthreads();  // step ks landed for every thread; every warpgroup is done with step ks - 1's stage
        const int next = ks + STAGES - 1;
        if (next < ksteps) {
            load_a(next % STAGES, next);
            b.values(column, next * BK + bk, v);  // into registers: stored after this step's MMAs are issued
        }
        dev::cp_async_commit();

        mma_stage(part, base + (ks % STAGES) * STAGE_BYTES, warpgroup);
        // Stage `next` was last read by step ks - 1's MMAs, which every thread waited for before this step's barrier.
        if (next < ksteps) store_b(next % STAGES);
        wgmma::wait<0>();
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] += part[i];  // round to nearest
    }
    dev::cp_async_wait<0>();

    store_tile(acc, store, M, m0, n0, tid);
#endif
}

void require_hopper(const char* what, const char* hint = "") {
    int device = 0, major = 0, minor = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    GPUOPT_REQUIRE(major == 9, std::string(what) + ": wgmma exists only on Hopper GPUs (compute capability 9.0); "
                               "this GPU is " + std::to_string(major) + "." + std::to_string(minor) + hint);
}

// The product's padded extents (M, N to the 128-row and -column tiles, K to the 32-k stages) and its grid of tiles,
// checked against the grid's limit.
struct Padded {
    std::int64_t Mp, Np, Kp, tiles;
};
inline Padded padded(std::int64_t M, std::int64_t N, std::int64_t K, const char* what) {
    Padded p;
    p.Mp = ceil_div<std::int64_t>(M, BM) * BM, p.Np = ceil_div<std::int64_t>(N, BN) * BN;
    p.Kp = ceil_div<std::int64_t>(K, BK) * BK;
    p.tiles = p.Mp / BM * (p.Np / BN);
    GPUOPT_REQUIRE(p.tiles < (std::int64_t{1} << 31), std::string(what) + ": " + std::to_string(p.tiles) +
                                                          " output tiles of 128x128; the grid allows at most 2^31-1");
    return p;
}

// a (M x K, row-major) split into hi, lo (Mp x Kp) on the current stream (split_rows).
inline void split_a(const float* a, std::int64_t M, std::int64_t K, bool vec_a, const Padded& p, float* hi, float* lo) {
    const unsigned kx = static_cast<unsigned>(ceil_div<std::int64_t>(p.Kp / 4, 128));
    split_rows<<<dim3(kx, static_cast<unsigned>(std::min<std::int64_t>(p.Mp, 65535))), 128, 0, current_stream()>>>(
        a, static_cast<int>(M), static_cast<int>(K), hi, lo, static_cast<int>(p.Mp), static_cast<int>(p.Kp), vec_a);
    GPUOPT_CUDA_CHECK(cudaGetLastError());
}

// store <- a (M x K, row-major) * b (K x N, element (k, n) = b(k, n)) on the current stream: the operands split
// into TF32 hi and lo (3x their bytes, from the caching pool, freed into it after the launches, which the stream
// orders before any later use), then the product. vec_a: K % 4 == 0 and a 16-byte aligned.
template <class B, class Store>
void run(const float* a, std::int64_t M, std::int64_t K, bool vec_a, B b, std::int64_t N, Store store,
         const char* what, const char* hint = "") {
    require_hopper(what, hint);
    const Padded p = padded(M, N, K, what);
    const std::int64_t Mp = p.Mp, Np = p.Np, Kp = p.Kp, tiles = p.tiles;
    const unsigned blocks = static_cast<unsigned>(tiles);
    require_shared_memory(product_kernel<Store>, SMEM_BYTES, what);
    DeviceBuffer<float> a_hi(Mp * Kp), a_lo(Mp * Kp), b_hi(Np * Kp), b_lo(Np * Kp);
    split_a(a, M, K, vec_a, p, a_hi.data(), a_lo.data());
    split_cols<<<dim3(static_cast<unsigned>(Np / 32), static_cast<unsigned>(std::min<std::int64_t>(Kp / 32, 65535))),
                 dim3(32, 8), 0, current_stream()>>>(b, static_cast<int>(K), static_cast<int>(N), b_hi.data(),
                                                      b_lo.data(), static_cast<int>(Kp));
    GPUOPT_CUDA_CHECK(cudaGetLastError());
    product_kernel<Store><<<blocks, THREADS, SMEM_BYTES, current_stream()>>>(
        a_hi.data(), a_lo.data(), b_hi.data(), b_lo.data(), store, static_cast<int>(M), static_cast<int>(Kp),
        static_cast<int>(Mp / BM), static_cast<int>(Np / BN));
    GPUOPT_CUDA_CHECK(cudaGetLastError());
}

// store <- a (M x K, row-major) * B (K x N) gathered inside the product (product_gather_kernel): only a is split
// (3x its bytes from the caching pool). b: a Gather over K x N whose values are 0 past K and past N.
template <class Gather, class Store>
void run_gathered(const float* a, std::int64_t M, std::int64_t K, bool vec_a, Gather b, std::int64_t N, Store store,
                  const char* what, const char* hint = "") {
    require_hopper(what, hint);
    const Padded p = padded(M, N, K, what);
    const std::int64_t Mp = p.Mp, Np = p.Np, Kp = p.Kp, tiles = p.tiles;
    require_shared_memory(product_gather_kernel<Gather, Store>, SMEM_BYTES, what);
    DeviceBuffer<float> a_hi(Mp * Kp), a_lo(Mp * Kp);
    split_a(a, M, K, vec_a, p, a_hi.data(), a_lo.data());
    product_gather_kernel<Gather, Store><<<static_cast<unsigned>(tiles), THREADS, SMEM_BYTES, current_stream()>>>(
        a_hi.data(), a_lo.data(), b, store, static_cast<int>(M), static_cast<int>(Kp), static_cast<int>(Mp / BM),
        static_cast<int>(Np / BN));
    GPUOPT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

}  // namespace gpuopt::matmul::tf32x3_wgmma
