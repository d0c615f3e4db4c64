// conv2d "implicit_gemm_tf32x3": the implicit GEMM y[pixel][k] = sum_kk X[pixel][kk] W[kk][k] (kk = (c, r, s))
// on the TF32 tensor cores at FP32 accuracy, the matmul ladder's 3xTF32 (matmul_tf32x3.cu): every operand split
// into a TF32 high part and a TF32 remainder, lo*hi + hi*lo + hi*hi by mma.sync.m16n8k8, each 32 k summed in
// the tensor cores (which round toward zero) and then added in FP32 (round to nearest).
//
// Made for layers with few output maps (K <= 32) and long filter windows, where an FFMA kernel is bound by issue
// (Fashion-MNIST conv2: 6 -> 16 maps, 5x5, 150 taps). A block takes one image at a time (persistent over images):
// the zero-padded image is staged in shared memory already split (hi and lo planes, so the split costs one pass
// per image instead of one per use), the filters split once per block as B[kk][k], and a table of each tap's
// offset in the staged image. A warp computes MT m16 tiles of consecutive output pixels x all K maps
// (NT n8 tiles): A fragments are gathered from the staged planes at pixel base + tap offset (the implicit
// im2col), B fragments are shared by the MT tiles. Taps past C*R*S (to a multiple of 8) have zero filters and
// read the pixel's own first tap, which is finite wherever its output is. Bias and activation in the store.
// Deterministic: a fixed order of products per output.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/activation.hpp"
#include "../common/cuda_check.cuh"
#include "../common/device.hpp"
#include "../common/error.hpp"
#include "../common/launch.cuh"
#include "../common/kernel_info.hpp"
#include "../common/tf32.cuh"
#include "conv2d_cuda.hpp"

namespace gpuopt::conv {

namespace {

constexpr int kThreads = 128;  // 4 warps
constexpr int kMT = 4;         // m16 tiles of pixels a warp computes at once (B fragments shared by them)
constexpr int kFlushK = 32;    // taps summed in the tensor cores before an FP32 add

struct Tf32Conv {
    const float *x, *w, *bias;
    float* y;
    int N, C, H, W, K, R, S, P, Q, stride_h, stride_w, pad_h, pad_w;
    int Hp, Wp;          // staged (padded) plane
    int crs, crs_pad;    // taps, and rounded up to 8
    Activation act;
};

// v split into hi and lo, stored at hi[i], lo[i].
__device__ __forceinline__ void store_split(float v, std::uint32_t* hi, std::uint32_t* lo, int i) {
    const tf32::Split p = tf32::split(v);
    hi[i] = p.hi, lo[i] = p.lo;
}

template <int NT>
__global__ void __launch_bounds__(kThreads) conv_tf32x3_kernel(Tf32Conv g) {
    extern __shared__ __align__(16) std::uint32_t smem[];
    const int plane = g.Hp * g.Wp, img = g.C * plane, img4 = (img + 3) & ~3;
    std::uint32_t* s_xhi = smem;
    std::uint32_t* s_xlo = s_xhi + img4;
    std::uint32_t* s_bhi = s_xlo + img4;
    std::uint32_t* s_blo = s_bhi + g.crs_pad * 8 * NT;
    int* s_koff = reinterpret_cast<int*>(s_blo + g.crs_pad * 8 * NT);

    for (int i = threadIdx.x; i < g.crs_pad * 8 * NT; i += kThreads) {
        const int kk = i / (8 * NT), k = i % (8 * NT);
        const float v = kk < g.crs && k < g.K ? __ldg(g.w + static_cast<std::int64_t>(k) * g.crs + kk) : 0.f;
        store_split(v, s_bhi, s_blo, i);
    }
    for (int kk = threadIdx.x; kk < g.crs_pad; kk += kThreads) {
        int off = 0;
        if (kk < g.crs) {
            const int c = kk / (g.R * g.S), rs = kk % (g.R * g.S);
            off = c * plane + (rs / g.S) * g.Wp + rs % g.S;
        }
        s_koff[kk] = off;
    }

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, grp = lane / 4, t = lane % 4;
    const int PQ = g.P * g.Q, mtiles = (PQ + 15) / 16;
    const bool vec = g.pad_h == 0 && g.pad_w == 0 && img % 4 == 0 &&
                     reinterpret_cast<std::uintptr_t>(g.x) % 16 == 0;
    for (std::int64_t n = blockIdx.x; n < g.N; n += gridDim.x) {
        __syncthreads();  // every warp is done with the previous image (and, first, the filters are in place)
        const float* xn = g.x + n * g.C * g.H * g.W;
        if (vec) {  // unpadded: the image is one contiguous run
            const float4* x4 = reinterpret_cast<const float4*>(xn);
#pragma unroll 4
            for (int i = threadIdx.x; i < img / 4; i += kThreads) {
                const float4 v = __ldg(x4 + i);
                const tf32::Split p0 = tf32::split(v.x), p1 = tf32::split(v.y),
                                          p2 = tf32::split(v.z), p3 = tf32::split(v.w);
                reinterpret_cast<uint4*>(s_xhi)[i] = make_uint4(p0.hi, p1.hi, p2.hi, p3.hi);
                reinterpret_cast<uint4*>(s_xlo)[i] = make_uint4(p0.lo, p1.lo, p2.lo, p3.lo);
            }
        } else {
            for (int i = threadIdx.x; i < img; i += kThreads) {
                const int c = i / plane, hw = i % plane, h = hw / g.Wp - g.pad_h, w = hw % g.Wp - g.pad_w;
                const bool in = h >= 0 && h < g.H && w >= 0 && w < g.W;
                store_split(in ? __ldg(xn + (static_cast<std::int64_t>(c) * g.H + h) * g.W + w) : 0.f, s_xhi, s_xlo, i);
            }
        }
        __syncthreads();

        float* yn = g.y + n * g.K * PQ;
        for (int m0 = warp * kMT; m0 < mtiles; m0 += 4 * kMT) {
            int base[kMT][2];  // staged offset of the first tap of pixel rows grp and grp + 8 of each tile
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int m = min((m0 + mt) * 16 + grp + 8 * h, PQ - 1);  // past the plane: computed, not stored
                    base[mt][h] = (m / g.Q) * g.stride_h * g.Wp + (m % g.Q) * g.stride_w;
                }
            float acc[kMT][NT][4] = {}, part[kMT][NT][4];
            for (int k0 = 0; k0 < g.crs_pad; k0 += kFlushK) {
#pragma unroll
                for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
                    for (int j = 0; j < NT; ++j)
#pragma unroll
                        for (int e = 0; e < 4; ++e) part[mt][j][e] = 0.f;
#pragma unroll
                for (int kb = k0; kb < k0 + kFlushK; kb += 8) {
                    if (kb >= g.crs_pad) break;
                    const int o0 = s_koff[kb + t], o1 = s_koff[kb + t + 4];
                    std::uint32_t bh[NT][2], bl[NT][2];  // b0: (tap t, map grp), b1: (tap t + 4, map grp)
#pragma unroll
                    for (int j = 0; j < NT; ++j) {
                        const int i0 = (kb + t) * 8 * NT + 8 * j + grp, i1 = i0 + 4 * 8 * NT;
                        bh[j][0] = s_bhi[i0], bh[j][1] = s_bhi[i1], bl[j][0] = s_blo[i0], bl[j][1] = s_blo[i1];
                    }
#pragma unroll
                    for (int mt = 0; mt < kMT; ++mt) {
                        // a0..a3: (row grp, tap t), (row grp + 8, t), (grp, t + 4), (grp + 8, t + 4).
                        const std::uint32_t ah[4] = {s_xhi[base[mt][0] + o0], s_xhi[base[mt][1] + o0],
                                                     s_xhi[base[mt][0] + o1], s_xhi[base[mt][1] + o1]};
                        const std::uint32_t al[4] = {s_xlo[base[mt][0] + o0], s_xlo[base[mt][1] + o0],
                                                     s_xlo[base[mt][0] + o1], s_xlo[base[mt][1] + o1]};
#pragma unroll
                        for (int j = 0; j < NT; ++j) {  // smallest terms first
                            tf32::mma_m16n8k8(part[mt][j], al, bh[j]);
                            tf32::mma_m16n8k8(part[mt][j], ah, bl[j]);
                            tf32::mma_m16n8k8(part[mt][j], ah, bh[j]);
                        }
                    }
                }
#pragma unroll
                for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
                    for (int j = 0; j < NT; ++j)
#pragma unroll
                        for (int e = 0; e < 4; ++e) acc[mt][j][e] += part[mt][j][e];  // round to nearest
            }
            // acc[mt][j][2h + e]: pixel (m0 + mt) * 16 + grp + 8h, map 8j + 2t + e.
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int m = (m0 + mt) * 16 + grp + 8 * h;
                    if (m >= PQ) continue;
#pragma unroll
                    for (int j = 0; j < NT; ++j)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const int k = 8 * j + 2 * t + e;
                            if (k >= g.K) continue;
                            const float b = g.bias ? __ldg(g.bias + k) : 0.f;
                            yn[static_cast<std::int64_t>(k) * PQ + m] = apply_activation(acc[mt][j][2 * h + e] + b, g.act);
                        }
                }
        }
    }
}

const void* kernel_of(int nt) {
    return nt == 1 ? reinterpret_cast<const void*>(conv_tf32x3_kernel<1>)
                   : nt == 2 ? reinterpret_cast<const void*>(conv_tf32x3_kernel<2>)
                             : reinterpret_cast<const void*>(conv_tf32x3_kernel<4>);
}

}  // namespace

std::int64_t conv2d_implicit_gemm_tf32x3_check(const Conv2dShape& s) {
    s.validate();
    GPUOPT_REQUIRE(s.K <= 32, "conv2d implicit_gemm_tf32x3: made for layers of at most 32 output maps (all of them "
                              "in one warp's n-tiles), got K = " + std::to_string(s.K));
    const std::int64_t Hp = s.H + 2 * s.pad_h, Wp = s.W + 2 * s.pad_w, crs = s.C * s.R * s.S;
    GPUOPT_REQUIRE(s.N < (1LL << 40) && s.P() * s.Q() < (1LL << 30) && crs < (1LL << 20),
                   "conv2d implicit_gemm_tf32x3: an image or filter too large for the kernel's 32-bit indices");
    const std::int64_t bytes = conv2d_implicit_gemm_tf32x3_shared_bytes(s.C, Hp, Wp, crs, s.K);
    const int limit = max_shared_memory_per_block_optin();
    GPUOPT_REQUIRE(bytes <= limit,
                   "conv2d implicit_gemm_tf32x3: stages one whole (padded) image, split into TF32 hi and lo, in "
                   "shared memory: C*(H+2*pad_h)*(W+2*pad_w) = " + std::to_string(s.C * Hp * Wp) +
                       " floats need " + std::to_string(bytes) + " bytes with the filters; this GPU allows " +
                       std::to_string(limit));
    return bytes;
}

void conv2d_implicit_gemm_tf32x3(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                                 Activation act) {
    const std::int64_t bytes = conv2d_implicit_gemm_tf32x3_check(s);
    Tf32Conv g{x, w, bias, y,
               static_cast<int>(s.N), static_cast<int>(s.C), static_cast<int>(s.H), static_cast<int>(s.W),
               static_cast<int>(s.K), static_cast<int>(s.R), static_cast<int>(s.S), static_cast<int>(s.P()),
               static_cast<int>(s.Q()), static_cast<int>(s.stride_h), static_cast<int>(s.stride_w),
               static_cast<int>(s.pad_h), static_cast<int>(s.pad_w), static_cast<int>(s.H + 2 * s.pad_h),
               static_cast<int>(s.W + 2 * s.pad_w), static_cast<int>(s.C * s.R * s.S),
               static_cast<int>((s.C * s.R * s.S + 7) / 8 * 8), act};
    const int nt = conv2d_implicit_gemm_tf32x3_map_tiles(s.K);
    const void* kernel = kernel_of(nt);
    require_shared_memory(kernel, static_cast<std::size_t>(bytes), "conv2d implicit_gemm_tf32x3");
    int per_sm = 0;
    GPUOPT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, bytes));
    // Persistent over images: every resident block takes images in turn (the next image's staging overlaps the
    // other blocks' products).
    const std::int64_t grid = std::min<std::int64_t>(s.N, static_cast<std::int64_t>(multiprocessor_count()) *
                                                              std::max(per_sm, 1));
    void* args[] = {&g};
    GPUOPT_CUDA_CHECK(cudaLaunchKernel(kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), args,
                                       static_cast<std::size_t>(bytes), current_stream()));
}


std::vector<KernelInfo> conv2d_tf32x3_kernel_info() {
    std::vector<KernelInfo> out;
    for (int nt : {1, 2, 4})  // shared memory depends on the shape: the occupancy here is at none
        out.push_back(kernel_info(kernel_of(nt), "implicit_gemm_tf32x3<n8 x " + std::to_string(nt) + ">",
                                          kThreads, 0));
    return out;
}

}  // namespace gpuopt::conv
