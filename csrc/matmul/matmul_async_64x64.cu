// Instantiations of the async kernel with 64 x 64 block tiles (see matmul_async.cuh; one file
// per block tile so they compile in parallel).
#include "matmul_async.cuh"

namespace gpuopt::matmul {

MatmulLaunch launch_async_64x64(AsyncTile tile, int stages, int split_k, bool vec_n, std::int64_t M,
                              std::int64_t N) {
    using async_detail::plan;
    constexpr AsyncTile t0 = async_tile("64x64x16"), t1 = async_tile("64x64x16_k2");  // checked against kAsyncTiles
    if (tile == t0) return plan<AsyncTiling64x64x16>(stages, split_k, vec_n, M, N);
    if (tile == t1) return plan<AsyncTiling64x64x16_k2>(stages, split_k, vec_n, M, N);
    return {};
}

}  // namespace gpuopt::matmul
