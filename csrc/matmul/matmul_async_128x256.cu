// Instantiations of the async kernel with 128 x 256 block tiles (see matmul_async.cuh; one file
// per block tile so they compile in parallel).
#include "matmul_async.cuh"

namespace gpuopt::matmul {

MatmulLaunch plan_async_128x256(const std::string& tile, int stages, int split_k, bool vec_n, std::int64_t M,
                                std::int64_t N) {
    using async_detail::plan;
    if (tile == "128x256x32") return plan<AsyncTiling128x256x32>(stages, split_k, vec_n, M, N);
    if (tile == "128x256x16") return plan<AsyncTiling128x256x16>(stages, split_k, vec_n, M, N);
    return {};
}

}  // namespace gpuopt::matmul
