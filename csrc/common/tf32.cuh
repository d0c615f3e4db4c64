// 3xTF32, FP32 accuracy on TF32 tensor cores: the split of a float into a TF32 high part and a TF32 remainder,
// and the m16n8k8 mma.sync that takes them (matmul tf32x3 and tf32x3_wgmma, conv2d implicit_gemm_tf32x3 and
// winograd's tensor-core products, k-means' tiled tensor-core distances).
#pragma once

#include <cstdint>

namespace gpuopt::tf32 {

struct Split {
    std::uint32_t hi, lo;
};

// x = hi + lo (+ about 2^-22 |x|), both TF32 (round to nearest, ties away); x - hi is exact in FP32.
__device__ __forceinline__ Split split(float x) {
    std::uint32_t hi, lo;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(x));
    const float rest = x - __uint_as_float(hi);
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(rest));
    return {hi, lo};
}

// d += a * b on one m16 x n8 x k8 tile (TF32 in, FP32 accumulate; the tensor cores round this sum toward zero,
// so callers add it into an FP32 accumulator every few k).
__device__ __forceinline__ void mma_m16n8k8(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace gpuopt::tf32
