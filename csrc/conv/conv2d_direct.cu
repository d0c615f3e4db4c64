// conv2d "direct_regblock": gpuopt's register-blocked direct convolution, for layers whose filter
// window (C*R*S taps) is too short for a GEMM to pay off: an implicit GEMM with C*R*S = 27 (CS6235
// conf3: 3 channels, 3x3) spends its time loading and storing tiles, not multiplying. Here the
// arithmetic is the direct loop of the reports, arranged so that every load feeds many FMAs.
//
// Work of a block (kThreads = 128 threads):
//   * a run of up to kThreads * PT consecutive output pixels pos = p*Q + q of ONE image n: with
//     Q < kThreads * PT, runs cover whole rows and may start and end mid-row (the last run of an image
//     is partial); with wider rows, each run is a segment of one row (the last segment is partial), so
//     the staged input never needs more than one run's columns, however wide the image;
//   * the output maps [k_begin, k_begin + maps_per_block) (blockIdx.y), taken KT at a time.
// Thread t owns the pixels pos0 + t + i*kThreads (i < PT) and KT maps: a PT x KT register tile. The
// stores of one (i, map) by a warp are 32 consecutive floats of y[n][k]: coalesced.
//
// Shared memory:
//   ws  the filters of the KT maps for a chunk of CB channels, tap-major: ws[(c*R*S + tap)*KT + j],
//       so the KT weights of one tap are KT/4 float4 broadcasts.
//   xs  the input rows the run reads, for the chunk's CB channels, zero in the padding. Columns are
//       de-interleaved by the stride v: input column x (counted from the run's first window) goes to
//       phase x % v, slot x / v, so the thread for output column q reads tap s at
//       (s % v)*cw + (q - q_base) + s / v: consecutive q, consecutive words, no bank conflicts at any
//       stride. Only phases < min(v, S) are kept (the others are never read), and with a stride u > R
//       only the R rows each output row needs, so large strides stage no dead input.
// Per tap and thread: PT scalar loads of x, KT/4 float4 loads of w, PT*KT FMAs (4 + 4 loads for
// 64 FMAs at PT = 4, KT = 16).
//
// Staging is by 4-byte cp.async (zero-fill for the padding and for maps past K), double-buffered: a
// block walks steps (map tile, channel chunk) and copies step t + 1's stage while it computes step t,
// so it waits for global memory once, not once per element or per step. The channel chunk CB is as
// many channels as fit kStageFloats (input rows + two filter buffers), at least one; with every channel
// in one chunk (the small-C layers this kernel is for) the input is staged once per block, in one
// buffer, and reused for all its maps; otherwise the input chunks are double-buffered too.
// maps_per_block: all K maps per block unless that leaves fewer than kTargetBlocksPerSM blocks per
// multiprocessor, then fewer maps (more blocks) so the GPU fills.
// PT (1, 2 or 4 pixels per thread, "auto" by default): 2 (4 when K <= 8), fewer when that would waste
// more than 1/8 of the block's slots on the last, partial run of an image (or row).
//
// Limits: positions inside an image are ints (the padded image, P*Q < 2^31); a single channel's staged
// rows plus filters must fit the GPU's shared memory (require_shared_memory names the limit): about
// R * min(v, S) * (kThreads*PT + S) floats for wide rows, so only very large filters are rejected.
// Deterministic: every output is one thread's sum, in (c, r, s) order.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/device.hpp"
#include "../common/launch.cuh"
#include "../common/async_copy.cuh"
#include "conv2d_cuda.hpp"

namespace gpuopt::conv {

namespace {

using i64 = std::int64_t;

constexpr int kThreads = 128;
constexpr int kMaxGridY = 65535;
// Target for the staged input rows + filters of one chunk (floats): 40 KiB keeps 4 blocks of 128
// threads (the register limit below) on a multiprocessor. One channel may exceed it (up to the opt-in
// limit of the GPU).
constexpr i64 kStageFloats = 10240;
constexpr int kTargetBlocksPerSM = 8;  // two rounds of 4 resident blocks

struct DirectParams {
    int N, K, C, H, W, R, S, u, v, ph, pw;
    int P, Q, PQ;
    Activation act;
    int runs;            // runs per image; blockIdx.x = n * runs + run
    int segments;        // 0: runs cross rows; else runs per row (each a segment of one row)
    int maps_per_block;  // a multiple of KT
    int CB;              // channels per staged chunk
    int rstep;           // staged rows between consecutive output rows: min(u, R)
    int rows;            // staged rows: (max output rows of a run - 1) * rstep + R
    int cw;              // slots per column phase: Q + (S - 1) / v
    int phases;          // column phases kept: min(v, S)
    int pitch;           // floats per staged row: phases * cw
    int plane;           // floats per staged channel: rows * pitch
};

// The input rows of channels [c0, c0 + cb) that the block's run reads, into xs (see the header), by
// 4-byte cp.async (zero-filled in the padding): every copy of the stage is in flight at once instead of
// one load's latency per element. One warp per staged row; its lanes walk the row phase by phase, so
// global reads along a row are consecutive (v = 1) or interleaved by v (the phases of a line are read by
// the same warp).
__device__ __forceinline__ void stage_input(float* __restrict__ xs, const float* __restrict__ xn, const DirectParams& a,
                                            int c0, int cb, int p_first, int q_base) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int kWarps = kThreads / 32;
    const i64 HW = static_cast<i64>(a.H) * a.W;
    for (int row = warp; row < cb * a.rows; row += kWarps) {
        const int c = row / a.rows;
        const int sr = row - c * a.rows;  // staged row
        // Input row: with u <= R the staged rows are the input rows from the run's first window on;
        // with u > R each output row stages only its own R rows.
        const int out_rel = a.u <= a.R ? 0 : sr / a.R;
        const int in_row = (p_first + out_rel) * a.u - a.ph + (a.u <= a.R ? sr : sr - out_rel * a.R);
        const bool row_ok = in_row >= 0 && in_row < a.H;
        const float* src = xn + (c0 + c) * HW + static_cast<i64>(in_row) * a.W;
        float* dst = xs + c * a.plane + sr * a.pitch;
        const int col0 = q_base * a.v - a.pw;  // input column of the run's first window
        for (int phase = 0; phase < a.phases; ++phase) {
            for (int slot = lane; slot < a.cw; slot += 32) {
                const int in_col = col0 + slot * a.v + phase;
                const bool ok = row_ok && in_col >= 0 && in_col < a.W;
                dev::cp_async_4(dst + phase * a.cw + slot, ok ? src + in_col : xn, ok ? 4 : 0);
            }
        }
    }
}

// Filters of maps [k0, k0 + KT) and channels [c0, c0 + cb) into ws[(c*RS + tap)*KT + j] by cp.async;
// maps past K are zero-filled (their sums are computed and never stored). Consecutive threads read
// consecutive taps of a map (w[k][c0..][..] is contiguous).
template <int KT>
__device__ __forceinline__ void stage_filters(float* __restrict__ ws, const float* __restrict__ w, const DirectParams& a,
                                              int k0, int c0, int cb, int RS) {
    const int per_map = cb * RS;
    for (int i = threadIdx.x; i < KT * per_map; i += kThreads) {
        const int j = i / per_map;
        const int tap = i - j * per_map;
        const int k = k0 + j;
        const bool ok = k < a.K;
        const float* src = ok ? w + (static_cast<i64>(k) * a.C + c0) * RS + tap : w;
        dev::cp_async_4(ws + tap * KT + j, src, ok ? 4 : 0);
    }
}

// KT: maps per thread; PT: pixels per thread; KR, KS: filter size as template constants (0: runtime).
template <int KT, int PT, int KR, int KS>
__global__ void __launch_bounds__(kThreads, 4)
    conv2d_direct_regblock_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ bias, float* __restrict__ y, DirectParams a) {
    static_assert(KT % 4 == 0, "KT weights are read as float4");
    extern __shared__ __align__(16) float smem[];
    const int R = KR > 0 ? KR : a.R;
    const int S = KS > 0 ? KS : a.S;
    const int RS = R * S;
    // Two filter buffers of KT * CB * RS floats (a multiple of 4: what follows stays 16-byte aligned), then
    // one input buffer of CB * plane floats when every channel is one chunk (staged once), else two.
    const int w_floats = KT * a.CB * RS, x_floats = a.CB * a.plane;
    const bool one_chunk = a.CB >= a.C;
    float* const ws0 = smem;
    float* const xs0 = smem + 2 * w_floats;

    // The block's run: pixels pos0 .. pos_end - 1 (at most kThreads * PT), starting in output row
    // p_first at column q_base (0 unless runs are row segments).
    const int n = blockIdx.x / a.runs;
    const int run = blockIdx.x - n * a.runs;
    int pos0, pos_end, p_first, q_base;
    if (a.segments == 0) {
        pos0 = run * (kThreads * PT);
        pos_end = a.PQ;
        p_first = pos0 / a.Q;
        q_base = 0;
    } else {
        p_first = run / a.segments;
        q_base = (run - p_first * a.segments) * (kThreads * PT);
        pos0 = p_first * a.Q + q_base;
        pos_end = (p_first + 1) * a.Q;
    }

    // Where each of the thread's pixels reads tap (0, 0) in a staged channel.
    int offset[PT];
#pragma unroll
    for (int i = 0; i < PT; ++i) {
        const int pos = pos0 + threadIdx.x + i * kThreads;
        const int p = pos / a.Q, q = pos - p * a.Q;
        offset[i] = pos < pos_end ? (p - p_first) * a.rstep * a.pitch + (q - q_base) : 0;  // idle: slot 0
    }

    const float* xn = x + static_cast<i64>(n) * a.C * a.H * a.W;
    const int k_begin = blockIdx.y * a.maps_per_block;
    const int k_end = min(a.K, k_begin + a.maps_per_block);

    // Steps (map tile, channel chunk), channel chunks innermost; the stage of step t + 1 is copied
    // while step t computes (double-buffered shared memory, one cp.async group per step).
    const int c_chunks = (a.C + a.CB - 1) / a.CB;
    const int steps = (k_end - k_begin + KT - 1) / KT * c_chunks;
    auto issue = [&](int t) {
        const int kt = t / c_chunks, c0 = (t - kt * c_chunks) * a.CB;
        const int cb = min(a.CB, a.C - c0);
        if (!one_chunk || t == 0)
            stage_input(xs0 + (one_chunk ? 0 : (t & 1) * x_floats), xn, a, c0, cb, p_first, q_base);
        stage_filters<KT>(ws0 + (t & 1) * w_floats, w, a, k_begin + kt * KT, c0, cb, RS);
        dev::cp_async_commit();
    };

    float acc[PT][KT];
    issue(0);
    for (int t = 0; t < steps; ++t) {
        const int kt = t / c_chunks, cc = t - kt * c_chunks;
        const int k0 = k_begin + kt * KT, cb = min(a.CB, a.C - cc * a.CB);
        if (t + 1 < steps) {
            issue(t + 1);
            dev::cp_async_wait<1>();  // step t's copies have landed (t + 1's may be in flight)
        } else {
            dev::cp_async_wait<0>();
        }
        __syncthreads();  // ... for every thread's copies
        if (cc == 0) {
#pragma unroll
            for (int i = 0; i < PT; ++i)
#pragma unroll
                for (int j = 0; j < KT; ++j) acc[i][j] = 0.f;
        }
        {
            const float* xs = xs0 + (one_chunk ? 0 : (t & 1) * x_floats);
            const float* ws = ws0 + (t & 1) * w_floats;
            for (int c = 0; c < cb; ++c) {
                const float* xc = xs + c * a.plane;
                const float* wc = ws + c * RS * KT;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    int col_phase = 0, col_slot = 0;  // tap s: (s % v, s / v), stepped without division
#pragma unroll
                    for (int s = 0; s < S; ++s) {
                        const int tap_offset = r * a.pitch + col_phase * a.cw + col_slot;
                        float xv[PT];
#pragma unroll
                        for (int i = 0; i < PT; ++i) xv[i] = xc[offset[i] + tap_offset];
                        const float4* w4 = reinterpret_cast<const float4*>(wc + (r * S + s) * KT);
#pragma unroll
                        for (int j4 = 0; j4 < KT / 4; ++j4) {
                            const float4 wv = w4[j4];
#pragma unroll
                            for (int i = 0; i < PT; ++i) {
                                acc[i][4 * j4 + 0] += xv[i] * wv.x;
                                acc[i][4 * j4 + 1] += xv[i] * wv.y;
                                acc[i][4 * j4 + 2] += xv[i] * wv.z;
                                acc[i][4 * j4 + 3] += xv[i] * wv.w;
                            }
                        }
                        if (++col_phase == a.v) col_phase = 0, ++col_slot;
                    }
                }
            }
        }
        __syncthreads();  // every thread is done with buffer t & 1 before step t + 2's copies refill it
        if (cc != c_chunks - 1) continue;

#pragma unroll
        for (int j = 0; j < KT; ++j) {
            const int k = k0 + j;
            if (k >= k_end) break;
            const float b = bias != nullptr ? bias[k] : 0.f;
            float* yk = y + (static_cast<i64>(n) * a.K + k) * a.PQ;
#pragma unroll
            for (int i = 0; i < PT; ++i) {
                const int pos = pos0 + threadIdx.x + i * kThreads;
                if (pos < pos_end) yk[pos] = apply_activation(acc[i][j] + b, a.act);
            }
        }
    }
}

using DirectKernel = void (*)(const float*, const float*, const float*, float*, DirectParams);

template <int KT, int PT>
DirectKernel select_filter(i64 R, i64 S) {
    if (R == 1 && S == 1) return conv2d_direct_regblock_kernel<KT, PT, 1, 1>;
    if (R == 3 && S == 3) return conv2d_direct_regblock_kernel<KT, PT, 3, 3>;
    if (R == 5 && S == 5) return conv2d_direct_regblock_kernel<KT, PT, 5, 5>;
    if (R == 7 && S == 7) return conv2d_direct_regblock_kernel<KT, PT, 7, 7>;
    return conv2d_direct_regblock_kernel<KT, PT, 0, 0>;
}

// The instantiation for a resolved (non-zero) k_tile and pixels of kDirectKTiles x kDirectPixels. at_value with
// lambdas of a stated return type, not at_nonzero_value: through that one's nested lambdas cicc wrote other PTX
// for one kernel (<16, 1, 3, 3>, a different SASS in every build), the instantiation order being the same.
template <int KT>
DirectKernel select_pixels(int pixels, i64 R, i64 S) {
    return at_value<kDirectPixels>(pixels, [&](auto pt) -> DirectKernel {
        if constexpr (decltype(pt)::value == 0) return nullptr;
        else return select_filter<KT, decltype(pt)::value>(R, S);
    });
}

DirectKernel select_kernel(int k_tile, int pixels, i64 R, i64 S) {
    return at_value<kDirectKTiles>(k_tile, [&](auto kt) -> DirectKernel {
        if constexpr (decltype(kt)::value == 0) return nullptr;
        else return select_pixels<decltype(kt)::value>(pixels, R, S);
    });
}

}  // namespace

DirectRegblockLaunch conv2d_direct_regblock_plan(const Conv2dShape& s, int k_tile, int pixels, int multiprocessors) {
    s.validate();
    const std::string what = "conv2d direct_regblock";
    require_choice(kDirectKTiles, k_tile, what);
    if (k_tile == 0) k_tile = s.K <= 8 ? 8 : 16;
    require_choice(kDirectPixels, pixels, what);
    const i64 P = s.P(), Q = s.Q(), PQ = P * Q;
    // Positions inside an image are ints, with room for a run past the last row or column (offsets of
    // images and channels are 64-bit, so the batch and an image may exceed 2^31 elements).
    GPUOPT_REQUIRE(s.N <= INT_MAX && s.K <= INT_MAX && s.C <= INT_MAX && s.R * s.S <= INT_MAX &&
                       PQ <= INT_MAX - 4 * kThreads && (P + 2) * s.stride_h + s.R + s.pad_h <= INT_MAX &&
                       (Q + 4 * kThreads) * s.stride_w + s.S + s.pad_w <= INT_MAX,
                   what + ": a dimension is too large for 32-bit positions (N, K, C, R*S, P*Q and the padded image "
                          "plus a run of pixels must be < 2^31)");

    DirectRegblockLaunch plan;
    plan.k_tile = k_tile;
    // Runs: rows narrower than a run are covered whole (runs cross rows); wider rows are cut into
    // segments of at most one run each.
    auto slots = [&](i64 run) {  // slots of an image (or of a row) in runs of `run` pixels
        return Q < run ? ceil_div(PQ, run) * run : ceil_div(Q, run) * run;
    };
    auto used = [&](i64 run) { return Q < run ? PQ : Q; };
    if (pixels == 0) {
        // 2 pixels per thread (4 with at most 8 maps, whose blocks have fewer maps to spread the staging
        // over), fewer when the last, partial run would waste more than 1/8 of its slots. Measured on the
        // H200 (the tune_conv_auto study): 4 pixels of 16 maps need ~128 registers and lose occupancy.
        pixels = 1;
        for (int pt : {4, 2}) {
            if (pt == 4 && s.K > 8) continue;
            const i64 run = i64{kThreads} * pt;
            if (8 * (slots(run) - used(run)) <= slots(run)) {
                pixels = pt;
                break;
            }
        }
    }
    plan.pixels = pixels;
    const i64 run = i64{kThreads} * pixels;
    plan.segments = Q < run ? 0 : ceil_div(Q, run);
    plan.runs = plan.segments == 0 ? ceil_div(PQ, run) : P * plan.segments;
    GPUOPT_REQUIRE(s.N * plan.runs <= INT_MAX, what + ": " + std::to_string(s.N * plan.runs) +
                                                  " blocks of output pixels; must be < 2^31");

    // Staged rows: a run crossing rows covers at most (run - 1) / Q + 2 output rows (never more than P),
    // a segment one. Staged columns per phase: the run's output columns (all Q, or one segment's) plus
    // the filter's reach.
    const i64 out_rows = plan.segments == 0 ? std::min<i64>(P, (run - 1) / Q + 2) : 1;
    const i64 out_cols = plan.segments == 0 ? Q : run;
    plan.rstep = std::min(s.stride_h, s.R);
    plan.rows = (out_rows - 1) * plan.rstep + s.R;
    plan.cw = out_cols + (s.S - 1) / s.stride_w;
    plan.phases = std::min(s.stride_w, s.S);
    plan.pitch = plan.phases * plan.cw;
    const i64 plane = plan.rows * plan.pitch;  // < 2^63: R*S < 2^31, pitch <= S*(run + S)
    GPUOPT_REQUIRE(plane <= (i64{1} << 32), what + ": one channel's staged input (" + std::to_string(plan.rows) +
                                                " rows x " + std::to_string(plan.pitch) +
                                                " floats) is far beyond any GPU's shared memory");
    // Two filter buffers always; one input buffer when every channel fits one chunk (staged once), else two.
    const i64 filters = 2 * k_tile * s.R * s.S;
    if (s.C * (plane + filters) <= kStageFloats) {
        plan.channels_per_chunk = s.C;
        plan.input_buffers = 1;
    } else {
        plan.channels_per_chunk = std::clamp<i64>(kStageFloats / (2 * plane + filters), 1, s.C);
        plan.input_buffers = plan.channels_per_chunk == s.C ? 1 : 2;
    }
    plan.shared_bytes =
        plan.channels_per_chunk * (plan.input_buffers * plane + filters) * static_cast<i64>(sizeof(float));

    // Maps per block: all of them, unless the grid would then have fewer than kTargetBlocksPerSM blocks
    // per multiprocessor; never so few that the grid's y exceeds 65535.
    const i64 map_tiles = ceil_div<i64>(s.K, k_tile);
    const i64 want_groups = ceil_div<i64>(i64{kTargetBlocksPerSM} * std::max(multiprocessors, 1), s.N * plan.runs);
    const i64 groups = std::clamp<i64>(want_groups, 1, map_tiles);
    i64 tiles_per_block = ceil_div(map_tiles, groups);
    tiles_per_block = std::max(tiles_per_block, ceil_div<i64>(map_tiles, kMaxGridY));
    plan.maps_per_block = tiles_per_block * k_tile;
    plan.map_groups = ceil_div(s.K, plan.maps_per_block);
    return plan;
}

void conv2d_direct_regblock(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                            Activation act, int k_tile, int pixels) {
    s.validate();
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr,
                   "conv2d direct_regblock: x, w and y must be device pointers");
    const DirectRegblockLaunch plan = conv2d_direct_regblock_plan(s, k_tile, pixels, multiprocessor_count());
    const std::string what = "conv2d direct_regblock (k_tile=" + std::to_string(plan.k_tile) + ", pixels=" +
                             std::to_string(plan.pixels) + ", " + std::to_string(plan.channels_per_chunk) +
                             " channel(s) staged)";
    GPUOPT_REQUIRE(plan.shared_bytes <= INT_MAX / 2, what + ": needs " + std::to_string(plan.shared_bytes) +
                                                            " bytes of shared memory per block");
    const DirectKernel kernel = select_kernel(plan.k_tile, plan.pixels, s.R, s.S);
    require_shared_memory(kernel, static_cast<std::size_t>(plan.shared_bytes), what.c_str());

    DirectParams a{};
    a.N = static_cast<int>(s.N);
    a.K = static_cast<int>(s.K);
    a.C = static_cast<int>(s.C);
    a.H = static_cast<int>(s.H);
    a.W = static_cast<int>(s.W);
    a.R = static_cast<int>(s.R);
    a.S = static_cast<int>(s.S);
    a.u = static_cast<int>(s.stride_h);
    a.v = static_cast<int>(s.stride_w);
    a.ph = static_cast<int>(s.pad_h);
    a.pw = static_cast<int>(s.pad_w);
    a.P = static_cast<int>(s.P());
    a.Q = static_cast<int>(s.Q());
    a.PQ = a.P * a.Q;
    a.act = act;
    a.runs = static_cast<int>(plan.runs);
    a.segments = static_cast<int>(plan.segments);
    a.maps_per_block = static_cast<int>(plan.maps_per_block);
    a.CB = static_cast<int>(plan.channels_per_chunk);
    a.rstep = static_cast<int>(plan.rstep);
    a.rows = static_cast<int>(plan.rows);
    a.cw = static_cast<int>(plan.cw);
    a.phases = static_cast<int>(plan.phases);
    a.pitch = static_cast<int>(plan.pitch);
    a.plane = static_cast<int>(plan.rows * plan.pitch);

    const dim3 grid(static_cast<unsigned>(s.N * plan.runs), static_cast<unsigned>(plan.map_groups));
    kernel<<<grid, kThreads, static_cast<std::size_t>(plan.shared_bytes), current_stream()>>>(x, w, bias, y, a);
    GPUOPT_CHECK_LAUNCH("conv2d_direct_regblock_kernel");
}

std::vector<KernelInfo> conv2d_direct_kernel_info() {
    std::vector<KernelInfo> out;
    const std::pair<int, int> filters[] = {{1, 1}, {3, 3}, {5, 5}, {7, 7}, {2, 4}};
    for (int k_tile : kDirectKTiles.values) {
        for (int pixels : kDirectPixels.values) {
            if (k_tile == 0 || pixels == 0) continue;  // auto: resolved to one of the others
            for (const auto& [r, s] : filters) {
                const void* kernel = reinterpret_cast<const void*>(select_kernel(k_tile, pixels, r, s));
                const std::string filter = r == 2 ? "RxS" : std::to_string(r) + "x" + std::to_string(s);
                const std::string name =
                    "direct_regblock<k" + std::to_string(k_tile) + " p" + std::to_string(pixels) + " " + filter + ">";
                out.push_back(kernel_info(kernel, name, kThreads, 32 * 1024));  // a 32 KiB stage
            }
        }
    }
    return out;
}

}  // namespace gpuopt::conv
