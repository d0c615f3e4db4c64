// argmax of each row of x (rows x cols) -> int64, numpy.argmax's rules: the first index of the
// largest value; a NaN counts as the largest, so the first NaN wins.
//
//   basic    the report's kernel: one thread per row, the reference's loop. Consecutive threads
//            read addresses a row apart (uncoalesced), and a row of 10 scores is one thread's work.
//   warp     a group of 4..32 lanes per row (nn_rows.cuh; a block for rows past 4096), each lane
//            scanning its strided share of the row, then a shuffle reduction carrying (value,
//            index). The rules make "better" a strict total order on (value, index) pairs, so the
//            reduction gives the same answer in any order.
//   streams  the report's final design (its Table 4): rows in two halves, each half's kernel on
//            its own stream followed there by an async copy of its indices into pinned host
//            memory, so the first half's copy overlaps the second half's kernel. The streams and
//            the pinned buffer are created once per device and kept.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "../common/cuda_check.cuh"
#include "../common/launch.cuh"
#include "nn_cuda.hpp"
#include "nn_rows.cuh"

namespace gpuopt::nn {

namespace {

using i64 = std::int64_t;
constexpr int kThreads = rows::kThreads;

__global__ void __launch_bounds__(kThreads) argmax_basic_kernel(const float* __restrict__ x, i64* __restrict__ out,
                                                                i64 nrows, i64 cols) {
    for (i64 i = static_cast<i64>(blockIdx.x) * kThreads + threadIdx.x; i < nrows;
         i += static_cast<i64>(gridDim.x) * kThreads) {
        const float* row = x + i * cols;
        i64 best = 0;
        for (i64 j = 0; j < cols; ++j) {  // the reference's loop (nn_cpu.cpp)
            const float v = row[j];
            if (isnan(v)) {
                best = j;
                break;
            }
            if (v > row[best]) best = j;
        }
        out[i] = best;
    }
}

// A candidate: value and column. "Nothing yet" is (-inf, INT_MAX): any element of the row beats it
// (a larger value, or -inf at a smaller index).
struct Best {
    float v;
    int i;
};

__device__ __forceinline__ Best shfl_xor(Best b, int off) {
    return {__shfl_xor_sync(0xffffffffu, b.v, off), __shfl_xor_sync(0xffffffffu, b.i, off)};
}

// The better of two candidates: NaN above every number (between NaNs the smaller index), then the
// larger value, then (equal values) the smaller index.
__device__ __forceinline__ Best better(Best a, Best b) {
    const bool a_nan = isnan(a.v), b_nan = isnan(b.v);
    bool take_b;
    if (a_nan || b_nan) take_b = b_nan && (!a_nan || b.i < a.i);
    else take_b = b.v > a.v || (b.v == a.v && b.i < a.i);
    return take_b ? b : a;
}

template <int LANES>
__global__ void __launch_bounds__(kThreads) argmax_rows_kernel(const float* __restrict__ x, i64* __restrict__ out,
                                                               i64 nrows, int cols) {
    __shared__ Best scratch[kThreads / 32];
    rows::for_each_row<LANES>(nrows, [&](i64 row, bool valid, int lane) {
        Best b{-INFINITY, INT_MAX};
        if (valid) {
            const float* r = x + row * cols;
            for (int j = lane; j < cols; j += LANES) b = better(b, Best{__ldg(r + j), j});
        }
        b = rows::group_reduce<LANES>(b, [](Best p, Best q) { return better(p, q); }, scratch);
        if (valid && lane == 0) out[row] = b.i;
    });
}

void launch_rows(const float* x, i64* out, i64 nrows, i64 cols, cudaStream_t stream) {
    rows::with_lanes(cols, [&](auto lanes) {
        constexpr int L = decltype(lanes)::value;
        argmax_rows_kernel<L><<<rows::row_blocks<L>(nrows), kThreads, 0, stream>>>(x, out, nrows, static_cast<int>(cols));
    });
    GPUOPT_CHECK_LAUNCH("argmax_rows_kernel");
}

void check_argmax(const float* x, const i64* out, i64 nrows, i64 cols, const char* what) {
    GPUOPT_REQUIRE(nrows >= 0 && cols >= 1, std::string(what) + ": rows must be >= 0 and cols >= 1");
    GPUOPT_REQUIRE(nrows == 0 || (x != nullptr && out != nullptr), std::string(what) + ": null pointer");
}

// The streams variant's cached resources, one set per device: two blocking streams, an event to
// order them after the call's stream, and a pinned buffer that only grows. The mutex serialises calls (the buffer is shared).
struct Pipeline {
    cudaStream_t stream[2] = {nullptr, nullptr};
    cudaEvent_t ready = nullptr;
    i64* pinned = nullptr;
    i64 capacity = 0;  // entries of pinned
};
std::mutex pipeline_mutex;

Pipeline& pipeline() {
    static std::map<int, Pipeline>* pipelines = new std::map<int, Pipeline>();  // never freed (driver shutdown)
    int device = 0;
    GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
    Pipeline& p = (*pipelines)[device];
    for (cudaStream_t& s : p.stream)
        if (s == nullptr) GPUOPT_CUDA_CHECK(cudaStreamCreate(&s));
    if (p.ready == nullptr) GPUOPT_CUDA_CHECK(cudaEventCreateWithFlags(&p.ready, cudaEventDisableTiming));
    return p;
}

// Waits for both streams when it goes out of scope, an error included, so the pinned buffer is
// never reused or freed with a copy into it in flight.
struct DrainStreams {
    Pipeline& p;
    ~DrainStreams() {
        for (cudaStream_t s : p.stream) cudaStreamSynchronize(s);
    }
};

}  // namespace

void row_op_check(i64 nrows, i64 cols, const char* what) {
    GPUOPT_REQUIRE(nrows >= 0 && cols >= 1, std::string(what) + ": rows must be >= 0 and cols >= 1");
    GPUOPT_REQUIRE(cols < kRowColumnLimit, std::string(what) + ": rows of " + std::to_string(cols) +
                                               " floats; the row kernels index columns with int (< 2^31 - 1024)");
}

void argmax_basic(const float* x, i64* out, i64 nrows, i64 cols) {
    check_argmax(x, out, nrows, cols, "argmax basic");
    if (nrows == 0) return;
    argmax_basic_kernel<<<grid_for(nrows, kThreads), kThreads, 0, current_stream()>>>(x, out, nrows, cols);
    GPUOPT_CHECK_LAUNCH("argmax_basic_kernel");
}

void argmax_warp(const float* x, i64* out, i64 nrows, i64 cols) {
    check_argmax(x, out, nrows, cols, "argmax warp");
    row_op_check(nrows, cols, "argmax warp");
    if (nrows == 0) return;
    launch_rows(x, out, nrows, cols, current_stream());
}

void argmax_streams(const float* x, i64* out, i64* host_out, i64 nrows, i64 cols) {
    check_argmax(x, out, nrows, cols, "argmax streams");
    row_op_check(nrows, cols, "argmax streams");
    if (host_out == nullptr) {  // a device result: nothing to overlap with
        if (nrows > 0) launch_rows(x, out, nrows, cols, current_stream());
        return;
    }
    if (nrows == 0) return;
    std::lock_guard<std::mutex> lock(pipeline_mutex);
    Pipeline& p = pipeline();
    if (p.capacity < nrows) {  // grows only: no host allocation on later calls of this size or less
        if (p.pinned != nullptr) GPUOPT_CUDA_CHECK(cudaFreeHost(p.pinned));
        p.pinned = nullptr;
        p.capacity = 0;
        GPUOPT_CUDA_CHECK(cudaMallocHost(&p.pinned, static_cast<std::size_t>(nrows) * sizeof(i64)));
        p.capacity = nrows;
    }
    // Both halves wait for the work queued before on the call's stream (x's producer, out's poisoning
    // in the tests); the host waits for both before returning, so later work on any stream sees out.
    GPUOPT_CUDA_CHECK(cudaEventRecord(p.ready, current_stream()));
    DrainStreams drain{p};
    const i64 half = (nrows + 1) / 2;
    for (int h = 0; h < 2; ++h) {
        const i64 first = h * half, count = (h == 0 ? half : nrows - half);
        if (count == 0) continue;  // one row: the second half is empty
        GPUOPT_CUDA_CHECK(cudaStreamWaitEvent(p.stream[h], p.ready, 0));
        launch_rows(x + first * cols, out + first, count, cols, p.stream[h]);
        GPUOPT_CUDA_CHECK(cudaMemcpyAsync(p.pinned + first, out + first, static_cast<std::size_t>(count) * sizeof(i64),
                                          cudaMemcpyDeviceToHost, p.stream[h]));
    }
    for (cudaStream_t s : p.stream) GPUOPT_CUDA_CHECK(cudaStreamSynchronize(s));
    std::memcpy(host_out, p.pinned, static_cast<std::size_t>(nrows) * sizeof(i64));
}

}  // namespace gpuopt::nn
