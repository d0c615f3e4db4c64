// Four consecutive floats of a row as one float4: a 16-byte load or store where the row allows it, four checked
// 4-byte accesses where it does not (rows of any length and alignment).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gpuopt {

// True when p is 16-byte aligned (a float4 load from it is legal).
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

namespace dev {

// row[col .. col+3] of a row of `cols` floats, zeros outside it (and for rows out of range:
// row_ok false, row is then never read). VEC: the row is 16-byte aligned and cols % 4 == 0,
// so with col % 4 == 0 the four floats are all in range or all out: one 16-byte load.
// Otherwise four checked 4-byte loads.
template <bool VEC>
__device__ __forceinline__ float4 load4(const float* __restrict__ row, int col, int cols, bool row_ok) {
    if constexpr (VEC) {
        return row_ok && col < cols ? __ldg(reinterpret_cast<const float4*>(row + col)) : make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
        float4 v;
        v.x = row_ok && col + 0 < cols ? __ldg(row + col + 0) : 0.f;
        v.y = row_ok && col + 1 < cols ? __ldg(row + col + 1) : 0.f;
        v.z = row_ok && col + 2 < cols ? __ldg(row + col + 2) : 0.f;
        v.w = row_ok && col + 3 < cols ? __ldg(row + col + 3) : 0.f;
        return v;
    }
}

// row[col .. col+3] = v where in range (the caller checks the row); VEC as for load4.
template <bool VEC>
__device__ __forceinline__ void store4(float* __restrict__ row, int col, int cols, float4 v) {
    if constexpr (VEC) {
        if (col < cols) *reinterpret_cast<float4*>(row + col) = v;
    } else {
        if (col + 0 < cols) row[col + 0] = v.x;
        if (col + 1 < cols) row[col + 1] = v.y;
        if (col + 2 < cols) row[col + 2] = v.z;
        if (col + 3 < cols) row[col + 3] = v.w;
    }
}

}  // namespace dev
}  // namespace gpuopt
