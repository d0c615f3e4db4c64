// conv2d depthwise: groups = C, every input channel c convolved with its own M = K / C filters into maps
// [c*M, (c+1)*M) (MobileNet's depthwise layers: M = 1, any stride, padding and dilation). Each output reads the
// R*S taps of one channel: a handful of FMAs per 8 bytes moved, so the floor is bytes (x read once, y written
// once) over bandwidth, not FLOPs. Two kernels: the rows kernel (conv2d_depthwise_rows.cu: square 3x3 to 7x7
// filters, stride 1 or 2, no dilation; whole input rows staged by 16-byte loads) where it takes the layer, and
// this file's patch kernel for every other filter, stride and dilation.
//
// The patch kernel: a block owns `Planes` output planes (n, k), a TileQ x TileP output tile of each: it stages the input patch the
// tile reads, ((TileP - 1) * u + R_span) x ((TileQ - 1) * v + S_span) floats, zero outside the image, with
// consecutive threads on consecutive columns (coalesced), and the map's R*S taps; then each thread sums Rows
// outputs down one column, taps in (r, s) order (one float FMA chain: deterministic). Stores run along q.
// Three tiles, one per plane size: 32x32 (1 plane), 16x16 (2 planes) and 8x8 (4 planes), 256 threads each, so
// a 7x7 plane does not leave 975 of a 32x32 tile's 1024 outputs idle.
#include <algorithm>
#include <climits>
#include <string>

#include "../common/activation.hpp"
#include "../common/launch.cuh"
#include "conv2d_choices.hpp"
#include "conv2d_cuda.hpp"
#include "conv2d_depthwise_rows.hpp"

namespace gpuopt::conv {

namespace {

using i64 = std::int64_t;

template <int TileQ, int TileP, int Rows, int Planes>
struct DepthwiseTile {
    static constexpr int kTileQ = TileQ, kTileP = TileP, kRows = Rows, kPlanes = Planes;
    static constexpr int kThreadRows = TileP / Rows;
    static constexpr int kThreads = TileQ * kThreadRows * Planes;
    static_assert(TileP % Rows == 0 && kThreads == 256, "a tile's threads: 256, Rows outputs a thread");
};
using Tile32 = DepthwiseTile<32, 32, 4, 1>;
using Tile16 = DepthwiseTile<16, 16, 2, 2>;
using Tile8 = DepthwiseTile<8, 8, 1, 4>;

// What every block of a launch shares (positions are ints: the launcher checks the ranges).
struct DepthwiseArgs {
    int C, H, W, K, M, R, S, P, Q;
    int u, v, ph, pw, dh, dw;
    int patch_h, patch_w;  // the staged patch of one plane
    int tiles_q, tiles;    // tiles a plane: along q, in all
    i64 planes;            // N * K
};

template <class T, Activation Act>
__global__ void __launch_bounds__(T::kThreads) depthwise_kernel(const float* __restrict__ x,
                                                                const float* __restrict__ w,
                                                                const float* __restrict__ bias,
                                                                float* __restrict__ y, DepthwiseArgs a) {
    extern __shared__ float shared[];
    const int patch = a.patch_h * a.patch_w, taps = a.R * a.S;
    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    const int tid = (tz * T::kThreadRows + ty) * T::kTileQ + tx;
    float* my_patch = shared + tz * (patch + taps);
    float* my_taps = my_patch + patch;
    const int tile = static_cast<int>(blockIdx.x % a.tiles);
    const int p0 = tile / a.tiles_q * T::kTileP, q0 = tile % a.tiles_q * T::kTileQ;
    const int row0 = p0 * a.u - a.ph, col0 = q0 * a.v - a.pw;
    // Planes in steps of the grid; every thread runs every step (the barriers), a slice past the last plane idles.
    const i64 step = static_cast<i64>(gridDim.x / a.tiles) * T::kPlanes;
    for (i64 base = static_cast<i64>(blockIdx.x / a.tiles) * T::kPlanes; base < a.planes; base += step) {
        const i64 plane = base + tz;  // (n, k): y's plane, x's plane (n, k / M)
        const bool live = plane < a.planes;
        const i64 n = plane / a.K;
        const int k = static_cast<int>(plane % a.K);
        if (live) {
            const float* xc = x + (n * a.C + k / a.M) * static_cast<i64>(a.H) * a.W;
            const int slice = T::kTileQ * T::kThreadRows;
            for (int i = tid % slice; i < patch; i += slice) {
                const int r = i / a.patch_w, c = i - r * a.patch_w;
                const int row = row0 + r, col = col0 + c;
                my_patch[i] = row >= 0 && row < a.H && col >= 0 && col < a.W ? xc[row * a.W + col] : 0.f;
            }
            for (int i = tid % slice; i < taps; i += slice) my_taps[i] = w[static_cast<i64>(k) * taps + i];
        }
        __syncthreads();
        if (live) {
            const float b = bias ? bias[k] : 0.f;
            float* yp = y + plane * a.P * a.Q;
            const int q = q0 + tx;
#pragma unroll
            for (int j = 0; j < T::kRows; ++j) {
                const int pl = ty + j * T::kThreadRows, p = p0 + pl;
                if (p >= a.P || q >= a.Q) continue;
                const float* in = my_patch + pl * a.u * a.patch_w + tx * a.v;
                float acc = 0.f;
                for (int r = 0; r < a.R; ++r)
                    for (int s = 0; s < a.S; ++s)
                        acc = fmaf(in[r * a.dh * a.patch_w + s * a.dw], my_taps[r * a.S + s], acc);
                yp[p * a.Q + q] = apply_activation(acc + b, Act);
            }
        }
        __syncthreads();  // the next step's staging overwrites this one's patch
    }
}

template <class T>
i64 shared_floats(const DepthwiseArgs& a) {
    return static_cast<i64>(T::kPlanes) * (static_cast<i64>(a.patch_h) * a.patch_w + a.R * a.S);
}

template <class T>
void launch(const float* x, const float* w, const float* bias, float* y, DepthwiseArgs a, Activation act,
            const std::string& what) {
    a.patch_h = (T::kTileP - 1) * a.u + (a.R - 1) * a.dh + 1;
    a.patch_w = (T::kTileQ - 1) * a.v + (a.S - 1) * a.dw + 1;
    a.tiles_q = (a.Q + T::kTileQ - 1) / T::kTileQ;
    const i64 tiles = static_cast<i64>(a.tiles_q) * ((a.P + T::kTileP - 1) / T::kTileP);
    GPUOPT_REQUIRE(tiles <= INT_MAX / 64, what + ": too many output tiles in a plane");
    a.tiles = static_cast<int>(tiles);
    const std::size_t bytes = static_cast<std::size_t>(shared_floats<T>(a)) * sizeof(float);
    // Blocks: every tile of as many plane steps as fill the GPU a few times over, at most 2^31 - 1 in all.
    const i64 steps = std::min<i64>((a.planes + T::kPlanes - 1) / T::kPlanes, std::max<i64>(1, INT_MAX / tiles));
    const dim3 block(T::kTileQ, T::kThreadRows, T::kPlanes);
    with_activation(act, [&](auto act_c) {
        const auto kernel = depthwise_kernel<T, decltype(act_c)::value>;
        require_shared_memory(kernel, bytes, what.c_str());
        kernel<<<static_cast<unsigned>(tiles * steps), block, bytes, current_stream()>>>(x, w, bias, y, a);
    });
    GPUOPT_CHECK_LAUNCH("conv2d depthwise_kernel");
}

}  // namespace

DepthwiseChoice conv2d_depthwise_check(const Conv2dShape& s, DepthwiseKernel kernel, int tile) {
    const std::string what = "conv2d/depthwise";
    s.validate();
    require_choice(kDepthwiseTiles, tile, what);
    GPUOPT_REQUIRE(s.groups == s.C,
                   what + ": takes depthwise layers only, groups = C (each input channel its own K / C filters); got "
                          "groups=" + std::to_string(s.groups) + " with C=" + std::to_string(s.C));
    const i64 P = s.P(), Q = s.Q();
    GPUOPT_REQUIRE(s.K <= INT_MAX && s.H * s.W <= INT_MAX && P * Q <= INT_MAX && s.R * s.S <= INT_MAX &&
                       (P + 32) * s.stride_h + s.R_span() <= INT_MAX && (Q + 32) * s.stride_w + s.S_span() <= INT_MAX,
                   what + ": a plane is too large for 32-bit positions (H*W, P*Q and the padded extents must be "
                          "< 2^31)");
    if (kernel == DepthwiseKernel::Rows) {
        GPUOPT_REQUIRE(tile == 0, what + ": tile applies to the patch kernel; kernel='rows' takes tile='auto' (got "
                                         "tile=" + std::to_string(tile) + ")");
        const std::string unfit = depthwise_rows_unfit(s);
        GPUOPT_REQUIRE(unfit.empty(), what + ": kernel='rows' takes " + unfit + "; kernel='patch' takes any layer");
        return {true, DepthwiseTileKind::Tile32};
    }
    if (kernel == DepthwiseKernel::Auto && tile == 0 && depthwise_rows_unfit(s).empty())
        return {true, DepthwiseTileKind::Tile32};
    if (tile != 0) return {false, static_cast<DepthwiseTileKind>(tile)};
    // The tile that wastes the fewest outputs at the plane's size: 32x32 from 25 outputs a side.
    const i64 side = std::max(P, Q);
    return {false, side > 24 ? DepthwiseTileKind::Tile32 : side > 12 ? DepthwiseTileKind::Tile16 : DepthwiseTileKind::Tile8};
}

void conv2d_depthwise(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                      Activation act, DepthwiseKernel kernel, int tile) {
    const DepthwiseChoice choice = conv2d_depthwise_check(s, kernel, tile);
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr,
                   "conv2d depthwise: x, w and y must be device pointers");
    if (choice.rows) return conv2d_depthwise_rows(x, w, bias, y, s, act);
    DepthwiseArgs a{};
    a.C = static_cast<int>(s.C), a.H = static_cast<int>(s.H), a.W = static_cast<int>(s.W);
    a.K = static_cast<int>(s.K), a.M = static_cast<int>(s.K / s.C), a.R = static_cast<int>(s.R);
    a.S = static_cast<int>(s.S), a.P = static_cast<int>(s.P()), a.Q = static_cast<int>(s.Q());
    a.u = static_cast<int>(s.stride_h), a.v = static_cast<int>(s.stride_w);
    a.ph = static_cast<int>(s.pad_h), a.pw = static_cast<int>(s.pad_w);
    a.dh = static_cast<int>(s.dilation_h), a.dw = static_cast<int>(s.dilation_w);
    a.planes = s.N * s.K;
    const std::string what = "conv2d/depthwise";
    switch (choice.tile) {
        case DepthwiseTileKind::Tile32: launch<Tile32>(x, w, bias, y, a, act, what); break;
        case DepthwiseTileKind::Tile16: launch<Tile16>(x, w, bias, y, a, act, what); break;
        case DepthwiseTileKind::Tile8: launch<Tile8>(x, w, bias, y, a, act, what); break;
    }
}

std::vector<KernelInfo> conv2d_depthwise_kernel_info() {
    std::vector<KernelInfo> out;
    const auto add = [&](auto tile, const char* name) {
        using T = decltype(tile);
        const auto kernel = depthwise_kernel<T, Activation::None>;
        out.push_back(kernel_info(reinterpret_cast<const void*>(kernel), name, T::kThreads, 16 * 1024));
    };
    add(Tile32{}, "depthwise_32x32");
    add(Tile16{}, "depthwise_16x16");
    add(Tile8{}, "depthwise_8x8");
    for (KernelInfo& info : conv2d_depthwise_rows_kernel_info()) out.push_back(std::move(info));
    return out;
}

}  // namespace gpuopt::conv
