// The NCTU lab's sparse convolution layer on the GPU (see sparse_conv_cuda.hpp).
//
// One convolution kernel, templated on a filter-format policy (DenseFilter, CooFilter,
// FastFilter) that enumerates the taps (value, row, col) of filter slice (m, c); then a
// 2x2 max-pool kernel.
//
// Why two kernels, not one: it is the lab's structure (convLayerGPU, then MaxPoolingGPU),
// which these variants reproduce, and one thread per pre-pool output checks every
// pre-activation sum for int32 overflow, including the trailing odd row/column the pool
// drops, exactly as the CPU reference does. A fused conv+pool kernel (each thread owning
// a 2x2 window, no round trip of the M*H*W pre-pool maps through global memory) is
// future work.

#include <climits>
#include <cstdint>

#include "../common/device_buffer.cuh"
#include "../common/launch.cuh"
#include "sparse_conv_cuda.hpp"
#include "sparse_exact.cuh"

namespace gpuopt::sparse {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxTaps = kSparseMaxTaps;

// ---------------------------------------------------------------- filter formats
// Each policy yields the taps of slice s = m*C + c through for_each_tap(s, f), calling
// f(value, row, col). kSkipZeroInputs: whether the kernel skips zero input neurons (the
// lab's COO kernel does; its part-I dense kernel is a plain direct convolution).

// The lab's part I: every R*S tap of the dense int16 slice, zeros included.
struct DenseFilter {
    static constexpr bool kSkipZeroInputs = false;
    const std::int16_t* __restrict__ w;  // (M, C, R, S)
    int R, S;

    template <typename F>
    __device__ __forceinline__ void for_each_tap(std::int64_t slice, F&& f) const {
        const std::int16_t* ws = w + slice * (R * S);
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < S; ++t) f(static_cast<int>(ws[r * S + t]), r, t);
    }
};

// COO: `width` padded (value, row, col) entries per slice, three int16 arrays.
struct CooFilter {
    static constexpr bool kSkipZeroInputs = true;
    const std::int16_t* __restrict__ data;  // (M, C, width) each
    const std::int16_t* __restrict__ row;
    const std::int16_t* __restrict__ col;
    int width;

    template <typename F>
    __device__ __forceinline__ void for_each_tap(std::int64_t slice, F&& f) const {
        const std::int64_t base = slice * width;
        for (int j = 0; j < width; ++j) {
            const int value = data[base + j];
            if (value == 0) continue;  // padding (value 0 at (0, 0)): row/col need not be read
            f(value, static_cast<int>(row[base + j]), static_cast<int>(col[base + j]));
        }
    }
};

// FAST codes: decode_fast (sparse_exact.cuh).
struct FastFilter {
    static constexpr bool kSkipZeroInputs = true;
    const std::int32_t* __restrict__ codes;  // (M, C, width)
    int width;

    template <typename F>
    __device__ __forceinline__ void for_each_tap(std::int64_t slice, F&& f) const {
        const std::int64_t base = slice * width;
        for (int j = 0; j < width; ++j) {
            const int code = codes[base + j];
            if (code == 0) continue;  // padding (value 0 at (0, 0))
            const FastTap t = decode_fast(code);
            f(t.value, t.row, t.col);
        }
    }
};

// ---------------------------------------------------------------- kernels
// One thread per pre-pool output (m, oy, ox), ox fastest so a warp reads consecutive
// input neurons and writes consecutive outputs; all threads of a warp (mostly) share m,
// so the filter reads are broadcasts. Sums are int64 of exact 64-bit products (exact
// even for a FAST code whose value lies outside int16), so the overflow test sees the
// true sum. Writes relu(sum) (clamped to int32; the flag makes the host discard the result on
// overflow) and raises *overflow when the sum does not fit in int32.
template <typename Filter>
__global__ void __launch_bounds__(kThreads)
    conv_relu_kernel(const std::int16_t* __restrict__ x, const Filter filter, std::int32_t* __restrict__ pre,
                     int* __restrict__ overflow, int C, int H, int W, int M, int pad_h, int pad_w) {
    const std::int64_t map_size = static_cast<std::int64_t>(H) * W;
    const std::int64_t outputs = static_cast<std::int64_t>(M) * map_size;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < outputs; i += stride) {
        const int m = static_cast<int>(i / map_size);
        const int pos = static_cast<int>(i - m * map_size);  // oy*W + ox, < 2^31 (checked on the host)
        const int oy = pos / W, ox = pos - oy * W;
        std::int64_t sum = 0;
        for (int c = 0; c < C; ++c) {
            const std::int16_t* xc = x + c * map_size;
            filter.for_each_tap(static_cast<std::int64_t>(m) * C + c, [&](int value, int row, int col) {
                const int iy = oy - pad_h + row, ix = ox - pad_w + col;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) return;  // zero padding ("same")
                const int neuron = xc[iy * W + ix];
                if (Filter::kSkipZeroInputs && neuron == 0) return;
                sum += static_cast<std::int64_t>(value) * neuron;
            });
        }
        if (sum > INT_MAX || sum < INT_MIN) atomicOr(overflow, 1);
        pre[i] = static_cast<std::int32_t>(sum <= 0 ? 0 : (sum > INT_MAX ? INT_MAX : sum));
    }
}

// One thread per pooled output (m, py, px): max of the 2x2 window at (2py, 2px) of the
// (already ReLU'd) pre-pool maps; a trailing odd row/column is dropped (floor).
__global__ void __launch_bounds__(kThreads)
    max_pool_2x2_kernel(const std::int32_t* __restrict__ pre, std::int32_t* __restrict__ y, int H, int W, int M) {
    const int PH = H / 2, PW = W / 2;
    const std::int64_t pooled_size = static_cast<std::int64_t>(PH) * PW;
    const std::int64_t outputs = static_cast<std::int64_t>(M) * pooled_size;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < outputs; i += stride) {
        const std::int64_t m = i / pooled_size;
        const int pos = static_cast<int>(i - m * pooled_size);
        const int py = pos / PW, px = pos - py * PW;
        const std::int32_t* window = pre + (m * H + 2 * py) * W + 2 * px;
        y[i] = max(max(window[0], window[1]), max(window[W], window[W + 1]));
    }
}

// ---------------------------------------------------------------- host side
void check_shape(const SparseConvShape& s) {
    GPUOPT_REQUIRE(s.C >= 1 && s.M >= 1, "sparse_conv: C and M must be >= 1");
    GPUOPT_REQUIRE(s.H >= 2 && s.W >= 2, "sparse_conv: H and W must be >= 2 (2x2 max pool)");
    GPUOPT_REQUIRE(s.R >= 1 && s.S >= 1 && s.R <= kMaxTaps && s.S <= kMaxTaps && s.R % 2 == 1 && s.S % 2 == 1,
                   "sparse_conv (CUDA): the kernels take filters with odd sides up to 9x9 (FAST's one-digit rows and "
                   "columns), got " + std::to_string(s.R) + "x" + std::to_string(s.S) + "; use variant='cpu'");
    // Per-map offsets and the m, c loop counters are int in the kernels.
    GPUOPT_REQUIRE(s.C <= INT_MAX && s.M <= INT_MAX && s.H <= INT_MAX && s.W <= INT_MAX && s.H * s.W <= INT_MAX,
                   "sparse_conv (CUDA): C, M and H*W must be < 2^31");
}

void check_width(std::int64_t width, const SparseConvShape& s) {
    GPUOPT_REQUIRE(width >= 1 && width <= s.R * s.S, "sparse_conv: width (entries per padded slice) must be in 1..R*S = " +
                                                         std::to_string(s.R * s.S) + ", got " + std::to_string(width));
}

template <typename Filter>
bool run(const std::int16_t* x, const Filter& filter, std::int32_t* y, const SparseConvShape& s) {
    GPUOPT_REQUIRE(x != nullptr && y != nullptr, "sparse_conv: null x or y");
    const std::int64_t pre_count = s.M * s.H * s.W;
    const std::int64_t out_count = s.M * s.out_h() * s.out_w();
    DeviceBuffer<std::int32_t> pre(static_cast<std::size_t>(pre_count));
    DeviceBuffer<int> overflow(1);
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(overflow.data(), 0, sizeof(int), current_stream()));

    conv_relu_kernel<Filter><<<grid_for(pre_count, kThreads), kThreads, 0, current_stream()>>>(
        x, filter, pre.data(), overflow.data(), static_cast<int>(s.C), static_cast<int>(s.H), static_cast<int>(s.W),
        static_cast<int>(s.M), static_cast<int>(s.R / 2), static_cast<int>(s.S / 2));
    GPUOPT_CHECK_LAUNCH("sparse conv_relu_kernel");
    max_pool_2x2_kernel<<<grid_for(out_count, kThreads), kThreads, 0, current_stream()>>>(pre.data(), y, static_cast<int>(s.H),
                                                                      static_cast<int>(s.W), static_cast<int>(s.M));
    GPUOPT_CHECK_LAUNCH("sparse max_pool_2x2_kernel");

    // The caller must learn whether the result is valid, so wait for the kernels and read
    // the flag (this also surfaces a kernel fault here). The scratch goes back to the pool
    // only after this point.
    int overflowed = 0;
    copy_to_host_sync(&overflowed, overflow.data(), sizeof(int));
    return overflowed == 0;
}

}  // namespace

void sparse_conv_check(const SparseConvShape& s) { check_shape(s); }

bool sparse_conv_dense(const std::int16_t* x, const std::int16_t* w, std::int32_t* y, const SparseConvShape& s) {
    check_shape(s);
    GPUOPT_REQUIRE(w != nullptr, "sparse_conv_dense: null w");
    return run(x, DenseFilter{w, static_cast<int>(s.R), static_cast<int>(s.S)}, y, s);
}

bool sparse_conv_coo(const std::int16_t* x, const std::int16_t* data, const std::int16_t* row, const std::int16_t* col,
                     std::int64_t width, std::int32_t* y, const SparseConvShape& s) {
    check_shape(s);
    check_width(width, s);
    GPUOPT_REQUIRE(data != nullptr && row != nullptr && col != nullptr, "sparse_conv_coo: null data, row or col");
    return run(x, CooFilter{data, row, col, static_cast<int>(width)}, y, s);
}

bool sparse_conv_fast(const std::int16_t* x, const std::int32_t* codes, std::int64_t width, std::int32_t* y,
                      const SparseConvShape& s) {
    check_shape(s);
    check_width(width, s);
    GPUOPT_REQUIRE(codes != nullptr, "sparse_conv_fast: null codes");
    return run(x, FastFilter{codes, static_cast<int>(width)}, y, s);
}

}  // namespace gpuopt::sparse
