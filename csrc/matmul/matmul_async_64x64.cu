// Instantiations of the async kernel with 64 x 64 block tiles (see matmul_async.cuh; one file
// per block tile so they compile in parallel).
#include "matmul_async.cuh"

namespace gpuopt::matmul {

MatmulLaunch plan_async_64x64(const std::string& tile, int stages, int split_k, bool vec_n, std::int64_t M,
                              std::int64_t N) {
    using async_detail::plan;
    if (tile == "64x64x16") return plan<AsyncTiling64x64x16>(stages, split_k, vec_n, M, N);
    if (tile == "64x64x16_k2") return plan<AsyncTiling64x64x16_k2>(stages, split_k, vec_n, M, N);
    return {};
}

}  // namespace gpuopt::matmul
