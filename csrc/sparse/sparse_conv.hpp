// The sparse convolution layer of the NCTU 2016 lab: "same" RxS convolution (stride 1)
// over C int16 input maps, int32 accumulation, ReLU, then 2x2 max pooling (stride 2).
#pragma once

#include <cstdint>

namespace gpuopt::sparse {

struct SparseConvShape {
    std::int64_t C = 0, H = 0, W = 0;  // input  x[C][H][W]
    std::int64_t M = 0, R = 3, S = 3;  // filter w[M][C][R][S], R and S odd
    std::int64_t out_h() const { return H / 2; }
    std::int64_t out_w() const { return W / 2; }
};

// fast_sparse_input's planes kernel (sparse_conv_scatter_planes.cu, its fast path) takes maps up to
// kSparsePlanesMaxW wide and kSparsePlanesMaxH high, filters up to kSparsePlanesMaxTaps x kSparsePlanesMaxTaps; other
// shapes take its atomic kernel (sparse_conv_scatter.cu). Python's default (gpuopt/sparse/auto.py) asks this rule.
constexpr std::int64_t kSparsePlanesMaxW = 32;
constexpr std::int64_t kSparsePlanesMaxH = 511;
constexpr std::int64_t kSparsePlanesMaxTaps = 3;
inline bool sparse_input_planes_apply(const SparseConvShape& s) {
    return s.W <= kSparsePlanesMaxW && s.H <= kSparsePlanesMaxH && s.R <= kSparsePlanesMaxTaps &&
           s.S <= kSparsePlanesMaxTaps;
}

// fast_imma (sparse_conv_imma.cu: int8 tensor cores, the input split in two bytes) takes the planes kernel's shapes
// with C <= kSparseImmaMaxC: its byte products summed over 9 * C taps, |sum| <= 9 * C * 128 * 255, stay below 2^31.
constexpr std::int64_t kSparseImmaMaxC = 4096;
inline bool sparse_imma_apply(const SparseConvShape& s) { return sparse_input_planes_apply(s) && s.C <= kSparseImmaMaxC; }

// Reference on dense filters: y[M][H/2][W/2]. Sums are exact (int64) and the result
// equals what int32 accumulation gives whenever it fits; returns false (y unspecified)
// when some pre-activation sum does not fit in int32.
bool sparse_conv_cpu(const std::int16_t* x, const std::int16_t* w, std::int32_t* y,
                     const SparseConvShape& s);

// Dense filters w[slices][taps] (slices = M*C, taps = R*S) to the lab's COO lists: nnz[slice], then each
// non-zero's value, tap row (tap / S) and column (tap % S), slice by slice, taps in row-major order.
// count_nonzeros fills nnz; fill_coo (data/row/col sized to the sum) writes the entries. Parallel over slices.
void count_nonzeros(const std::int16_t* w, std::int64_t slices, std::int64_t taps, std::int32_t* nnz);
void fill_coo(const std::int16_t* w, std::int64_t slices, std::int64_t taps, std::int64_t S, const std::int32_t* nnz,
              std::int16_t* data, std::int16_t* row, std::int16_t* col);

}  // namespace gpuopt::sparse
