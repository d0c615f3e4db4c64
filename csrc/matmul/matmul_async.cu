// Ladder step 9, "async": the warp-tiled kernel fed by a multi-stage cp.async pipeline
// (the kernel is in matmul_async.cuh, its instantiations in matmul_async_<tile>.cu). This
// file picks the configuration: tile and split-k, each given or "auto".
#include <algorithm>
#include <cmath>

#include "../common/device.hpp"
#include "matmul_async.cuh"

namespace gpuopt::matmul {

namespace {

// What tile="auto" / split_k=0 choose from: a tile with a split, the blocks of it a
// multiprocessor holds at once (occupancy), and its throughput on the H200 with every
// multiprocessor full (GFLOP/s, from the sweep in notes/matmul.md).
struct AutoConfig {
    AsyncTile tile;
    int bm, bn, bk, split, occupancy;
    double gflops;
};
constexpr AutoConfig kAutoConfigs[] = {
    {async_tile("128x256x32"), 128, 256, 32, 1, 1, 47800.0},  // large shapes
    {async_tile("128x128x16"), 128, 128, 16, 1, 2, 44200.0},
    {async_tile("128x64x16"), 128, 64, 16, 1, 4, 43000.0},
    {async_tile("64x64x16"), 64, 64, 16, 1, 4, 38600.0},
    {async_tile("128x128x32"), 128, 128, 32, 2, 1, 44700.0},  // split-k, for shapes with few tiles
    {async_tile("128x128x16"), 128, 128, 16, 4, 2, 44200.0},
    {async_tile("64x64x16"), 64, 64, 16, 2, 4, 38600.0},
    {async_tile("64x64x16"), 64, 64, 16, 4, 4, 38600.0},
};
// A block's fixed cost in units of k-depth: for split-k, the cluster reduction of the
// partial tiles (pipeline fill and drain proved negligible in the fit).
constexpr double kFixedK = 0.0, kSplitFixedK = 48.0;
// A multiprocessor holding fewer blocks than its occupancy runs below its full rate (fewer
// warps to hide latency): rate x (blocks / occupancy)^0.2. The three constants were
// fitted to the H200 sweep of squares 512..8192 (notes/matmul.md).
constexpr double kUnderfillExponent = 0.2;

// Estimated time: blocks are dealt to the multiprocessors in rounds (tile quantisation:
// a round with one block on one multiprocessor costs as much as a full one), each block
// doing BM*BN*(K/split + fixed) multiply-adds at the configuration's rate.
double estimate(const AutoConfig& c, std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t sms) {
    const std::int64_t blocks = ceil_div<std::int64_t>(M, c.bm) * ceil_div<std::int64_t>(N, c.bn) * c.split;
    const std::int64_t rounds = ceil_div<std::int64_t>(blocks, sms);
    const double fill = std::min(1.0, static_cast<double>(rounds) / c.occupancy);
    const double rate = c.gflops * std::pow(fill, kUnderfillExponent);
    const double depth = static_cast<double>(ceil_div<std::int64_t>(K, c.split)) + (c.split > 1 ? kSplitFixedK : kFixedK);
    return static_cast<double>(rounds) * c.bm * c.bn * depth / rate;
}

constexpr AsyncTile kAuto = static_cast<AsyncTile>(0);
static_assert(kAsyncTiles.find("auto") == 0, "index 0 of kAsyncTiles is auto");

struct Choice {
    AsyncTile tile;
    int split_k;
};

// tile "auto" and/or split_k 0 (auto): the cheapest estimate among the table's rows the
// caller left open (an explicit split_k replaces the rows' split). An explicit tile
// without a row in the table runs unsplit.
Choice choose(AsyncTile tile, int split_k, std::int64_t M, std::int64_t N, std::int64_t K) {
    if (tile != kAuto && split_k != 0) return {tile, split_k};
    const std::int64_t sms = multiprocessor_count();
    const bool clusters = device_has_clusters();
    Choice best{tile == kAuto ? kAutoConfigs[0].tile : tile, split_k == 0 ? 1 : split_k};
    double best_cost = INFINITY;
    for (AutoConfig c : kAutoConfigs) {
        if (tile != kAuto && tile != c.tile) continue;
        if (split_k != 0) c.split = split_k;
        if (c.split > 1) {
            if (!clusters) continue;  // split-k reduces through a thread-block cluster (sm_90)
            // Split only where the unsplit grid leaves multiprocessor slots empty, and
            // each block keeps at least two k-steps.
            const std::int64_t tiles = ceil_div<std::int64_t>(M, c.bm) * ceil_div<std::int64_t>(N, c.bn);
            if (tiles >= sms * c.occupancy || K < 2LL * c.bk * c.split) continue;
        }
        const double cost = estimate(c, M, N, K, sms);
        if (cost < best_cost) best_cost = cost, best = {c.tile, c.split};
    }
    return best;
}

}  // namespace

MatmulLaunch launch_async(const float* /*a*/, const float* b, const float* c, std::int64_t M, std::int64_t N,
                        std::int64_t K, AsyncTile tile_param, int stages, int split_k) {
    require_choice(kAsyncSplitK, split_k, "matmul async");
    require_choice(kAsyncStages, stages, "matmul async");
    GPUOPT_REQUIRE(split_k <= 1 || device_has_clusters(),
                   "matmul async: split_k > 1 needs thread-block clusters (compute capability 9.0 or newer)");
    const bool vec_n = N % 4 == 0 && aligned16(b) && aligned16(c);
    const auto tile_index = static_cast<std::size_t>(tile_param);
    GPUOPT_REQUIRE(tile_index < kAsyncTiles.size(), "matmul async: tile must be an index into kAsyncTiles, got " +
                                                        std::to_string(static_cast<int>(tile_param)));
    if (tile_param != kAuto) {  // reject tiles no file instantiates before planning a shape
        bool known = false;
        for (auto plan : {launch_async_128x256, launch_async_128x128, launch_async_128x64, launch_async_64x64})
            known = known || plan(tile_param, stages, 1, vec_n, 1, 1).kernel != nullptr;
        GPUOPT_REQUIRE(known, std::string("matmul async: no kernel for tile '") + kAsyncTiles.names[tile_index] + "'");
    }
    const Choice ch = choose(tile_param, split_k, M, N, K);
    MatmulLaunch l;
    for (auto plan : {launch_async_128x256, launch_async_128x128, launch_async_128x64, launch_async_64x64}) {
        l = plan(ch.tile, stages, ch.split_k, vec_n, M, N);
        if (l.kernel != nullptr) return l;
    }
    ::gpuopt::detail::fail_argument(__FILE__, __LINE__,
                                    std::string("matmul async: no kernel for tile '") + kAsyncTiles.names[tile_index] + "'");
}

void matmul_async(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N, std::int64_t K,
                  AsyncTile tile, int stages, int split_k) {
    require_shape(M, N, K, "async");
    run_launch(launch_async(a, b, c, M, N, K, tile, stages, split_k), a, b, c, M, N, K);
}

}  // namespace gpuopt::matmul
