// gpuopt._core: the CPU references and build facts. Thin: shapes come from the arrays
// themselves, outputs are allocated here, the GIL is released around compute.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "../common/parallel.hpp"
#include "../conv/conv2d.hpp"
#include "../conv/conv2d_cuda.hpp"  // constants only: the GPU kernels' limits (no CUDA code is linked here)
#include "../kmeans/kmeans_choices.hpp"
#include "../matmul/matmul_choices.hpp"
#include "../kmeans/kmeans.hpp"
#include "../matmul/matmul.hpp"
#include "../nn/conv2d_pool_choices.hpp"
#include "../nn/nn.hpp"
#include "../sparse/sparse_conv.hpp"
#include "../sparse/sparse_conv_cuda.hpp"
#include "array_util.hpp"

namespace py = pybind11;
using namespace gpuopt;
using bind::carray;

namespace {

carray<float> conv2d_py(const carray<float>& x, const carray<float>& w, const std::optional<carray<float>>& bias,
                     std::int64_t stride_h, std::int64_t stride_w, std::int64_t pad_h, std::int64_t pad_w,
                     const std::string& activation, std::int64_t dilation_h, std::int64_t dilation_w,
                     std::int64_t groups) {
    const auto xs = bind::shape_of(x, 4, "x");
    const auto ws = bind::shape_of(w, 4, "w");
    conv::Conv2dShape s;
    s.N = xs[0], s.C = xs[1], s.H = xs[2], s.W = xs[3];
    s.K = ws[0], s.R = ws[2], s.S = ws[3];
    s.stride_h = stride_h, s.stride_w = stride_w, s.pad_h = pad_h, s.pad_w = pad_w;
    s.dilation_h = dilation_h, s.dilation_w = dilation_w, s.groups = groups;
    GPUOPT_REQUIRE(groups > 0 && ws[1] * groups == s.C, "w must have C / groups input channels (K, C / groups, R, S)");
    if (bias) GPUOPT_REQUIRE(bias->ndim() == 1 && bias->shape(0) == s.K, "bias must have shape (K,)");
    s.validate();
    const Activation act = activation_from_string(activation);
    auto y = bind::empty<float>({s.N, s.K, s.P(), s.Q()});
    const float* b = bias ? bias->data() : nullptr;
    {
        py::gil_scoped_release release;
        conv::conv2d_cpu(x.data(), w.data(), b, y.mutable_data(), s, act);
    }
    return y;
}

carray<float> matmul_py(const carray<float>& a, const carray<float>& b) {
    const auto as = bind::shape_of(a, 2, "a");
    const auto bs = bind::shape_of(b, 2, "b");
    GPUOPT_REQUIRE(as[1] == bs[0], "a and b must have matching inner dimensions");
    auto c = bind::empty<float>({as[0], bs[1]});
    {
        py::gil_scoped_release release;
        matmul::matmul_cpu(a.data(), b.data(), c.mutable_data(), as[0], bs[1], as[1]);
    }
    return c;
}

py::tuple kmeans_py(const carray<float>& x, const carray<float>& init, float threshold, std::int64_t max_iter,
                    const std::string& summation) {
    const auto sum_order = choice<kmeans::Summation>(kmeans::kSummations, summation, "kmeans cpu");
    const auto xs = bind::shape_of(x, 2, "x");
    const auto is = bind::shape_of(init, 2, "init");
    GPUOPT_REQUIRE(is[1] == xs[1], "init must have as many coordinates as x");
    auto centroids = bind::empty<float>({is[0], is[1]});
    std::copy(init.data(), init.data() + init.size(), centroids.mutable_data());
    auto membership = bind::empty<std::int32_t>({xs[0]});
    kmeans::KMeansStats stats;
    {
        py::gil_scoped_release release;
        stats = kmeans::kmeans_cpu(x.data(), xs[0], xs[1], is[0], threshold, max_iter, centroids.mutable_data(),
                                   membership.mutable_data(), sum_order);
    }
    carray<float> delta(static_cast<py::ssize_t>(stats.delta.size()));
    std::copy(stats.delta.begin(), stats.delta.end(), delta.mutable_data());
    return py::make_tuple(centroids, membership, stats.iterations, delta);
}

carray<std::int32_t> kmeans_predict_py(const carray<float>& x, const carray<float>& centroids) {
    const auto xs = bind::shape_of(x, 2, "x");
    const auto cs = bind::shape_of(centroids, 2, "centroids");
    GPUOPT_REQUIRE(cs[1] == xs[1], "centroids must have as many coordinates as x");
    auto membership = bind::empty<std::int32_t>({xs[0]});
    {
        py::gil_scoped_release release;
        kmeans::predict_cpu(x.data(), xs[0], xs[1], centroids.data(), cs[0], membership.mutable_data());
    }
    return membership;
}

// A shard's chunked group sums (kmeans::chunked_group_sums): x (n, d) with n >= 0, its first row at a group
// boundary of the whole data; membership (n,) in 0..k-1. Returns sums (groups, k, d) float64, counts (groups, k).
py::tuple kmeans_group_sums_py(const carray<float>& x, const carray<std::int32_t>& membership, std::int64_t k) {
    const auto xs = bind::shape_of(x, 2, "x");
    const auto ms = bind::shape_of(membership, 1, "membership");
    GPUOPT_REQUIRE(xs[1] >= 1, "x must have at least one coordinate (shape (n, d) with d >= 1)");
    GPUOPT_REQUIRE(ms[0] == xs[0], "membership must have one entry per row of x: shape (" + std::to_string(xs[0]) +
                                       ",), got (" + std::to_string(ms[0]) + ",)");
    GPUOPT_REQUIRE(k >= 1, "k must be at least 1, got " + std::to_string(k));
    const std::int64_t groups = (xs[0] + kmeans::kSumGroup - 1) / kmeans::kSumGroup;
    auto sums = bind::empty<double>({groups, k, xs[1]});
    auto counts = bind::empty<std::int64_t>({groups, k});
    {
        py::gil_scoped_release release;
        kmeans::CentreScratch scratch;
        kmeans::chunked_group_sums(x.data(), membership.data(), xs[0], xs[1], k, sums.mutable_data(),
                                   counts.mutable_data(), scratch);
    }
    return py::make_tuple(sums, counts);
}

// The sparse layer's shape from its six sizes (the launchers' shape rules take the struct).
sparse::SparseConvShape sparse_shape(std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R,
                                     std::int64_t S) {
    sparse::SparseConvShape s;
    s.C = C, s.H = H, s.W = W, s.M = M, s.R = R, s.S = S;
    return s;
}

carray<std::int32_t> sparse_conv_py(const carray<std::int16_t>& x, const carray<std::int16_t>& w) {
    const auto xs = bind::shape_of(x, 3, "x");
    const auto ws = bind::shape_of(w, 4, "w");
    GPUOPT_REQUIRE(ws[1] == xs[0], "w must have as many input channels as x");
    const sparse::SparseConvShape s = sparse_shape(xs[0], xs[1], xs[2], ws[0], ws[2], ws[3]);
    auto y = bind::empty<std::int32_t>({s.M, s.out_h(), s.out_w()});
    bool fits = true;
    {
        py::gil_scoped_release release;
        fits = sparse::sparse_conv_cpu(x.data(), w.data(), y.mutable_data(), s);
    }
    if (!fits) throw py::value_error("sparse_conv2d: a convolution sum does not fit in int32 (the lab's accumulator)");
    return y;
}

py::tuple dense_to_coo_py(const carray<std::int16_t>& w) {
    const auto ws = bind::shape_of(w, 4, "w");
    GPUOPT_REQUIRE(ws[2] <= 32767 && ws[3] <= 32767, "filter taps must index with int16 rows and columns");
    const std::int64_t slices = ws[0] * ws[1], taps = ws[2] * ws[3];
    auto nnz = bind::empty<std::int32_t>({ws[0], ws[1]});
    {
        py::gil_scoped_release release;
        sparse::count_nonzeros(w.data(), slices, taps, nnz.mutable_data());
    }
    std::int64_t total = 0;
    for (std::int64_t i = 0; i < slices; ++i) total += nnz.data()[i];
    auto data = bind::empty<std::int16_t>({total});
    auto row = bind::empty<std::int16_t>({total});
    auto col = bind::empty<std::int16_t>({total});
    {
        py::gil_scoped_release release;
        sparse::fill_coo(w.data(), slices, taps, ws[3], nnz.data(), data.mutable_data(), row.mutable_data(),
                         col.mutable_data());
    }
    return py::make_tuple(nnz, data, row, col);
}

carray<float> activation_py(const carray<float>& x, const std::string& act) {
    const Activation a = activation_from_string(act);
    std::vector<py::ssize_t> shape(x.shape(), x.shape() + x.ndim());
    auto y = bind::empty<float>(shape);
    {
        py::gil_scoped_release release;
        nn::activation_cpu(x.data(), y.mutable_data(), x.size(), a);
    }
    return y;
}

carray<float> pool2d_py(const carray<float>& x, std::int64_t size, const std::string& kind) {
    GPUOPT_REQUIRE(x.ndim() >= 2, "x must have at least 2 dimensions (..., H, W)");
    const auto pool = choice<nn::PoolKind>(nn::kPoolKinds, kind, "pool2d");
    const py::ssize_t nd = x.ndim();
    const std::int64_t H = x.shape(nd - 2), W = x.shape(nd - 1);
    GPUOPT_REQUIRE(size >= 1 && H >= size && W >= size, "pooling window larger than the input");
    std::vector<py::ssize_t> shape(x.shape(), x.shape() + nd);
    shape[nd - 2] = H / size;
    shape[nd - 1] = W / size;
    const std::int64_t planes = H * W == 0 ? 0 : x.size() / (H * W);
    auto y = bind::empty<float>(shape);
    {
        py::gil_scoped_release release;
        nn::pool2d_cpu(x.data(), y.mutable_data(), planes, H, W, size,
                       pool);
    }
    return y;
}

carray<float> fully_connected_py(const carray<float>& x, const carray<float>& w, const std::optional<carray<float>>& bias,
                                 const std::string& activation) {
    const auto xs = bind::shape_of(x, 2, "x");
    const auto ws = bind::shape_of(w, 2, "w");
    GPUOPT_REQUIRE(xs[1] == ws[0], "w must have shape (in_features, out_features) matching x");
    if (bias) GPUOPT_REQUIRE(bias->ndim() == 1 && bias->shape(0) == ws[1], "bias must have shape (out_features,)");
    const Activation act = activation_from_string(activation);
    auto y = bind::empty<float>({xs[0], ws[1]});
    const float* b = bias ? bias->data() : nullptr;
    {
        py::gil_scoped_release release;
        nn::fully_connected_cpu(x.data(), w.data(), b, y.mutable_data(), xs[0], xs[1], ws[1], act);
    }
    return y;
}

carray<std::int64_t> argmax_py(const carray<float>& x) {
    const auto xs = bind::shape_of(x, 2, "x");
    auto out = bind::empty<std::int64_t>({xs[0]});
    {
        py::gil_scoped_release release;
        nn::argmax_rows_cpu(x.data(), out.mutable_data(), xs[0], xs[1]);
    }
    return out;
}

carray<float> softmax_py(const carray<float>& x) {
    const auto xs = bind::shape_of(x, 2, "x");
    auto y = bind::empty<float>({xs[0], xs[1]});
    {
        py::gil_scoped_release release;
        nn::softmax_rows_cpu(x.data(), y.mutable_data(), xs[0], xs[1]);
    }
    return y;
}

py::dict build_info_py() {
    py::dict d;
    d["version"] = GPUOPT_VERSION;
    d["compiler"] = GPUOPT_CXX_COMPILER;
    d["openmp"] = openmp_enabled();
    d["cpu_threads"] = cpu_threads();
#if defined(GPUOPT_CUDA_BUILT)
    d["cuda"] = true;
    d["cuda_version"] = GPUOPT_CUDA_VERSION;
    d["cuda_architectures"] = GPUOPT_CUDA_ARCHS;
    d["cublas"] = true;
    d["cublas_version"] = GPUOPT_CUBLAS_VERSION;
#if defined(GPUOPT_WITH_CUDNN)
    d["cudnn"] = true;
    d["cudnn_version"] = GPUOPT_CUDNN_VERSION;
#else
    d["cudnn"] = false;
    d["cudnn_version"] = py::none();
#endif
#else
    d["cuda"] = false;
    d["cuda_version"] = py::none();
    d["cuda_architectures"] = py::none();
    d["cublas"] = false;
    d["cublas_version"] = py::none();
    d["cudnn"] = false;
    d["cudnn_version"] = py::none();
#endif
    return d;
}

}  // namespace

// The GPU kernels' limits, from the headers the kernels are compiled with: gpuopt reads them here (in every
// build, at import) instead of restating them. The launchers enforce them.
py::dict kernel_limits_py() {
    py::dict d;
    d["conv2d_constant_weight_bytes"] = conv::kConstantWeightBytes;
    d["conv2d_general_min_images"] = conv::kGeneralMinImages;
    d["conv2d_general_min_maps"] = conv::kGeneralMinMaps;
    d["conv2d_general_min_channels"] = conv::kGeneralMinChannels;
    d["conv2d_gemm_index_limit"] = conv::kGemmIndexLimit;
    d["conv2d_unroll_scratch_bytes"] = conv::kUnrollScratchBytes;
    d["sparse_conv2d_max_taps"] = sparse::kSparseMaxTaps;
    d["sparse_conv2d_planes_max_width"] = sparse::kSparsePlanesMaxW;
    d["sparse_conv2d_planes_max_height"] = sparse::kSparsePlanesMaxH;
    d["sparse_conv2d_planes_max_taps"] = sparse::kSparsePlanesMaxTaps;
    d["sparse_conv2d_imma_max_channels"] = sparse::kSparseImmaMaxC;
    d["kmeans_sum_group"] = kmeans::kSumGroup;  // objects a group of the chunked sum tree (where shards may start)
    return d;
}

namespace {

// One exported table: {"allowed": (...), "default": value}; ints spelled as Python's Params spell them (0 as
// zero_name where it means "choose from the shape").
template <std::size_t N>
py::dict choices_dict(const NameChoices<N>& c, std::size_t default_index) {
    py::list allowed;
    for (const char* name : c.names) allowed.append(name);
    py::dict d;
    d["allowed"] = py::tuple(allowed);
    d["default"] = c.names[default_index];
    return d;
}
template <std::size_t N>
py::dict choices_dict(const NameChoices<N>& c) {
    return choices_dict(c, c.default_index);
}
template <std::size_t N>
py::dict choices_dict(const IntChoices<N>& c, std::size_t default_index) {
    auto value = [&c](int v) -> py::object {
        if (v == 0 && c.zero_name != nullptr) return py::str(c.zero_name);
        return py::int_(v);
    };
    py::list allowed;
    for (int v : c.values) allowed.append(value(v));
    py::dict d;
    d["allowed"] = py::tuple(allowed);
    d["default"] = value(c.values[default_index]);
    return d;
}
template <std::size_t N>
py::dict choices_dict(const IntChoices<N>& c) {
    return choices_dict(c, c.default_index);
}

}  // namespace

// The parameter tables of the *_choices.hpp headers, by "op/variant/param": the allowed values (in display order)
// and the default. gpuopt's registry builds those Params from them (registry.Param.native), so values and defaults
// are written once, in C++, and the launchers dispatch on the same tables.
py::dict kernel_choices_py() {
    py::dict d;
    // A table several variants share is exported under each one's key.
    for (const char* v : {"plain", "reorder", "unroll_k", "unroll_c", "unroll_nk", "shared", "general"})
        d[py::str(std::string("conv2d/") + v + "/block_size")] = choices_dict(conv::kCs6235BlockSizes);
    for (const char* v : {"tiled", "tiled_unrolled", "tiled_channels", "tiled_corner_turn"})
        d[py::str(std::string("conv2d/") + v + "/tile_width")] = choices_dict(conv::kEce408TileWidths);
    d["conv2d/tiled_channels/channels_per_block"] = choices_dict(conv::kEce408ChannelsPerBlock);
    d["conv2d/unroll/gemm"] = choices_dict(conv::kUnrollGemms);
    d["conv2d/implicit_gemm/tile"] = choices_dict(conv::kImplicitGemmTiles);
    d["conv2d/implicit_gemm_fast/tile"] = choices_dict(conv::kFastTiles);
    d["conv2d/cudnn/algorithms"] = choices_dict(conv::kCudnnAlgorithms);
    d["conv2d/unroll_k/loop_order"] = choices_dict(conv::kCs6235LoopOrders);
    d["conv2d/unroll_k/unroll"] = choices_dict(conv::kCs6235UnrollK);
    d["conv2d/unroll_c/unroll"] = choices_dict(conv::kCs6235UnrollC);
    d["conv2d/direct_regblock/k_tile"] = choices_dict(conv::kDirectKTiles);
    d["conv2d/depthwise/kernel"] = choices_dict(conv::kDepthwiseKernels);
    d["conv2d/depthwise/tile"] = choices_dict(conv::kDepthwiseTiles);
    d["conv2d/direct_regblock/pixels"] = choices_dict(conv::kDirectPixels);
    d["conv2d/direct_fused/channels_per_block"] = choices_dict(nn::kFusedChannelsPerBlock);
    d["conv2d/direct_fused/images"] = choices_dict(nn::kFusedImages);
    d["conv2d/winograd/m"] = choices_dict(conv::kWinogradTiles);
    d["conv2d_pool/fused/channels_per_block"] = choices_dict(nn::kFusedChannelsPerBlock);
    d["conv2d_pool/fused/images"] = choices_dict(nn::kFusedImages);
    d["conv2d_pool/fused/channels_per_thread"] = choices_dict(nn::kFusedChannelsPerThread);
    d["conv2d_pool/direct_smallc/images"] = choices_dict(nn::kSmallcImages);
    d["conv2d_pool/direct_smallc/maps"] = choices_dict(nn::kSmallcMaps);
    d["conv2d_pool/winograd/m"] = choices_dict(conv::kWinogradTiles);
    d["conv2d_pool/winograd/products"] = choices_dict(conv::kWinogradProducts);
    d["matmul/coalesced/warp_layout"] = choices_dict(matmul::kWarpLayouts);
    d["matmul/shared/block"] = choices_dict(matmul::kSharedBlocks);
    d["matmul/tile_buffer/tile_sz"] = choices_dict(matmul::kTileBufferSizes);
    d["matmul/blocktile_2d/tile"] = choices_dict(matmul::kTiles2d);
    d["matmul/vectorized/tile"] = choices_dict(matmul::kTiles2d, matmul::kVectorizedDefaultTile);
    d["matmul/warptile/tile"] = choices_dict(matmul::kWarpTiles);
    d["matmul/async/tile"] = choices_dict(matmul::kAsyncTiles);
    d["matmul/async/stages"] = choices_dict(matmul::kAsyncStages);
    d["matmul/async/split_k"] = choices_dict(matmul::kAsyncSplitK);
    d["matmul/tf32x3/stages"] = choices_dict(matmul::kTf32x3Stages);
    d["matmul/tf32x3/flush_k"] = choices_dict(matmul::kTf32x3FlushK);
    d["matmul/tf32x3/split"] = choices_dict(matmul::kTf32x3Splits);
    d["kmeans/cpu/summation"] = choices_dict(kmeans::kSummations);
    d["kmeans/liao/threads"] = choices_dict(kmeans::kLiaoThreads);
    for (const char* step : {"liao_occupancy", "liao_aos", "liao_vec"}) {
        d[(std::string("kmeans/") + step + "/threads").c_str()] =
            choices_dict(kmeans::kLiaoThreads, kmeans::kLiaoStepsDefaultThreads);
        d[(std::string("kmeans/") + step + "/reduction_threads").c_str()] = choices_dict(kmeans::kLiaoReductionThreads);
    }
    for (const char* loop : {"device", "device_fused", "device_gemm", "device_tiled"})
        d[(std::string("kmeans/") + loop + "/blocks").c_str()] = choices_dict(kmeans::kLoopBlocks);
    for (const char* loop : {"device", "device_gemm", "device_tiled"})
        d[(std::string("kmeans/") + loop + "/loops_per_sync").c_str()] = choices_dict(kmeans::kLoopsPerSync);
    d["kmeans/device_fused/loops_per_sync"] = choices_dict(kmeans::kFusedLoopsPerSync);
    d["kmeans/device_persistent/blocks"] = choices_dict(kmeans::kPersistentBlocks);
    d["kmeans/stream/chunk_points"] = choices_dict(kmeans::kStreamChunkPoints);
    d["kmeans/stream/buffers"] = choices_dict(kmeans::kStreamBuffers);
    d["kmeans/device_tiled/products"] = choices_dict(kmeans::tiled::kTiledProducts);
    d["kmeans/distributed/loop"] = choices_dict(kmeans::multi::kMultiLoops);
    d["kmeans/device_persistent/x_memory"] = choices_dict(kmeans::kPersistentXMemory);
    d["kmeans/stream/host_memory"] = choices_dict(kmeans::kStreamHostMemory);
    d["kmeans/stream/assign"] = choices_dict(kmeans::kStreamAssign);
    d["sparse_conv2d/fast_fused/kernel"] = choices_dict(sparse::kFusedKernels);
    d["sparse_conv2d/fast_fused/split"] = choices_dict(sparse::kFusedSplits);
    return d;
}

PYBIND11_MODULE(_core, m) {
    m.doc() = "gpuopt CPU references (internal; use the gpuopt package API)";
    const auto nogil_doc = "Internal: arguments are validated by gpuopt; shapes are read from the arrays.";
    m.def("conv2d", &conv2d_py, py::arg("x").noconvert(), py::arg("w").noconvert(), py::arg("bias").noconvert(),
          py::arg("stride_h"), py::arg("stride_w"), py::arg("pad_h"), py::arg("pad_w"), py::arg("activation"),
          py::arg("dilation_h") = 1, py::arg("dilation_w") = 1, py::arg("groups") = 1, nogil_doc);
    m.def("matmul", &matmul_py, py::arg("a").noconvert(), py::arg("b").noconvert(), nogil_doc);
    m.def("kmeans", &kmeans_py, py::arg("x").noconvert(), py::arg("init").noconvert(), py::arg("threshold"),
          py::arg("max_iter"), py::arg("summation") = kmeans::kSummations.default_name(), nogil_doc);
    m.def("kmeans_predict", &kmeans_predict_py, py::arg("x").noconvert(), py::arg("centroids").noconvert(), nogil_doc);
    m.def("kmeans_slot_layout",
          [](const std::vector<std::int64_t>& rows, std::int64_t k, std::int64_t d) {
              GPUOPT_REQUIRE(k >= 1 && d >= 1, "kmeans_slot_layout: k and d must be >= 1");
              const kmeans::SlotLayout s = kmeans::slot_layout(rows, k, d);
              return py::make_tuple(s.tail, s.size);
          },
          py::arg("rows"), py::arg("k"), py::arg("d"),
          "gpuopt.distributed.kmeans' slot of the exchange for ranks of `rows` rows: (tail, size) in float64.");
    m.def("kmeans_group_sums", &kmeans_group_sums_py, py::arg("x").noconvert(), py::arg("membership").noconvert(),
          py::arg("k"), nogil_doc);
    m.def("sparse_conv", &sparse_conv_py, py::arg("x").noconvert(), py::arg("w").noconvert(), nogil_doc);
    m.def("sparse_input_planes_apply", [](std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R,
                                          std::int64_t S) {
        return sparse::sparse_input_planes_apply(sparse_shape(C, H, W, M, R, S));
    }, py::arg("C"), py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"), py::arg("S"),
          "Whether fast_sparse_input's planes kernel takes this shape (the rule the launcher applies; host only).");
    m.def("sparse_imma_apply", [](std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R,
                                  std::int64_t S) {
        return sparse::sparse_imma_apply(sparse_shape(C, H, W, M, R, S));
    }, py::arg("C"), py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"), py::arg("S"),
          "Whether fast_imma takes this shape (its launcher's rule; host only).");
    m.def("dense_to_coo", &dense_to_coo_py, py::arg("w").noconvert(), nogil_doc);
    m.def("activation", &activation_py, py::arg("x").noconvert(), py::arg("activation"), nogil_doc);
    m.def("pool2d", &pool2d_py, py::arg("x").noconvert(), py::arg("size"), py::arg("kind"), nogil_doc);
    m.def("fully_connected", &fully_connected_py, py::arg("x").noconvert(), py::arg("w").noconvert(),
          py::arg("bias").noconvert(), py::arg("activation") = kActivations.default_name(), nogil_doc);
    m.def("argmax", &argmax_py, py::arg("x").noconvert(), nogil_doc);
    m.def("softmax", &softmax_py, py::arg("x").noconvert(), nogil_doc);
    m.def("build_info", &build_info_py, "What this build was compiled with.");
    m.def("kernel_limits", &kernel_limits_py, "The GPU kernels' limits (constant bank, index ranges, switches).");
    m.def("conv2d_implicit_gemm_tf32x3_shared_bytes", &conv::conv2d_implicit_gemm_tf32x3_shared_bytes, py::arg("C"),
          py::arg("Hp"), py::arg("Wp"), py::arg("taps"), py::arg("K"),
          "Shared memory (bytes) conv2d implicit_gemm_tf32x3 takes for a layer: C channels of Hp x Wp padded "
          "planes, taps = C*R*S, K output maps (its check holds it to the GPU's opt-in limit).");
    m.def("conv2d_depthwise_rows_takes", &conv::conv2d_depthwise_rows_takes, py::arg("R"), py::arg("S"),
          py::arg("stride_h"), py::arg("stride_w"), py::arg("dilation_h"), py::arg("dilation_w"),
          "Whether conv2d depthwise's rows kernel takes a filter, stride and dilation (square 3x3, 5x5 or 7x7, "
          "stride 1 or 2, no dilation; its shared memory apart).");
    m.def("conv2d_depthwise_rows_min_shared_bytes", &conv::conv2d_depthwise_rows_min_shared_bytes, py::arg("H"),
          py::arg("W"), py::arg("R"), py::arg("stride"), py::arg("M"),
          "Shared memory (bytes) conv2d depthwise's rows kernel needs at its narrowest unit (4 output rows of one "
          "H x W plane, R x R filter, M maps a channel): past the GPU's opt-in limit it does not take the layer.");
    m.def("kernel_choices", &kernel_choices_py,
          "The parameter tables of the kernels' *_choices.hpp headers: {'op/variant/param': {'allowed', 'default'}}.");
}
