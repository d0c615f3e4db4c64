// conv2d variants of the ECE408 Fashion-MNIST report (../shared/seeds/ece408-fashion-mnist-conv-report.txt),
// generalised to every shape: any N, C, H, W, K, R, S, stride (u, v), padding (ph, pw), an optional bias
// and the fused activation, with the semantics of conv2d_cpu (conv2d.hpp).
//
//   tiled              Optimization 3: per block a T x T tile of outputs y[n][k][p0.., q0..]; per input
//                      channel the block stages the input tile ((T-1)*u + R) x ((T-1)*v + S) (the report's
//                      (TILE_WIDTH + K - 1)^2 generalised to strides) and the R x S filter slice w[k][c] in
//                      shared memory, then every thread sums its window from shared memory.
//   tiled_unrolled     Optimizations 4 & 5: the same kernel with __restrict__ pointers and the filter loops
//                      fully unrolled for 1x1, 3x3, 5x5 and 7x7 (template instantiations; any other R x S
//                      runs a generic instantiation with runtime loop bounds).
//   tiled_channels     Optimizations 6 & 7: a third block dimension over input channels: thread z of the
//                      block sums channels z, z + Z, z + 2Z, ... (Z = channels_per_block) and adds its partial
//                      sum into y with atomicAdd.
//   tiled_corner_turn  Optimization 8, on top of tiled_unrolled: the filters of a chunk of channels
//                      (w[k][c0 .. c0+32][R][S], contiguous in memory) are read by consecutive threads from
//                      consecutive addresses (coalesced) and written "corner-turned" into shared memory, tap
//                      major and channel minor (ws[r*S + s][c]), instead of one R*S slice per channel.
//   unroll_constmem    Optimizations 1 & 2: y[n] = W_unrolled (K x C*R*S) * X_unrolled (C*R*S x P*Q) with the
//                      unrolled weights in __constant__ memory; X_unrolled is never stored: each thread
//                      gathers its column (n, p, q) of it by index and multiplies it with the weights of
//                      several output maps.
//
// Notes that matter to callers:
// * Tiles never exceed the output: the block is min(T, Q) x min(T, P) (x Z) threads and the staged tile
//   shrinks with it, so a 7x7 output runs 7x7 blocks whatever T is. T x T (x Z) > 1024 threads is rejected
//   up front (even when the output would shrink it), as is a tile that does not fit the GPU's shared memory
//   (require_shared_memory names the limit).
// * tiled_channels: atomics and a nonlinearity do not commute, so y is initialised first (bias, or zero)
//   by a fill kernel, the main kernel only adds partial sums, and the activation (when not "none") runs as
//   a second small elementwise kernel after every channel has been added. Float atomics make the order of
//   those additions nondeterministic: results agree with the reference to ~1e-6 relative but are not
//   bitwise reproducible from run to run. The other variants are deterministic.
// * unroll_constmem: the constant bank (64 KB) is one per process and device, so filter banks over
//   65536 bytes (K*C*R*S*4) are rejected with InvalidArgument, and a mutex makes "copy the weights in,
//   launch" one step: concurrent calls from several host threads are serialised. The copy and the kernel
//   are queued on the call's stream, and a call on another stream than the last one's first waits there
//   for the last kernel (an event), so a later call's copy cannot overwrite the weights before an earlier
//   call's kernel has finished.
// * Grids of the tiled kernels: x over the output tiles of a map, y over k, z over n; y and z are capped at
//   65535 blocks and the kernels loop over the rest, so any N and K run. unroll_constmem: x over the
//   columns (n, p, q), grid-stride, y over groups of output maps.
// * Registers: the tiled kernels are bounded for 1024-thread blocks; the non-atomic ones at 2 blocks of
//   1024 per SM (<= 32 registers, no spills with CUDA 13 for sm_80/sm_90), the atomic one at 1 (it needs
//   ~45 registers for the unrolled 3x3..7x7 sums and would spill at 32).

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <string>

#include "../common/launch.cuh"
#include "conv2d_cuda.hpp"

namespace gpuopt::conv {

namespace {

using i64 = std::int64_t;

constexpr int kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y and gridDim.z
constexpr int kMaxBlockThreads = 1024;

// ------------------------------------------------------------------------------------------------
// Shared pieces of the tiled kernels.

// Pointer types of a kernel: the report's Optimization 4 is exactly "add __restrict__".
template <bool kRestrict>
struct Pointers {
    using In = const float*;
    using Out = float*;
};
template <>
struct Pointers<true> {
    using In = const float* __restrict__;
    using Out = float* __restrict__;
};

// How a block stages the filters in shared memory.
enum class WeightStaging {
    PerChannel,  // ws[z][r*S + s]: the slice w[k][c] of each z-slice's channel, loaded per channel
    CornerTurn,  // ws[(r*S + s) * pad + j]: w[k][c0 + j] for a chunk of channels, loaded once per chunk
};

// Corner turning stages this many channels per chunk for the unrolled filter sizes (R*S <= 49, so at
// most 49 * 33 floats); the generic instantiation picks a chunk that keeps the stage under 8 KiB.
constexpr int kCornerChunk = 32;
constexpr int kCornerPad = kCornerChunk + 1;  // odd row pitch: the transposed writes hit 32 distinct banks
constexpr int kCornerStageFloats = 2048;

// The kernels' view of the problem: sizes and positions inside an image are 32-bit (conv_params checks
// that they fit), offsets into the batch 64-bit. Fewer 64-bit values, fewer registers.
struct ConvParams {
    int N, K, C, H, W, R, S, u, v, ph, pw;
    int P, Q;  // output extent
    Activation act;
};

struct TiledParams : ConvParams {
    int TH, TW;      // staged input tile: (blockDim.y-1)*u + R rows, (blockDim.x-1)*v + S columns
    int tiles_q;     // tiles along q; blockIdx.x = tile_p * tiles_q + tile_q
    int chunk, pad;  // corner turning: channels per staged chunk, pitch of a tap's row in ws
};

// The input tile of one channel, rows row0 .. row0+TH-1 and columns col0 .. col0+TW-1; positions in the
// zero padding (or past the image) are stored as 0 so the sums need no bounds tests. Threads (tx, ty)
// of a bw x bh slice stride over it two-dimensionally: consecutive tx read consecutive columns.
__device__ __forceinline__ void load_input_tile(float* xs, const float* xc, int row0, int col0, int TH, int TW, int H,
                                                int W, int tx, int ty, int bw, int bh) {
    for (int i = ty; i < TH; i += bh) {
        const int row = row0 + i;
        const bool row_ok = row >= 0 && row < H;
        const i64 row_offset = static_cast<i64>(row) * W;
        for (int j = tx; j < TW; j += bw) {
            const int col = col0 + j;
            xs[i * TW + j] = (row_ok && col >= 0 && col < W) ? xc[row_offset + col] : 0.f;
        }
    }
}

// One channel's R*S filter slice (contiguous in w): thread t loads taps t, t + n, ... (coalesced; the
// report's "one weight per thread").
__device__ __forceinline__ void load_filter_slice(float* ws, const float* wc, int RS, int t, int n) {
    for (int i = t; i < RS; i += n) ws[i] = wc[i];
}

// Corner turning: w[k][c0 .. c0+count) is count*R*S contiguous floats, read by consecutive threads at
// consecutive addresses and written transposed, tap-major: ws[tap * pad + channel].
template <int kRS>
__device__ __forceinline__ void load_filters_corner_turned(float* ws, const float* wk, int count, int RS_runtime,
                                                           int pad, int t, int n) {
    const int RS = kRS > 0 ? kRS : RS_runtime;
    const int total = count * RS;
    for (int i = t; i < total; i += n) {
        const int j = i / RS;  // channel within the chunk (a constant divisor when unrolled)
        const int tap = i - j * RS;
        ws[tap * pad + j] = wk[i];
    }
}

// acc += sum_{r,s} window[r*TW + s] * filter[(r*S + s) * wstride]: the thread's window in the staged input
// tile times the staged filter. Fully unrolled when R and S are template constants (kUnroll); the
// baseline `tiled` keeps the report's plain loops (#pragma unroll 1).
template <bool kUnroll, int KR, int KS>
__device__ __forceinline__ float window_dot(float acc, const float* window, int TW, const float* filter, int wstride,
                                            int R_runtime, int S_runtime) {
    const int R = KR > 0 ? KR : R_runtime;
    const int S = KS > 0 ? KS : S_runtime;
    if constexpr (kUnroll) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int s = 0; s < S; ++s) acc += window[r * TW + s] * filter[(r * S + s) * wstride];
        }
    } else {
#pragma unroll 1
        for (int r = 0; r < R; ++r) {
#pragma unroll 1
            for (int s = 0; s < S; ++s) acc += window[r * TW + s] * filter[(r * S + s) * wstride];
        }
    }
    return acc;
}

// The epilogue every variant shares: bias, activation, store; or, for the channel-parallel variant,
// only the atomic add of a partial sum (bias and activation run as separate kernels).
template <bool kAtomic, typename OutPtr, typename InPtr>
__device__ __forceinline__ void write_output(OutPtr y, i64 index, float acc, InPtr bias, i64 k, Activation act) {
    if constexpr (kAtomic) {
        atomicAdd(y + index, acc);
    } else {
        if (bias != nullptr) acc += bias[k];
        y[index] = apply_activation(acc, act);
    }
}

// ------------------------------------------------------------------------------------------------
// The tiled kernel, one template for the four tiled variants.
//
// Block (bw, bh, Z): thread (tx, ty, tz) computes y[n][k][tile_p*bh + ty][tile_q*bw + tx]; with Z > 1
// (tiled_channels) thread z sums channels z, z+Z, ... and adds its part atomically. Dynamic shared
// memory: Z input tiles of TH x TW, then the filters (Z slices of R*S, or one corner-turned chunk).
//
//   kFast   __restrict__ pointers and unrolled filter loops (everything but `tiled`)
//   KR, KS  filter size as template constants, 0 for runtime R, S
template <bool kFast, int KR, int KS, WeightStaging kStaging, bool kAtomic>
__global__ void __launch_bounds__(kMaxBlockThreads, kAtomic ? 1 : 2)
    conv2d_tiled_kernel(typename Pointers<kFast>::In x, typename Pointers<kFast>::In w,
                        typename Pointers<kFast>::In bias, typename Pointers<kFast>::Out y, TiledParams a) {
    extern __shared__ float smem[];
    const int C = a.C;
    const int R = KR > 0 ? KR : a.R;
    const int S = KS > 0 ? KS : a.S;
    const int RS = R * S;
    const i64 HW = static_cast<i64>(a.H) * a.W;

    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    const int bw = blockDim.x, bh = blockDim.y, Z = blockDim.z;
    const int slice_thread = ty * bw + tx;  // index within this z-slice
    const int slice_threads = bw * bh;
    const int block_thread = tz * slice_threads + slice_thread;
    const int block_threads = Z * slice_threads;

    const int tile_elems = a.TH * a.TW;
    float* xs = smem + tz * tile_elems;  // this z-slice's input tile
    float* ws = smem + Z * tile_elems;   // the filters
    float* w_slice = ws + tz * RS;       // per-channel staging: this z-slice's filter slice

    const int tile_p = blockIdx.x / a.tiles_q;
    const int tile_q = blockIdx.x - tile_p * a.tiles_q;
    const int p = tile_p * bh + ty, q = tile_q * bw + tx;
    const bool active = p < a.P && q < a.Q;
    const int row0 = tile_p * bh * a.u - a.ph;  // input position of the tile's corner (< 0 in the padding)
    const int col0 = tile_q * bw * a.v - a.pw;
    const float* window = xs + ty * a.u * a.TW + tx * a.v;  // this thread's window in the staged tile

    constexpr bool kCorner = kStaging == WeightStaging::CornerTurn;
    const int chunk = (kCorner && KR > 0) ? kCornerChunk : a.chunk;
    const int pad = (kCorner && KR > 0) ? kCornerPad : a.pad;

    for (int n = blockIdx.z; n < a.N; n += gridDim.z) {
        const float* xn = x + static_cast<i64>(n) * C * HW;  // image n
        for (int k = blockIdx.y; k < a.K; k += gridDim.y) {
            const float* wk = w + static_cast<i64>(k) * C * RS;  // filter bank of map k
            float acc = 0.f;
            int chunk_pos = 0;  // corner turning: this channel's column in the staged chunk
            // Every thread runs the same number of iterations (the barriers need it); a z-slice whose
            // channel is past C stages nothing and adds nothing.
            for (int c0 = 0; c0 < C; c0 += Z) {
                const int c = c0 + tz;
                const bool has_channel = c < C;
                if constexpr (kCorner) {
                    if (chunk_pos == 0)
                        load_filters_corner_turned<KR * KS>(ws, wk + static_cast<i64>(c0) * RS, min(chunk, C - c0), RS,
                                                            pad, block_thread, block_threads);
                }
                if (has_channel) {
                    load_input_tile(xs, xn + c * HW, row0, col0, a.TH, a.TW, a.H, a.W, tx, ty, bw, bh);
                    if constexpr (!kCorner)
                        load_filter_slice(w_slice, wk + static_cast<i64>(c) * RS, RS, slice_thread, slice_threads);
                }
                __syncthreads();
                if (active && has_channel) {
                    if constexpr (kCorner)
                        acc = window_dot<kFast, KR, KS>(acc, window, a.TW, ws + chunk_pos, pad, R, S);
                    else
                        acc = window_dot<kFast, KR, KS>(acc, window, a.TW, w_slice, 1, R, S);
                }
                __syncthreads();
                if constexpr (kCorner) {
                    if (++chunk_pos == chunk) chunk_pos = 0;
                }
            }
            if (active && tz < C)
                write_output<kAtomic>(y, ((static_cast<i64>(n) * a.K + k) * a.P + p) * a.Q + q, acc, bias, k, a.act);
        }
    }
}

// tiled_channels' prologue and epilogue: y = bias[k] (the zero case is a memset) before the atomic
// sums, y = act(y) after them.
__global__ void fill_bias_kernel(const float* __restrict__ bias, float* __restrict__ y, i64 total, i64 K, i64 PQ) {
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<i64>(gridDim.x) * blockDim.x)
        y[i] = bias[(i / PQ) % K];
}

__global__ void activation_kernel(float* __restrict__ y, i64 total, Activation act) {
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<i64>(gridDim.x) * blockDim.x)
        y[i] = apply_activation(y[i], act);
}

// ------------------------------------------------------------------------------------------------
// Host side of the tiled variants.

// (__restrict__ qualifies the parameters themselves, so it is not part of the function's type.)
using TiledKernel = void (*)(const float*, const float*, const float*, float*, TiledParams);

// The instantiation for this filter size: unrolled 1x1, 3x3, 5x5, 7x7, else the generic one. The
// baseline (kFast = false) has only the generic one.
template <bool kFast, WeightStaging kStaging, bool kAtomic>
TiledKernel select_tiled_kernel(i64 R, i64 S) {
    if constexpr (kFast) {
        if (R == 1 && S == 1) return conv2d_tiled_kernel<kFast, 1, 1, kStaging, kAtomic>;
        if (R == 3 && S == 3) return conv2d_tiled_kernel<kFast, 3, 3, kStaging, kAtomic>;
        if (R == 5 && S == 5) return conv2d_tiled_kernel<kFast, 5, 5, kStaging, kAtomic>;
        if (R == 7 && S == 7) return conv2d_tiled_kernel<kFast, 7, 7, kStaging, kAtomic>;
    }
    return conv2d_tiled_kernel<kFast, 0, 0, kStaging, kAtomic>;
}

bool unrolled_filter(i64 R, i64 S) { return R == S && (R == 1 || R == 3 || R == 5 || R == 7); }

void require_pointers(const float* x, const float* w, const float* y, const char* name) {
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr,
                   std::string("conv2d ") + name + ": x, w and y must be device pointers");
}

// The validated shape as the kernels take it.
ConvParams conv_params(const Conv2dShape& s, Activation act, const std::string& what) {
    const i64 P = s.P(), Q = s.Q();
    GPUOPT_REQUIRE(s.N <= INT_MAX && s.K <= INT_MAX && s.C <= INT_MAX && s.H + 2 * s.pad_h + s.stride_h <= INT_MAX &&
                       s.W + 2 * s.pad_w + s.stride_w <= INT_MAX && P * Q <= INT_MAX && s.R * s.S <= INT_MAX,
                   what + ": a dimension is too large for 32-bit positions (N, K, C, the padded image, P*Q, R*S "
                          "must be < 2^31)");
    ConvParams g{};
    g.N = static_cast<int>(s.N);
    g.K = static_cast<int>(s.K);
    g.C = static_cast<int>(s.C);
    g.H = static_cast<int>(s.H);
    g.W = static_cast<int>(s.W);
    g.R = static_cast<int>(s.R);
    g.S = static_cast<int>(s.S);
    g.u = static_cast<int>(s.stride_h);
    g.v = static_cast<int>(s.stride_w);
    g.ph = static_cast<int>(s.pad_h);
    g.pw = static_cast<int>(s.pad_w);
    g.P = static_cast<int>(P);
    g.Q = static_cast<int>(Q);
    g.act = act;
    return g;
}

// What a tiled variant launches on a shape: the kernels' parameters and the block geometry.
struct TiledLaunch {
    TiledParams params{};
    int bw = 0, bh = 0, Z = 1;
    i64 tiles = 0, smem_floats = 0;
    std::string what;  // the variant and its parameters, for messages
};

// Validates shape and parameters and plans one tiled variant: host only (no CUDA call), so it is also the
// variant's check before anything is copied to the device.
template <WeightStaging kStaging, bool kAtomic>
TiledLaunch tiled_launch(const Conv2dShape& s, Activation act, int tile_width, int channels_per_block, const char* name) {
    s.validate();
    TiledLaunch launch;
    std::string& what = launch.what;
    what = std::string("conv2d ") + name + " (tile_width=" + std::to_string(tile_width) +
           (kAtomic ? ", channels_per_block=" + std::to_string(channels_per_block) : std::string()) + ")";
    require_choice(kEce408TileWidths, tile_width, what);
    if (kAtomic) require_choice(kEce408ChannelsPerBlock, channels_per_block, what);
    const i64 threads = static_cast<i64>(tile_width) * tile_width * channels_per_block;
    GPUOPT_REQUIRE(threads <= kMaxBlockThreads,
                   what + ": a block of " + std::to_string(tile_width) + " x " + std::to_string(tile_width) +
                       (kAtomic ? " x " + std::to_string(channels_per_block) : std::string()) + " = " +
                       std::to_string(threads) + " threads; the limit is 1024 threads per block");

    TiledParams& params = launch.params;
    static_cast<ConvParams&>(params) = conv_params(s, act, what);
    const i64 P = params.P, Q = params.Q;
    // The tile never exceeds the output map.
    const int bw = static_cast<int>(std::min<i64>(tile_width, Q));
    const int bh = static_cast<int>(std::min<i64>(tile_width, P));
    const int Z = kAtomic ? channels_per_block : 1;
    const i64 TH = (bh - 1) * s.stride_h + s.R;
    const i64 TW = (bw - 1) * s.stride_w + s.S;
    const i64 RS = s.R * s.S;
    const i64 tiles_q = ceil_div<i64>(Q, bw), tiles = ceil_div<i64>(P, bh) * tiles_q;

    params.chunk = 1;
    params.pad = 1;
    i64 filter_floats = Z * RS;
    if constexpr (kStaging == WeightStaging::CornerTurn) {
        if (unrolled_filter(s.R, s.S)) {
            params.chunk = kCornerChunk;
            params.pad = kCornerPad;
        } else {
            params.chunk = static_cast<int>(std::clamp<i64>(kCornerStageFloats / RS, 1, std::min<i64>(kCornerChunk, s.C)));
            params.pad = params.chunk | 1;
        }
        filter_floats = RS * params.pad;
    }
    const i64 smem_floats = Z * TH * TW + filter_floats;
    // Reject what no GPU could stage before narrowing to int (the exact limit is checked below).
    GPUOPT_REQUIRE(smem_floats <= (i64{1} << 28) && tiles <= INT_MAX,
                   what + ": needs " + std::to_string(smem_floats * 4) + " bytes of shared memory per block");
    params.TH = static_cast<int>(TH);
    params.TW = static_cast<int>(TW);
    params.tiles_q = static_cast<int>(tiles_q);
    launch.bw = bw, launch.bh = bh, launch.Z = Z;
    launch.tiles = tiles;
    launch.smem_floats = smem_floats;
    return launch;
}

// Checks, plans and launches one tiled variant.
template <bool kFast, WeightStaging kStaging, bool kAtomic>
void launch_tiled(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s, Activation act,
                  int tile_width, int channels_per_block, const char* name) {
    const TiledLaunch launch = tiled_launch<kStaging, kAtomic>(s, act, tile_width, channels_per_block, name);
    require_pointers(x, w, y, name);
    const auto kernel = select_tiled_kernel<kFast, kStaging, kAtomic>(s.R, s.S);
    const std::size_t smem = static_cast<std::size_t>(launch.smem_floats) * sizeof(float);
    require_shared_memory(kernel, smem, launch.what.c_str());

    const dim3 block(static_cast<unsigned>(launch.bw), static_cast<unsigned>(launch.bh), static_cast<unsigned>(launch.Z));
    const dim3 grid(static_cast<unsigned>(launch.tiles), static_cast<unsigned>(std::min<i64>(s.K, kMaxGridYZ)),
                    static_cast<unsigned>(std::min<i64>(s.N, kMaxGridYZ)));
    const TiledParams& params = launch.params;
    const i64 PQ = static_cast<i64>(params.P) * params.Q, total = s.N * s.K * PQ;

    if constexpr (kAtomic) {
        if (bias != nullptr) {
            fill_bias_kernel<<<grid_for(total, 256), 256, 0, current_stream()>>>(bias, y, total, s.K, PQ);
            GPUOPT_CHECK_LAUNCH("fill_bias_kernel");
        } else {
            GPUOPT_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<std::size_t>(total) * sizeof(float), current_stream()));
        }
    }
    kernel<<<grid, block, smem, current_stream()>>>(x, w, bias, y, params);
    GPUOPT_CHECK_LAUNCH("conv2d_tiled_kernel");
    if constexpr (kAtomic) {
        if (act != Activation::None) {
            activation_kernel<<<grid_for(total, 256), 256, 0, current_stream()>>>(y, total, act);
            GPUOPT_CHECK_LAUNCH("activation_kernel");
        }
    }
}

// ------------------------------------------------------------------------------------------------
// unroll_constmem.

constexpr int kConstantFloats = static_cast<int>(kConstantWeightBytes / sizeof(float));
__constant__ float c_weights[kConstantFloats];  // W_unrolled, row k = w[k] flattened (c, r, s)

constexpr int kConstmemThreads = 256;

// The constant bank's users, in order: the mutex makes copy + launch one step; `done` is recorded after the last
// kernel that read the bank (on `stream`, outside any capture), which a call on another stream waits for.
struct ConstantBank {
    std::mutex mutex;
    cudaEvent_t done = nullptr;
    cudaStream_t stream = nullptr;
};
ConstantBank& constant_bank() {
    static ConstantBank* bank = new ConstantBank;  // never destroyed (driver shutdown)
    return *bank;
}

// Thread j of the 1-D grid owns column j = (n, p, q) of X_unrolled (q fastest: a warp writes consecutive
// outputs) and rows k0 .. k0+KB-1 of W_unrolled (blockIdx.y): it walks the column once, row index
// crs = (c*R + r)*S + s, gathering each element from x by index (0 in the padding), and multiplies it
// with KB weights. The weights a warp reads are the same for all its threads: constant-cache broadcasts.
// When KB does not divide K the last group starts at K - KB (the launcher picks KB <= K), so every row
// read is a real filter; it writes only the maps the groups before it did not.
template <int KB>
__global__ void __launch_bounds__(kConstmemThreads)
    conv2d_unroll_constmem_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                                  ConvParams a) {
    const int CRS = a.C * a.R * a.S;
    const i64 HW = static_cast<i64>(a.H) * a.W;
    const i64 columns = static_cast<i64>(a.N) * a.P * a.Q;
    const int first_new = static_cast<int>(blockIdx.y) * KB;
    const int k0 = min(first_new, a.K - KB);
    const float* w_rows = c_weights + k0 * CRS;

    for (i64 j = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; j < columns;
         j += static_cast<i64>(gridDim.x) * blockDim.x) {
        const int q = static_cast<int>(j % a.Q);
        const i64 pn = j / a.Q;
        const int p = static_cast<int>(pn % a.P);
        const int n = static_cast<int>(pn / a.P);
        const int row0 = p * a.u - a.ph, col0 = q * a.v - a.pw;
        float acc[KB];
#pragma unroll
        for (int kk = 0; kk < KB; ++kk) acc[kk] = 0.f;
        const float* xc = x + static_cast<i64>(n) * a.C * HW;
        const float* wcol = w_rows;  // column crs of this thread's rows
        for (int c = 0; c < a.C; ++c, xc += HW) {
            for (int r = 0; r < a.R; ++r) {
                const int in_row = row0 + r;
                const bool row_ok = in_row >= 0 && in_row < a.H;
                for (int s = 0; s < a.S; ++s, ++wcol) {
                    const int in_col = col0 + s;
                    const float xv =
                        (row_ok && in_col >= 0 && in_col < a.W) ? xc[static_cast<i64>(in_row) * a.W + in_col] : 0.f;
#pragma unroll
                    for (int kk = 0; kk < KB; ++kk) acc[kk] += wcol[kk * CRS] * xv;
                }
            }
        }
#pragma unroll
        for (int kk = 0; kk < KB; ++kk) {
            const int k = k0 + kk;
            if (k >= first_new)
                write_output<false>(y, ((static_cast<i64>(n) * a.K + k) * a.P + p) * a.Q + q, acc[kk], bias, k, a.act);
        }
    }
}

template <int KB>
void launch_unroll_constmem(const float* x, const float* bias, float* y, const ConvParams& g) {
    const i64 columns = static_cast<i64>(g.N) * g.P * g.Q;
    const dim3 grid(grid_for(columns, kConstmemThreads), static_cast<unsigned>(ceil_div(g.K, KB)));
    conv2d_unroll_constmem_kernel<KB><<<grid, kConstmemThreads, 0, current_stream()>>>(x, bias, y, g);
    GPUOPT_CHECK_LAUNCH("conv2d_unroll_constmem_kernel");
}

}  // namespace

void conv2d_tiled_check(const Conv2dShape& s, int tile_width) {
    tiled_launch<WeightStaging::PerChannel, false>(s, Activation::None, tile_width, 1, "tiled");
}

void conv2d_tiled_unrolled_check(const Conv2dShape& s, int tile_width) {
    tiled_launch<WeightStaging::PerChannel, false>(s, Activation::None, tile_width, 1, "tiled_unrolled");
}

void conv2d_tiled_channels_check(const Conv2dShape& s, int tile_width, int channels_per_block) {
    tiled_launch<WeightStaging::PerChannel, true>(s, Activation::None, tile_width, channels_per_block, "tiled_channels");
}

void conv2d_tiled_corner_turn_check(const Conv2dShape& s, int tile_width) {
    tiled_launch<WeightStaging::CornerTurn, false>(s, Activation::None, tile_width, 1, "tiled_corner_turn");
}

void conv2d_tiled(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s, Activation act,
                  int tile_width) {
    launch_tiled<false, WeightStaging::PerChannel, false>(x, w, bias, y, s, act, tile_width, 1, "tiled");
}

void conv2d_tiled_unrolled(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                           Activation act, int tile_width) {
    launch_tiled<true, WeightStaging::PerChannel, false>(x, w, bias, y, s, act, tile_width, 1, "tiled_unrolled");
}

void conv2d_tiled_channels(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                           Activation act, int tile_width, int channels_per_block) {
    launch_tiled<true, WeightStaging::PerChannel, true>(x, w, bias, y, s, act, tile_width, channels_per_block,
                                                        "tiled_channels");
}

void conv2d_tiled_corner_turn(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                              Activation act, int tile_width) {
    launch_tiled<true, WeightStaging::CornerTurn, false>(x, w, bias, y, s, act, tile_width, 1, "tiled_corner_turn");
}

void conv2d_unroll_constmem_check(const Conv2dShape& s) {
    s.validate();
    // Overflow-safe: every factor is positive, compare step by step against the limit.
    const i64 limit = kConstantWeightBytes / static_cast<i64>(sizeof(float));
    const bool fits = s.K <= limit && s.C <= limit / s.K && s.R <= limit / (s.K * s.C) &&
                      s.S <= limit / (s.K * s.C * s.R);
    if (!fits) {
        // The size in bytes where it is representable (each factor is positive; K*C*R*S may overflow).
        const bool exact = s.C <= INT64_MAX / 4 / s.K && s.R <= INT64_MAX / 4 / (s.K * s.C) &&
                           s.S <= INT64_MAX / 4 / (s.K * s.C * s.R);
        const std::string bytes = exact ? std::to_string(4 * s.K * s.C * s.R * s.S) : std::string("over 2^63");
        GPUOPT_REQUIRE(false, "conv2d unroll_constmem: the filter bank (K*C*R*S = " + std::to_string(s.K) + "*" +
                                  std::to_string(s.C) + "*" + std::to_string(s.R) + "*" + std::to_string(s.S) +
                                  " floats = " + bytes + " bytes) does not fit the 65536-byte (64 KB) constant "
                                  "memory; use a tiled variant");
    }
    conv_params(s, Activation::None, "conv2d unroll_constmem");
}

void conv2d_unroll_constmem(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                            Activation act) {
    conv2d_unroll_constmem_check(s);
    require_pointers(x, w, y, "unroll_constmem");
    const ConvParams g = conv_params(s, act, "conv2d unroll_constmem");
    const std::size_t bytes = static_cast<std::size_t>(s.K * s.C * s.R * s.S) * sizeof(float);

    // The constant bank is process-wide: the copy and the launch that reads it are one step.
    ConstantBank& bank = constant_bank();
    std::lock_guard<std::mutex> lock(bank.mutex);
    const cudaStream_t on = current_stream();
    if (!bank.done) GPUOPT_CUDA_CHECK(cudaEventCreateWithFlags(&bank.done, cudaEventDisableTiming));
    else if (bank.stream != on) GPUOPT_CUDA_CHECK(cudaStreamWaitEvent(on, bank.done, 0));
    GPUOPT_CUDA_CHECK(cudaMemcpyToSymbolAsync(c_weights, w, bytes, 0, cudaMemcpyDeviceToDevice, on));
    // Output maps per thread: the largest of 8, 4, 2, 1 that is <= K.
    if (g.K >= 8)
        launch_unroll_constmem<8>(x, bias, y, g);
    else if (g.K >= 4)
        launch_unroll_constmem<4>(x, bias, y, g);
    else if (g.K >= 2)
        launch_unroll_constmem<2>(x, bias, y, g);
    else
        launch_unroll_constmem<1>(x, bias, y, g);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    GPUOPT_CUDA_CHECK(cudaStreamIsCapturing(on, &capture));
    if (capture == cudaStreamCaptureStatusNone) {  // (in a capture the next call runs on the same stream anyway)
        GPUOPT_CUDA_CHECK(cudaEventRecord(bank.done, on));
        bank.stream = on;
    }
}

}  // namespace gpuopt::conv
