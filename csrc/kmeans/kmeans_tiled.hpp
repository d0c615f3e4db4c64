// device_tiled's assign-and-sum (kmeans_tiled.cu), launched by kmeans_device.cu's loop between its own state and
// finish_loop. Internal to csrc/kmeans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kmeans_choices.hpp"

namespace gpuopt::kmeans::tiled {

// Past it the deep path (kmeans_tiled_deep.cu: the K loop over D, any D): x^T of a 256-point tile padded to 128
// coordinates takes 133 KB (one block an SM), and the deep path, padding to a multiple of 32, ran faster there with
// either products (kmeans_tiled.cu's takes_deep).
constexpr int kMaxTiledDim = 64;
constexpr int kMaxTcTiledDim = 32;  // past it products "tf32x3" run on the deep path's 3xTF32 tile (takes_deep)
constexpr int kMaxClusters = 8192;  // the norms (assign_tiled) and member counts (sum_members) in shared memory

// The screen's products (Products, kTiledProducts: kmeans_choices.hpp); Auto picks by shape.
Products resolve(Products p, std::int64_t d, std::int64_t k);

// D > kMaxTiledDim (kMaxTcTiledDim with products "tf32x3"): shift, prep, assign and resolve (kmeans_tiled_deep.cu;
// tc: the 3xTF32 tile, products "tf32x3"); a workspace of deep::workspace_bytes the caller allocates once a run.
namespace deep {
struct Grid {
    unsigned assign_blocks = 0;   // persistent: as many as are resident, at most the tiles
    unsigned resolve_blocks = 0;  // the resolve pass over the queue (the assign kernel gathering its points)
};
std::size_t workspace_bytes(std::int64_t n, std::int64_t d, std::int64_t k, bool tc);
void check(std::int64_t d, std::int64_t k, bool tc);
Grid plan(std::int64_t n, std::int64_t k, int blocks, bool tc);
void launch(const Grid& g, const float* x, std::int64_t n, std::int64_t d, std::int64_t k, const float* centres,
            std::int32_t* membership, void* state, void* workspace, bool tc);
}  // namespace deep

struct Launch {
    Products products = Products::Ffma;  // resolved
    unsigned assign_blocks = 0;  // persistent grids: as many blocks as are resident, at most the work
    unsigned sum_blocks = 0;
    bool deep = false;                 // the deep path (kmeans_tiled.cu's takes_deep)
    deep::Grid deep_grid;
    std::size_t workspace_bytes = 0;   // the deep path's scratch, allocated by the caller once a run
};

// ValueError-style GPUOPT_REQUIRE failures for what the kernels cannot run (k, shared memory).
void check(std::int64_t n, std::int64_t d, std::int64_t k, Products p);
// blocks > 0: at most that many blocks a grid (tests: the result never depends on the grid).
Launch plan(std::int64_t n, std::int64_t d, std::int64_t k, int blocks, Products p);
// One loop's assignment (memberships, the change count in the state) and chunk sums + member counts, on the current stream;
// state is kmeans_device.cuh's LoopState.
void launch(const Launch& l, const float* x, std::int64_t n, std::int64_t d, std::int64_t k, const float* centres,
            std::int32_t* membership, double* chunk_sums, unsigned long long* counts, void* state, void* workspace);

}  // namespace gpuopt::kmeans::tiled
