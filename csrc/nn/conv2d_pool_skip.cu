// conv2d_pool "zero_skip": the fused layer (convolution + bias + activation + 2x2 pool) computed by scattering its
// input, so the zeros of a ReLU'd input cost a test and no FMAs. MNIST's conv2 reads conv1 after ReLU and average
// pooling: 57% of its values are zero (and 44% of the dense FMAs touch them: the zeros lie at the digit's borders).
//
// A warp per (image, group of kRows output rows), its lanes the output maps (KPL maps a lane, map k = 32 j + lane),
// accumulators for the group's kRows x OW outputs of each map in registers. The group's input rows are swept in
// (c, y, x) order; a (item, channel) pair's values are tested by ballots, 32 at a time (lane j tests value j), so a
// value's test is a bit of a mask every lane holds (a uniform branch) and, where it is not zero, it is added into
// every output it reaches, fma(x, w, acc). So each output's sum is fma(x, w, acc) over (c, r, s) in order from 0, as
// `fused` forms it, and a skipped term is one whose fma would have left acc unchanged (x == 0, finite weights, acc >=
// +0 or -0 alike): the same bits as `fused`. Then bias, activation and the pool (pool4: the CPU reference's order) of
// each 2x2 window, only pooled outputs stored.
//
// The sweep is unrolled over positions, so H, W, R, S are compile-time: the shapes below (MNIST's conv2, and an 8x12
// input); other shapes are rejected before launch.
//
// What the H200 profiles changed (MNIST conv2 on the real conv1 output, 10,000 images; notes/ece408-reports.md): the
// first version read the filters through L1 and tested each value by a warp vote: 1.42 ms, 15% of the warps' time
// waiting on loads (the 205 KB filter bank does not stay in L1 beside the streamed input) and the vote-to-branch
// latency on every value. Now each block keeps the whole filter bank in shared memory, arranged [C][R*S][lane][KPL]
// (arrange_filters) so a lane's KPL maps of a (channel, tap) are one 8-byte load, staged once; a block is 12 warps (the register file, 168
// a thread) and the grid persistent, one block an SM; a warp walks its items' (item, channel) pairs with the next
// pair's input rows (kRows + R - 1 of them, contiguous) copied by cp.async into the other of two buffers while this
// one is swept (1.15 ms); and the ballots replace the votes (1.06 ms).
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>

#include "../common/cuda_check.cuh"
#include "../common/device.hpp"
#include "../common/scratch.hpp"
#include "../common/error.hpp"
#include "../common/launch.cuh"
#include "../common/async_copy.cuh"
#include "conv2d_pool.hpp"
#include "conv2d_pool_common.cuh"

namespace gpuopt::nn {

namespace {

using dev::cp_async_16;
using dev::cp_async_4;
using dev::cp_async_commit;
using dev::cp_async_wait;

constexpr int kSkipWarps = 12;  // a block: 12 x 32 threads x 168 registers fill the 64K register file
// Output rows a warp. 4: 168 registers, 3 warps a scheduler; 2 fits 128 registers (4 warps) but sweeps 6 of 12 input
// rows for 2 outputs: MNIST conv2 on the real conv1 output 1.625 ms against 1.420 (H200, da9be74+, L1 version).
constexpr int kRowsPerWarp = 4;

template <int H, int W, int R, int S>
struct SkipGeometry {
    static constexpr int OH = H - R + 1, OW = W - S + 1, G = OH / kRowsPerWarp, IR = kRowsPerWarp + R - 1, RS = R * S;
    static constexpr int kRowFloats = IR * W;  // a (item, channel)'s input rows, contiguous in x
    static_assert(kRowFloats % 32 == 0, "a pair's rows: whole ballots of 32 values, whole 4-byte copies a lane");
    static_assert(OH % kRowsPerWarp == 0 && OW % 2 == 0 && W % 4 == 0, "whole row groups, whole 2x2 windows, float4 rows");
};

// Shared memory of a block: the filter bank and two row buffers a warp.
std::int64_t skip_shared_bytes(std::int64_t C, std::int64_t RS, int kpl, int row_floats) {
    return (C * RS * 32 * kpl + std::int64_t{kSkipWarps} * 2 * row_floats) * 4;
}

template <int H, int W, int R, int S, int KPL, Activation ACT, PoolKind POOL>
__global__ void __launch_bounds__(kSkipWarps * 32, 1) conv_pool_skip(const float* __restrict__ x,
                                                                    const float* __restrict__ wt,
                                                                    const float* __restrict__ bias,
                                                                    float* __restrict__ y, std::int64_t n_images,
                                                                    int C, int K, bool x_aligned16) {
    using Geo = SkipGeometry<H, W, R, S>;
    constexpr int kRows = kRowsPerWarp, OH = Geo::OH, OW = Geo::OW, G = Geo::G, IR = Geo::IR, RS = Geo::RS;
    constexpr int kRowFloats = Geo::kRowFloats;
    extern __shared__ __align__(16) float smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float* ws = smem;                                                        // [C][RS][32][KPL]
    float* xs = smem + static_cast<std::int64_t>(C) * RS * 32 * KPL + warp * 2 * kRowFloats;  // this warp's 2 buffers

    // Items (image, row group) go round the grid's warps, block-fastest, so a small batch spreads over the SMs. The
    // shuffle makes the item visibly warp-uniform to the compiler: without it every vote below gets a divergence check.
    const int n_items = static_cast<int>(n_images) * G, slots = static_cast<int>(gridDim.x) * kSkipWarps;
    int item = __shfl_sync(0xffffffffu, warp * static_cast<int>(gridDim.x) + static_cast<int>(blockIdx.x), 0);
    auto rows_of = [&](int it) {  // input rows g kRows .. + IR - 1 of channel 0 of item it = (n, g)
        return x + static_cast<std::int64_t>(it / G) * C * (H * W) + (it % G) * (kRows * W);
    };
    auto stage = [&](const float* src, float* dst) {  // one cp.async group a call
        static_assert(kRowFloats / 4 <= 32, "at most one 16-byte copy a lane");
        if (x_aligned16) {
            if (lane < kRowFloats / 4) cp_async_16(dst + 4 * lane, src + 4 * lane, 16);
        } else {
#pragma unroll
            for (int j = 0; j < kRowFloats / 32; ++j) cp_async_4(dst + 32 * j + lane, src + 32 * j + lane, 4);
        }
        cp_async_commit();
    };
    if (item < n_items) stage(rows_of(item), xs);
    {
        const int bank = C * RS * 8 * KPL;  // 16-byte chunks of the filter bank
        for (int i = threadIdx.x; i < bank; i += kSkipWarps * 32) cp_async_16(ws + 4 * i, wt + 4 * i, 16);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();  // the only block barrier: warps run their items independently after it
    }

    int buf = 0;
    for (; item < n_items; item += slots) {
        const std::int64_t n = item / G;
        const int g = item % G;
        float acc[KPL][kRows][OW];
#pragma unroll
        for (int k = 0; k < KPL; ++k)
#pragma unroll
            for (int i = 0; i < kRows; ++i)
#pragma unroll
                for (int j = 0; j < OW; ++j) acc[k][i][j] = 0.f;
        const float* rows = rows_of(item);
        for (int c = 0; c < C; ++c) {
            // The next (item, channel) pair's rows into the other buffer (past the last pair, this one's again:
            // harmless, and the group count stays uniform); then this pair's are complete.
            const float* next = c + 1 < C ? rows + H * W : (item + slots < n_items ? rows_of(item + slots) : rows);
            stage(next, xs + (buf ^ 1) * kRowFloats);
            rows = next;
            cp_async_wait<1>();
            __syncwarp();
            const float* xr = xs + buf * kRowFloats;
            float w[KPL][RS];
            const float* wc = ws + (static_cast<std::int64_t>(c) * RS * 32 + lane) * KPL;
#pragma unroll
            for (int t = 0; t < RS; ++t) {
                if constexpr (KPL == 2) {
                    const float2 v = *reinterpret_cast<const float2*>(wc + t * 32 * KPL);
                    w[0][t] = v.x, w[1][t] = v.y;
                } else {
                    w[0][t] = wc[t * 32];
                }
            }
            // The pair's zero tests, 32 values a ballot: bit p of nz[p / 32] says value p is not zero. The same in
            // every lane, so each value's branch below is uniform (and the bits are tested several at a time).
            unsigned nz[kRowFloats / 32];
#pragma unroll
            for (int j = 0; j < kRowFloats / 32; ++j) nz[j] = __ballot_sync(0xffffffffu, xr[32 * j + lane] != 0.f);
#pragma unroll
            for (int yy = 0; yy < IR; ++yy) {
                float row[W];  // the same address in every lane: a broadcast
#pragma unroll
                for (int q = 0; q < W / 4; ++q) {
                    const float4 v = reinterpret_cast<const float4*>(xr + yy * W)[q];
                    row[4 * q] = v.x, row[4 * q + 1] = v.y, row[4 * q + 2] = v.z, row[4 * q + 3] = v.w;
                }
#pragma unroll
                for (int xx = 0; xx < W; ++xx) {
                    const float v = row[xx];
                    const int p = yy * W + xx;
                    if (nz[p / 32] >> (p % 32) & 1u) {
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
            __syncwarp();  // every lane has read this buffer before the next pair's copy refills it
            buf ^= 1;
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
}

template <int H, int W, int R, int S, int KPL, Activation ACT, PoolKind POOL>
void launch(const float* x, const float* wt, const float* bias, float* y, std::int64_t n, int C, int K) {
    const auto kernel = conv_pool_skip<H, W, R, S, KPL, ACT, POOL>;
    const std::int64_t bytes = skip_shared_bytes(C, R * S, KPL, SkipGeometry<H, W, R, S>::kRowFloats);
    require_shared_memory(kernel, static_cast<std::size_t>(bytes), "conv2d_pool zero_skip");
    const std::int64_t items = n * SkipGeometry<H, W, R, S>::G;
    // Persistent: one block an SM (its shared memory and registers), fewer when the batch has fewer items.
    const std::int64_t blocks = std::min<std::int64_t>(multiprocessor_count(), items);
    kernel<<<static_cast<unsigned>(blocks), kSkipWarps * 32, static_cast<std::size_t>(bytes), current_stream()>>>(
        x, wt, bias, y, n, C, K, reinterpret_cast<std::uintptr_t>(x) % 16 == 0);
}

template <int H, int W, int R, int S, int KPL>
void launch_act(Activation act, PoolKind pool, const float* x, const float* wt, const float* bias, float* y,
                std::int64_t n, int C, int K) {
    with_activation(act, [&](auto a) {
        constexpr Activation A = decltype(a)::value;
        if (pool == PoolKind::Max) launch<H, W, R, S, KPL, A, PoolKind::Max>(x, wt, bias, y, n, C, K);
        else launch<H, W, R, S, KPL, A, PoolKind::Average>(x, wt, bias, y, n, C, K);
    });
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
    GPUOPT_REQUIRE(s.N <= (std::int64_t{1} << 29), what + ": at most 2^29 images a call (32-bit item indices), got N = " +
                                                  std::to_string(s.N));
    GPUOPT_REQUIRE(s.C <= 4096, what + ": at most 4096 input channels, got C = " + std::to_string(s.C));
    const std::int64_t bytes = skip_shared_bytes(s.C, s.R * s.S, s.K > 32 ? 2 : 1,
                                                 static_cast<int>((kRowsPerWarp + s.R - 1) * s.W));
    const int limit = max_shared_memory_per_block_optin();
    GPUOPT_REQUIRE(bytes <= limit, what + ": keeps the whole filter bank in shared memory (C*R*S = " +
                                       std::to_string(s.C * s.R * s.S) + " taps x " + (s.K > 32 ? "64" : "32") +
                                       " map slots) beside its row buffers: " + std::to_string(bytes) +
                                       " bytes; this GPU allows " + std::to_string(limit));
}

void conv2d_pool_skip(const float* x, const float* w, const float* bias, float* y, const ConvPoolShape& s,
                      Activation act, PoolKind pool) {
    conv2d_pool_skip_check(s);
    const int C = static_cast<int>(s.C), K = static_cast<int>(s.K), RS = static_cast<int>(s.R * s.S);
    const int kpl = K > 32 ? 2 : 1;
    const std::int64_t arranged = static_cast<std::int64_t>(C) * RS * 32 * kpl;
    const Scratch scratch({sizeof(float) * static_cast<std::size_t>(arranged)});  // (scratch.hpp)
    float* wt = scratch.get<float>(0);
    arrange_filters<<<grid_for(arranged, 256), 256, 0, current_stream()>>>(w, wt, K, C, RS, 32 * kpl, kpl, arranged);  // one block
    GPUOPT_CHECK_LAUNCH("arrange_filters");
    auto run = [&](auto shape, auto kp) {
        constexpr SkipShape c = kSkipShapes[decltype(shape)::value];
        launch_act<c.H, c.W, c.R, c.S, decltype(kp)::value>(act, pool, x, wt, bias, y, s.N, C, K);
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
