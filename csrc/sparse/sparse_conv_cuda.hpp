// The NCTU lab's sparse convolution layer on the GPU: device pointers, the current stream
// (common/stream.hpp).
//
// Every function computes y[M][H/2][W/2] = maxpool2x2(relu(conv_same(x, w))) exactly,
// like sparse_conv_cpu, from filters in one of the lab's three formats:
//   dense  w     int16 (M, C, R, S)            (the lab's part I)
//   coo    data, row, col  int16 (M, C, width)  (COOFilters.padded(): slices padded
//                                               with value 0 at (0, 0))
//   fast   codes int32 (M, C, width)            (value*100 + row*10 + col, padded with 0)
// x is int16 (C, H, W); C, M >= 1, H, W >= 2, R and S odd in 1..9, 1 <= width <= R*S.
//
// Each returns true when every pre-activation sum (pooled or not) fits in int32, and
// false otherwise (y unspecified), as sparse_conv_cpu does. Reading that flag back is a
// 4-byte device-to-host copy, so these calls SYNCHRONISE with the device: they return
// after the kernels have finished, and a kernel fault surfaces here as CudaError.
// Scratch (the pre-pool maps and the flag) comes from the caching pool.
//
// COO rows/cols are trusted to lie in the filter (COOFilters checks them); any value
// still only reads inside x, because every tap's input position is bounds-checked.
#pragma once

#include <cstdint>

#include "sparse_choices.hpp"
#include "sparse_conv.hpp"

namespace gpuopt::sparse {

// The shape checks every launcher runs first (host only, no CUDA call): InvalidArgument for a shape the
// kernels cannot run. kSparseMaxTaps: the largest R and S (FAST stores row and column as one digit each).
constexpr std::int64_t kSparseMaxTaps = 9;
void sparse_conv_check(const SparseConvShape& s);

bool sparse_conv_dense(const std::int16_t* x, const std::int16_t* w, std::int32_t* y, const SparseConvShape& s);

bool sparse_conv_coo(const std::int16_t* x, const std::int16_t* data, const std::int16_t* row, const std::int16_t* col,
                     std::int64_t width, std::int32_t* y, const SparseConvShape& s);

bool sparse_conv_fast(const std::int16_t* x, const std::int32_t* codes, std::int64_t width, std::int32_t* y,
                      const SparseConvShape& s);

// The one-pass variants below compute the same y, but do NOT synchronise: they queue their work on the current stream
// and set the device int *overflow (1 element, zeroed first) to 1 when some sum does not fit in int32 (y then
// unspecified). The caller reads the flag with the result, so the hot path has no host round trip.
//
// The layer in one kernel (sparse_conv_fused.cu): conv + ReLU + pool fused, the pre-pool maps never
// written; int32 sums where a per-block bound proves them exact, int64 otherwise.
// split: blocks of a thread-block cluster that share one (maps, tile), each summing 1/split of the channels
// (1, 2, 4 or 8; 0 = chosen from the shape).
// kernel: kWindow, one 2x2 pool window per thread (any R, S); kInt32 / kFp32, the register-blocked 3x3 kernel
// (sparse_conv_fused_blocked.cu) accumulating in int32 (IMAD) or in FP32 (FFMA, exact while max|x| * sum|w| <=
// 2^24, else the exact int64 path: slow, e.g. 9 taps per slice on the lab's neurons); kAuto: kWindow (measured
// on the H200 on the lab's layer: window 143 us, int32 160 us, fp32 160 us; notes/sparse.md). FusedKernel and its
// table: sparse_choices.hpp.
void sparse_conv_fast_fused(const std::int16_t* x, const std::int32_t* codes, std::int64_t width, std::int32_t* y,
                            int* overflow, const SparseConvShape& s, int split, FusedKernel kernel);
// The register-blocked 3x3 kernel (called by sparse_conv_fast_fused after its checks).
void sparse_conv_fast_fused_blocked(const std::int16_t* x, const std::int32_t* codes, std::int64_t width,
                                    std::int32_t* y, int* overflow, const SparseConvShape& s, int split, bool fp32);

// Input sparsity (sparse_conv_scatter.cu): the non-zero inputs compacted on the device, each times each tap
// scattered into shared-memory int32 accumulators (integer atomics: exact, order-independent), then ReLU + pool.
// Its shape check adds H, W <= 32767 and H*W <= 2^27.
void sparse_conv_sparse_input_check(const SparseConvShape& s);
// Sparse neurons (round 6, gpuopt.sparse.SparseNeurons): the planes kernel's per-channel lists, built once on the
// device by sparse_neurons_compact from int16 x (C, H, W) (H <= kSparsePlanesMaxH, W <= kSparsePlanesMaxW):
// nz int32 [C][H*W] (a channel's non-zeros in raster order, value << 16 | 4 * (iy * 32 + ix); capacity H*W),
// rowptr int32 [C][H + 1] (row iy's entries are nz[c][rowptr[c][iy] .. rowptr[c][iy + 1])), absmax int32 [C]
// (max |x| of the channel). Queued on the current stream, no synchronisation.
void sparse_neurons_check(std::int64_t C, std::int64_t H, std::int64_t W);
void sparse_neurons_compact(const std::int16_t* x, int* nz, int* rowptr, int* absmax, std::int64_t C, std::int64_t H,
                            std::int64_t W);
struct SparseNeuronLists {
    const int* nz = nullptr;
    const int* rowptr = nullptr;
    const int* absmax = nullptr;
    // The caller proved max|x| * max_m sum|w_m| <= INT32_MAX (no sum can overflow): the kernel zeroes the overflow
    // flag itself (no memset launch).
    bool bound_proven = false;
};
// lists: x's lists already built (the planes kernel alone is queued; x is still read by the exact int64 path);
// nullptr: x compacted here first. Lists need sparse_input_planes_apply (InvalidArgument otherwise).
void sparse_conv_fast_sparse_input(const std::int16_t* x, const std::int32_t* codes, std::int64_t width,
                                   std::int32_t* y, int* overflow, const SparseConvShape& s,
                                   const SparseNeuronLists* lists);
// Its kernel where sparse_input_planes_apply (sparse_conv.hpp; sparse_conv_scatter_planes.cu, one launch); false
// (nothing queued) for other shapes, which take the atomic kernel of sparse_conv_scatter.cu.
bool sparse_conv_fast_sparse_input_planes(const std::int16_t* x, const std::int32_t* codes, std::int64_t width,
                                          std::int32_t* y, int* overflow, const SparseConvShape& s,
                                          const SparseNeuronLists* lists);

// Int8 tensor cores (sparse_conv_imma.cu; round 5): the FAST codes expanded to dense int8 taps and the input split into
// its low (unsigned) and high (signed) bytes, each product summed exactly in s32 by mma.sync and combined in int64;
// map tiles with a tap outside int8 take the exact int64 path. Shapes: sparse_imma_apply (sparse_conv.hpp), else
// InvalidArgument from its check.
void sparse_conv_imma_check(const SparseConvShape& s);
void sparse_conv_fast_imma(const std::int16_t* x, const std::int32_t* codes, std::int64_t width, std::int32_t* y,
                           int* overflow, const SparseConvShape& s);

}  // namespace gpuopt::sparse
