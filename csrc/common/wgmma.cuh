// Hopper warpgroup MMA (wgmma, sm_90a only) for the TF32 kernels: shared-memory matrix descriptors for
// K-major tiles in the 128-byte swizzle, and m64n128k8 with both operands from shared memory.
//
// Everything here needs the arch-specific target sm_90a (compute_90a); callers guard their kernel bodies
// with GPUOPT_HAS_WGMMA and keep an empty body for every other target.
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GPUOPT_HAS_WGMMA 1
#else
#define GPUOPT_HAS_WGMMA 0
#endif

namespace gpuopt::wgmma {

// Descriptor of a K-major tile whose rows are 128 bytes (32 floats) stored in the 128-byte swizzle
// (16-byte chunk c of row r at chunk c ^ (r % 8); the tile 1024-byte aligned): rows 8 apart are 1024 bytes
// apart (the stride byte offset); the leading byte offset is unused in this mode. A k-step of 8 floats
// inside the row is the same descriptor 32 bytes further on: the swizzle is applied to the final address.
__device__ __forceinline__ std::uint64_t desc_k_major_sw128(std::uint32_t smem_addr) {
    return (static_cast<std::uint64_t>((smem_addr & 0x3FFFF) >> 4))  // start address, 16-byte units
           | (std::uint64_t{1} << 16)                                // leading byte offset (unused)
           | (std::uint64_t{1024 >> 4} << 32)                         // stride byte offset: 8 rows of 128 B
           | (std::uint64_t{1} << 62);                               // 128-byte swizzle
}

#if GPUOPT_HAS_WGMMA
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Shared-memory writes of the generic proxy (st.shared, cp.async) made visible to the async proxy wgmma reads.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// d (+)= a * b for a 64 x 128 x 8 TF32 product of one warpgroup, FP32 accumulate; SCALE_D 0 overwrites d.
// Fragment of d (per thread, lane l of warp w of the warpgroup): for n8 block i, d[4i + 0, 1] is row
// 16w + l/4, columns 8i + 2(l%4) + 0, 1; d[4i + 2, 3] is the same 8 rows further. PTX names every register.
template <int SCALE_D>
__device__ __forceinline__ void m64n128k8_tf32(float (&d)[64], std::uint64_t desc_a, std::uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "n"(SCALE_D));
}
#endif

}  // namespace gpuopt::wgmma
