// The CS6235 report's convolution kernels (../shared/seeds/cs6235-cnn-gpu-conv-report.txt)
// as ONE templated kernel family, instantiated for the parameter values gpuopt offers.
//
// Every variant is a 1-D grid in which each thread owns one *group* of outputs: NU images
// x KU output maps at one output position (p, q). The flat group index is decoded q
// fastest, then p, then k-group and n-group (the report's q,p,k,n mapping) or n-group and
// k-group (its q,p,n,k "reorder"). Each thread runs the report's three remaining loops
// (c, r, s) in the "crs" or "rsc" order and keeps its NU x KU sums in registers (compile-
// time indices only), so one input value feeds KU maps and one filter value NU images:
//
//   plain      q,p,k,n  KU=1 NU=1 CU=1  crs
//   reorder    q,p,n,k  KU=1 NU=1 CU=1  crs
//   unroll_k   q,p,k,n  KU=2..16        crs or rsc   (unroll-and-jam of k into the c,r,s loops)
//   unroll_c   q,p,k,n  CU=2..16        crs          (the c loop unrolled and jammed into r,s)
//   unroll_nk  q,p,k,n  KU=4 NU=4       rsc          (unroll-and-jam of n and k)
//   shared     q,p,n,k  KU=1 NU=1       rsc, c tiled through shared memory
//   general    switches on the shape (see general_launch)
//
// Unlike the report's kernels, every instantiation is correct for any shape: groups at the
// end of K or N (K, N not multiples of the unroll factor) clamp their surplus lanes to the
// last valid map/image for loading (valid addresses, no branches in the loops) and do not
// write them; the c loop runs CU channels at a time and then a one-channel tail; taps in
// the zero padding are skipped by clamping the r and s ranges; the grid is grid-stride
// with 64-bit indices (offsets computed in 32 bits when every tensor fits, in 64 bits
// otherwise). Sums are float, in the loop order of the variant; bias and activation are
// fused.

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../common/launch.cuh"
#include "conv2d_cuda.hpp"

namespace gpuopt::conv {

namespace {

using Order = Cs6235LoopOrder;

// Loop bounds and the group grid, computed on the host.
struct Dims {
    std::int64_t P, Q;
    std::int64_t Kg, Ng;          // k-groups ceil(K/KU), n-groups ceil(N/NU)
    std::int64_t total;           // groups: Ng * Kg * P * Q
    std::int64_t tile_channels;   // shared: input channels per tile (TC)
};

// Runs f(c) for c in [begin, end): CU channels per step (a compile-time unrolled body),
// then the remainder one at a time.
template <int CU, typename I, typename F>
__device__ __forceinline__ void channel_run(I begin, I end, F&& f) {
    I c = begin;
    if constexpr (CU > 1) {
        for (; c + CU <= end; c += CU) {
#pragma unroll
            for (int t = 0; t < CU; ++t) f(c + t);
        }
    }
    for (; c < end; ++c) f(c);
}

// Decodes group index g into (q, p, kg, ng).
template <bool NBeforeK, typename I>
__device__ __forceinline__ void decode(I g, I P, I Q, I Kg, I Ng, I& q, I& p, I& kg, I& ng) {
    q = g % Q;
    g /= Q;
    p = g % P;
    g /= P;
    if constexpr (NBeforeK) {
        ng = g % Ng;
        kg = g / Ng;
    } else {
        kg = g % Kg;
        ng = g / Kg;
    }
}

// The body of every kernel. NBeforeK: mapping q,p,n,k (else q,p,k,n). KU / NU: output maps
// / images per thread. CU: c-loop unroll factor (1: none). Ord: crs or rsc. Shared: the c
// loop is tiled through shared memory (needs NBeforeK and rsc: a block then spans few
// k-groups, whose filters every thread of the block reads from the tile). I: the type of
// every offset and index inside x, w and y (int when all of them fit in 31 bits, which
// halves the registers the addresses take; int64 otherwise). The grid-stride loop itself
// is always 64-bit.
template <bool NBeforeK, int KU, int NU, int CU, Order Ord, bool Shared, typename I>
__device__ __forceinline__ void conv2d_cs6235_body(const float* __restrict__ x, const float* __restrict__ w,
                                                   const float* __restrict__ bias, float* __restrict__ y,
                                                   const Conv2dShape& shape, const Dims& d, Activation act) {
    static_assert(KU >= 1 && NU >= 1 && CU >= 1, "unroll factors are >= 1");
    static_assert(!Shared || (NBeforeK && Ord == Order::Rsc), "the shared tiling is for the q,p,n,k mapping, rsc");
    extern __shared__ float w_tile[];  // Shared: [k channels of the block][TC][R][S]

    const I N = static_cast<I>(shape.N), C = static_cast<I>(shape.C), H = static_cast<I>(shape.H),
            W = static_cast<I>(shape.W), K = static_cast<I>(shape.K), R = static_cast<I>(shape.R),
            S = static_cast<I>(shape.S);
    const I u = static_cast<I>(shape.stride_h), v = static_cast<I>(shape.stride_w), ph = static_cast<I>(shape.pad_h),
            pw = static_cast<I>(shape.pad_w);
    const I P = static_cast<I>(d.P), Q = static_cast<I>(d.Q), Kg = static_cast<I>(d.Kg), Ng = static_cast<I>(d.Ng);
    const I HW = H * W, RS = R * S, CHW = C * HW, CRS = C * RS;
    const std::int64_t block = blockDim.x;
    const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * block;

    // The loop bound is the block's first group, the same for every thread of the block, so
    // the __syncthreads of the shared path are reached by all of them.
    for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * block; base < d.total; base += step) {
        const std::int64_t g = base + threadIdx.x;
        const bool active = g < d.total;
        I q, p, kg, ng;
        decode<NBeforeK, I>(static_cast<I>(active ? g : d.total - 1), P, Q, Kg, Ng, q, p, kg, ng);
        const I k0 = kg * KU, n0 = ng * NU;

        // Window origin (negative inside the padding) and the taps that land in the input.
        const I row0 = p * u - ph, col0 = q * v - pw;
        const I r_lo = row0 < 0 ? -row0 : 0, r_hi = (H - row0 < R) ? H - row0 : R;
        const I s_lo = col0 < 0 ? -col0 : 0, s_hi = (W - col0 < S) ? W - col0 : S;

        // Lane offsets; surplus lanes of a tail group read the last image / map.
        I x_lane[NU];
#pragma unroll
        for (int i = 0; i < NU; ++i) x_lane[i] = (n0 + i < N ? n0 + i : N - 1) * CHW;
        I w_lane[KU];
#pragma unroll
        for (int j = 0; j < KU; ++j) w_lane[j] = (k0 + j < K ? k0 + j : K - 1) * CRS;

        float acc[NU][KU];
#pragma unroll
        for (int i = 0; i < NU; ++i)
#pragma unroll
            for (int j = 0; j < KU; ++j) acc[i][j] = 0.f;

        // One tap for the whole group: NU input values, KU filter values, NU*KU FMAs.
        // woff: offset in a filter (global path) or in the lane's tile rows (shared).
        auto tap = [&](I xoff, I woff) {
            float xv[NU];
#pragma unroll
            for (int i = 0; i < NU; ++i) xv[i] = __ldg(x + (x_lane[i] + xoff));
#pragma unroll
            for (int j = 0; j < KU; ++j) {
                const float wv = Shared ? w_tile[w_lane[j] + woff] : __ldg(w + (w_lane[j] + woff));
#pragma unroll
                for (int i = 0; i < NU; ++i) acc[i][j] = fmaf(xv[i], wv, acc[i][j]);
            }
        };
        // body(x offset of (row, col) in a channel, r*S + s) for every tap inside the input.
        auto rs_loop = [&](auto&& body) {
            for (I r = r_lo; r < r_hi; ++r)
                for (I s = s_lo; s < s_hi; ++s) body((row0 + r) * W + col0 + s, r * S + s);
        };

        if constexpr (Shared) {
            // The k-groups of this block's groups: with q,p,n,k a run of Ng*P*Q consecutive
            // groups shares one k-group, so a block spans a few (the host sized the tile for
            // the most any block can span). The tile holds their filters for TC channels;
            // the lanes index it instead of w.
            const std::int64_t run = static_cast<std::int64_t>(Ng) * P * Q;
            const std::int64_t last = (base + block < d.total ? base + block : d.total) - 1;
            const I kc0 = static_cast<I>(base / run) * KU;
            const I kchan = static_cast<I>(last / run - base / run + 1) * KU;
            const I TC = static_cast<I>(d.tile_channels);
#pragma unroll
            for (int j = 0; j < KU; ++j) w_lane[j] = (k0 + j - kc0) * TC * RS;
            for (I c0 = 0; c0 < C; c0 += TC) {
                const I tc = (C - c0 < TC) ? C - c0 : TC;
                const I per_k = tc * RS;  // w[k][c0 .. c0+tc)[r][s] is contiguous
                __syncthreads();          // the previous tile has been read
                for (I e = threadIdx.x; e < kchan * per_k; e += static_cast<I>(block)) {
                    const I kk = e / per_k, rem = e - kk * per_k;
                    const I kw = (kc0 + kk < K) ? kc0 + kk : K - 1;
                    w_tile[kk * TC * RS + rem] = __ldg(w + ((kw * C + c0) * RS + rem));
                }
                __syncthreads();
                if (active)
                    rs_loop([&](I xo, I wo) {
                        channel_run<CU>(I(0), tc, [&](I cc) { tap(xo + (c0 + cc) * HW, cc * RS + wo); });
                    });
            }
        } else if constexpr (Ord == Order::Crs) {
            // c outermost; with CU > 1 the CU channels of a step are jammed into the r, s loops.
            I c = 0;
            if constexpr (CU > 1) {
                for (; c + CU <= C; c += CU)
                    rs_loop([&](I xo, I wo) {
#pragma unroll
                        for (int t = 0; t < CU; ++t) tap(xo + (c + t) * HW, wo + (c + t) * RS);
                    });
            }
            for (; c < C; ++c) rs_loop([&](I xo, I wo) { tap(xo + c * HW, wo + c * RS); });
        } else {
            // r, s outermost (padding checks once per tap, not per channel), c innermost.
            rs_loop([&](I xo, I wo) { channel_run<CU>(I(0), C, [&](I c) { tap(xo + c * HW, wo + c * RS); }); });
        }

        if (active) {
#pragma unroll
            for (int i = 0; i < NU; ++i) {
#pragma unroll
                for (int j = 0; j < KU; ++j) {
                    const I n = n0 + i, k = k0 + j;
                    if (n < N && k < K) {
                        float out = acc[i][j];
                        if (bias) out += bias[k];
                        y[((n * K + k) * P + p) * Q + q] = apply_activation(out, act);
                    }
                }
            }
        }
    }
}

// Two entry points per instantiation: one the compiler sizes freely (up to 255 registers,
// used whenever the block size fits what it uses) and one bounded to 1024-thread blocks (at
// most 64 registers, so every block size runs; used only when the free one cannot launch
// the requested block, e.g. block_size=1024 with 72 registers per thread).
template <bool NBeforeK, int KU, int NU, int CU, Order Ord, bool Shared, typename I>
__global__ void conv2d_cs6235_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                     const float* __restrict__ bias, float* __restrict__ y, Conv2dShape shape,
                                     Dims d, Activation act) {
    conv2d_cs6235_body<NBeforeK, KU, NU, CU, Ord, Shared, I>(x, w, bias, y, shape, d, act);
}

template <bool NBeforeK, int KU, int NU, int CU, Order Ord, bool Shared, typename I>
__global__ void __launch_bounds__(1024, 1)
    conv2d_cs6235_kernel_1024(const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ bias, float* __restrict__ y, Conv2dShape shape, Dims d,
                              Activation act) {
    conv2d_cs6235_body<NBeforeK, KU, NU, CU, Ord, Shared, I>(x, w, bias, y, shape, d, act);
}

using KernelFn = void (*)(const float*, const float*, const float*, float*, Conv2dShape, Dims, Activation);

// The instantiations: one row per (mapping, KU, NU, CU, order, shared) a plan can ask for.
struct KernelEntry {
    bool n_before_k;
    int ku, nu, cu;
    Order order;
    bool shared;
    KernelFn fn[2][2];  // [64-bit offsets][bounded to 1024 threads]
};

template <bool NBeforeK, int KU, int NU, int CU, Order Ord, bool Shared = false>
KernelEntry entry() {
    return {NBeforeK,
            KU,
            NU,
            CU,
            Ord,
            Shared,
            {{&conv2d_cs6235_kernel<NBeforeK, KU, NU, CU, Ord, Shared, std::int32_t>,
              &conv2d_cs6235_kernel_1024<NBeforeK, KU, NU, CU, Ord, Shared, std::int32_t>},
             {&conv2d_cs6235_kernel<NBeforeK, KU, NU, CU, Ord, Shared, std::int64_t>,
              &conv2d_cs6235_kernel_1024<NBeforeK, KU, NU, CU, Ord, Shared, std::int64_t>}}};
}

// Every row, in one list (the order the kernels have always been instantiated in): unroll_k's for each KU of
// kCs6235UnrollK (crs, then rsc), unroll_c's for each CU of kCs6235UnrollC (0, no unrolling, is plain's row).
template <std::size_t... K, std::size_t... C>
std::vector<KernelEntry> kernel_table(std::index_sequence<K...>, std::index_sequence<C...>) {
    return {
        entry<false, 1, 1, 1, Order::Crs>(),   // plain, unroll_c unroll=0
        entry<true, 1, 1, 1, Order::Crs>(),    // reorder
        entry<false, kCs6235UnrollK.values[K], 1, 1, Order::Crs>()...,  // unroll_k crs
        entry<false, kCs6235UnrollK.values[K], 1, 1, Order::Rsc>()...,  // unroll_k rsc; general k (small N, C < 256)
        entry<false, 1, 1, std::max(1, kCs6235UnrollC.values[C]), Order::Crs>()...,  // unroll_c
        entry<false, 4, 4, 1, Order::Rsc>(),   // unroll_nk; general nk (large N)
        entry<true, 1, 1, 1, Order::Rsc, true>(),  // shared
        entry<false, 2, 1, 8, Order::Rsc>(),   // general k and c (small N, C >= 256)
    };
}

const KernelEntry* find_kernel(const Cs6235Launch& plan) {
    static const std::vector<KernelEntry> table = kernel_table(std::make_index_sequence<kCs6235UnrollK.size()>{},
                                                               std::make_index_sequence<kCs6235UnrollC.size()>{});
    for (const KernelEntry& e : table)
        if (e.n_before_k == plan.map_n_before_k && e.ku == plan.k_unroll && e.nu == plan.n_unroll &&
            e.cu == plan.c_unroll && e.order == plan.loop_order && e.shared == plan.shared)
            return &e;
    return nullptr;
}

const char* variant_name(Cs6235Variant v) {
    switch (v) {
        case Cs6235Variant::Plain: return "plain";
        case Cs6235Variant::Reorder: return "reorder";
        case Cs6235Variant::UnrollK: return "unroll_k";
        case Cs6235Variant::UnrollC: return "unroll_c";
        case Cs6235Variant::UnrollNK: return "unroll_nk";
        case Cs6235Variant::Shared: return "shared";
        case Cs6235Variant::General: return "general";
    }
    return "?";
}

// The general kernel's switch (the report's Sec. 3 summary, thresholds made explicit):
//  - N >= 8 and K >= 4: n and k unrolled and jammed, 4 x 4, rsc (the report did this for
//    N = 128 and K >= 64, Fig 8). From N = 8 on at least two full groups of 4 images exist,
//    so the surplus lanes of a tail group cost at most 3 of 11 images; with K < 4 most
//    k lanes would idle, so such shapes take the branches below.
//  - else C >= 256: k and c unrolled, 2 maps x 8 channels, rsc (conf2: C = 832, where
//    c unrolling helped, Fig 4).
//  - else: k unrolled by 2, rsc (conf1). The report saw k unrolling stagnate or hurt at
//    N = 1 (Fig 3a): there the grid is small, so the factor stays at 2 to keep threads for
//    the H200's 132 SMs; rsc because it beat crs at equal factors (Fig 5).
void general_launch(const Conv2dShape& s, Cs6235Launch& plan) {
    plan.loop_order = Order::Rsc;
    if (s.N >= kGeneralMinImages && s.K >= kGeneralMinMaps) {
        plan.n_unroll = 4;
        plan.k_unroll = 4;
    } else if (s.C >= kGeneralMinChannels) {
        plan.k_unroll = 2;
        plan.c_unroll = 8;
    } else {
        plan.k_unroll = 2;
    }
}

}  // namespace

Cs6235Variant cs6235_variant_from_string(const std::string& name) {
    for (Cs6235Variant v : {Cs6235Variant::Plain, Cs6235Variant::Reorder, Cs6235Variant::UnrollK,
                            Cs6235Variant::UnrollC, Cs6235Variant::UnrollNK, Cs6235Variant::Shared,
                            Cs6235Variant::General})
        if (name == variant_name(v)) return v;
    detail::fail_argument(__FILE__, __LINE__,
                          "CS6235 conv2d variant must be one of plain, reorder, unroll_k, unroll_c, unroll_nk, shared, "
                          "general; got '" + name + "'");
}

Cs6235Launch conv2d_cs6235_plan(const Conv2dShape& s, const Cs6235Config& cfg) {
    s.validate();
    const std::string name = std::string("conv2d ") + variant_name(cfg.variant);
    require_choice(kCs6235BlockSizes, cfg.block_size, name);
    const bool takes_unroll = cfg.variant == Cs6235Variant::UnrollK || cfg.variant == Cs6235Variant::UnrollC;
    GPUOPT_REQUIRE(takes_unroll || cfg.unroll == 0,
                   name + ": takes no unroll factor (unroll must be 0), got " + std::to_string(cfg.unroll));
    GPUOPT_REQUIRE(cfg.variant == Cs6235Variant::UnrollK || cfg.loop_order == Order::Crs,
                   name + ": has a fixed loop order; loop_order is a parameter of unroll_k only");

    Cs6235Launch plan;
    switch (cfg.variant) {
        case Cs6235Variant::Plain: break;
        case Cs6235Variant::Reorder: plan.map_n_before_k = true; break;
        case Cs6235Variant::UnrollK:
            plan.k_unroll = require_choice(kCs6235UnrollK, cfg.unroll, name);
            plan.loop_order = cfg.loop_order;
            break;
        case Cs6235Variant::UnrollC:
            plan.c_unroll = require_choice(kCs6235UnrollC, cfg.unroll, name) == 0 ? 1 : cfg.unroll;
            break;
        case Cs6235Variant::UnrollNK:
            plan.k_unroll = 4;
            plan.n_unroll = 4;
            plan.loop_order = Order::Rsc;
            break;
        case Cs6235Variant::Shared: {
            plan.map_n_before_k = true;
            plan.loop_order = Order::Rsc;
            plan.shared = true;
            // With q,p,n,k a block of B consecutive groups spans at most (B-1)/run + 2
            // k-groups (run = Ng*P*Q groups share one); the tile holds their filters for TC
            // channels, TC chosen so the tile has about B values (the report's Tilesz =
            // Blocksize: one load per thread per tile), at least one channel.
            const std::int64_t B = cfg.block_size, KU = plan.k_unroll, RS = s.R * s.S;
            const std::int64_t run = ceil_div<std::int64_t>(s.N, plan.n_unroll) * s.P() * s.Q();
            const std::int64_t span = std::min(ceil_div<std::int64_t>(s.K, KU), (B - 1) / run + 2);
            const std::int64_t per_channel = span * KU * RS;  // tile values per input channel
            plan.tile_channels = std::max<std::int64_t>(1, std::min<std::int64_t>(s.C, B / per_channel));
            plan.shared_bytes = per_channel * plan.tile_channels * static_cast<std::int64_t>(sizeof(float));
            break;
        }
        case Cs6235Variant::General: general_launch(s, plan); break;
        default: GPUOPT_REQUIRE(false, "conv2d CS6235: unknown variant " + std::to_string(static_cast<int>(cfg.variant)));
    }
    return plan;
}

void conv2d_cs6235(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                   Activation act, const Cs6235Config& cfg) {
    const Cs6235Launch plan = conv2d_cs6235_plan(s, cfg);
    const std::string name = std::string("conv2d ") + variant_name(cfg.variant);
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr, name + ": x, w and y must be device pointers");
    const KernelEntry* kernel = find_kernel(plan);
    GPUOPT_REQUIRE(kernel != nullptr, name + ": no kernel instantiated for this plan (internal error)");

    Dims d{};
    d.P = s.P();
    d.Q = s.Q();
    d.Kg = ceil_div<std::int64_t>(s.K, plan.k_unroll);
    d.Ng = ceil_div<std::int64_t>(s.N, plan.n_unroll);
    d.total = d.Ng * d.Kg * d.P * d.Q;
    d.tile_channels = plan.tile_channels;
    // 32-bit offsets when every index the kernel forms fits: the elements of x, w and y,
    // the groups, and the padded extents (window origins and clamped r, s ranges).
    const std::int64_t limit = 0x7fffffffLL;
    const bool index32 = s.N * s.C * s.H * s.W <= limit && s.K * s.C * s.R * s.S <= limit &&
                         s.N * s.K * d.P * d.Q <= limit && d.total <= limit &&
                         s.H + 2 * s.pad_h + s.stride_h <= limit && s.W + 2 * s.pad_w + s.stride_w <= limit &&
                         s.N + plan.n_unroll <= limit && s.K + plan.k_unroll <= limit && s.C + 16 <= limit;

    const int B = cfg.block_size;
    check_block_threads(B, true);
    // Registers per thread bound the block size (the report's "register allocation issues"
    // at high unroll factors): the freely compiled kernel when it can run B threads, else
    // the one bounded to 1024 threads (fewer registers, possibly spilling).
    KernelFn fn = kernel->fn[index32 ? 0 : 1][0];
    cudaFuncAttributes attr{};
    GPUOPT_CUDA_CHECK(cudaFuncGetAttributes(&attr, fn));
    if (B > attr.maxThreadsPerBlock) {
        fn = kernel->fn[index32 ? 0 : 1][1];
        GPUOPT_CUDA_CHECK(cudaFuncGetAttributes(&attr, fn));
    }
    GPUOPT_REQUIRE(B <= attr.maxThreadsPerBlock,
                   name + ": block_size=" + std::to_string(B) + " is more than this kernel can run (" +
                       std::to_string(attr.numRegs) + " registers per thread allow at most " +
                       std::to_string(attr.maxThreadsPerBlock) + " threads per block)");
    std::size_t smem = 0;
    if (plan.shared) {
        smem = static_cast<std::size_t>(plan.shared_bytes);
        require_shared_memory(fn, smem,
                              (name + ": a filter tile of " + std::to_string(plan.tile_channels) +
                               " input channel(s) for every output map a block spans")
                                  .c_str());
    }
    fn<<<grid_for(d.total, B), B, smem, current_stream()>>>(x, w, bias, y, s, d, act);
    GPUOPT_CHECK_LAUNCH("conv2d_cs6235_kernel");
}

}  // namespace gpuopt::conv
