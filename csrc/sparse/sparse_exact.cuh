// Device helpers shared by the sparse layer kernels (sparse_conv.cu, sparse_conv_fused.cu,
// sparse_conv_fused_blocked.cu, sparse_conv_scatter.cu): FAST decoding, the channel split of the clustered
// kernels, and the exact int64 fallback the one-pass kernels take when their int32 bound does not hold.
#pragma once

#include <climits>
#include <cstdint>

namespace gpuopt::sparse {

// What the fallback needs of a layer (the kernels' geometry structs extend it).
struct FusedShape {
    int C, H, W, M, width, pad_h, pad_w;
};

// FAST: one int32 code = value*100 + row*10 + col per entry, decoded with floor
// semantics so negative values round-trip (-280 -> value -3, row 2, col 0). C++'s / and %
// truncate toward zero, hence floor_divmod10's fix-up (no overflow for any int32 code).
__device__ __forceinline__ int floor_divmod10(int n, int& mod) {
    int quot = n / 10;
    mod = n - quot * 10;  // truncated: in -9..9
    if (mod < 0) {
        mod += 10;
        quot -= 1;
    }
    return quot;
}

struct FastTap {
    int value, row, col;
};

// One FAST code decoded; code 0 (padding) is value 0 at (0, 0).
__device__ __forceinline__ FastTap decode_fast(int code) {
    FastTap t;
    t.value = floor_divmod10(floor_divmod10(code, t.col), t.row);
    return t;
}

// Input channels per block when `split` blocks of a cluster share a layer's C channels in whole chunks of
// `chunk`: block r takes [r * per, min(C, (r + 1) * per)).
__device__ __forceinline__ int channels_per_split(int C, int split, int chunk) {
    return ((C + split - 1) / split + chunk - 1) / chunk * chunk;
}

// The exact int64 recomputation of this thread's windows (the rare path: the int32 bound failed).
// One round of a block's stable stream compaction (the input compaction of fast_sparse_input's kernels): each
// thread's item, if `flag`, goes to slot `slot` past the earlier rounds' items; `warp_before` counts the items of
// the warps before this one, `total` the round's. warp_counts: kWarps ints of shared memory; two barriers.
struct CompactRound {
    int slot, warp_before, total;
};
template <int kWarps>
__device__ __forceinline__ CompactRound compact_round(bool flag, int* warp_counts) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
        before += w < warp ? warp_counts[w] : 0;
        total += warp_counts[w];
    }
    __syncthreads();  // warp_counts is rewritten next round
    return {before + __popc(ballot & ((1u << lane) - 1u)), before, total};
}

template <int MB>
__device__ void exact_windows(const std::int16_t* __restrict__ x, const std::int32_t* __restrict__ codes,
                              std::int32_t* __restrict__ y, int* __restrict__ overflow, const FusedShape& g, int m0,
                              int oy, int ox) {
    const int PH = g.H / 2, PW = g.W / 2;
    for (int m = m0; m < min(m0 + MB, g.M); ++m) {
        long long best = 0;
        for (int d = 0; d < 4; ++d) {
            const int gy = oy + (d >> 1), gx = ox + (d & 1);
            if (gy >= g.H || gx >= g.W) continue;
            long long sum = 0;
            for (int c = 0; c < g.C; ++c) {
                const std::int32_t* cs = codes + (static_cast<long long>(m) * g.C + c) * g.width;
                const std::int16_t* xc = x + static_cast<long long>(c) * g.H * g.W;
                for (int j = 0; j < g.width; ++j) {
                    const FastTap t = decode_fast(cs[j]);
                    const int iy = gy - g.pad_h + t.row, ix = gx - g.pad_w + t.col;
                    if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W)
                        sum += static_cast<long long>(t.value) * xc[iy * g.W + ix];
                }
            }
            if (sum > INT_MAX || sum < INT_MIN) atomicOr(overflow, 1);
            best = max(best, min(sum, static_cast<long long>(INT_MAX)));
        }
        if (oy / 2 < PH && ox / 2 < PW)
            y[(static_cast<long long>(m) * PH + oy / 2) * PW + ox / 2] = static_cast<std::int32_t>(best);
    }
}


}  // namespace gpuopt::sparse
