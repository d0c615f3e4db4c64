// fast_fused's register-blocked 3x3 kernel (sparse_conv_fused.cu keeps the one-window-per-thread kernel for
// other sizes and as blocked=0). The window kernel spent ~8.8 instructions per multiply-add (ncu, H200): per tap
// it loaded the tap, computed two addresses and did 4 shared loads for 4 IMADs, and 256 threads re-staged every
// channel for only 8 maps. Here:
//
// - a thread owns a 4x4 patch of pre-pool outputs (2x2 pool windows) of MT maps; a block is MG such thread
//   groups (64 patches = one 32x32 tile each) over MB = MT*MG maps, staging each channel once for all MB;
// - per channel a thread loads its 6x6 input neighbourhood from shared memory ONCE (6 x (16 + 8)-byte loads),
//   then per map and tap a warp-uniform switch over the 9 positions selects compile-time register indices:
//   16 multiply-adds per tap with no address arithmetic and no further shared loads;
// - taps are decoded once per block into shared memory ([channel][entry][map], read as 16-byte broadcasts),
//   a padding entry (value 0) becoming position 9 (skipped).
//
// Arithmetic T: int (IMAD) or float (FFMA: 2x the IMAD rate on Hopper). Exactness as the window kernel: every
// partial sum of an output is bounded by max|x| * sum|w_m| (measured while staging / decoding); float sums of
// integers are exact while that bound is <= 2^24, int32 sums while it is <= INT_MAX. Where the bound fails the
// block recomputes with the exact int64 path (sparse_exact.cuh), which also raises the overflow flag.
// Channel split: a cluster of `split` blocks shares one (maps, tile), partial sums added in rank order through
// distributed shared memory as exact int32 (every partial is within the bound).

#include "../common/cluster.cuh"
#include "../common/device.hpp"

#include <climits>
#include <cstdint>
#include <type_traits>

#include "../common/launch.cuh"
#include "sparse_conv_cuda.hpp"
#include "sparse_exact.cuh"

namespace gpuopt::sparse {

namespace {

constexpr int kP = 8;                   // patches per tile side (4x4 outputs each): 32x32 tile
constexpr int kPatches = kP * kP;       // threads per map group
constexpr int kTile = 4 * kP;           // pre-pool outputs per tile side
constexpr int kLH = kTile + 2;          // staged rows (3x3: 1 halo row each side)
constexpr int kRS = 36;                 // staged row stride (words): 34 columns, multiple of 4 (16-byte reads)
constexpr int kChanWords = kLH * kRS;
constexpr int kChunk = 8;               // channels staged per pass

struct BGeometry : FusedShape {
    int tiles_x, tiles, split;
    bool vec;  // x rows may be read 16 bytes at a time
};

// int16 -> float exactly with two full-rate ops (I2F is quarter rate): 1.5 * 2^23 + v, then subtract.
template <typename T>
__device__ __forceinline__ T to_t(int v) {
    if constexpr (std::is_same_v<T, float>)
        return __int_as_float(0x4B400000 + v) - 12582912.0f;
    else
        return v;
}

template <int DR, int DS, typename T>
__device__ __forceinline__ void tap(T (&acc)[4][4], const T (&in)[6][6], T v) {
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) acc[a][b] += v * in[a + DR][b + DS];
}

// Warp-uniform pos (the map group's taps): one indirect branch per tap, register indices fixed per case.
template <typename T>
__device__ __forceinline__ void apply(T (&acc)[4][4], const T (&in)[6][6], T v, int pos) {
    switch (pos) {
        case 0: tap<0, 0>(acc, in, v); break;
        case 1: tap<0, 1>(acc, in, v); break;
        case 2: tap<0, 2>(acc, in, v); break;
        case 3: tap<1, 0>(acc, in, v); break;
        case 4: tap<1, 1>(acc, in, v); break;
        case 5: tap<1, 2>(acc, in, v); break;
        case 6: tap<2, 0>(acc, in, v); break;
        case 7: tap<2, 1>(acc, in, v); break;
        case 8: tap<2, 2>(acc, in, v); break;
        default: __builtin_unreachable();  // one jump table, no range checks (padding is skipped by the caller)
    }
}

template <typename T, int MT, int MG>
__global__ void __launch_bounds__(kPatches * MG, 2)
    fused_blocked_kernel(const std::int16_t* __restrict__ x, const std::int32_t* __restrict__ codes,
                         std::int32_t* __restrict__ y, int* __restrict__ overflow, const BGeometry g) {
    constexpr int MB = MT * MG, kThreads = kPatches * MG;
    extern __shared__ int4 smem_raw[];
    T* xs = reinterpret_cast<T*>(smem_raw);                        // [kChunk][kLH][kRS]
    int2* taps = reinterpret_cast<int2*>(xs + kChunk * kChanWords);  // [kChunk][width][MB]: value bits, pos
    __shared__ unsigned long long wsum[MB];
    __shared__ int xmax;
    __shared__ int inexact;  // some map's bound fails: the int64 path
    const int rank = g.split > 1 ? static_cast<int>(cluster::rank()) : 0;
    const int groups = (g.M + MB - 1) / MB;
    const int owner = blockIdx.x / g.split, group = owner % groups, tile = owner / groups;
    const int m0 = group * MB;
    const int ty = tile / g.tiles_x, tx = tile - ty * g.tiles_x;
    const int y0 = ty * kTile, x0 = tx * kTile;
    const int tid = threadIdx.x, gq = tid / kPatches, p = tid % kPatches, px = p % kP, py = p / kP;
    if (tid < MB) wsum[tid] = 0;
    if (tid == 0) xmax = inexact = 0;

    T acc[MT][4][4];
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b) acc[t][a][b] = T(0);
    int my_xmax = 0;
    const long long map_size = static_cast<long long>(g.H) * g.W;
    const int per = channels_per_split(g.C, g.split, kChunk);
    const int c_end = min(g.C, (rank + 1) * per);
    for (int c0 = rank * per; c0 < c_end; c0 += kChunk) {
        const int nc = min(kChunk, c_end - c0);
        __syncthreads();  // the previous chunk's reads are done (and wsum/xmax are initialised)
        // Rows li = 0..33 (input row y0 - 1 + li), interior columns 8 at a time at lj = 1 + gx - x0.
#pragma unroll 1  // staging: registers are for the accumulators
        for (int e = tid; e < nc * kLH * (kTile / 8); e += kThreads) {
            const int row = e / (kTile / 8), q = e - row * (kTile / 8);
            const int cc = row / kLH, li = row - cc * kLH;
            const int gy = y0 - 1 + li, gx0 = x0 + 8 * q;
            const std::int16_t* src = x + (c0 + cc) * map_size + static_cast<long long>(gy) * g.W;
            T* dst = xs + cc * kChanWords + li * kRS + 1 + 8 * q;
            const bool row_in = gy >= 0 && gy < g.H;
            if (g.vec && row_in && gx0 + 8 <= g.W) {
                const int4 v = *reinterpret_cast<const int4*>(src + gx0);
                const int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const int lo = static_cast<std::int16_t>(words[k] & 0xffff), hi = words[k] >> 16;
                    my_xmax = max(my_xmax, max(abs(lo), abs(hi)));
                    dst[2 * k] = to_t<T>(lo);
                    dst[2 * k + 1] = to_t<T>(hi);
                }
            } else {
#pragma unroll
                for (int k = 0; k < 8; ++k) {
                    const int gx = gx0 + k;
                    const int v = (row_in && gx < g.W) ? static_cast<int>(src[gx]) : 0;
                    my_xmax = max(my_xmax, abs(v));
                    dst[k] = to_t<T>(v);
                }
            }
        }
        // Halo columns lj = 0 and 33.
#pragma unroll 1
        for (int e = tid; e < nc * kLH * 2; e += kThreads) {
            const int row = e >> 1, cc = row / kLH, li = row - cc * kLH;
            const int lj = (e & 1) ? kTile + 1 : 0;
            const int gy = y0 - 1 + li, gx = x0 - 1 + lj;
            const int v = (gy >= 0 && gy < g.H && gx >= 0 && gx < g.W)
                              ? static_cast<int>(x[(c0 + cc) * map_size + static_cast<long long>(gy) * g.W + gx])
                              : 0;
            my_xmax = max(my_xmax, abs(v));
            xs[cc * kChanWords + li * kRS + lj] = to_t<T>(v);
        }
        // Taps of this chunk.
#pragma unroll 1
        for (int e = tid; e < MB * nc * g.width; e += kThreads) {
            const int m = e % MB, cj = e / MB;  // cj = cc * width + j
            const int cc = cj / g.width, j = cj - cc * g.width;
            const FastTap tap = m0 + m < g.M  // filters past M: value 0
                ? decode_fast(codes[(static_cast<long long>(m0 + m) * g.C + c0 + cc) * g.width + j])
                : FastTap{0, 0, 0};
            const int value = tap.value, row = tap.row, col = tap.col;
            const T tv = to_t<T>(value);
            int bits;
            if constexpr (std::is_same_v<T, float>)
                bits = __float_as_int(tv);
            else
                bits = tv;
            taps[e] = make_int2(bits, value != 0 ? row * 3 + col : 9);
            if (value != 0) atomicAdd(&wsum[m], static_cast<unsigned long long>(abs(value)));
        }
        __syncthreads();
        for (int cc = 0; cc < nc; ++cc) {
            T in[6][6];
            const T* src = xs + cc * kChanWords + 4 * py * kRS + 4 * px;
#pragma unroll
            for (int r = 0; r < 6; ++r) {
                const int4 a = *reinterpret_cast<const int4*>(src + r * kRS);
                const int2 b = *reinterpret_cast<const int2*>(src + r * kRS + 4);
                const int w[6] = {a.x, a.y, a.z, a.w, b.x, b.y};
#pragma unroll
                for (int k = 0; k < 6; ++k) {
                    if constexpr (std::is_same_v<T, float>)
                        in[r][k] = __int_as_float(w[k]);
                    else
                        in[r][k] = w[k];
                }
            }
            const int4* tc = reinterpret_cast<const int4*>(taps + cc * g.width * MB + gq * MT);
#pragma unroll 1  // one switch site per map: small code (the lab's layer has width 1)
            for (int j = 0; j < g.width; ++j) {
                int4 tq[MT / 2];
#pragma unroll
                for (int h = 0; h < MT / 2; ++h) tq[h] = tc[j * (MB / 2) + h];
#pragma unroll
                for (int t = 0; t < MT; ++t) {
                    const int bits = (t & 1) ? tq[t / 2].z : tq[t / 2].x;
                    const int pos = (t & 1) ? tq[t / 2].w : tq[t / 2].y;
                    T v;
                    if constexpr (std::is_same_v<T, float>)
                        v = __int_as_float(bits);
                    else
                        v = bits;
                    if (pos < 9) apply<T>(acc[t], in, v, pos);  // 9: a padding entry
                }
            }
        }
    }

    atomicMax(&xmax, my_xmax);
    __syncthreads();
    constexpr unsigned long long kLimit = std::is_same_v<T, float> ? (1ull << 24) : INT_MAX;
    const int PH = g.H / 2, PW = g.W / 2;
    int* part = reinterpret_cast<int*>(smem_raw);  // [MB][kTile][kTile] partial sums (split > 1)
    if (g.split > 1) {  // the staging's last reads were before the __syncthreads above
#pragma unroll
        for (int t = 0; t < MT; ++t)
#pragma unroll
            for (int a = 0; a < 4; ++a)
                *reinterpret_cast<int4*>(part + ((gq * MT + t) * kTile + 4 * py + a) * kTile + 4 * px) =
                    make_int4(static_cast<int>(acc[t][a][0]), static_cast<int>(acc[t][a][1]),
                              static_cast<int>(acc[t][a][2]), static_cast<int>(acc[t][a][3]));
        cluster::sync();
    }
    // The bound over the cluster (this block alone when split == 1): thread m checks map m (few registers
    // while the accumulators are live).
    if (tid < MB) {
        unsigned long long ws = 0;
        int xm = 0;
        for (int r = 0; r < g.split; ++r) {
            xm = max(xm, g.split > 1 ? *cluster::map(&xmax, r) : xmax);
            ws += g.split > 1 ? cluster::map(wsum, r)[tid] : wsum[tid];
        }
        if (static_cast<unsigned long long>(xm) * ws > kLimit) inexact = 1;
    }
    __syncthreads();
    const bool exact = inexact == 0;
    if (g.split == 1) {
        if (!exact) {  // block-uniform
#pragma unroll 1
            for (int i = 0; i < 4; ++i)
                exact_windows<MT>(x, codes, y, overflow, g, m0 + gq * MT, y0 + 4 * py + 2 * (i >> 1),
                                  x0 + 4 * px + 2 * (i & 1));
            return;
        }
#pragma unroll
        for (int t = 0; t < MT; ++t) {
            const int m = m0 + gq * MT + t;
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int k = 0; k < 2; ++k) {
                    const int wy = (y0 + 4 * py) / 2 + i, wx = (x0 + 4 * px) / 2 + k;
                    if (m < g.M && wy < PH && wx < PW) {
                        const T v = max(max(acc[t][2 * i][2 * k], acc[t][2 * i][2 * k + 1]),
                                        max(acc[t][2 * i + 1][2 * k], acc[t][2 * i + 1][2 * k + 1]));
                        y[(static_cast<long long>(m) * PH + wy) * PW + wx] = max(0, static_cast<int>(v));
                    }
                }
        }
        return;
    }
    // Cluster: this block finishes pool windows [rank * share, (rank + 1) * share) of the tile's 16x16.
    constexpr int kWin = kTile / 2;
    const int share = kWin * kWin / g.split;
    if (!exact) {
        for (int w = tid; w < share; w += kThreads) {
            const int wi = rank * share + w;
            exact_windows<MB>(x, codes, y, overflow, g, m0, y0 + 2 * (wi / kWin), x0 + 2 * (wi % kWin));
        }
    } else {
        for (int e = tid; e < MB * share; e += kThreads) {
            const int m = e / share, wi = rank * share + (e - m * share);
            const int wy = wi / kWin, wx = wi % kWin;
            const int oy = y0 + 2 * wy, ox = x0 + 2 * wx;
            if (m0 + m >= g.M || oy / 2 >= PH || ox / 2 >= PW) continue;
            int v[4] = {0, 0, 0, 0};
            for (int r = 0; r < g.split; ++r) {
                const int* pr = cluster::map(part, r) + (m * kTile + 2 * wy) * kTile + 2 * wx;
                const int2 top = *reinterpret_cast<const int2*>(pr), bot = *reinterpret_cast<const int2*>(pr + kTile);
                v[0] += top.x, v[1] += top.y, v[2] += bot.x, v[3] += bot.y;
            }
            y[(static_cast<long long>(m0 + m) * PH + oy / 2) * PW + ox / 2] =
                max(0, max(max(v[0], v[1]), max(v[2], v[3])));
        }
    }
    cluster::sync();  // no block leaves (freeing its shared memory) while another still reads it
}

template <typename T, int MT, int MG>
void launch(const std::int16_t* x, const std::int32_t* codes, std::int32_t* y, int* overflow, BGeometry g) {
    constexpr int MB = MT * MG;
    const std::int64_t blocks = static_cast<std::int64_t>((g.M + MB - 1) / MB) * g.tiles * g.split;
    GPUOPT_REQUIRE(blocks <= INT_MAX, "sparse_conv_fast_fused: too many blocks (maps x tiles >= 2^31)");
    const std::size_t stage = sizeof(T) * kChunk * kChanWords + sizeof(int2) * kChunk * g.width * MB;
    const std::size_t partials = g.split > 1 ? sizeof(int) * MB * kTile * kTile : 0;
    const std::size_t smem = stage > partials ? stage : partials;
    auto kernel = fused_blocked_kernel<T, MT, MG>;
    require_shared_memory(kernel, smem, "sparse_conv_fast_fused");
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(overflow, 0, sizeof(int), current_stream()));
    cluster::launch(kernel, static_cast<unsigned>(blocks), kPatches * MG, smem, g.split, x, codes, y, overflow, g);
    GPUOPT_CHECK_LAUNCH("sparse fused_blocked_kernel");
}

}  // namespace

void sparse_conv_fast_fused_blocked(const std::int16_t* x, const std::int32_t* codes, std::int64_t width,
                                    std::int32_t* y, int* overflow, const SparseConvShape& s, int split, bool fp32) {
    // The caller (sparse_conv_fast_fused) has checked the shape, width, split and pointers.
    GPUOPT_REQUIRE(s.R == 3 && s.S == 3, "sparse_conv_fast_fused: the register-blocked kernel is 3x3 only");
    constexpr int MT = 4, MG = 4, MB = MT * MG;
    BGeometry g{};
    g.C = static_cast<int>(s.C), g.H = static_cast<int>(s.H), g.W = static_cast<int>(s.W), g.M = static_cast<int>(s.M);
    g.width = static_cast<int>(width), g.pad_h = 1, g.pad_w = 1;
    g.tiles_x = static_cast<int>((s.W + kTile - 1) / kTile);
    g.tiles = g.tiles_x * static_cast<int>((s.H + kTile - 1) / kTile);
    g.vec = s.W % 8 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
    // Auto split: 2 blocks per SM (the GPU's multiprocessor count) in one wave where possible, each block keeping >= 2
    // channel chunks (the lab's layer: 32 map groups x 8 = 256 blocks).
    const std::int64_t owners = (s.M + MB - 1) / MB * g.tiles;
    if (split == 0) {
        split = 1;
        while (cluster::supported() && split < 8 && owners * split <= multiprocessor_count() && s.C >= 2 * kChunk * 2 * split)
            split *= 2;
    }
    GPUOPT_REQUIRE(split == 1 || cluster::supported(), "sparse_conv_fast_fused: split > 1 needs thread-block clusters (a GPU of compute capability 9.0 or later)");
    g.split = split;
    if (fp32)
        launch<float, MT, MG>(x, codes, y, overflow, g);
    else
        launch<int, MT, MG>(x, codes, y, overflow, g);
}

}  // namespace gpuopt::sparse
