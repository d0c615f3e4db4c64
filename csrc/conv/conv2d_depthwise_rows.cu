// conv2d depthwise, rows kernel: square 3x3, 5x5 and 7x7 filters, stride 1 or 2, no dilation (MobileNet's,
// EfficientNet's and ConvNeXt's depthwise layers), any padding, M = K / C filters a channel.
//
// The layer is memory-bound (a few FMAs per 8 bytes of x and y), so the kernel is built around its bytes. A unit of
// work has as its input ONE contiguous run of x: a band of output rows of one plane (its input rows are whole rows,
// contiguous in NCHW), or, where a plane has at most kUnitOutputs outputs, whole consecutive planes. At stride 2
// blocks are persistent and double-buffered (at stride 1 a block runs one unit, see the launcher): while a block
// computes one unit from shared memory, its next unit's run is on its way in by 16-byte cp.async copies (a head and tail of 4-byte ones where the run is not 16-byte aligned; no
// index arithmetic per element), with the unit's taps. Each thread sums kStripRows outputs down one column: every
// input row the strip reads is loaded once into registers (R values, zero outside the image) and feeds each output
// row it touches, taps in (r, s) order: one float FMA chain an output, deterministic. Consecutive threads take
// consecutive columns, so stores coalesce along q. Bands of one plane are consecutive units, so the R - U halo rows
// two bands share are mostly re-read from L2, not DRAM.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "../common/activation.hpp"
#include "../common/async_copy.cuh"
#include "../common/device.hpp"
#include "../common/launch.cuh"
#include "conv2d_cuda.hpp"
#include "conv2d_depthwise_rows.hpp"

namespace gpuopt::conv {

namespace {

using i64 = std::int64_t;

constexpr int kThreads = 256;
constexpr int kStripRows = 4;        // outputs a thread sums down one column
constexpr int kUnitOutputs = 2048;   // outputs a unit aims at: 8 a thread
constexpr int kStageFloats = 8192;   // a unit's staged input at most (32 KiB a buffer), but for the narrowest bands
constexpr int kSlotsPerSm = 4;       // blocks an SM holds, for sizing units (the launch asks the occupancy API)

// What every block of a launch shares. Unit u: input planes [u / bands * unit_planes, + unit_planes) and output
// rows [u % bands * band_rows, + band_rows) of each.
struct RowsArgs {
    int C, H, W, M, P, Q, ph, pw;
    int whole_planes;   // units of whole planes (bands == 1), else of one plane's band
    int unit_planes, bands, band_rows;
    int taps_offset;    // floats from a buffer's start to its taps
    int buffer_floats;  // a buffer: the staged run (shifted up to 3 floats for alignment), then the taps
    i64 in_planes;      // N * C
    i64 units;
};

// One unit's geometry: its planes, output rows [p_lo, p_hi), and the input rows [row_lo, row_hi] staged of each
// plane (all of them for whole planes, so that consecutive planes are one run; else the band's, clipped to the
// image, none where the band reads only padding).
struct UnitRows {
    i64 plane0;
    int planes, p_lo, p_hi, row_lo, row_hi, rows;
};

// Where a unit's run starts in x, and its address mod 16 bytes in floats (the run's shift in its buffer).
__device__ __forceinline__ const float* run_start(const float* x, const RowsArgs& a, const UnitRows& u) {
    return x + (u.plane0 * a.H + u.row_lo) * a.W;
}
__device__ __forceinline__ int run_shift(const float* src) {
    return static_cast<int>(reinterpret_cast<std::uintptr_t>(src) >> 2 & 3);
}

template <int R, int U>
__device__ __forceinline__ UnitRows unit_rows(const RowsArgs& a, i64 unit) {
    UnitRows u;
    u.plane0 = unit / a.bands * a.unit_planes;
    u.planes = static_cast<int>(min(static_cast<i64>(a.unit_planes), a.in_planes - u.plane0));
    u.p_lo = static_cast<int>(unit % a.bands) * a.band_rows;
    u.p_hi = min(a.P, u.p_lo + a.band_rows);
    u.row_lo = a.whole_planes ? 0 : max(0, u.p_lo * U - a.ph);
    u.row_hi = a.whole_planes ? a.H - 1 : min(a.H - 1, (u.p_hi - 1) * U - a.ph + R - 1);
    u.rows = max(0, u.row_hi - u.row_lo + 1);
    return u;
}

// Queues the unit's input run into `buffer` (16-byte cp.async where aligned: the run lands shifted by its address
// mod 16 bytes) and its taps after it; the caller commits.
template <int R, int U>
__device__ __forceinline__ void stage_unit(const float* __restrict__ x, const float* __restrict__ w,
                                           const RowsArgs& a, i64 unit, float* buffer, int tid) {
    constexpr int kTaps = R * R;
    const UnitRows u = unit_rows<R, U>(a, unit);
    const float* src = run_start(x, a, u);
    const int shift = run_shift(src);
    float* dst = buffer + shift;
    const int n = u.planes * u.rows * a.W;
    const int head = min(n, (4 - shift) & 3);
    const int n4 = (n - head) >> 2, tail = head + 4 * n4;
    for (int i = tid; i < n4; i += kThreads) dev::cp_async_16(dst + head + 4 * i, src + head + 4 * i, 16);
    if (tid < head) dev::cp_async_4(dst + tid, src + tid, 4);
    if (tid < n - tail) dev::cp_async_4(dst + tail + tid, src + tail + tid, 4);
    float* taps = buffer + a.taps_offset;
    const int unit_maps = u.planes * a.M;  // output planes (plane0 + g) * M + m, consecutive
    for (int i = tid; i < unit_maps * kTaps; i += kThreads) {
        const int om = i / kTaps;
        const int k = static_cast<int>((u.plane0 + om / a.M) % a.C) * a.M + om % a.M;
        dev::cp_async_4(taps + i, w + static_cast<i64>(k) * kTaps + (i - om * kTaps), 4);
    }
}

// The unit's outputs from its staged buffer: kStripRows a thread down one column, items (map, strip, column).
template <int R, int U, Activation Act>
__device__ __forceinline__ void compute_unit(const float* x, const float* __restrict__ bias, float* __restrict__ y,
                                             const RowsArgs& a, i64 unit, const float* buffer, int tid) {
    constexpr int kTaps = R * R, kSpan = (kStripRows - 1) * U + R;  // input rows a strip reads
    const UnitRows u = unit_rows<R, U>(a, unit);
    const float* staged = buffer + run_shift(run_start(x, a, u));
    const float* taps = buffer + a.taps_offset;
    const int strips = (u.p_hi - u.p_lo + kStripRows - 1) / kStripRows;
    const int items = u.planes * a.M * strips * a.Q;
    float tap[kTaps];
    int tap_map = -1;  // the map whose taps are in tap[]: a band's items share one, whole planes' items differ
    for (int item = tid; item < items; item += kThreads) {
        const int q = item % a.Q, rest = item / a.Q;
        const int strip = rest % strips, om = rest / strips;
        const int p0 = u.p_lo + strip * kStripRows;
        if (om != tap_map) {
#pragma unroll
            for (int t = 0; t < kTaps; ++t) tap[t] = taps[om * kTaps + t];
            tap_map = om;
        }
        // Row `row` of the unit's plane om / M at base[row * W]; columns outside the image read as zero.
        const float* base = staged + (om / a.M * u.rows - u.row_lo) * a.W;
        const int col0 = q * U - a.pw, row0 = p0 * U - a.ph;
        bool col_in[R];
#pragma unroll
        for (int s = 0; s < R; ++s) col_in[s] = col0 + s >= 0 && col0 + s < a.W;
        float acc[kStripRows];
#pragma unroll
        for (int j = 0; j < kStripRows; ++j) acc[j] = 0.f;
#pragma unroll
        for (int i = 0; i < kSpan; ++i) {
            const int row = row0 + i;
            const bool row_in = row >= u.row_lo && row <= u.row_hi;
            float v[R];
#pragma unroll
            for (int s = 0; s < R; ++s) v[s] = row_in && col_in[s] ? base[row * a.W + col0 + s] : 0.f;
#pragma unroll
            for (int j = 0; j < kStripRows; ++j) {
                const int r = i - j * U;  // this input row is tap row r of output row j (both known here)
                if (r < 0 || r >= R) continue;
#pragma unroll
                for (int s = 0; s < R; ++s) acc[j] = fmaf(v[s], tap[r * R + s], acc[j]);
            }
        }
        const i64 map = u.plane0 * a.M + om;  // (n, k) of y
        const float b = bias ? __ldg(bias + map % (static_cast<i64>(a.C) * a.M)) : 0.f;
        float* yq = y + map * a.P * a.Q + q;
#pragma unroll
        for (int j = 0; j < kStripRows; ++j)
            if (p0 + j < u.p_hi) yq[static_cast<i64>(p0 + j) * a.Q] = apply_activation(acc[j] + b, Act);
    }
}

// Blocks an SM keeps (registers capped to fit them, without spills: tests/conv checks): 6 for the stride-1 3x3
// kernel, whose one-unit blocks need the most of them in flight (see the launcher).
template <int R, int U>
constexpr int kMinBlocks = R == 3 ? (U == 1 ? 6 : 5) : R == 5 ? 4 : 2;

template <int R, int U, Activation Act>
__global__ void __launch_bounds__(kThreads, kMinBlocks<R, U>) depthwise_rows_kernel(const float* __restrict__ x,
                                                                  const float* __restrict__ w,
                                                                  const float* __restrict__ bias,
                                                                  float* __restrict__ y, RowsArgs a) {
    extern __shared__ float4 shared4[];
    float* shared = reinterpret_cast<float*>(shared4);
    const int tid = threadIdx.x;
    i64 unit = blockIdx.x;
    if (unit < a.units) stage_unit<R, U>(x, w, a, unit, shared, tid);
    dev::cp_async_commit();
    for (int buf = 0; unit < a.units; unit += gridDim.x, buf ^= 1) {
        // The next unit's copies go out before this one's sums: one unit always in flight a block.
        if (unit + gridDim.x < a.units)
            stage_unit<R, U>(x, w, a, unit + gridDim.x, shared + (buf ^ 1) * a.buffer_floats, tid);
        dev::cp_async_commit();
        dev::cp_async_wait<1>();
        __syncthreads();
        compute_unit<R, U, Act>(x, bias, y, a, unit, shared + buf * a.buffer_floats, tid);
        __syncthreads();  // the next iteration stages into this buffer
    }
}

template <int R, int U>
struct RowsKernel {
    template <Activation Act>
    static auto kernel() { return depthwise_rows_kernel<R, U, Act>; }
};

// Calls f(RowsKernel<R, U>{}) for the shape's filter and stride (depthwise_rows_unfit has accepted them).
template <class F>
void with_rows_kernel(const Conv2dShape& s, F&& f) {
    const auto by_stride = [&](auto r) {
        if (s.stride_h == 1) f(RowsKernel<decltype(r)::value, 1>{});
        else f(RowsKernel<decltype(r)::value, 2>{});
    };
    if (s.R == 3) by_stride(std::integral_constant<int, 3>{});
    else if (s.R == 5) by_stride(std::integral_constant<int, 5>{});
    else by_stride(std::integral_constant<int, 7>{});
}

}  // namespace

std::string depthwise_rows_unfit(const Conv2dShape& s) {
    if (!conv2d_depthwise_rows_takes(s.R, s.S, s.stride_h, s.stride_w, s.dilation_h, s.dilation_w))
        return "square 3x3, 5x5 or 7x7 filters at stride 1 or 2 without dilation (got " + std::to_string(s.R) + "x" +
               std::to_string(s.S) + ", stride (" + std::to_string(s.stride_h) + ", " + std::to_string(s.stride_w) +
               "), dilation (" + std::to_string(s.dilation_h) + ", " + std::to_string(s.dilation_w) + "))";
    const std::int64_t least = conv2d_depthwise_rows_min_shared_bytes(s.H, s.W, s.R, s.stride_h, s.K / s.C);
    if (least > max_shared_memory_per_block_optin())
        return "a unit's input rows in shared memory (" + std::to_string(least) + " bytes needed, " +
               std::to_string(max_shared_memory_per_block_optin()) + " available: W = " + std::to_string(s.W) +
               " is too wide)";
    if (depthwise_rows_plan(s).units > INT_MAX) return "at most 2^31 - 1 units of work";
    return "";
}

DepthwiseRowsPlan depthwise_rows_plan(const Conv2dShape& s) {
    const i64 P = s.P(), Q = s.Q(), M = s.K / s.C, in_planes = s.N * s.C;
    const i64 U = s.stride_h, plane_outputs = P * Q * M;
    const i64 slots = static_cast<i64>(multiprocessor_count()) * kSlotsPerSm;
    const i64 plane = s.H * s.W;
    DepthwiseRowsPlan plan;
    i64 staged;
    if (plane_outputs <= kUnitOutputs && plane <= kStageFloats) {
        // Whole planes, as many as make kUnitOutputs within kStageFloats, but no more than spread the planes
        // over one wave of blocks (a small layer: more, smaller units).
        const i64 g = std::max<i64>(1, std::min({kUnitOutputs / plane_outputs, ceil_div(in_planes, slots),
                                                 static_cast<i64>(kStageFloats) / plane}));
        plan.whole_planes = true, plan.unit_planes = static_cast<int>(g), plan.bands = 1;
        plan.band_rows = static_cast<int>(P);
        staged = g * plane;
    } else {
        // Bands of whole output rows, kUnitOutputs a band at most, fewer where a wave would not fill otherwise
        // (batch 1) or the rows would pass kStageFloats (wide planes; 4 rows at least: their bytes are
        // conv2d_depthwise_rows_min_shared_bytes); equal bands in multiples of a strip.
        i64 most = std::max<i64>(kStripRows, kUnitOutputs / (Q * M) / kStripRows * kStripRows);
        const i64 fit_rows = (kStageFloats / s.W - s.R) / U + 1;  // output rows whose input rows fit
        most = std::min(most, std::max<i64>(kStripRows, fit_rows / kStripRows * kStripRows));
        if (in_planes < slots) {
            const i64 bands_wanted = ceil_div(slots, in_planes);
            most = std::min(most, std::max<i64>(kStripRows, P / bands_wanted / kStripRows * kStripRows));
        }
        const i64 bands = ceil_div(P, most);
        const i64 band_rows = ceil_div(ceil_div(P, bands), static_cast<i64>(kStripRows)) * kStripRows;
        plan.unit_planes = 1, plan.band_rows = static_cast<int>(band_rows);
        plan.bands = static_cast<int>(ceil_div(P, band_rows));
        staged = std::min<i64>(s.H, (band_rows - 1) * U + s.R) * s.W;
    }
    // Two buffers of: the staged run (shifted by up to 3 floats to keep 16-byte copies aligned), the unit's taps.
    plan.taps_offset = static_cast<int>(std::min<i64>(INT_MAX / 4, ceil_div<i64>(staged + 3, 4) * 4));
    plan.buffer_floats = static_cast<int>(
        std::min<i64>(INT_MAX / 4, conv2d_depthwise_rows_buffer_floats(staged, plan.unit_planes * M * s.R * s.S)));
    plan.units = ceil_div<i64>(in_planes, plan.unit_planes) * plan.bands;
    plan.shared_bytes = 2 * static_cast<std::size_t>(plan.buffer_floats) * sizeof(float);
    return plan;
}

void conv2d_depthwise_rows(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                           Activation act) {
    const DepthwiseRowsPlan plan = depthwise_rows_plan(s);
    RowsArgs a{};
    a.C = static_cast<int>(s.C), a.H = static_cast<int>(s.H), a.W = static_cast<int>(s.W);
    a.M = static_cast<int>(s.K / s.C), a.P = static_cast<int>(s.P()), a.Q = static_cast<int>(s.Q());
    a.ph = static_cast<int>(s.pad_h), a.pw = static_cast<int>(s.pad_w);
    a.whole_planes = plan.whole_planes, a.unit_planes = plan.unit_planes, a.bands = plan.bands;
    a.band_rows = plan.band_rows;
    a.taps_offset = plan.taps_offset, a.buffer_floats = plan.buffer_floats;
    a.in_planes = s.N * s.C, a.units = plan.units;
    with_rows_kernel(s, [&](auto rk) {
        with_activation(act, [&](auto act_c) {
            const auto kernel = decltype(rk)::template kernel<decltype(act_c)::value>();
            require_shared_memory(kernel, plan.shared_bytes, "conv2d/depthwise (rows)");
            // Stride 2: persistent blocks (as many as are resident at once), each looping over units with the next
            // one's copies in flight. Stride 1 (four times the outputs a byte): a block a unit, the hardware's
            // block scheduler overlapping one block's copies with another's sums; measured on the H200
            // (MobileNetV2 b32): persistent 70 us on 32 @112/1 against 57 a block a unit, and 69.7 on 96 @112/2
            // against 76.5.
            const i64 resident = static_cast<i64>(resident_blocks_per_sm(kernel, kThreads, plan.shared_bytes)) *
                                 multiprocessor_count();
            const i64 blocks = s.stride_h == 1 ? plan.units : std::min(plan.units, resident);
            const auto grid = static_cast<unsigned>(std::max<i64>(1, blocks));
            kernel<<<grid, kThreads, plan.shared_bytes, current_stream()>>>(x, w, bias, y, a);
        });
    });
    GPUOPT_CHECK_LAUNCH("conv2d depthwise_rows_kernel");
}

std::vector<KernelInfo> conv2d_depthwise_rows_kernel_info() {
    std::vector<KernelInfo> out;
    const auto add = [&](auto rk, const char* name) {
        const auto kernel = decltype(rk)::template kernel<Activation::None>();
        out.push_back(kernel_info(reinterpret_cast<const void*>(kernel), name, kThreads, 16 * 1024));
    };
    add(RowsKernel<3, 1>{}, "depthwise_rows_3x3_s1");
    add(RowsKernel<3, 2>{}, "depthwise_rows_3x3_s2");
    add(RowsKernel<5, 1>{}, "depthwise_rows_5x5_s1");
    add(RowsKernel<5, 2>{}, "depthwise_rows_5x5_s2");
    add(RowsKernel<7, 1>{}, "depthwise_rows_7x7_s1");
    add(RowsKernel<7, 2>{}, "depthwise_rows_7x7_s2");
    return out;
}

}  // namespace gpuopt::conv
