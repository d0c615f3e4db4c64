// Ladder step 11, "tf32x3_wgmma": tf32x3's FP32 accuracy from Hopper's warpgroup tensor-core
// instructions (wgmma, sm_90a). The three products of the split (lo_a*hi_b + hi_a*lo_b + hi_a*hi_b, as
// step 10) need four TF32 operand tiles; splitting them inside the k-loop is what held step 10 at
// cuBLAS SGEMM's speed (issue-bound, notes/matmul.md). Here the split is done once, before the product,
// by two small kernels that write hi and lo of A (M x K, as it is) and of B transposed (N x K: wgmma
// reads TF32 only K-major), zero-padded to whole tiles; they move 3 bytes for every byte of A and B, about
// 5% of the product's time at 4096^3 (measured). The product is then a plain TF32 GEMM over four tiles.
//
// Block tile 128 x 128 x 32, two warpgroups of 64 x 128 (wgmma m64n128k8, both operands read from
// shared memory through descriptors). Each k-step of 32 holds four 16 KB tiles (A hi, A lo, B hi, B lo),
// rows of 128 bytes in the 128-byte swizzle (so wgmma's reads are conflict-free), filled by a 3-stage
// cp.async pipeline (192 KB, one block per SM). Per k-step a warpgroup runs 12 wgmma (3 products x 4
// k8) into a fragment zeroed by the first of them (scale-d 0), waits for them and adds the fragment to
// its FP32 accumulator with ordinary round-to-nearest adds: the tensor cores' accumulator rounds toward
// zero, so, as step 10's flush_k = 32, no more than 32 k are summed there (FP32-level error, tested).
// Deterministic: a fixed order of products per output. The kernel body exists only for sm_90a; the
// launcher rejects other GPUs before launch.
#include "matmul_kernels.cuh"
#include "tf32x3_wgmma.cuh"

namespace gpuopt::matmul {

namespace {
const char* kName = "tf32x3_wgmma<128x128x32 2 warpgroups m64n128k8 s3, split operands>";
}  // namespace

KernelInfo tf32x3_wgmma_info() {
    using namespace tf32x3_wgmma;
    return kernel_info(reinterpret_cast<const void*>(product_kernel<RowMajorStore>), kName, THREADS, SMEM_BYTES);
}

void matmul_tf32x3_wgmma(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K) {
    using namespace tf32x3_wgmma;
    require_shape(M, N, K, "tf32x3_wgmma");
    const bool vec_c = N % 2 == 0 && reinterpret_cast<std::uintptr_t>(c) % 8 == 0;
    run(a, M, K, K % 4 == 0 && aligned16(a), RowMajorB{b, static_cast<int>(N)}, N,
        RowMajorStore{c, static_cast<int>(N), vec_c}, "matmul tf32x3_wgmma", " (use tf32x3 there)");
}

}  // namespace gpuopt::matmul
