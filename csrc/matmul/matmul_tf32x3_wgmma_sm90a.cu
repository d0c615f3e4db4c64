// Ladder step 11, "tf32x3_wgmma": tf32x3's FP32 accuracy from Hopper's warpgroup tensor-core
// instructions (wgmma, sm_90a). The three products of the split (lo_a*hi_b + hi_a*lo_b + hi_a*hi_b, as
// step 10) need four TF32 operand tiles; splitting them inside the k-loop is what held step 10 at
// cuBLAS SGEMM's speed (issue-bound, notes/matmul.md). Here the split is done once, before the product,
// by two small kernels that write hi and lo of A (M x K, as it is) and of B transposed (N x K: wgmma
// reads TF32 only K-major), zero-padded to whole tiles; they move 3 bytes for every byte of A and B, about
// 5% of the product's time at 4096^3 (measured). The product is then a plain TF32 GEMM over four tiles.
//
// Block tile 128 x 128 x 32, two warpgroups of 64 x 128 (wgmma m64n128k8, both operands read from
// shared memory through descriptors). Each k-step of 32 holds four 16 KB tiles (A hi, A lo, B hi, B lo),
// rows of 128 bytes in the 128-byte swizzle (so wgmma's reads are conflict-free), filled by a 3-stage
// cp.async pipeline (192 KB, one block per SM). Per k-step a warpgroup runs 12 wgmma (3 products x 4
// k8) into a fragment zeroed by the first of them (scale-d 0), waits for them and adds the fragment to
// its FP32 accumulator with ordinary round-to-nearest adds: the tensor cores' accumulator rounds toward
// zero, so, as step 10's flush_k = 32, no more than 32 k are summed there (FP32-level error, tested).
// Deterministic: a fixed order of products per output. The kernel body exists only for sm_90a; the
// launcher rejects other GPUs before launch.
#include <algorithm>
#include <cstdint>
#include <string>

#include "../common/cuda_check.cuh"
#include "../common/device_buffer.cuh"
#include "../common/error.hpp"
#include "../common/stream.hpp"
#include "../common/tf32.cuh"
#include "../common/wgmma.cuh"
#include "matmul_kernels.cuh"

namespace gpuopt::matmul {

namespace {

constexpr int BM = 128, BN = 128, BK = 32, STAGES = 3, THREADS = 256;
constexpr int TILE_BYTES = BM * BK * 4;  // 128 rows of 128 bytes (BM == BN)
constexpr int STAGE_BYTES = 4 * TILE_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + alignment of the swizzle atoms
constexpr int GROUP_M = 16;                              // tile rows walked before moving right (L2 reuse)

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

// b (K x N, row-major) -> hi, lo (Np x Kp): transposed through a 32 x 33 shared tile (coalesced both ways),
// zero past K and N. Blocks of 32 x 8 threads, one 32 x 32 tile each (k tiles in y, strided).
__global__ void split_cols(const float* __restrict__ b, int K, int N, float* __restrict__ hi, float* __restrict__ lo,
                           int Kp) {
    __shared__ float t[32][33];
    const int n0 = blockIdx.x * 32;
    for (int k0 = blockIdx.y * 32; k0 < Kp; k0 += gridDim.y * 32) {
        __syncthreads();  // the previous tile's reads are done
        for (int i = threadIdx.y; i < 32; i += 8) {
            const int k = k0 + i, n = n0 + threadIdx.x;
            t[i][threadIdx.x] = k < K && n < N ? __ldg(b + static_cast<std::int64_t>(k) * N + n) : 0.f;
        }
        __syncthreads();
        for (int i = threadIdx.y; i < 32; i += 8) {
            const std::int64_t o = static_cast<std::int64_t>(n0 + i) * Kp + k0 + threadIdx.x;
            const tf32::Split p = tf32::split(t[threadIdx.x][i]);
            hi[o] = __uint_as_float(p.hi), lo[o] = __uint_as_float(p.lo);
        }
    }
}

// c (M x N) = a * b from the split operands: a_hi, a_lo (Mp x Kp), b_hi, b_lo (Np x Kp), all K-major.
__global__ void __launch_bounds__(THREADS, 1)
    tf32x3_wgmma_kernel(const float* __restrict__ a_hi, const float* __restrict__ a_lo,
                        const float* __restrict__ b_hi, const float* __restrict__ b_lo, float* __restrict__ c, int M,
                        int N, int Kp, int tiles_m, int tiles_n, bool vec) {
#if GPUOPT_HAS_WGMMA
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    // The stages 1024-byte aligned (the swizzle atoms): as a generic pointer for the copies, a shared address
    // for the descriptors.
    unsigned char* smem = smem_raw + (1024 - static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_raw)) % 1024) % 1024;
    const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));

    const dev::TileCoord tile = dev::tile_of_block<GROUP_M>(static_cast<int>(blockIdx.x), tiles_m, tiles_n);
    const int m0 = tile.m * BM, n0 = tile.n * BN;

    const int tid = threadIdx.x, warpgroup = tid / 128;
    // Stage layout: [A hi][A lo][B hi][B lo], each 128 rows x 128 bytes, swizzled.
    const float* src[4] = {a_hi + static_cast<std::int64_t>(m0) * Kp, a_lo + static_cast<std::int64_t>(m0) * Kp,
                           b_hi + static_cast<std::int64_t>(n0) * Kp, b_lo + static_cast<std::int64_t>(n0) * Kp};
    auto load = [&](int stage, int kstep) {
        unsigned char* st = smem + stage * STAGE_BYTES;
#pragma unroll
        for (int i = 0; i < 16; ++i) {  // 4 tiles x 1024 chunks of 16 bytes / 256 threads
            const int t = i / 4, e = tid + (i % 4) * THREADS, r = e / 8, chunk = e % 8;
            dev::cp_async_16(reinterpret_cast<float*>(st + t * TILE_BYTES + r * 128 + ((chunk ^ (r % 8)) * 16)),
                             src[t] + static_cast<std::int64_t>(r) * Kp + kstep * BK + 4 * chunk, 16);
        }
    };

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

        const std::uint32_t st = base + (ks % STAGES) * STAGE_BYTES, rows_a = warpgroup * 64 * 128;
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
        wgmma::wait<0>();
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] += part[i];  // round to nearest
    }
    dev::cp_async_wait<0>();  // only empty groups remain; leave nothing in flight

    // acc[4i + 2h + e]: row 16w + l/4 + 8h, column 8i + 2(l%4) + e of the warpgroup's 64 x 128 tile.
    const int warp = (tid % 128) / 32, lane = tid % 32;
    const int row0 = m0 + warpgroup * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row >= M) continue;
        float* c_row = c + static_cast<std::int64_t>(row) * N;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int col = n0 + 8 * i + 2 * (lane % 4);
            const float x = acc[4 * i + 2 * h], y = acc[4 * i + 2 * h + 1];
            if (vec) {  // N even and c 8-byte aligned: the pair is aligned, both columns in range or neither
                if (col < N) *reinterpret_cast<float2*>(c_row + col) = make_float2(x, y);
            } else {
                if (col < N) c_row[col] = x;
                if (col + 1 < N) c_row[col + 1] = y;
            }
        }
    }
#endif
}

const char* kName = "tf32x3_wgmma<128x128x32 2 warpgroups m64n128k8 s3, split operands>";

void require_hopper() {
    int device = 0, major = 0, minor = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    GPUOPT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    GPUOPT_REQUIRE(major == 9, "matmul tf32x3_wgmma: wgmma exists only on Hopper GPUs (compute capability 9.0); this "
                               "GPU is " + std::to_string(major) + "." + std::to_string(minor) +
                                   " (use tf32x3 there)");
}

}  // namespace

KernelInfo tf32x3_wgmma_info() {
    return kernel_info(reinterpret_cast<const void*>(tf32x3_wgmma_kernel), kName, THREADS, SMEM_BYTES);
}

void matmul_tf32x3_wgmma(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K) {
    require_shape(M, N, K, "tf32x3_wgmma");
    require_hopper();
    const std::int64_t Mp = ceil_div<std::int64_t>(M, BM) * BM, Np = ceil_div<std::int64_t>(N, BN) * BN;
    const std::int64_t Kp = ceil_div<std::int64_t>(K, BK) * BK;
    const unsigned blocks = tile_count(M, N, BM, BN, "tf32x3_wgmma");
    require_shared_memory(tf32x3_wgmma_kernel, SMEM_BYTES, kName);

    // The split operands (3x the bytes of a and b), from the caching pool; freed into it after the launches,
    // which the stream orders before any later use.
    DeviceBuffer<float> a_hi(Mp * Kp), a_lo(Mp * Kp), b_hi(Np * Kp), b_lo(Np * Kp);
    const bool vec_a = K % 4 == 0 && aligned16(a);
    const unsigned kx = static_cast<unsigned>(ceil_div<std::int64_t>(Kp / 4, 128));
    split_rows<<<dim3(kx, static_cast<unsigned>(std::min<std::int64_t>(Mp, 65535))), 128, 0, current_stream()>>>(
        a, static_cast<int>(M), static_cast<int>(K), a_hi.data(), a_lo.data(), static_cast<int>(Mp),
        static_cast<int>(Kp), vec_a);
    GPUOPT_CUDA_CHECK(cudaGetLastError());
    split_cols<<<dim3(static_cast<unsigned>(Np / 32), static_cast<unsigned>(std::min<std::int64_t>(Kp / 32, 65535))),
                 dim3(32, 8), 0, current_stream()>>>(b, static_cast<int>(K), static_cast<int>(N), b_hi.data(), b_lo.data(),
                                static_cast<int>(Kp));
    GPUOPT_CUDA_CHECK(cudaGetLastError());
    const bool vec_c = N % 2 == 0 && reinterpret_cast<std::uintptr_t>(c) % 8 == 0;
    tf32x3_wgmma_kernel<<<blocks, THREADS, SMEM_BYTES, current_stream()>>>(a_hi.data(), a_lo.data(), b_hi.data(), b_lo.data(), c,
                                                          static_cast<int>(M), static_cast<int>(N),
                                                          static_cast<int>(Kp), static_cast<int>(Mp / BM),
                                                          static_cast<int>(Np / BN), vec_c);
    GPUOPT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gpuopt::matmul
