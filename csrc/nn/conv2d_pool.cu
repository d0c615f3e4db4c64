// Fused convolution + bias + activation + 2x2 pooling (conv2d_pool.hpp), float32 FMA.
//
// The layer as an implicit GEMM done directly: a block owns a tile of tile_p x tile_q convolution
// outputs of `images` images for `channels_per_block` output channels; each thread owns a 2 x 4 patch
// of outputs (one row of two pooling windows) for 8 channels, 64 accumulators (or 4 channels, for first
// layers, whose short reductions need more warps per SM rather than more work per thread). Per input channel and
// filter row the thread loads its two input rows (2 x 8 floats, four 16-byte shared loads) once and
// reuses them for all S taps; each tap costs two 16-byte loads of 8 weights for 64 FMAs. The patch
// is pooled in registers, so only the pooled outputs are stored.
//
// Shared memory per chunk of input channels: the input tiles (zero-filled past the image, rows padded
// to a multiple of 4 floats) and the chunk's filters, pre-arranged by a small kernel as
// [channel block][c][r][s][channels_per_block] so a block's filters are one contiguous run. A thread's
// 8 channels are {4g..4g+3} and {B/2+4g..B/2+4g+3} (B channels per block): the 16-byte weight loads of
// neighbouring threads then cover 128 contiguous bytes, free of bank conflicts.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

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

constexpr int kMaxThreads = 512;          // block size bound (__launch_bounds__: <= 128 registers a thread)
constexpr int kMaxThreadsCpt4 = 384;      // with 4 channels a thread: two blocks an SM (<= 85 registers)
constexpr int kTargetThreads = 256;       // images per block chosen to reach about this many threads
constexpr int kMaxChannelsPerBlock = 64;  // output channels per block
constexpr bool channels_per_block_fit() {  // each a whole number of 8-channel thread tiles (of 4 or 8 channels)
    for (int v : kFusedChannelsPerBlock.values)
        if (v % 8 != 0 || v > kMaxChannelsPerBlock) return false;
    return true;
}
static_assert(channels_per_block_fit(), "kFusedChannelsPerBlock: multiples of 8 up to kMaxChannelsPerBlock");
constexpr int kMaxTileQ = 32;             // conv output columns per tile (8 patches of 4)
constexpr std::int64_t kStageBudget = 36 * 1024;  // per buffer, two per block: up to three blocks per SM (227 KB)

__host__ __device__ constexpr int round_up4(int v) { return (v + 3) / 4 * 4; }

template <typename TIn>
__device__ __forceinline__ float load_input(const TIn* x, std::int64_t i, float divisor);
template <>
__device__ __forceinline__ float load_input<float>(const float* x, std::int64_t i, float) {
    return __ldg(x + i);
}
template <>
__device__ __forceinline__ float load_input<std::uint8_t>(const std::uint8_t* x, std::int64_t i, float divisor) {
    return __fdiv_rn(static_cast<float>(__ldg(x + i)), divisor);  // as NumPy's float32 x / divisor
}

// Runtime layout of one launch, the same in every block.
struct Layout {
    int N, C, H, W, K, PP, QQ;      // shape; PP x QQ 2x2 windows (pooled outputs; pool_size 1: the patch grid)
    int P, Q;                       // convolution outputs
    int tile_p, tile_q;             // conv outputs per tile
    int tiles_q, tiles;             // tiles along q, tiles per image
    int images, cpb, chunk;         // images / output channels per block, input channels per chunk
    int in_rows, in_pitch;          // staged input tile: rows, floats per row
    int gather;                     // 1: the filters read from w (K, C, R, S) and arranged while staged (small banks)
};

// A bank of at most this many arranged floats is arranged by the conv kernel itself while it stages each chunk's
// filters (4-byte copies from w), not by arrange_filters first: one launch a call instead of two (a launch is ~5 µs
// of host time on the H200's host, more than a tiny layer's kernel); past it the 16-byte copies of the arranged bank
// pay for the extra launch. (MNIST's conv1, 32 maps of 1 x 5 x 5: 800.)
constexpr std::int64_t kGatherMaxFloats = 4096;



// pool_size 1: bias, activation and the 2 x 4 patch (rows p, p + 1; columns q..q + 3) of each of the thread's
// channels stored where it lies inside the P x Q output; one 16-byte store a row when Q % 4 == 0 (q is a multiple
// of 4, so the row's four values are aligned).
template <int CPT, Activation ACT>
__device__ __forceinline__ void store_patch(const float (&acc)[2][4][CPT], const float* __restrict__ bias,
                                            float* __restrict__ y, const Layout& L, std::int64_t n, int p, int q,
                                            int k0, int g, int half) {
    if (n >= L.N || p >= L.P || q >= L.Q) return;
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
        const int kk = k0 + (k < 4 ? 4 * g + k : half + 4 * g + k - 4);
        if (kk >= L.K) continue;
        const float b = bias ? __ldg(bias + kk) : 0.f;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            if (p + i >= L.P) continue;
            float v[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j] = apply_activation(acc[i][j][k] + b, ACT);
            float* out = y + ((n * L.K + kk) * L.P + p + i) * static_cast<std::int64_t>(L.Q) + q;
            if (L.Q % 4 == 0) {
                *reinterpret_cast<float4*>(out) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (q + j < L.Q) out[j] = v[j];
            }
        }
    }
}

// Stages one step's inputs into shared memory: the input tiles of `cc` channels from c0 of the block's images
// (zero past the image and for images past N) and the filters of those channels. float32 input goes by cp.async
// (16 bytes where a run of 4 lies inside the row and is aligned, else 4 bytes with zero-fill), so the copies of
// the next step are in flight while this one computes; uint8 input is converted (and divided) on the way.
template <int R, int S, typename TIn>
__device__ __forceinline__ void stage(const TIn* __restrict__ x, float divisor, const float* __restrict__ wblock,
                                      float* s_in, float* s_w, const Layout& L, std::int64_t n0, int p0, int q0,
                                      int c0, int cc, int kb) {
    const int segs_row = L.in_pitch / 4, in_plane = L.in_rows * L.in_pitch;
    const int total = L.images * cc * L.in_rows * segs_row;
    const std::int64_t plane = static_cast<std::int64_t>(L.H) * L.W;
    const bool vec_ok = (L.W % 4 == 0) && (reinterpret_cast<std::uintptr_t>(x) % 16 == 0);
    for (int e = threadIdx.x; e < total; e += blockDim.x) {
        const int seg = e % segs_row;
        int t = e / segs_row;
        const int row = t % L.in_rows;
        t /= L.in_rows;
        const int c = t % cc, im = t / cc;
        const std::int64_t n = n0 + im;
        const int h = p0 + row, col = q0 + 4 * seg;
        float* dst = s_in + (im * L.chunk + c) * in_plane + row * L.in_pitch + 4 * seg;
        const bool row_ok = n < L.N && h < L.H;
        const std::int64_t src = row_ok ? (n * L.C + c0 + c) * plane + static_cast<std::int64_t>(h) * L.W + col : 0;
        if constexpr (std::is_same_v<TIn, float>) {
            if (vec_ok && row_ok && col + 3 < L.W) {
                dev::cp_async_16(dst, x + src, 16);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const bool ok = row_ok && col + j < L.W;
                    dev::cp_async_4(dst + j, ok ? x + src + j : x, ok ? 4 : 0);
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j)
                dst[j] = row_ok && col + j < L.W ? load_input<TIn>(x, src + j, divisor) : 0.f;
        }
    }
    if (L.gather) {  // wblock is w (K, C, R, S): slot j of tap t of channel c is map kb * cpb + j (zero past K)
        for (int e = threadIdx.x; e < cc * R * S * L.cpb; e += blockDim.x) {
            const int slot = e % L.cpb, rest = e / L.cpb, tap = rest % (R * S), c = c0 + rest / (R * S);
            const int k = kb * L.cpb + slot;
            const bool ok = k < L.K;
            dev::cp_async_4(s_w + e, ok ? wblock + (static_cast<std::int64_t>(k) * L.C + c) * (R * S) + tap : wblock,
                            ok ? 4 : 0);
        }
        return;
    }
    // The filters: one contiguous run of cc * R * S * cpb floats (a multiple of 8).
    const float* wsrc = wblock + static_cast<std::int64_t>(c0) * R * S * L.cpb;
    for (int e = threadIdx.x; e < cc * R * S * L.cpb / 4; e += blockDim.x)
        dev::cp_async_16(s_w + 4 * e, wsrc + 4 * e, 16);
}

// A persistent loop over (image group, tile) items, each in steps of `chunk` input channels, double-buffered:
// the copies of step t + 1 (the next chunk, or the next item's first) are issued before step t computes.
template <int R, int S, int CPT, Activation ACT, PoolKind POOL, bool POOLED, typename TIn>
__global__ void __launch_bounds__(CPT == 4 ? kMaxThreadsCpt4 : kMaxThreads, CPT == 4 ? 2 : 1) conv_pool_kernel(const TIn* __restrict__ x, float divisor,
                                                                const float* __restrict__ wt,
                                                                const float* __restrict__ bias,
                                                                float* __restrict__ y, Layout L) {
    constexpr int NV = round_up4(S + 3);  // input values per row a thread reads (4 outputs + S - 1)
    extern __shared__ __align__(16) float smem[];
    const int in_plane = L.in_rows * L.in_pitch;
    const int stage_floats = L.images * L.chunk * in_plane + L.chunk * R * S * L.cpb;
    // Buffer b: inputs [images][chunk][in_rows][in_pitch], then filters [chunk][R][S][cpb].
    auto s_in = [&](int b) { return smem + b * stage_floats; };
    auto s_w = [&](int b) { return smem + b * stage_floats + L.images * L.chunk * in_plane; };

    const int kb = blockIdx.y;
    const float* wblock = L.gather ? wt : wt + static_cast<std::int64_t>(kb) * L.C * R * S * L.cpb;
    const std::int64_t items = static_cast<std::int64_t>(ceil_div(L.N, L.images)) * L.tiles;
    const int chunks = ceil_div(L.C, L.chunk);
    auto origin = [&](std::int64_t item, std::int64_t& n0, int& p0, int& q0) {
        const int tile = static_cast<int>(item % L.tiles);
        n0 = item / L.tiles * L.images;
        p0 = (tile / L.tiles_q) * L.tile_p, q0 = (tile % L.tiles_q) * L.tile_q;
    };

    // Which patch and channels this thread computes: channel group fastest (see the file comment).
    const int groups = L.cpb / CPT;
    const int g = threadIdx.x % groups;
    const int rest = threadIdx.x / groups;
    const int patches_q = L.tile_q / 4, patches = (L.tile_p / 2) * patches_q;
    const int patch = rest % patches;
    const int img = rest / patches;
    const int pr = 2 * (patch / patches_q), qc = 4 * (patch % patches_q);
    const int half = L.cpb / 2;

    std::int64_t item = blockIdx.x;
    if (item >= items) return;
    std::int64_t n0;
    int p0, q0;
    origin(item, n0, p0, q0);
    stage<R, S, TIn>(x, divisor, wblock, s_in(0), s_w(0), L, n0, p0, q0, 0, min(L.chunk, L.C), kb);
    dev::cp_async_commit();
    int buf = 0;
    for (; item < items; item += gridDim.x) {
        float acc[2][4][CPT];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int k = 0; k < CPT; ++k) acc[i][j][k] = 0.f;

        for (int chunk = 0; chunk < chunks; ++chunk) {
            dev::cp_async_wait<0>();
            __syncthreads();  // this step's buffer has landed; the other one is free (its step is computed)
            {
                std::int64_t next = item;
                int next_chunk = chunk + 1;
                if (next_chunk == chunks) next += gridDim.x, next_chunk = 0;
                if (next < items) {
                    std::int64_t nn0;
                    int np0, nq0;
                    origin(next, nn0, np0, nq0);
                    const int c0 = next_chunk * L.chunk;
                    stage<R, S, TIn>(x, divisor, wblock, s_in(buf ^ 1), s_w(buf ^ 1), L, nn0, np0, nq0, c0,
                                     min(L.chunk, L.C - c0), kb);
                }
                dev::cp_async_commit();
            }
            const int cc = min(L.chunk, L.C - chunk * L.chunk);
            const float* xin = s_in(buf) + img * L.chunk * in_plane + pr * L.in_pitch + qc;
            const float* wg = s_w(buf) + 4 * g;
            for (int c = 0; c < cc; ++c) {
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    float in[2][NV];
#pragma unroll
                    for (int i = 0; i < 2; ++i)
#pragma unroll
                        for (int v = 0; v < NV; v += 4) {
                            const float4 t = *reinterpret_cast<const float4*>(xin + (r + i) * L.in_pitch + v);
                            in[i][v] = t.x, in[i][v + 1] = t.y, in[i][v + 2] = t.z, in[i][v + 3] = t.w;
                        }
#pragma unroll
                    for (int s = 0; s < S; ++s) {
                        const float* wp = wg + (r * S + s) * L.cpb;
                        float wv[CPT];
                        const float4 wa = *reinterpret_cast<const float4*>(wp);
                        wv[0] = wa.x, wv[1] = wa.y, wv[2] = wa.z, wv[3] = wa.w;
                        if constexpr (CPT == 8) {
                            const float4 wb = *reinterpret_cast<const float4*>(wp + half);
                            wv[4] = wb.x, wv[5] = wb.y, wv[6] = wb.z, wv[7] = wb.w;
                        }
#pragma unroll
                        for (int i = 0; i < 2; ++i)
#pragma unroll
                            for (int j = 0; j < 4; ++j)
#pragma unroll
                                for (int k = 0; k < CPT; ++k) acc[i][j][k] = fmaf(in[i][j + s], wv[k], acc[i][j][k]);
                    }
                }
                xin += in_plane;
                wg += R * S * L.cpb;
            }
            buf ^= 1;
        }

        // Epilogue: bias, activation, pool the two windows, store what lies inside the output.
        const std::int64_t n = n0 + img;
        if constexpr (!POOLED) {  // pool_size 1: the 2 x 4 patch itself, rows and columns inside P x Q
            store_patch<CPT, ACT>(acc, bias, y, L, n, p0 + pr, q0 + qc, kb * L.cpb, g, half);
            if (item + gridDim.x < items) origin(item + gridDim.x, n0, p0, q0);
            continue;
        }
        const int pp = (p0 + pr) / 2, qq = (q0 + qc) / 2;
        if (n < L.N && pp < L.PP && qq < L.QQ) {
#pragma unroll
            for (int k = 0; k < CPT; ++k) {
                const int kk = kb * L.cpb + (k < 4 ? 4 * g + k : half + 4 * g + k - 4);  // CPT 4: k < 4 only
                if (kk >= L.K) continue;
                const float b = bias ? __ldg(bias + kk) : 0.f;
                float* out = y + ((n * L.K + kk) * L.PP + pp) * static_cast<std::int64_t>(L.QQ) + qq;
                const float left = pool4<ACT, POOL>(acc[0][0][k] + b, acc[0][1][k] + b, acc[1][0][k] + b, acc[1][1][k] + b);
                const float right = pool4<ACT, POOL>(acc[0][2][k] + b, acc[0][3][k] + b, acc[1][2][k] + b, acc[1][3][k] + b);
                if (L.QQ % 2 == 0) {  // qq is even, so the pair is 8-byte aligned: one store fills what a sector gets
                    *reinterpret_cast<float2*>(out) = make_float2(left, right);
                } else {
                    out[0] = left;
                    if (qq + 1 < L.QQ) out[1] = right;
                }
            }
        }
        if (item + gridDim.x < items) origin(item + gridDim.x, n0, p0, q0);
    }
    dev::cp_async_wait<0>();  // nothing left in flight
}

// The grid of 2x2 windows the kernel tiles: the pooling windows, or for pool_size 1 the convolution output
// rounded up to whole windows (the extra row or column is computed on zero-filled input and not stored).
std::int64_t windows_h(const ConvPoolShape& s) { return s.pool == 2 ? s.pooled_h() : (s.H - s.R + 2) / 2; }
std::int64_t windows_w(const ConvPoolShape& s) { return s.pool == 2 ? s.pooled_w() : (s.W - s.S + 2) / 2; }

Layout make_layout(const ConvPoolShape& s, const ConvPoolLaunch& p) {
    Layout L{};
    L.N = static_cast<int>(s.N), L.C = static_cast<int>(s.C), L.H = static_cast<int>(s.H), L.W = static_cast<int>(s.W);
    L.K = static_cast<int>(s.K), L.PP = static_cast<int>(windows_h(s)), L.QQ = static_cast<int>(windows_w(s));
    L.P = static_cast<int>(s.H - s.R + 1), L.Q = static_cast<int>(s.W - s.S + 1);
    L.tile_p = p.tile_p, L.tile_q = p.tile_q;
    L.tiles_q = ceil_div(2 * L.QQ, p.tile_q);
    L.tiles = ceil_div(2 * L.PP, p.tile_p) * L.tiles_q;
    L.images = p.images, L.cpb = p.channels_per_block, L.chunk = p.chunk_channels;
    L.in_rows = p.tile_p + static_cast<int>(s.R) - 1;
    L.in_pitch = round_up4(p.tile_q + static_cast<int>(s.S) - 1);
    return L;
}

}  // namespace

ConvPoolLaunch conv2d_pool_plan(const ConvPoolShape& s, const ConvPoolConfig& cfg) {
    GPUOPT_REQUIRE(s.N >= 1 && s.C >= 1 && s.H >= 1 && s.W >= 1 && s.K >= 1,
                   "conv2d_pool: N, C, H, W and K must be >= 1");
    GPUOPT_REQUIRE(s.R == s.S && (s.R == 3 || s.R == 5),
                   "conv2d_pool/fused: filters must be 3x3 or 5x5 (the sizes the fused kernel is compiled for), got " +
                       std::to_string(s.R) + "x" + std::to_string(s.S));
    GPUOPT_REQUIRE(s.pool == 2 || s.pool == 1,
                   "conv2d_pool/fused: pool_size must be 2 (or 1: no pooling), got " + std::to_string(s.pool));
    GPUOPT_REQUIRE(s.H >= s.R + s.pool - 1 && s.W >= s.S + s.pool - 1,
                   "conv2d_pool: the input (" + std::to_string(s.H) + "x" + std::to_string(s.W) +
                       ") must be larger than the filter, so that at least one pooling window is filled");
    // 32-bit indices inside a block and for shapes; 64-bit for global offsets.
    GPUOPT_REQUIRE(s.C * s.H * s.W < (1LL << 31) && s.K < (1LL << 24) && s.N < (1LL << 40),
                   "conv2d_pool/fused: a single image or filter bank is too large for the kernel's indices");

    ConvPoolLaunch p;
    const int PP = static_cast<int>(windows_h(s)), QQ = static_cast<int>(windows_w(s));
    require_choice(kFusedChannelsPerBlock, cfg.channels_per_block, "conv2d_pool/fused");
    require_choice(kFusedImages, cfg.images, "conv2d_pool/fused");
    p.channels_per_block = cfg.channels_per_block
                               ? cfg.channels_per_block
                               : static_cast<int>(std::min<std::int64_t>((s.K + 7) / 8 * 8, kMaxChannelsPerBlock));
    require_choice(kFusedChannelsPerThread, cfg.channels_per_thread, "conv2d_pool/fused");
    // A short reduction (a first layer: C*R*S of 25) leaves each thread little work per staged image; four
    // channels a thread halve the registers, so two or three blocks share an SM and hide the staging.
    p.channels_per_thread = cfg.channels_per_thread ? cfg.channels_per_thread : (s.C * s.R * s.S <= 32 ? 4 : 8);
    const int groups = p.channels_per_block / p.channels_per_thread;
    p.tile_q = std::min(round_up4(2 * QQ), kMaxTileQ);
    p.tile_q = round_up4(ceil_div(2 * QQ, ceil_div(2 * QQ, p.tile_q)));  // even tiles along q
    const int per_row_pair = (p.tile_q / 4) * groups;
    const int max_threads = p.channels_per_thread == 4 ? kMaxThreadsCpt4 : kMaxThreads;
    const int max_pairs = std::max(1, max_threads / per_row_pair);
    const int pairs = ceil_div(PP, ceil_div(PP, max_pairs));  // even tiles along p
    p.tile_p = 2 * pairs;
    const int per_image = pairs * per_row_pair;
    p.images = static_cast<int>(std::min<std::int64_t>(cfg.images ? cfg.images : std::max(1, kTargetThreads / per_image), s.N));
    p.threads = p.images * per_image;
    GPUOPT_REQUIRE(p.threads <= max_threads, "conv2d_pool/fused: " + std::to_string(p.images) + " images of " +
                                                 std::to_string(per_image) + " threads make a block of " +
                                                 std::to_string(p.threads) + " threads; the kernel's limit is " +
                                                 std::to_string(max_threads));

    const std::int64_t in_plane = static_cast<std::int64_t>(p.tile_p + s.R - 1) * round_up4(p.tile_q + static_cast<int>(s.S) - 1);
    const std::int64_t per_channel = 4 * (p.images * in_plane + s.R * s.S * p.channels_per_block);
    const int max_chunk = static_cast<int>(std::clamp<std::int64_t>(kStageBudget / per_channel, 1, s.C));
    p.chunk_channels = ceil_div(static_cast<int>(s.C), ceil_div(static_cast<int>(s.C), max_chunk));  // even chunks
    p.shared_bytes = 2 * p.chunk_channels * per_channel;  // double-buffered
    const std::int64_t tiles = static_cast<std::int64_t>(ceil_div(2 * PP, p.tile_p)) * ceil_div(2 * QQ, p.tile_q);
    p.blocks = ceil_div<std::int64_t>(s.N, p.images) * tiles;
    // blocks: work items (image group x tile), each block loops over several (a persistent grid, sized at launch).
    return p;
}

namespace {

template <int R, Activation ACT, PoolKind POOL, bool POOLED, typename TIn>
void launch(const TIn* x, float divisor, const float* wt, const float* bias, float* y, const Layout& L,
            const ConvPoolLaunch& p) {
    const auto kernel = at_nonzero_value<kFusedChannelsPerThread>(p.channels_per_thread, [](auto cpt) {
        return conv_pool_kernel<R, R, decltype(cpt)::value, ACT, POOL, POOLED, TIn>;
    });
    require_shared_memory(kernel, static_cast<std::size_t>(p.shared_bytes), "conv2d_pool/fused");
    // As many blocks as stay resident (each loops over items), at most one per item.
    const int sms = multiprocessor_count();
    const int per_sm = resident_blocks_per_sm(kernel, p.threads, static_cast<std::size_t>(p.shared_bytes));
    const int kblocks = ceil_div(L.K, L.cpb);
    const std::int64_t resident = std::max<std::int64_t>(1, static_cast<std::int64_t>(sms) * std::max(per_sm, 1) / kblocks);
    const dim3 grid(static_cast<unsigned>(std::min(p.blocks, resident)), static_cast<unsigned>(kblocks));
    kernel<<<grid, p.threads, p.shared_bytes, current_stream()>>>(x, divisor, wt, bias, y, L);
    GPUOPT_CHECK_LAUNCH("conv_pool_kernel");
}

template <int R, Activation ACT, PoolKind POOL, bool POOLED = true>
void dispatch_input(const void* x, InputType t, float divisor, const float* wt, const float* bias, float* y,
                    const Layout& L, const ConvPoolLaunch& p) {
    if (t == InputType::Uint8)
        launch<R, ACT, POOL, POOLED>(static_cast<const std::uint8_t*>(x), divisor, wt, bias, y, L, p);
    else
        launch<R, ACT, POOL, POOLED>(static_cast<const float*>(x), divisor, wt, bias, y, L, p);
}

template <int R, Activation ACT>
void dispatch_pool(PoolKind pool, const void* x, InputType t, float divisor, const float* wt, const float* bias,
                   float* y, const Layout& L, const ConvPoolLaunch& p, bool pooled) {
    if (!pooled)  // pool_size 1: the kind does not matter
        dispatch_input<R, ACT, PoolKind::Max, false>(x, t, divisor, wt, bias, y, L, p);
    else if (pool == PoolKind::Max)
        dispatch_input<R, ACT, PoolKind::Max>(x, t, divisor, wt, bias, y, L, p);
    else
        dispatch_input<R, ACT, PoolKind::Average>(x, t, divisor, wt, bias, y, L, p);
}

template <int R>
void dispatch_act(Activation act, PoolKind pool, const void* x, InputType t, float divisor, const float* wt,
                  const float* bias, float* y, const Layout& L, const ConvPoolLaunch& p, bool pooled) {
    switch (act) {
        case Activation::Relu: return dispatch_pool<R, Activation::Relu>(pool, x, t, divisor, wt, bias, y, L, p, pooled);
        case Activation::Tanh: return dispatch_pool<R, Activation::Tanh>(pool, x, t, divisor, wt, bias, y, L, p, pooled);
        default: return dispatch_pool<R, Activation::None>(pool, x, t, divisor, wt, bias, y, L, p, pooled);
    }
}

}  // namespace

void conv2d_pool_fused(const void* x, InputType input_type, float input_divisor, const float* w, const float* bias,
                       float* y, const ConvPoolShape& s, Activation act, PoolKind pool, const ConvPoolConfig& cfg) {
    const ConvPoolLaunch p = conv2d_pool_plan(s, cfg);
    GPUOPT_REQUIRE(input_type == InputType::Float32 ? input_divisor == 1.f : input_divisor > 0.f,
                   "conv2d_pool: input_divisor applies to uint8 input (> 0); float32 input takes 1.0");
    Layout L = make_layout(s, p);
    const int RS = static_cast<int>(s.R * s.S);
    const std::int64_t arranged = static_cast<std::int64_t>(ceil_div(L.K, L.cpb)) * L.C * RS * L.cpb;
    L.gather = arranged <= kGatherMaxFloats;
    std::optional<Scratch> scratch;  // the arranged bank (scratch.hpp), where the kernel does not gather it
    const float* wt = w;
    if (!L.gather) {
        scratch.emplace(std::initializer_list<std::size_t>{sizeof(float) * static_cast<std::size_t>(arranged)});
        float* arranged_w = scratch->get<float>(0);
        arrange_filters<<<grid_for(arranged, 256), 256, 0, current_stream()>>>(w, arranged_w, L.K, L.C, RS, L.cpb, 1,
                                                                                arranged);
        GPUOPT_CHECK_LAUNCH("arrange_filters");
        wt = arranged_w;
    }
    if (s.R == 3)
        dispatch_act<3>(act, pool, x, input_type, input_divisor, wt, bias, y, L, p, s.pool == 2);
    else
        dispatch_act<5>(act, pool, x, input_type, input_divisor, wt, bias, y, L, p, s.pool == 2);
}

}  // namespace gpuopt::nn
