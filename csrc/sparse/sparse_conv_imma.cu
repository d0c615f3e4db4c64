// fast_imma: the lab's layer as an implicit GEMM on the int8 tensor cores (round 5; notes/sparse.md). Dense work:
// y[m][p] = sum over (tap, c) of w[m][c][tap] * x[c][p + tap], 2.4 G multiply-adds on the lab's layer (9x the taps,
// 5x the non-zero inputs of the scatter's 53 M), but mma.sync m16n8k32 does 4096 of them per warp instruction where
// the planes kernel did 32 (one shared atomic): 1.2 M tensor instructions against 2.1 M atomics + 18 M others.
// Exact: x = 256 * xh + xl (xl = low byte, unsigned; xh = high byte, signed), the taps int8, two s32 products
// (|sum| <= 9 * C * 128 * 255 < 2^31 for C <= 4096: no wrap), combined in int64, so every sum is exact and
// overflow of int32 is detected per output (the trailing odd row/column the pool drops included).
//
// 1. prepare_kernel (one launch, two kinds of blocks): x -> xq[chunk of 64 channels][padded row][34 columns]
//    [low bytes 64 | high bytes 64], zero-padded (halo, ragged H, W < 32, channels past C); the FAST codes -> dense
//    int8 taps wq[map tile][chunk][tap 3x3][64 maps][64 channels], per (map tile, chunk) a flag when a tap does not
//    fit int8 (then that map tile takes the exact int64 path). Both laid out as the main kernel's shared memory
//    (16-byte units XOR-swizzled: ldmatrix bank-conflict-free), so it stages them with plain 16-byte cp.async.
// 2. imma_kernel (a dependent launch): a block = 64 maps x 2 output rows x 32 columns (one pooled row), 8 warps
//    of 32 maps x 2 rows x 8 columns, 3-stage cp.async pipeline over the channel chunks; per (tap column, 32
//    channels): 10 ldmatrix.x4 (6 of taps, 4 of input rows: the two output rows share them), 24 mma (3 tap rows x
//    two map tiles x two rows x low/high byte). Epilogue in registers: 256 * hi + lo,
//    overflow check, ReLU, the 2x2 max (a thread holds both rows of its two columns), one store per window.
#include "../common/cluster.cuh"

#include <climits>
#include <cstdint>
#include <string>

#include "../common/scratch.hpp"
#include "../common/launch.cuh"
#include "../common/async_copy.cuh"
#include "sparse_conv_cuda.hpp"
#include "sparse_exact.cuh"

namespace gpuopt::sparse {

namespace {

constexpr int kBM = 64;                       // maps per block (2 warps x 32)
constexpr int kTR = 2;                        // output rows per block: one pooled row
constexpr int kCols = static_cast<int>(kSparsePlanesMaxW);  // output columns (4 warps x 8)
constexpr int kCK = 64;                       // channels per pipeline stage
constexpr int kPC = kCols + 2;                // staged input columns (halo)
constexpr int kPR = kTR + 2;                  // staged input rows (halo)
constexpr int kThreads = 256;
constexpr int kStages = 3;
constexpr int kPix = 2 * kCK;                 // bytes per staged pixel: 64 low bytes, then 64 high bytes
constexpr int kABytes = 9 * kBM * kCK;        // [tap][map][channel] int8
constexpr int kBBytes = kPR * kPC * kPix;     // [row][column][low | high]
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kPrepThreads = 256;
constexpr int kTapBlocks = kBM * (kCK / 4) / kPrepThreads;  // prepare_kernel's tap blocks per (map tile, chunk)
static_assert(kSparsePlanesMaxTaps == 3 && kCols == 32 && kStageBytes % 16 == 0, "3x3 frame, 4 warps of 8 columns");
static_assert(kTapBlocks * kPrepThreads == kBM * (kCK / 4), "one (map, 4 channels) task per prepare thread");

struct IGeometry : FusedShape {
    int R, S, chunks, mtiles, tiles;
    int xblocks;           // prepare_kernel's x blocks (the rest are tap blocks, one per (map tile, chunk))
    long long xchunk;      // bytes of xq per chunk: (tiles * kTR + 2) rows x kPC x kPix
};

// Swizzles (16-byte unit index XOR a key): the 8 row addresses of an ldmatrix hit 8 distinct bank groups.
__host__ __device__ constexpr int a_unit(int map, int unit) { return unit ^ ((map >> 1) & 3); }  // 64-byte rows
__host__ __device__ constexpr int b_unit(int col, int unit) { return unit ^ (col & 7); }         // 128-byte pixels

// Blocks [0, xblocks): one thread per (chunk, padded row, 16-channel group, padded column): 16 int16 loads (coalesced
// along the columns), a low-byte and a high-byte unit stored. Blocks after: kTapBlocks per (map tile, chunk), a thread
// per (map, 4 channels): the slices' codes summed per tap slot, 9 words of 4 int8 taps.
__global__ void __launch_bounds__(kPrepThreads)
    prepare_kernel(const std::int16_t* __restrict__ x, const std::int32_t* __restrict__ codes,
                   std::uint8_t* __restrict__ xq, std::int8_t* __restrict__ wq, int* __restrict__ wide,
                   int* __restrict__ overflow, const IGeometry g) {
    cluster::allow_dependents();  // imma_kernel's blocks may be scheduled meanwhile (they wait before reading)
    if (blockIdx.x == 0 && threadIdx.x == 0) *overflow = 0;
    if (static_cast<int>(blockIdx.x) < g.xblocks) {
        const int prow_n = g.tiles * kTR + 2;
        const long long n = static_cast<long long>(g.chunks) * prow_n * 4 * kPC;
        const long long t = static_cast<long long>(blockIdx.x) * kPrepThreads + threadIdx.x;
        if (t >= n) return;
        const int col = static_cast<int>(t % kPC);
        long long rest = t / kPC;
        const int grp = static_cast<int>(rest % 4);
        rest /= 4;
        const int prow = static_cast<int>(rest % prow_n), chunk = static_cast<int>(rest / prow_n);
        const int iy = prow - 1, ix = col - 1, c0 = chunk * kCK + grp * 16;
        const bool in = iy >= 0 && iy < g.H && ix >= 0 && ix < g.W;
        unsigned lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int c = c0 + i;
            const unsigned v = in && c < g.C
                                   ? static_cast<unsigned>(static_cast<unsigned short>(
                                         x[(static_cast<long long>(c) * g.H + iy) * g.W + ix]))
                                   : 0u;
            lo[i / 4] |= (v & 0xffu) << (8 * (i % 4));
            hi[i / 4] |= (v >> 8) << (8 * (i % 4));
        }
        std::uint8_t* pix = xq + chunk * g.xchunk + (static_cast<long long>(prow) * kPC + col) * kPix;
        reinterpret_cast<uint4*>(pix)[b_unit(col, grp)] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
        reinterpret_cast<uint4*>(pix)[b_unit(col, 4 + grp)] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
        return;
    }
    // Four blocks per (map tile, chunk), one (map, 4 channels) task a thread: round 5's first version gave each
    // thread 4 tasks in a row, each waiting for its codes (H200: prepare 11.3 us at ncu's clock, half of it the tail
    // of these blocks).
    const int b = static_cast<int>(blockIdx.x) - g.xblocks, per_tile = g.chunks * kTapBlocks;
    const int mt = b / per_tile, chunk = (b % per_tile) / kTapBlocks;
    const int task = (b % kTapBlocks) * kPrepThreads + threadIdx.x;
    std::int8_t* dst = wq + (static_cast<long long>(mt) * g.chunks + chunk) * kABytes;
    const int ml = task / (kCK / 4), q = task % (kCK / 4), m = mt * kBM + ml;  // q: 4 channels
    int v[9][4];
#pragma unroll
    for (int s = 0; s < 9; ++s)
#pragma unroll
        for (int i = 0; i < 4; ++i) v[s][i] = 0;
    for (int j = 0; j < g.width; ++j) {
        int code[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // the 4 loads in flight together; past M or C: code 0 (value 0)
            const int c = chunk * kCK + q * 4 + i;
            code[i] = m < g.M && c < g.C ? codes[(static_cast<long long>(m) * g.C + c) * g.width + j] : 0;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const FastTap t = decode_fast(code[i]);
            if (t.row >= g.R || t.col >= g.S) continue;  // outside the filter: adds nothing (as the planes kernel)
            const int slot = (t.row - g.pad_h + 1) * 3 + (t.col - g.pad_w + 1);  // in the 3x3 frame
#pragma unroll
            for (int s = 0; s < 9; ++s) v[s][i] += s == slot ? t.value : 0;
        }
    }
    int bad = 0;
#pragma unroll
    for (int s = 0; s < 9; ++s) {
        unsigned word = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            bad |= v[s][i] < -128 || v[s][i] > 127;
            word |= (static_cast<unsigned>(v[s][i]) & 0xffu) << (8 * i);
        }
        // unit q / 4 of map row ml, swizzled; word q % 4 inside it
        reinterpret_cast<unsigned*>(dst + (s * kBM + ml) * kCK)[a_unit(ml, q / 4) * 4 + q % 4] = word;
    }
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) wide[b] = bad;  // every flag written every call: no zeroing needed
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// d += a (16 maps x 32 channels, s8) * b (32 channels x 8 pixels: low bytes u8 / high bytes s8).
template <bool kHigh>
__device__ __forceinline__ void mma_s8(int (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    if constexpr (kHigh)
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(kThreads, 1)
    imma_kernel(const std::int8_t* __restrict__ wq, const std::uint8_t* __restrict__ xq, const int* __restrict__ wide,
                const std::int16_t* __restrict__ x, const std::int32_t* __restrict__ codes, std::int32_t* __restrict__ y,
                int* __restrict__ overflow, const IGeometry g) {
    extern __shared__ int4 smem_raw[];
    char* smem = reinterpret_cast<char*>(smem_raw);
    const int mt = static_cast<int>(blockIdx.x) % g.mtiles, tile = static_cast<int>(blockIdx.x) / g.mtiles;
    const int m0 = mt * kBM, y0 = tile * kTR;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp & 1, wc = warp >> 1;
    cluster::wait_for_previous();  // prepare_kernel's xq, wq, flags (and the zeroed overflow flag)
    int any_wide = 0;
    for (int i = threadIdx.x; i < g.chunks * kTapBlocks; i += kThreads) any_wide |= wide[(mt * g.chunks) * kTapBlocks + i];
    if (__syncthreads_or(any_wide)) {  // a tap outside int8 in this map tile: exact int64 windows (slow, rare)
        const int wcols = (g.W + 1) / 2;
        for (int p = threadIdx.x; p < kBM * wcols; p += kThreads)
            exact_windows<1>(x, codes, y, overflow, g, m0 + p / wcols, y0, 2 * (p % wcols));
        return;
    }

    const std::int8_t* a_src = wq + static_cast<long long>(mt) * g.chunks * kABytes;
    const std::uint8_t* b_src = xq + static_cast<long long>(y0) * kPC * kPix;  // padded rows y0 .. y0 + 3
    auto load_stage = [&](int kc) {
        char* dst = smem + (kc % kStages) * kStageBytes;
        const char* a = reinterpret_cast<const char*>(a_src) + static_cast<long long>(kc) * kABytes;
        const char* b = reinterpret_cast<const char*>(b_src) + kc * g.xchunk;
        for (int i = threadIdx.x; i < kABytes / 16; i += kThreads)
            dev::cp_async_16(reinterpret_cast<float*>(dst + 16 * i), reinterpret_cast<const float*>(a + 16 * i), 16);
        for (int i = threadIdx.x; i < kBBytes / 16; i += kThreads)
            dev::cp_async_16(reinterpret_cast<float*>(dst + kABytes + 16 * i),
                                     reinterpret_cast<const float*>(b + 16 * i), 16);
    };

    // Per-lane ldmatrix offsets (bytes in a stage). A: rows = maps wm*32 + (lane & 15) (+16: the second map tile),
    // unit = 2 * kh + (lane >> 4). B: one x4 per staged input row q (0..3) and tap column s holds both bytes,
    // matrix lane >> 3 = (low/high, channel half), row = column wc*8 + (lane & 7) + s; row q adds q * kPC * kPix.
    // Output row ty through tap row r reads input row ty + r: the warp's 2 x 3 (row, tap row) pairs share 4 rows.
    const int amap = wm * 32 + (lane & 15);
    unsigned a_off[2];
#pragma unroll
    for (int kh = 0; kh < 2; ++kh) a_off[kh] = amap * kCK + a_unit(amap, 2 * kh + (lane >> 4)) * 16;
    const int bpart = (lane >> 4) & 1, bhalf = (lane >> 3) & 1, bcol = wc * 8 + (lane & 7);
    unsigned b_off[3][2];  // [s][kh]
#pragma unroll
    for (int s = 0; s < 3; ++s)
#pragma unroll
        for (int kh = 0; kh < 2; ++kh)
            b_off[s][kh] = kABytes + (bcol + s) * kPix + b_unit(bcol + s, bpart * 4 + kh * 2 + bhalf) * 16;

    int acc[2][2][2][4] = {};  // [map tile][row][low, high][fragment]
    const unsigned smem_base = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int nk = g.chunks;
    load_stage(0);
    dev::cp_async_commit();
    if (nk > 1) load_stage(1);
    dev::cp_async_commit();
    for (int kc = 0; kc < nk; ++kc) {
        dev::cp_async_wait<1>();  // chunk kc has landed (this thread's copies) ...
        __syncthreads();                 // ... everyone's; and chunk kc - 1's buffer is free
        if (kc + 2 < nk) load_stage(kc + 2);
        dev::cp_async_commit();
        const unsigned sb = smem_base + (kc % kStages) * kStageBytes;
#pragma unroll
        for (int s = 0; s < 3; ++s)
#pragma unroll
            for (int kh = 0; kh < 2; ++kh) {
                unsigned a[3][2][4], b[4][4];  // a: [tap row][map tile]; b: [input row][low 2, high 2]
#pragma unroll
                for (int r = 0; r < 3; ++r) {
                    ldsm_x4(sb + a_off[kh] + (r * 3 + s) * kBM * kCK, a[r][0]);
                    ldsm_x4(sb + a_off[kh] + (r * 3 + s) * kBM * kCK + 16 * kCK, a[r][1]);
                }
#pragma unroll
                for (int q = 0; q < kPR; ++q) ldsm_x4(sb + b_off[s][kh] + q * kPC * kPix, b[q]);
#pragma unroll
                for (int r = 0; r < 3; ++r)
#pragma unroll
                    for (int ty = 0; ty < 2; ++ty)
#pragma unroll
                        for (int t = 0; t < 2; ++t) {
                            mma_s8<false>(acc[t][ty][0], a[r][t], b[ty + r][0], b[ty + r][1]);
                            mma_s8<true>(acc[t][ty][1], a[r][t], b[ty + r][2], b[ty + r][3]);
                        }
            }
    }
    dev::cp_async_wait<0>();  // (only empty groups left)

    // Fragment (map tile t, row ty): element 2h + i is map wm*32 + 16t + lane/4 + 8h, column wc*8 + 2*(lane%4) + i.
    const int PH = g.H / 2, PW = g.W / 2, pcol = wc * 4 + (lane & 3), ox = 2 * pcol;
    bool ovf = false;
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            long long best = 0;  // ReLU: max with 0
#pragma unroll
            for (int ty = 0; ty < 2; ++ty)
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const long long v = 256LL * acc[t][ty][1][2 * h + i] + acc[t][ty][0][2 * h + i];
                    if (y0 + ty < g.H && ox + i < g.W) ovf |= v > INT_MAX || v < INT_MIN;
                    best = v > best ? v : best;
                }
            const int m = m0 + wm * 32 + 16 * t + (lane >> 2) + 8 * h;
            if (m < g.M && tile < PH && pcol < PW)
                y[(static_cast<long long>(m) * PH + tile) * PW + pcol] = static_cast<std::int32_t>(best);
        }
    if (ovf) atomicOr(overflow, 1);
}

}  // namespace

void sparse_conv_imma_check(const SparseConvShape& s) {
    sparse_conv_check(s);
    GPUOPT_REQUIRE(sparse_imma_apply(s), "sparse_conv (fast_imma): W <= " + std::to_string(kSparsePlanesMaxW) +
                                             ", H <= " + std::to_string(kSparsePlanesMaxH) +
                                             ", filters up to 3x3 and C <= " + std::to_string(kSparseImmaMaxC) +
                                             " only; use variant='fast_fused'");
}

void sparse_conv_fast_imma(const std::int16_t* x, const std::int32_t* codes, std::int64_t width, std::int32_t* y,
                           int* overflow, const SparseConvShape& s) {
    sparse_conv_imma_check(s);
    GPUOPT_REQUIRE(width >= 1 && width <= s.R * s.S, "sparse_conv: width (entries per padded slice) must be in 1..R*S = " +
                                                         std::to_string(s.R * s.S) + ", got " + std::to_string(width));
    GPUOPT_REQUIRE(x != nullptr && y != nullptr && codes != nullptr && overflow != nullptr,
                   "sparse_conv_fast_imma: null x, codes, y or overflow");
    IGeometry g{};
    g.C = static_cast<int>(s.C), g.H = static_cast<int>(s.H), g.W = static_cast<int>(s.W), g.M = static_cast<int>(s.M);
    g.width = static_cast<int>(width), g.pad_h = static_cast<int>(s.R / 2), g.pad_w = static_cast<int>(s.S / 2);
    g.R = static_cast<int>(s.R), g.S = static_cast<int>(s.S);
    g.chunks = (g.C + kCK - 1) / kCK, g.mtiles = (g.M + kBM - 1) / kBM, g.tiles = (g.H + kTR - 1) / kTR;
    g.xchunk = static_cast<long long>(g.tiles * kTR + 2) * kPC * kPix;
    const long long xthreads = static_cast<long long>(g.chunks) * (g.tiles * kTR + 2) * 4 * kPC;
    g.xblocks = static_cast<int>((xthreads + kPrepThreads - 1) / kPrepThreads);
    const long long prep_blocks = g.xblocks + static_cast<long long>(g.mtiles) * g.chunks * kTapBlocks;
    const long long blocks = static_cast<long long>(g.mtiles) * g.tiles;
    GPUOPT_REQUIRE(prep_blocks <= INT_MAX && blocks <= INT_MAX, "sparse_conv_fast_imma: too many blocks");
    const std::size_t smem = static_cast<std::size_t>(kStages) * kStageBytes;
    require_shared_memory(imma_kernel, smem, "sparse_conv_fast_imma");
    // xq, wq and the wide-tap flags: scratch of this call (scratch.hpp: an arena kept per stream, or the pool).
    const Scratch scratch({static_cast<std::size_t>(g.chunks) * g.xchunk,
                           static_cast<std::size_t>(g.mtiles) * g.chunks * kABytes,
                           sizeof(int) * static_cast<std::size_t>(g.mtiles) * g.chunks * kTapBlocks});
    auto* xq = scratch.get<std::uint8_t>(0);
    auto* wq = scratch.get<std::int8_t>(1);
    auto* wide = scratch.get<int>(2);
    prepare_kernel<<<static_cast<unsigned>(prep_blocks), kPrepThreads, 0, current_stream()>>>(x, codes, xq, wq, wide,
                                                                         overflow, g);
    GPUOPT_CHECK_LAUNCH("sparse prepare_kernel");
    cluster::launch_ex(imma_kernel, static_cast<unsigned>(blocks), kThreads, smem, 1, true,
                       static_cast<const std::int8_t*>(wq), static_cast<const std::uint8_t*>(xq),
                       static_cast<const int*>(wide), x, codes, y, overflow, g);
    GPUOPT_CHECK_LAUNCH("sparse imma_kernel");
}

}  // namespace gpuopt::sparse
