// conv2d "winograd": fused Winograd F(m x m, r x r) convolution (notes/winograd.md), stride 1, 3x3 and 5x5 filters, any
// padding; with a 2x2 pool fused after the output transform for gpuopt.nn.conv2d_pool (the MNIST winograd stage).
//
// Y = A^T [ sum_c (G g_kc G^T) .* (B^T d_c B) ] A per m x m output tile (n = m + r - 1, n^2 transform points).
// The transforms are the exact ones of gpuopt/conv/winograd.py rounded to float32 once, generated as
// straight-line code into winograd_transforms.cuh (compile-time constants, zeros dropped).
//
// Two kernels per call:
//   1. filter transform: U[pt][c][k] = (G g_kc G^T)[pt] into pool scratch, K padded to the block's KB maps and C
//      to the chunk's CB channels with zeros (so the main kernel stages U by unconditional 16-byte cp.async);
//   2. the fused kernel. A block owns TB consecutive tiles (flattened over images, so tiles of several images
//      share a block) and KB maps, and loops over the channels CB at a time, staging one chunk ahead:
//        0. chunk i+1's raw n x n patches -> Rs (4-byte cp.async, zero-filled outside the image: padding and
//           ragged tiles) and its U -> Us[(i+1) & 1] (16-byte cp.async) are issued before chunk i's products,
//           so global latency hides behind them (one 512-thread block per SM; two 256-thread ones for
//           Fashion-sized K <= 16); each thread's source addresses and bounds are computed once per block;
//        a. column pass (B^T) in place in Rs[c][row][col][tile];
//        b. row pass (x B) -> Vs[pt][c][tile];
//        c. per-point products: thread (pt, kg, tg) owns a KT x TT register tile of maps x tiles of its point
//           and adds, per channel, KT/4 + TT/4 float4 shared loads into KT*TT FMAs (64 FMAs per 4 loads).
//           Or (Shape Tc, products "tf32x3", F(4,5) 32 x 16 x 8 only) a warp takes 4 whole points on the tensor
//           cores in 3xTF32 (winograd_tc.cuh), with U (from the filter kernel) and V (from the row pass) stored in
//           mma fragment order.
//      Three barriers per chunk. After the last chunk the accumulators go through shared memory (Es[pt][kk][tile],
//      over the staging buffers) and each thread takes whole (map, tile) pairs: A^T M A, bias, activation, and
//      the m x m outputs stored with ragged edges masked, or pooled 2x2 in registers (m even: pool windows never
//      cross tiles).
// Deterministic: each output is one thread's fixed-order sum (channels in order, then the fixed transforms).
// No run-time indexed register arrays (every loop over a register array is unrolled on template constants).
//
// Limits: stride 1, square 3x3 or 5x5 filters, m 2 or 4; tiles (N * ceil(P/m) * ceil(Q/m)) and C*H*W are ints.

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/device.hpp"
#include "../common/device_buffer.cuh"
#include "../common/launch.cuh"
#include "../common/async_copy.cuh"
#include "conv2d_cuda.hpp"
#include "winograd_block.cuh"
#include "winograd_resident.cuh"
#include "winograd_tc.cuh"
#include "winograd_transforms.cuh"

namespace gpuopt::conv {

namespace {

using i64 = std::int64_t;
using winograd::TileTable;
using winograd::WinoParams;

// Block shape: KB maps x TB tiles, CB channels per chunk, KT x TT register tile per thread, MinBlocks resident
// blocks per SM asked of ptxas (2 only at 256 threads: 128 registers; 2 at 288 threads caps them at 96 and spills).
// Tc: the per-point products in 3xTF32 on the tensor cores (winograd_tc.cuh; 32 x 16 x 8 blocks only): a warp
// takes kTcPoints whole points instead of a thread an 8 x 8 tile of one.
template <int M, int R, int KB_, int TB_, int CB_ = 8, int MinBlocks = 1, bool Tc = false>
struct Shape {
    static constexpr int kM = M, kR = R, kN = M + R - 1, kNN = kN * kN;
    static constexpr int KB = KB_, TB = TB_, CB = CB_, KT = 8, TT = 8;
    static constexpr int KG = KB / KT, TG = TB / TT;
    static constexpr int kThreads = kNN * KG * TG;
    static constexpr int kMinBlocks = MinBlocks;
    static constexpr bool kTc = Tc;
    static constexpr int kTcPoints = kNN * 32 / kThreads;
    static_assert(!Tc || (KB == winograd_tc::kMaps && TB == winograd_tc::kTiles && CB == winograd_tc::kChannels &&
                          kNN % (kThreads / 32) == 0), "tensor-core fragment layouts: 32 maps x 16 tiles x 8 channels");
    // Per-point strides of Us and Vs padded by 4 floats: the product loop's float4 loads of the 4 points a warp
    // spans then fall on different banks (unpadded, the 256- and 128-float strides put them on the same ones).
    // Tc: a warp reads one point at a time, in fragment order: no padding.
    static constexpr int kUsPt = CB * KB + (Tc ? 0 : 4), kVsPt = CB * TB + (Tc ? 0 : 4);
    // Rs's channel stride padded by 16 floats: the row pass's warps span two channels (opposite bank halves).
    static constexpr int kRsC = kNN * TB + 16;
    static constexpr int kStageFloats = kNN * (2 * kUsPt + kVsPt) + CB * kRsC;  // Us x 2, Vs, Rs
    // Filter staging: thread tid always copies float4 tid % (KB/4) of channel (tid / (KB/4)) % CB, points
    // tid / (KB/4 CB) + kPtStep i, when the block's threads cover whole (channel, map) planes.
    static constexpr bool kFixedU = kThreads % (CB * KB / 4) == 0 && kNN % (kThreads / (CB * KB / 4)) == 0;
    static constexpr int kPtStep = kThreads / (CB * KB / 4);
    // Es[pt][kk][t]: the point stride padded by 16 floats (neighbouring points on opposite bank halves) and each
    // map row's float4 slots XOR-swizzled by the map group kk / KT, so the accumulator stores (a warp spans 2-8
    // points x map groups x tile groups) use all banks; the epilogue's reads (t contiguous) stay conflict-free.
    // Tc: map rows padded to TB + 4 floats instead (the C fragments' float2 stores: 8 maps x 4 tile pairs a warp).
    static constexpr int kEsK = Tc ? TB + 4 : TB;
    static constexpr int kEsPt = Tc ? KB * kEsK : KB * TB + 16;
    static constexpr int kEpilogueFloats = kNN * kEsPt;  // Es
    static_assert(TB % 16 == 0, "Es swizzle: at least 4 float4 slots a map row");
    static constexpr int kSharedBytes = 4 * (kStageFloats > kEpilogueFloats ? kStageFloats : kEpilogueFloats);
    static_assert(KB % KT == 0 && TB % TT == 0 && KT % 4 == 0 && TT % 4 == 0 && kThreads % 32 == 0, "block shape");
};

// U[(pt * Cp + c) * Kp + k] = (G g G^T)[pt] of w[k][c] (zero for k >= K or c >= C). One thread per (k, c), k
// fastest so the stores are coalesced. Frag (the tensor-core kernel): U in blocks of (point, 8-channel chunk,
// 32-map block), each in A-fragment order (winograd_tc::u_index), so a block stages 1 KB per point contiguously.
template <int M, int R, bool Frag>
__global__ void winograd_filter_kernel(const float* __restrict__ w, float* __restrict__ u, int K, int C, int Kp,
                                       int Cp) {
    using T = winograd::Transforms<M, R>;
    constexpr int n = T::kN;
    const i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<i64>(Kp) * Cp) return;
    const int k = static_cast<int>(idx % Kp), c = static_cast<int>(idx / Kp);
    float tmp[n][R];  // G g: columns of g through G
    const bool ok = k < K && c < C;
#pragma unroll
    for (int s = 0; s < R; ++s) {
        float col[R], o[n];
#pragma unroll
        for (int r = 0; r < R; ++r) col[r] = ok ? w[((static_cast<i64>(k) * C + c) * R + r) * R + s] : 0.0f;
        T::g(col, o);
#pragma unroll
        for (int a = 0; a < n; ++a) tmp[a][s] = o[a];
    }
#pragma unroll
    for (int a = 0; a < n; ++a) {
        float o[n];
        T::g(tmp[a], o);
#pragma unroll
        for (int b = 0; b < n; ++b) {
            const int p = a * n + b;
            if constexpr (Frag) {
                namespace tc = winograd_tc;
                u[((static_cast<i64>(p) * (Cp / tc::kChannels) + c / tc::kChannels) * (Kp / tc::kMaps) +
                   k / tc::kMaps) * tc::kUFloats + tc::u_index(k % tc::kMaps, c % tc::kChannels)] = o[b];
            } else {
                u[(static_cast<i64>(p) * Cp + c) * Kp + k] = o[b];
            }
        }
    }
}

template <typename S>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks)
    winograd_kernel(const float* __restrict__ x, const float* __restrict__ u, const float* __restrict__ bias,
                    float* __restrict__ y, const WinoParams a) {
    using T = winograd::Transforms<S::kM, S::kR>;
    constexpr int n = S::kN, NN = S::kNN, M = S::kM, KB = S::KB, TB = S::TB, CB = S::CB, KT = S::KT, TT = S::TT;
    extern __shared__ __align__(16) float smem[];
    constexpr int kUsPt = S::kUsPt, kVsPt = S::kVsPt;
    float* Us = smem;                       // 2 x [NN][kUsPt] ([CB][KB] + pad): chunk i in buffer i & 1
    float* Vs = Us + 2 * NN * kUsPt;        // [NN][kVsPt] ([CB][TB] + pad)
    float* Rs = Vs + NN * kVsPt;            // [CB][n][n][TB] (channel stride kRsC): raw patches, then B^T d
    float* Es = smem;                       // [NN][KB][TB] (padded, swizzled: es()) after the last chunk
    __shared__ TileTable<TB> tt;

    const int tid = threadIdx.x;
    const int tile0 = blockIdx.x * TB, k0 = blockIdx.y * KB;
    tt.fill(a, tile0, M, tid, S::kThreads);

    const int pt = tid / (S::KG * S::TG), sub = tid % (S::KG * S::TG);
    const int kg = sub / S::TG, tg = sub % S::TG;
    float acc[KT][TT];  // FFMA: maps kg KT.. x tiles tg TT.. of point pt
#pragma unroll
    for (int i = 0; i < KT; ++i)
#pragma unroll
        for (int j = 0; j < TT; ++j) acc[i][j] = 0.0f;
    constexpr int NP = S::kTcPoints;
    const int lane = tid % 32, pt0 = (tid / 32) * NP;  // Tc: the warp's points pt0..
    float tacc[NP][2][2][4];                           // Tc: C fragments (winograd_tc::products)
#pragma unroll
    for (int p = 0; p < NP; ++p)
#pragma unroll
        for (int i = 0; i < 16; ++i) tacc[p][i / 8][(i / 4) % 2][i % 4] = 0.0f;
    __syncthreads();

    const winograd::PatchStager<TB, n, S::kThreads, S::kRsC> patches(x, tt, a, tid);
    // This thread's filter float4s (S::kFixedU): float4 uq of channel uc, points up0 + kPtStep i.
    constexpr int KB4 = KB / 4;
    const int uq = tid % KB4, uc = (tid / KB4) % CB, up0 = tid / (KB4 * CB);
    const i64 ustep = static_cast<i64>(S::kPtStep) * a.Cp * a.Kp;

    // Chunk c0's raw patches into Rs (4-byte cp.async, zero-filled outside the image, for channels past C and
    // for missing tiles: padding and ragged tiles read zeros) and its filters into Us[buf] (16-byte cp.async;
    // U is padded, every copy is in bounds). Issued one chunk ahead, so they land during the previous chunk's
    // products.
    auto stage = [&](int c0, float* us) {
        patches.template issue<CB>(x, c0, a.C, Rs);
        if constexpr (S::kTc) {  // U in fragment blocks: 1 KB per point, contiguous; 16-byte copies
            namespace tc = winograd_tc;
            constexpr int kPerPt = tc::kUFloats / 4, kPtStep = S::kThreads / kPerPt;
            const int f = tid % kPerPt, p0 = tid / kPerPt;
            const float* src = u + ((static_cast<i64>(p0) * (a.Cp / CB) + c0 / CB) * (a.Kp / KB) + blockIdx.y) *
                                       tc::kUFloats + 4 * f;
            const i64 step = static_cast<i64>(kPtStep) * (a.Cp / CB) * (a.Kp / KB) * tc::kUFloats;
#pragma unroll
            for (int i = 0; i < NN / kPtStep; ++i)
                dev::cp_async_16(us + (p0 + i * kPtStep) * kUsPt + 4 * f, src + i * step, 16);
        } else if constexpr (S::kFixedU) {
            const float* us_src = u + (static_cast<i64>(up0) * a.Cp + c0 + uc) * a.Kp + k0 + 4 * uq;
            float* us_dst = us + up0 * kUsPt + uc * KB + 4 * uq;
#pragma unroll
            for (int i = 0; i < NN / S::kPtStep; ++i)
                dev::cp_async_16(us_dst + i * S::kPtStep * kUsPt, us_src + i * ustep, 16);
        } else {
            for (int i = tid; i < NN * CB * KB4; i += S::kThreads) {
                const int q4 = i % KB4, rest = i / KB4;
                const int c = rest % CB, p = rest / CB;
                dev::cp_async_16(us + p * kUsPt + c * KB + q4 * 4,
                                 u + (static_cast<i64>(p) * a.Cp + c0 + c) * a.Kp + k0 + q4 * 4, 16);
            }
        }
    };
    stage(0, Us);
    dev::cp_async_commit();

    for (int c0 = 0, buf = 0; c0 < a.Cp; c0 += CB, buf ^= 1) {
        dev::cp_async_wait<0>();
        __syncthreads();  // chunk c0 staged; the previous chunk's products are done with Vs
        // a. column pass (B^T) in place in Rs.
        winograd::column_pass<M, S::kR, TB, CB, S::kRsC>(Rs, tid, S::kThreads);
        __syncthreads();
        // b. row pass (x B): V[(r*n + b)][c][t].
        for (int i = tid; i < CB * n * TB; i += S::kThreads) {
            const int t = i % TB, c = (i / TB) % CB, r = i / (TB * CB);  // c before r: Vs stores contiguous
            float d[n], o[n];
#pragma unroll
            for (int b = 0; b < n; ++b) d[b] = Rs[c * S::kRsC + (r * n + b) * TB + t];
            T::bt(d, o);
#pragma unroll
            for (int b = 0; b < n; ++b)
                Vs[(r * n + b) * kVsPt + (S::kTc ? winograd_tc::v_index(c, t) : c * TB + t)] = o[b];
        }
        __syncthreads();  // Vs ready; Rs and the other U buffer (read by the previous chunk) free
        if (c0 + CB < a.Cp) stage(c0 + CB, Us + (buf ^ 1) * NN * kUsPt);
        dev::cp_async_commit();
        // c. the point's products, channels in order.
        if constexpr (S::kTc) {
            winograd_tc::products<NP>(tacc, Us + buf * NN * kUsPt + pt0 * kUsPt, Vs + pt0 * kVsPt, lane);
        } else {
            const float* up = Us + buf * NN * kUsPt + pt * kUsPt + kg * KT;
            const float* vp = Vs + pt * kVsPt + tg * TT;
#pragma unroll 2
            for (int c = 0; c < CB; ++c) {
                float uf[KT], vf[TT];
#pragma unroll
                for (int q = 0; q < KT / 4; ++q) {
                    const float4 t4 = *reinterpret_cast<const float4*>(up + c * KB + 4 * q);
                    uf[4 * q] = t4.x, uf[4 * q + 1] = t4.y, uf[4 * q + 2] = t4.z, uf[4 * q + 3] = t4.w;
                }
#pragma unroll
                for (int q = 0; q < TT / 4; ++q) {
                    const float4 t4 = *reinterpret_cast<const float4*>(vp + c * TB + 4 * q);
                    vf[4 * q] = t4.x, vf[4 * q + 1] = t4.y, vf[4 * q + 2] = t4.z, vf[4 * q + 3] = t4.w;
                }
#pragma unroll
                for (int i = 0; i < KT; ++i)
#pragma unroll
                    for (int j = 0; j < TT; ++j) acc[i][j] = fmaf(uf[i], vf[j], acc[i][j]);
            }
        }
    }
    dev::cp_async_wait<0>();
    __syncthreads();  // every product done before Es overwrites the staging buffers

    // Accumulators to Es[pt][kk][t] (over the staging buffers).
    auto es = [](int p, int kk, int t) {
        if constexpr (S::kTc) return p * S::kEsPt + kk * S::kEsK + t;
        else return p * S::kEsPt + kk * TB + (((t >> 2) ^ ((kk / KT) & 3)) << 2) + (t & 3);
    };
    if constexpr (S::kTc) {  // C fragment (g, t): maps g, g + 8 x tiles 2t, 2t + 1 of each 16 x 8 tile
        const int g = lane / 4, t2 = 2 * (lane % 4);
#pragma unroll
        for (int p = 0; p < NP; ++p)
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                for (int ni = 0; ni < 2; ++ni)
#pragma unroll
                    for (int h = 0; h < 2; ++h)
                        *reinterpret_cast<float2*>(Es + es(pt0 + p, 16 * mi + g + 8 * h, 8 * ni + t2)) =
                            make_float2(tacc[p][mi][ni][2 * h], tacc[p][mi][ni][2 * h + 1]);
    } else {
#pragma unroll
        for (int i = 0; i < KT; ++i)
#pragma unroll
            for (int q = 0; q < TT / 4; ++q)
                *reinterpret_cast<float4*>(Es + es(pt, kg * KT + i, tg * TT + 4 * q)) =
                    make_float4(acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]);
    }
    __syncthreads();

    // Whole (map, tile) pairs per thread, tile fastest (conflict-free reads of Es): Y = A^T M A.
    for (int pair = tid; pair < KB * TB; pair += S::kThreads) {
        const int t = pair % TB, kk = pair / TB, k = k0 + kk;
        const int g = tile0 + t;
        if (k >= a.K || g >= a.tiles) continue;
        float tmp[M][n];  // A^T M: columns of M through A^T
#pragma unroll
        for (int b = 0; b < n; ++b) {
            float col[n], o[M];
#pragma unroll
            for (int r = 0; r < n; ++r) col[r] = Es[es(r * n + b, kk, t)];
            T::at(col, o);
#pragma unroll
            for (int i = 0; i < M; ++i) tmp[i][b] = o[i];
        }
        float yv[M][M];
#pragma unroll
        for (int i = 0; i < M; ++i) T::at(tmp[i], yv[i]);
        winograd::store_tile<M>(yv, bias ? bias[k] : 0.0f, k, tt.img[t], (tt.row0[t] + a.ph) / M,
                                (tt.col0[t] + a.pw) / M, a, y);
    }
}

using WinoKernel = void (*)(const float*, const float*, const float*, float*, WinoParams);
using FilterKernel = void (*)(const float*, float*, int, int, int, int);

struct WinoLaunch {
    WinoKernel kernel;
    FilterKernel filter;
    int KB, TB, CB, threads, shared_bytes;
    bool all_maps;  // one block runs every map block (the resident kernel): grid.y = 1
};

template <typename S>
WinoLaunch launch_of() {
    return {winograd_kernel<S>, winograd_filter_kernel<S::kM, S::kR, S::kTc>, S::KB, S::TB, S::CB, S::kThreads,
            S::kSharedBytes, false};
}

template <typename S>
WinoLaunch resident_launch() {
    return {winograd::winograd_resident_kernel<S>, winograd_filter_kernel<S::kM, S::kR, true>, S::KB, S::TB, S::CB,
            S::kThreads, S::kSharedBytes, true};
}

// F(4x4, 5x5) with every channel's V resident (winograd_resident.cuh): C <= 32, 16 tiles, 3xTF32 products, two
// warps a row of points (512 threads, 128 registers). On the H200 (MNIST conv2 + pool, 10,000 images) it ran
// 0.4515 ms against 0.4436 ms for one warp a row (256 threads, 254 registers; the same sums, bit for bit, but not
// run through the GPU tests on its own): notes/winograd.md, round 4.
constexpr int kResidentCMax = 32;
using Resident = winograd::ResidentShape<4, 5, 16, kResidentCMax, 2>;

// The instantiation for (m, r), C and K. F(4,5): with C <= 32 and K > 16 (MNIST conv2) the resident-V block
// (the input transformed once for all maps, 3xTF32 products; Tf32x3 asks for it at any K); with K <= 16 16 maps
// x 16 tiles x 4-channel chunks a block (Fashion conv2's 16 maps; 256 threads, 68 KB: two blocks per SM, so one
// block's staging, barriers and epilogue overlap the other's products), else 32 maps x 16 tiles x 8 channels (one
// 512-thread block per SM), FFMA, or Tf32x3's 3xTF32 products when C > 32 (the check refuses tf32x3 for other
// F(m, r)).
WinoLaunch select(int m, int r, i64 C, i64 K, WinogradProducts products) {
    if (m == 4 && r == 5) {
        const bool tc = products == WinogradProducts::Tf32x3;
        if (C <= kResidentCMax && (tc || (products == WinogradProducts::Auto && K > 16)))
            return resident_launch<Resident>();
        if (tc) return launch_of<Shape<4, 5, 32, 16, 8, 1, true>>();
        return K <= 16 ? launch_of<Shape<4, 5, 16, 16, 4, 2>>() : launch_of<Shape<4, 5, 32, 16>>();
    }
    if (m == 2 && r == 5) return launch_of<Shape<2, 5, 32, 16>>();
    if (m == 4 && r == 3) return launch_of<Shape<4, 3, 32, 16>>();
    return launch_of<Shape<2, 3, 32, 32>>();
}

}  // namespace

int conv2d_winograd_check(const Conv2dShape& s, int m, WinogradPool pool, WinogradProducts products) {
    s.validate();
    GPUOPT_REQUIRE(s.stride_h == 1 && s.stride_w == 1,
                   "conv2d winograd: stride must be 1 (Winograd tiles assume unit stride), got " +
                       std::to_string(s.stride_h) + "x" + std::to_string(s.stride_w));
    GPUOPT_REQUIRE(s.R == s.S && (s.R == 3 || s.R == 5),
                   "conv2d winograd: filters must be 3x3 or 5x5 (the compiled F(m, r)), got " + std::to_string(s.R) +
                       "x" + std::to_string(s.S));
    require_choice(kWinogradTiles, m, "conv2d winograd");
    const int mm = m == 0 ? kWinogradDefaultTile : m;
    GPUOPT_REQUIRE(products != WinogradProducts::Tf32x3 || (mm == 4 && s.R == 5),
                   "conv2d winograd: products 'tf32x3' is compiled for F(4x4, 5x5) only (m = 4, 5x5 filters)");
    const i64 tiles = s.N * ceil_div<i64>(s.P(), mm) * ceil_div<i64>(s.Q(), mm);
    GPUOPT_REQUIRE(tiles < INT_MAX / 2 && s.C * s.H * s.W < INT_MAX && s.K < INT_MAX / 2,
                   "conv2d winograd: N*ceil(P/m)*ceil(Q/m) output tiles and C*H*W must be below 2^30");
    GPUOPT_REQUIRE(pool == WinogradPool::None || (s.P() >= 2 && s.Q() >= 2),
                   "conv2d winograd: the pooled output would be empty (conv output smaller than 2x2)");
    return mm;
}

void conv2d_winograd(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                     Activation act, int m, WinogradPool pool, WinogradProducts products) {
    const int mm = conv2d_winograd_check(s, m, pool, products);
    GPUOPT_REQUIRE(x != nullptr && w != nullptr && y != nullptr, "conv2d winograd: x, w and y must be device pointers");
    const WinoLaunch L = select(mm, static_cast<int>(s.R), s.C, s.K, products);
    const std::string what = "conv2d winograd F(" + std::to_string(mm) + "," + std::to_string(s.R) + ")";
    require_shared_memory(L.kernel, static_cast<std::size_t>(L.shared_bytes), what.c_str());

    WinoParams a{};
    a.C = static_cast<int>(s.C);
    a.H = static_cast<int>(s.H);
    a.W = static_cast<int>(s.W);
    a.K = static_cast<int>(s.K);
    a.ph = static_cast<int>(s.pad_h);
    a.pw = static_cast<int>(s.pad_w);
    a.P = static_cast<int>(s.P());
    a.Q = static_cast<int>(s.Q());
    a.TQ = ceil_div(a.Q, mm);
    a.TPQ = ceil_div(a.P, mm) * a.TQ;
    a.tiles = static_cast<int>(s.N * a.TPQ);
    a.Cp = ceil_div(a.C, L.CB) * L.CB;
    a.Kp = ceil_div(a.K, L.KB) * L.KB;
    a.act = act;
    a.pool = pool;
    const int n = mm + static_cast<int>(s.R) - 1;
    GPUOPT_REQUIRE(L.all_maps || a.Kp / L.KB <= 65535, what + ": K above the grid's y limit");

    // Transformed filters, once per call (pool scratch; stream-ordered reuse after the kernel).
    DeviceBuffer<float> u(static_cast<std::size_t>(n) * n * a.Cp * a.Kp);
    const i64 pairs = static_cast<i64>(a.Kp) * a.Cp;
    L.filter<<<grid_for(pairs, 256), 256, 0, current_stream()>>>(w, u.data(), a.K, a.C, a.Kp, a.Cp);
    GPUOPT_CHECK_LAUNCH("winograd_filter_kernel");
    const dim3 grid(static_cast<unsigned>(ceil_div(a.tiles, L.TB)),
                    L.all_maps ? 1u : static_cast<unsigned>(a.Kp / L.KB));
    L.kernel<<<grid, L.threads, static_cast<std::size_t>(L.shared_bytes), current_stream()>>>(x, u.data(), bias, y, a);
    GPUOPT_CHECK_LAUNCH("conv2d_winograd_kernel");
}

std::vector<KernelInfo> conv2d_winograd_kernel_info() {
    std::vector<KernelInfo> out;
    auto add = [&](const WinoLaunch& L, const std::string& name) {
        out.push_back(kernel_info(reinterpret_cast<const void*>(L.kernel), name, L.threads, L.shared_bytes));
    };
    // {m, r, C, K, products}: the chunked blocks (tf32x3 at C = 64: the chunked tensor-core block), then the resident.
    const int sizes[][5] = {{4, 5, 64, 64, 2}, {4, 5, 64, 64, 1}, {4, 5, 8, 16, 1}, {2, 5, 64, 64, 0},
                            {4, 3, 64, 64, 0}, {2, 3, 64, 64, 0}};
    for (const auto& sz : sizes) {
        const auto products = static_cast<WinogradProducts>(sz[4]);
        const WinoLaunch L = select(sz[0], sz[1], sz[2], sz[3], products);
        add(L, "winograd<F(" + std::to_string(sz[0]) + "," + std::to_string(sz[1]) + ") KB" + std::to_string(L.KB) +
                   " TB" + std::to_string(L.TB) + (products == WinogradProducts::Tf32x3 ? " tf32x3>" : ">"));
    }
    add(resident_launch<Resident>(), "winograd<F(4,5) resident TB16 all maps, 2 warps a row, tf32x3>");
    return out;
}

}  // namespace gpuopt::conv
