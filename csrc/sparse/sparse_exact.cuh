// Device helpers shared by the one-pass sparse layer kernels (sparse_conv_fused.cu, sparse_conv_scatter.cu):
// FAST decoding and the exact int64 fallback they take when their int32 bound does not hold.
#pragma once

#include <climits>
#include <cstdint>

namespace gpuopt::sparse {

// What the fallback needs of a layer (the kernels' geometry structs extend it).
struct FusedShape {
    int C, H, W, M, width, pad_h, pad_w;
};

// FAST decoding with floor semantics (negative values round-trip), as in sparse_conv.cu.
__device__ __forceinline__ int floor_divmod10(int n, int& mod) {
    int quot = n / 10;
    mod = n - quot * 10;
    if (mod < 0) {
        mod += 10;
        quot -= 1;
    }
    return quot;
}

// The exact int64 recomputation of this thread's windows (the rare path: the int32 bound failed).
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
                    int col, row;
                    const int value = floor_divmod10(floor_divmod10(cs[j], col), row);
                    const int iy = gy - g.pad_h + row, ix = gx - g.pad_w + col;
                    if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W)
                        sum += static_cast<long long>(value) * xc[iy * g.W + ix];
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
