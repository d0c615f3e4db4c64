// Instantiations of the async kernel with 128 x 64 block tiles (see matmul_async.cuh; one file
// per block tile so they compile in parallel).
#include "matmul_async.cuh"

namespace gpuopt::matmul {

MatmulLaunch launch_async_128x64(AsyncTile tile, int stages, int split_k, bool vec_n, std::int64_t M,
                               std::int64_t N) {
    using async_detail::plan;
    constexpr AsyncTile t0 = async_tile("128x64x16");  // checked against kAsyncTiles
    if (tile == t0) return plan<AsyncTiling128x64x16>(stages, split_k, vec_n, M, N);
    return {};
}

}  // namespace gpuopt::matmul
