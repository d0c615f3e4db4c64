// conv2d_pool direct_smallc (conv2d_pool.hpp): first layers, few input channels, near one instruction an FFMA.
//
// `fused` is an implicit GEMM over C*R*S; with C = 1 its reduction is 25 taps, so each thread reloads inputs and
// weights for little work (1.9 instructions an FFMA on MNIST conv1). Here a block stages whole images (every input
// channel, zero past the image; uint8 through a table of v / divisor) and the filters and bias of `maps` output
// maps (all K up to 32) in shared memory once. A thread owns
// a 4x4 patch of convolution outputs (its 2x2 pooling windows whole inside it) and holds the patch's input,
// (4+R-1) x (4+S-1) values, in registers: with C = 1 it is loaded once and reused for every map, so a map costs
// R*S*16 FFMAs with register operands, ceil(R*S/4) broadcast 16-byte weight loads (every lane the same address)
// and the epilogue (bias through the accumulators' initial value, activation, pool, two 8-byte stores). With
// C > 1 the patch of each channel is reloaded per map (16 shared loads against R*S*16 FFMAs).
//
// Pooling: max pools the raw sums (bias added before, exact: rounding is monotone) and applies the activation to
// the one result (ReLU and tanh are monotone); average with ReLU or none pre-scales weights and bias by 1/4 (exact,
// a power of two), so the window sum is the average, in the CPU reference's order.
#include <algorithm>
#include <cstdint>
#include <string>

#include "../common/cuda_check.cuh"
#include "../common/device.hpp"
#include "../common/error.hpp"
#include "../common/launch.cuh"
#include "conv2d_pool.hpp"

namespace gpuopt::nn {

namespace {

constexpr int kPatch = kSmallcPatch;
constexpr bool maps_fit() {
    for (int v : kSmallcMaps.values)
        if (v > kSmallcMaxMaps) return false;
    return true;
}
static_assert(maps_fit(), "kSmallcMaps: at most kSmallcMaxMaps maps a block");

__host__ __device__ constexpr int round_up(int v, int m) { return (v + m - 1) / m * m; }

struct SmallcLayout {
    std::int64_t N;
    int C, H, W, K;
    int P, Q;             // convolution outputs
    int PP, QQ;           // stored outputs: pooled windows, or P x Q (pool_size 1)
    int patches_q, patches;
    int rows, pitch;      // staged plane
    int images, maps, kgroups;
};

// The CPU reference's max: a NaN wins, else the largest (PTX max.NaN, sm_80+).
__device__ __forceinline__ float max_nan(float a, float b) {
    float m;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(a), "f"(b));
    return m;
}

// Activation as one instruction where it can be: ReLU keeps NaN (as apply_activation) by max.NaN.
template <Activation ACT>
__device__ __forceinline__ float activate(float v) {
    if constexpr (ACT == Activation::Relu) return max_nan(v, 0.f);
    else return apply_activation(v, ACT);
}

// Stages the block's images (all channels) as rows x pitch float planes, zero past the image and for images past
// N; uint8 pixels through the block's table of v / divisor (rounded as NumPy's float32 x / divisor: one division
// per value, not per pixel). When the planes are the image itself
// (rows == H, pitch == W), the block's images are one contiguous run of x: 16-byte loads where aligned.
__device__ __forceinline__ void stage_images(const void* x, bool u8, const float* s_lut, float* s_x,
                                             const SmallcLayout& L, std::int64_t n0) {
    const int img = L.C * L.H * L.W;
    const int valid = static_cast<int>(min(static_cast<std::int64_t>(L.images), L.N - n0));
    const std::int64_t base = n0 * img;
    if (L.rows == L.H && L.pitch == L.W) {
        const int total = L.images * img, have = valid * img;
        if (!u8 && (base % 4 == 0) && (reinterpret_cast<std::uintptr_t>(x) % 16 == 0) && total % 4 == 0) {
            const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(x) + base);
            for (int e = threadIdx.x; e < total / 4; e += blockDim.x) {
                const float4 v = 4 * e < have ? __ldg(src + e) : make_float4(0.f, 0.f, 0.f, 0.f);
                reinterpret_cast<float4*>(s_x)[e] = v;
            }
            return;
        }
        if (u8 && (base % 16 == 0) && (reinterpret_cast<std::uintptr_t>(x) % 16 == 0) && total % 16 == 0) {
            const uint4* src = reinterpret_cast<const uint4*>(static_cast<const std::uint8_t*>(x) + base);
            for (int e = threadIdx.x; e < total / 16; e += blockDim.x) {
                const uint4 v = 16 * e < have ? __ldg(src + e) : make_uint4(0, 0, 0, 0);
                const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    float f[4];
#pragma unroll
                    for (int b = 0; b < 4; ++b) f[b] = s_lut[(words[q] >> (8 * b)) & 0xffu];
                    reinterpret_cast<float4*>(s_x)[4 * e + q] = make_float4(f[0], f[1], f[2], f[3]);
                }
            }
            return;
        }
    }
    const int plane = L.rows * L.pitch, total = L.images * L.C * plane;
    for (int e = threadIdx.x; e < total; e += blockDim.x) {
        const int col = e % L.pitch, row = (e / L.pitch) % L.rows, ic = e / plane;  // ic = image * C + channel
        float v = 0.f;
        if (ic < valid * L.C && row < L.H && col < L.W) {
            const std::int64_t i = base + (static_cast<std::int64_t>(ic) * L.H + row) * L.W + col;
            v = u8 ? s_lut[__ldg(static_cast<const std::uint8_t*>(x) + i)] : __ldg(static_cast<const float*>(x) + i);
        }
        s_x[e] = v;
    }
}

template <int R, Activation ACT, PoolKind POOL, bool POOLED>
__global__ void __launch_bounds__(kSmallcMaxThreads, 2)
    smallc_kernel(const void* __restrict__ x, bool u8, float divisor, const float* __restrict__ w,
                  const float* __restrict__ bias, float* __restrict__ y, SmallcLayout L) {
    constexpr int S = R, IR = kPatch + R - 1, NV = round_up(kPatch + S - 1, 4), TP = round_up(R * S, 4);
    // Average of ReLU / none: weights and bias times 1/4, so the window's sum is its average (see the file comment).
    constexpr bool kPrescale = POOLED && POOL == PoolKind::Average && ACT != Activation::Tanh;
    constexpr float kScale = kPrescale ? 0.25f : 1.f;
    extern __shared__ float4 smem4[];
    float* s_x = reinterpret_cast<float*>(smem4);
    const int plane = L.rows * L.pitch;
    float* s_w = s_x + L.images * L.C * plane;  // [maps][C][TP]
    float* s_lut = s_w + L.maps * L.C * TP;     // [256]: uint8 value -> value / divisor
    float* s_b = s_lut + 256;                   // [maps]

    const int kg = blockIdx.x % L.kgroups;  // map groups of the same images side by side: their input from L2
    const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x / L.kgroups) * L.images;
    const int k0 = kg * L.maps, kc = min(L.maps, L.K - k0);
    if (u8) {
        for (int v = threadIdx.x; v < 256; v += blockDim.x) s_lut[v] = __fdiv_rn(static_cast<float>(v), divisor);
        __syncthreads();
    }
    stage_images(x, u8, s_lut, s_x, L, n0);
    for (int e = threadIdx.x; e < L.maps * L.C * TP; e += blockDim.x) {
        const int tap = e % TP, kcix = e / TP;  // kcix = map * C + channel
        s_w[e] = tap < R * S && kcix < kc * L.C ? __ldg(w + (static_cast<std::int64_t>(k0) * L.C + kcix) * R * S + tap) * kScale
                                                : 0.f;
    }
    for (int k = threadIdx.x; k < L.maps; k += blockDim.x) s_b[k] = bias && k < kc ? __ldg(bias + k0 + k) * kScale : 0.f;
    __syncthreads();

    for (int item = threadIdx.x; item < L.images * L.patches; item += blockDim.x) {
        const int im = item / L.patches, patch = item % L.patches;
        const std::int64_t n = n0 + im;
        if (n >= L.N) break;  // items are image-major: the rest are past N too
        const int pr = patch / L.patches_q, pc = patch % L.patches_q;
        const float* xin = s_x + im * L.C * plane + kPatch * pr * L.pitch + kPatch * pc;
        float in[IR][NV];
        auto load_patch = [&](int c) {
#pragma unroll
            for (int i = 0; i < IR; ++i)
#pragma unroll
                for (int v = 0; v < NV; v += 4) {
                    const float4 t = *reinterpret_cast<const float4*>(xin + c * plane + i * L.pitch + v);
                    in[i][v] = t.x, in[i][v + 1] = t.y, in[i][v + 2] = t.z, in[i][v + 3] = t.w;
                }
        };
        const int p0 = kPatch * pr, q0 = kPatch * pc;  // conv output origin of the patch
        float* out = y + ((n * L.K + k0) * L.PP + (POOLED ? p0 / 2 : p0)) * static_cast<std::int64_t>(L.QQ) +
                     (POOLED ? q0 / 2 : q0);
        const std::int64_t map_stride = static_cast<std::int64_t>(L.PP) * L.QQ;
        // Which of the patch's pooled outputs lie inside PP x QQ (the same for every map).
        const int pp = p0 / 2, qq = q0 / 2;
        const bool row_in[2] = {pp < L.PP, pp + 1 < L.PP}, right_in = qq + 1 < L.QQ;
        const bool pair = L.QQ % 2 == 0 && right_in;  // qq even: an aligned 8-byte store
        // One map's taps of one channel on the patch in registers: the weights by broadcast 16-byte loads (one
        // address a warp), then R*S*16 FFMAs with register operands.
        auto taps = [&](float (&acc)[kPatch][kPatch], const float* wk) {
            float wv[TP];
#pragma unroll
            for (int t = 0; t < TP; t += 4) {
                const float4 q = *reinterpret_cast<const float4*>(wk + t);
                wv[t] = q.x, wv[t + 1] = q.y, wv[t + 2] = q.z, wv[t + 3] = q.w;
            }
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int s = 0; s < S; ++s)
#pragma unroll
                    for (int i = 0; i < kPatch; ++i)
#pragma unroll
                        for (int j = 0; j < kPatch; ++j) acc[i][j] = fmaf(in[i + r][j + s], wv[r * S + s], acc[i][j]);
        };
        // Bias (the accumulators' start: folded into the first FFMAs), activation, pool, store.
        auto epilogue = [&](float (&acc)[kPatch][kPatch], float* out) {
            if constexpr (POOLED) {
                float v[2][2];
#pragma unroll
                for (int a = 0; a < 2; ++a)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const float p = acc[2 * a][2 * e], q = acc[2 * a][2 * e + 1];
                        const float r = acc[2 * a + 1][2 * e], s = acc[2 * a + 1][2 * e + 1];
                        if constexpr (POOL == PoolKind::Max)
                            v[a][e] = activate<ACT>(max_nan(max_nan(max_nan(p, q), r), s));
                        else if constexpr (kPrescale)
                            v[a][e] = ((activate<ACT>(p) + activate<ACT>(q)) + activate<ACT>(r)) + activate<ACT>(s);
                        else  // tanh: the CPU reference's ((a + b) + c) + d, divided by 4
                            v[a][e] = (((activate<ACT>(p) + activate<ACT>(q)) + activate<ACT>(r)) + activate<ACT>(s)) * 0.25f;
                    }
#pragma unroll
                for (int a = 0; a < 2; ++a) {
                    if (!row_in[a]) continue;
                    float* o = out + a * L.QQ;
                    if (pair) {
                        *reinterpret_cast<float2*>(o) = make_float2(v[a][0], v[a][1]);
                    } else {
                        o[0] = v[a][0];  // qq < QQ always (the patches cover 2 * QQ columns)
                        if (right_in) o[1] = v[a][1];
                    }
                }
            } else {  // pool_size 1: the patch's rows and columns inside P x Q
#pragma unroll
                for (int i = 0; i < kPatch; ++i) {
                    if (p0 + i >= L.P) continue;
                    float* o = out + i * L.QQ;
                    float v[kPatch];
#pragma unroll
                    for (int j = 0; j < kPatch; ++j) v[j] = activate<ACT>(acc[i][j]);
                    if (L.QQ % 4 == 0) {  // q0 a multiple of 4: 16-byte aligned
                        *reinterpret_cast<float4*>(o) = make_float4(v[0], v[1], v[2], v[3]);
                    } else {
#pragma unroll
                        for (int j = 0; j < kPatch; ++j)
                            if (q0 + j < L.Q) o[j] = v[j];
                    }
                }
            }
        };
        if (L.C == 1) {  // straight-line maps: the patch loaded once, no channel loop (no accumulator copies)
            load_patch(0);
#pragma unroll 1
            for (int k = 0; k < kc; ++k, out += map_stride) {
                float acc[kPatch][kPatch];
                const float b = s_b[k];
#pragma unroll
                for (int i = 0; i < kPatch; ++i)
#pragma unroll
                    for (int j = 0; j < kPatch; ++j) acc[i][j] = b;
                taps(acc, s_w + k * TP);
                epilogue(acc, out);
            }
        } else {
#pragma unroll 1
            for (int k = 0; k < kc; ++k, out += map_stride) {
                float acc[kPatch][kPatch];
                const float b = s_b[k];
#pragma unroll
                for (int i = 0; i < kPatch; ++i)
#pragma unroll
                    for (int j = 0; j < kPatch; ++j) acc[i][j] = b;
                for (int c = 0; c < L.C; ++c) {
                    load_patch(c);
                    taps(acc, s_w + (k * L.C + c) * TP);
                }
                epilogue(acc, out);
            }
        }
    }
}

// Conv outputs the patch grid covers: whole pooling windows (2 * pooled), or the convolution (pool_size 1).
std::int64_t covered_h(const ConvPoolShape& s) { return s.pool == 2 ? 2 * s.pooled_h() : s.H - s.R + 1; }
std::int64_t covered_w(const ConvPoolShape& s) { return s.pool == 2 ? 2 * s.pooled_w() : s.W - s.S + 1; }

}  // namespace

SmallcLaunch conv2d_pool_smallc_plan(const ConvPoolShape& s, const SmallcConfig& cfg) {
    const std::string who = "conv2d_pool/direct_smallc: ";
    GPUOPT_REQUIRE(s.N >= 1 && s.C >= 1 && s.H >= 1 && s.W >= 1 && s.K >= 1,
                   "conv2d_pool: N, C, H, W and K must be >= 1");
    GPUOPT_REQUIRE(s.R == s.S && (s.R == 3 || s.R == 5),
                   who + "filters must be 3x3 or 5x5 (the sizes the kernel is compiled for), got " +
                       std::to_string(s.R) + "x" + std::to_string(s.S));
    GPUOPT_REQUIRE(s.pool == 2 || s.pool == 1, who + "pool_size must be 2 (or 1: no pooling), got " + std::to_string(s.pool));
    GPUOPT_REQUIRE(s.H >= s.R + s.pool - 1 && s.W >= s.S + s.pool - 1,
                   "conv2d_pool: the input (" + std::to_string(s.H) + "x" + std::to_string(s.W) +
                       ") must be larger than the filter, so that at least one pooling window is filled");
    GPUOPT_REQUIRE(s.C * s.R * s.S <= kSmallcMaxTaps,
                   who + "w: C*R*S = " + std::to_string(s.C * s.R * s.S) + " taps a map; the kernel is for first layers "
                       "(at most " + std::to_string(kSmallcMaxTaps) + "); use variant 'fused'");
    GPUOPT_REQUIRE(s.K < (1LL << 24) && s.N < (1LL << 40), who + "N or K too large for the kernel's indices");
    require_choice(kSmallcImages, cfg.images, "conv2d_pool/direct_smallc");
    require_choice(kSmallcMaps, cfg.maps, "conv2d_pool/direct_smallc");
    SmallcLaunch p;
    const int ph = static_cast<int>(ceil_div<std::int64_t>(covered_h(s), kPatch));
    const int pw = static_cast<int>(ceil_div<std::int64_t>(covered_w(s), kPatch));
    p.patches = ph * pw;
    p.rows = kPatch * ph + static_cast<int>(s.R) - 1;
    p.pitch = round_up(kPatch * pw + static_cast<int>(s.S) - 1, 4);  // 16-byte patch rows
    const int taps_pad = round_up(static_cast<int>(s.R * s.S), 4);
    // Maps a block: all of K up to 32, else K split evenly into groups of <= 32. Fewer, longer blocks won on the
    // H200 (MNIST conv1: 32 maps 0.245 ms, 16 maps 0.256, 8 maps 0.283): staging and the patch load are per block.
    p.maps = cfg.maps ? static_cast<int>(std::min<std::int64_t>(cfg.maps, s.K))
                      : static_cast<int>(ceil_div<std::int64_t>(s.K, ceil_div<std::int64_t>(s.K, 32)));
    const std::int64_t plane_bytes = 4LL * s.C * p.rows * p.pitch;
    const std::int64_t filter_bytes = 4LL * p.maps * (s.C * taps_pad + 1) + 4 * 256;  // filters, bias, uint8 table
    GPUOPT_REQUIRE(plane_bytes + filter_bytes <= kSmallcStageBudget,
                   who + "x: one staged image (" + std::to_string(s.C) + "x" + std::to_string(p.rows) + "x" +
                       std::to_string(p.pitch) + " floats) and the filters need " +
                       std::to_string(plane_bytes + filter_bytes) + " bytes of shared memory; the kernel's budget is " +
                       std::to_string(kSmallcStageBudget));
    // Images a block: the count (up to 16) whose items (images x patches, looped over up to 256 threads) leave the
    // fewest lanes idle; among equals up to 4 images (64 KB), where the staging of a short block is amortised (MNIST
    // conv1: 7 x 36 = 252 items; Fashion conv1, 225 patches: 4 images, 0.377 ms on the H200 against 0.400 for 1).
    const int fit = static_cast<int>((kSmallcStageBudget - filter_bytes) / plane_bytes);
    auto threads_for = [&](int images) { return std::min(kSmallcMaxThreads, round_up(images * p.patches, 32)); };
    auto lanes_used = [&](int images) {
        const int t = threads_for(images), items = images * p.patches;
        return static_cast<double>(items) / (ceil_div(items, t) * t);
    };
    if (cfg.images) {
        p.images = static_cast<int>(std::min<std::int64_t>({cfg.images, s.N, fit}));
    } else {
        p.images = 1;
        for (int i = 2; i <= std::min<std::int64_t>({16, s.N, fit}); ++i)
            if (lanes_used(i) > lanes_used(p.images) + 1e-9 ||
                (lanes_used(i) > lanes_used(p.images) - 1e-9 && i <= 4 && i * plane_bytes <= 64 * 1024))
                p.images = i;
    }
    GPUOPT_REQUIRE(cfg.images == 0 || p.images == std::min<std::int64_t>(cfg.images, s.N),
                   who + std::to_string(cfg.images) + " images of " + std::to_string(plane_bytes) +
                       " bytes do not fit the shared-memory budget (" + std::to_string(kSmallcStageBudget) + ")");
    p.threads = threads_for(p.images);
    p.shared_bytes = p.images * plane_bytes + filter_bytes;
    p.blocks = ceil_div<std::int64_t>(s.N, p.images) * ceil_div<std::int64_t>(s.K, p.maps);
    return p;
}

namespace {

template <int R, Activation ACT, PoolKind POOL, bool POOLED>
void launch(const void* x, bool u8, float divisor, const float* w, const float* bias, float* y, const SmallcLayout& L,
            const SmallcLaunch& p) {
    auto kernel = smallc_kernel<R, ACT, POOL, POOLED>;
    require_shared_memory(kernel, static_cast<std::size_t>(p.shared_bytes), "conv2d_pool/direct_smallc");
    GPUOPT_REQUIRE(p.blocks < (1LL << 31), "conv2d_pool/direct_smallc: too many images for one grid");
    kernel<<<static_cast<unsigned>(p.blocks), p.threads, p.shared_bytes, current_stream()>>>(x, u8, divisor, w, bias, y, L);
    GPUOPT_CHECK_LAUNCH("smallc_kernel");
}

template <int R, Activation ACT>
void dispatch_pool(PoolKind pool, bool pooled, const void* x, bool u8, float divisor, const float* w, const float* bias,
                   float* y, const SmallcLayout& L, const SmallcLaunch& p) {
    if (!pooled)
        launch<R, ACT, PoolKind::Max, false>(x, u8, divisor, w, bias, y, L, p);
    else if (pool == PoolKind::Max)
        launch<R, ACT, PoolKind::Max, true>(x, u8, divisor, w, bias, y, L, p);
    else
        launch<R, ACT, PoolKind::Average, true>(x, u8, divisor, w, bias, y, L, p);
}

template <int R>
void dispatch_act(Activation act, PoolKind pool, bool pooled, const void* x, bool u8, float divisor, const float* w,
                  const float* bias, float* y, const SmallcLayout& L, const SmallcLaunch& p) {
    switch (act) {
        case Activation::Relu: return dispatch_pool<R, Activation::Relu>(pool, pooled, x, u8, divisor, w, bias, y, L, p);
        case Activation::Tanh: return dispatch_pool<R, Activation::Tanh>(pool, pooled, x, u8, divisor, w, bias, y, L, p);
        default: return dispatch_pool<R, Activation::None>(pool, pooled, x, u8, divisor, w, bias, y, L, p);
    }
}

}  // namespace

void conv2d_pool_direct_smallc(const void* x, InputType input_type, float input_divisor, const float* w,
                               const float* bias, float* y, const ConvPoolShape& s, Activation act, PoolKind pool,
                               const SmallcConfig& cfg) {
    const SmallcLaunch p = conv2d_pool_smallc_plan(s, cfg);
    GPUOPT_REQUIRE(input_type == InputType::Float32 ? input_divisor == 1.f : input_divisor > 0.f,
                   "conv2d_pool: input_divisor applies to uint8 input (> 0); float32 input takes 1.0");
    SmallcLayout L{};
    L.N = s.N;
    L.C = static_cast<int>(s.C), L.H = static_cast<int>(s.H), L.W = static_cast<int>(s.W), L.K = static_cast<int>(s.K);
    L.P = static_cast<int>(s.H - s.R + 1), L.Q = static_cast<int>(s.W - s.S + 1);
    L.PP = static_cast<int>(s.pool == 2 ? s.pooled_h() : L.P), L.QQ = static_cast<int>(s.pool == 2 ? s.pooled_w() : L.Q);
    L.patches_q = static_cast<int>(ceil_div<std::int64_t>(covered_w(s), kPatch));
    L.patches = p.patches, L.rows = p.rows, L.pitch = p.pitch;
    L.images = p.images, L.maps = p.maps, L.kgroups = static_cast<int>(ceil_div<std::int64_t>(s.K, p.maps));
    const bool u8 = input_type == InputType::Uint8;
    if (s.R == 3)
        dispatch_act<3>(act, pool, s.pool == 2, x, u8, input_divisor, w, bias, y, L, p);
    else
        dispatch_act<5>(act, pool, s.pool == 2, x, u8, input_divisor, w, bias, y, L, p);
}

}  // namespace gpuopt::nn
