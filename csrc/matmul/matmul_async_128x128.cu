// Instantiations of the async kernel with 128 x 128 block tiles (see matmul_async.cuh; one file
// per block tile so they compile in parallel).
#include "matmul_async.cuh"

namespace gpuopt::matmul {

MatmulLaunch launch_async_128x128(AsyncTile tile, int stages, int split_k, bool vec_n, std::int64_t M,
                                std::int64_t N) {
    using async_detail::plan;
    constexpr AsyncTile t0 = async_tile("128x128x32"), t1 = async_tile("128x128x16");  // checked against kAsyncTiles
    if (tile == t0) return plan<AsyncTiling128x128x32>(stages, split_k, vec_n, M, N);
    if (tile == t1) return plan<AsyncTiling128x128x16>(stages, split_k, vec_n, M, N);
    return {};
}

}  // namespace gpuopt::matmul
