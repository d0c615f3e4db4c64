// conv2d_pool "zero_skip": the fused layer (convolution + bias + activation + 2x2 pool) computed by scattering its
// input, so the zeros of a ReLU'd input cost a test and no FMAs. MNIST's conv2 reads conv1 after ReLU and average
// pooling: 57% of its values are zero (and 44% of the dense FMAs touch them: the zeros lie at the digit's borders).
//
// A warp per (image, group of kRows output rows), its lanes the output maps (KPL maps a lane, map k = 32 j + lane),
// accumulators for the group's kRows x OW outputs of each map in registers. The group's input rows are swept in
// (c, y, x) order; a value is tested once for the whole warp (every lane holds it: a warp vote, so the branch is
// uniform) and, where it is not zero, added into every output it reaches, fma(x, w, acc). So each output's sum is
// fma(x, w, acc) over (c, r, s) in order from 0, as `fused` forms it, and a skipped term is one whose fma would have
// left acc unchanged (x == 0, finite weights, acc >= +0 or -0 alike): the same bits as `fused`. Then bias,
// activation and the pool (pool4: the CPU reference's order) of each 2x2 window, only pooled outputs stored.
//
// The sweep is unrolled over positions, so H, W, R, S are compile-time: the shapes below (MNIST's conv2, and an 8x12
// input); other shapes are rejected before launch. Weights: rearranged once a call to [C][R*S][K padded to 32 KPL]
// (arrange_filters), a coalesced load a tap and map slot, read through L1 (the 205 KB bank of MNIST's conv2 is read
// by every warp).
#include <cstdint>
#include <iterator>
#include <string>

#include "../common/cuda_check.cuh"
#include "../common/device.hpp"
#include "../common/device_buffer.cuh"
#include "../common/error.hpp"
#include "../common/launch.cuh"
#include "conv2d_pool.hpp"
#include "conv2d_pool_common.cuh"

namespace gpuopt::nn {

namespace {

constexpr int kSkipThreads = 128;  // 4 warps: items are independent (no barrier), small blocks fill the SMs evenly
// Output rows a warp. 4: 168 registers, 3 warps a scheduler; 2 fits 128 registers (4 warps) but sweeps 6 of 12 input
// rows for 2 outputs: MNIST conv2 on the real conv1 output 1.625 ms against 1.420 (H200, da9be74+).
constexpr int kRowsPerWarp = 4;

// kRows: output rows a warp (kRows + R - 1 input rows swept a channel).
template <int H, int W, int R, int S, int KPL, int kRows, Activation ACT, PoolKind POOL>
__global__ void __launch_bounds__(kSkipThreads, kRows == 4 ? 3 : 4) conv_pool_skip(const float* __restrict__ x,
                                                                  const float* __restrict__ wt,
                                                                  const float* __restrict__ bias,
                                                                  float* __restrict__ y, std::int64_t n_images, int C,
                                                                  int K) {
    constexpr int OH = H - R + 1, OW = W - S + 1, G = OH / kRows, IR = kRows + R - 1, RS = R * S, KP = 32 * KPL;
    static_assert(OH % kRows == 0 && OW % 2 == 0 && W % 4 == 0, "whole row groups, whole 2x2 windows, float4 rows");
    const int lane = threadIdx.x % 32;
    const std::int64_t item = blockIdx.x * static_cast<std::int64_t>(kSkipThreads / 32) + threadIdx.x / 32;
    if (item >= n_images * G) return;  // whole warps
    const std::int64_t n = item / G;
    const int g = static_cast<int>(item % G);
    float acc[KPL][kRows][OW];
#pragma unroll
    for (int k = 0; k < KPL; ++k)
#pragma unroll
        for (int i = 0; i < kRows; ++i)
#pragma unroll
            for (int j = 0; j < OW; ++j) acc[k][i][j] = 0.f;
    const float* xg = x + n * C * (H * W) + g * kRows * W;  // input rows g kRows .. + IR - 1 of channel 0
    for (int c = 0; c < C; ++c) {
        const float* xc = xg + static_cast<std::int64_t>(c) * (H * W);
        if (c + 1 < C)  // the next channel's rows into L1 while this one is swept (IR W floats, 128-byte lines)
            for (int b = lane * 32; b < IR * W + 32; b += 32 * 32) asm volatile("prefetch.global.L1 [%0];" ::"l"(xc + H * W + b));
        float w[KPL][RS];
#pragma unroll
        for (int t = 0; t < RS; ++t)
#pragma unroll
            for (int k = 0; k < KPL; ++k) w[k][t] = __ldg(wt + (static_cast<std::int64_t>(c) * RS + t) * KP + 32 * k + lane);
#pragma unroll
        for (int yy = 0; yy < IR; ++yy) {
            float row[W];
#pragma unroll
            for (int q = 0; q < W / 4; ++q) {
                const float4 v = __ldg(reinterpret_cast<const float4*>(xc + yy * W) + q);
                row[4 * q] = v.x, row[4 * q + 1] = v.y, row[4 * q + 2] = v.z, row[4 * q + 3] = v.w;
            }
#pragma unroll
            for (int xx = 0; xx < W; ++xx) {
                const float v = row[xx];
                if (__any_sync(0xffffffffu, v != 0.f)) {  // the same v in every lane: a uniform branch
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const int oy = yy - r;
                        if (oy < 0 || oy >= kRows) continue;
#pragma unroll
                        for (int s = 0; s < S; ++s) {
                            const int ox = xx - s;
                            if (ox < 0 || ox >= OW) continue;
#pragma unroll
                            for (int k = 0; k < KPL; ++k) acc[k][oy][ox] = fmaf(v, w[k][r * S + s], acc[k][oy][ox]);
                        }
                    }
                }
            }
        }
    }
    // Epilogue: bias, activation, each 2x2 window pooled, a pooled row of the map stored by the lane.
    constexpr int PW = OW / 2;
#pragma unroll
    for (int k = 0; k < KPL; ++k) {
        const int kk = 32 * k + lane;
        if (kk >= K) continue;
        const float b = bias ? __ldg(bias + kk) : 0.f;
        float* out = y + ((n * K + kk) * (OH / 2) + g * (kRows / 2)) * PW;
#pragma unroll
        for (int i = 0; i < kRows / 2; ++i)
#pragma unroll
            for (int j = 0; j < PW; ++j)
                out[i * PW + j] = pool4<ACT, POOL>(acc[k][2 * i][2 * j] + b, acc[k][2 * i][2 * j + 1] + b,
                                                   acc[k][2 * i + 1][2 * j] + b, acc[k][2 * i + 1][2 * j + 1] + b);
    }
}

template <int H, int W, int R, int S, int KPL, int kRows, Activation ACT>
void launch_pool(PoolKind pool, const float* x, const float* wt, const float* bias, float* y, std::int64_t n, int C,
                 int K) {
    constexpr int G = (H - R + 1) / kRows;
    const std::int64_t warps = n * G, blocks = (warps + kSkipThreads / 32 - 1) / (kSkipThreads / 32);
    if (pool == PoolKind::Max)
        conv_pool_skip<H, W, R, S, KPL, kRows, ACT, PoolKind::Max><<<static_cast<unsigned>(blocks), kSkipThreads>>>(
            x, wt, bias, y, n, C, K);
    else
        conv_pool_skip<H, W, R, S, KPL, kRows, ACT, PoolKind::Average><<<static_cast<unsigned>(blocks), kSkipThreads>>>(
            x, wt, bias, y, n, C, K);
}

template <int H, int W, int R, int S, int KPL>
void launch_act(Activation act, PoolKind pool, const float* x, const float* wt, const float* bias, float* y,
                std::int64_t n, int C, int K) {
    switch (act) {
        case Activation::Relu: return launch_pool<H, W, R, S, KPL, kRowsPerWarp, Activation::Relu>(pool, x, wt, bias, y, n, C, K);
        case Activation::Tanh: return launch_pool<H, W, R, S, KPL, kRowsPerWarp, Activation::Tanh>(pool, x, wt, bias, y, n, C, K);
        default: return launch_pool<H, W, R, S, KPL, kRowsPerWarp, Activation::None>(pool, x, wt, bias, y, n, C, K);
    }
}

// The compiled input sides and filters: (H, W, R, S).
struct SkipShape {
    int H, W, R, S;
};
constexpr SkipShape kSkipShapes[] = {{12, 12, 5, 5}, {8, 12, 5, 5}};

// The index of s's (H, W, R, S) in kSkipShapes, -1 if it is not compiled.
int compiled(const ConvPoolShape& s) {
    for (int i = 0; i < static_cast<int>(std::size(kSkipShapes)); ++i)
        if (s.H == kSkipShapes[i].H && s.W == kSkipShapes[i].W && s.R == kSkipShapes[i].R && s.S == kSkipShapes[i].S)
            return i;
    return -1;
}

}  // namespace

void conv2d_pool_skip_check(const ConvPoolShape& s) {
    const std::string what = "conv2d_pool zero_skip";
    GPUOPT_REQUIRE(s.N >= 1 && s.C >= 1 && s.K >= 1, what + ": N, C and K must be >= 1");
    GPUOPT_REQUIRE(s.pool == 2, what + ": pool_size must be 2, got " + std::to_string(s.pool));
    GPUOPT_REQUIRE(compiled(s) >= 0, what + ": compiled for (H, W, R, S) = (12, 12, 5, 5) (MNIST's conv2) and (8, 12, 5, 5); "
                                       "got (" + std::to_string(s.H) + ", " + std::to_string(s.W) + ", " +
                                       std::to_string(s.R) + ", " + std::to_string(s.S) + ")");
    GPUOPT_REQUIRE(s.K <= 64, what + ": at most 64 output maps (2 a lane), got K = " + std::to_string(s.K));
    GPUOPT_REQUIRE(s.C <= (1 << 20) && s.N <= (std::int64_t{1} << 40), what + ": shape too large");
}

void conv2d_pool_skip(const float* x, const float* w, const float* bias, float* y, const ConvPoolShape& s,
                      Activation act, PoolKind pool) {
    conv2d_pool_skip_check(s);
    const int C = static_cast<int>(s.C), K = static_cast<int>(s.K), RS = static_cast<int>(s.R * s.S);
    const int kpl = K > 32 ? 2 : 1;
    const std::int64_t arranged = static_cast<std::int64_t>(C) * RS * 32 * kpl;
    DeviceBuffer<float> wt(static_cast<std::size_t>(arranged));  // pool memory; freed in stream order
    arrange_filters<<<grid_for(arranged, 256), 256>>>(w, wt.data(), K, C, RS, 32 * kpl, arranged);
    GPUOPT_CHECK_LAUNCH("arrange_filters");
    auto run = [&](auto shape, auto kp) {
        constexpr SkipShape c = kSkipShapes[decltype(shape)::value];
        launch_act<c.H, c.W, c.R, c.S, decltype(kp)::value>(act, pool, x, wt.data(), bias, y, s.N, C, K);
    };
    auto with_kpl = [&](auto shape) {
        if (kpl == 2) run(shape, std::integral_constant<int, 2>{});
        else run(shape, std::integral_constant<int, 1>{});
    };
    static_assert(std::size(kSkipShapes) == 2, "a branch a compiled shape");
    if (compiled(s) == 0) with_kpl(std::integral_constant<int, 0>{});
    else with_kpl(std::integral_constant<int, 1>{});
    GPUOPT_CHECK_LAUNCH("conv2d_pool zero_skip");
}

}  // namespace gpuopt::nn
