// The sparse convolution layer's CUDA variants, sparse_conv2d_<variant>(args, *, <parameters>), their shared
// check, and the one argument struct every variant takes:
//
//   SparseConvShape(C, H, W, M, R, S)          x int16 (C, H, W), filters (M, C, R, S); y int32 (M, H/2, W/2)
//   SparseConv2dArgs(x, filters, width, y, overflow, shape)
//       filters: the device addresses of the variant's format (dense: (w,); coo: (data, row, col); fast and the
//       one-pass variants: (codes,)); width: entries per padded slice (0 for dense); overflow: the one-pass
//       variants' int32 device flag (0 for the others)
//   check.sparse_conv2d_<variant>(shape)       the launcher's shape checks (host only)
//
// dense/coo/fast return True when every pre-activation sum fitted in int32 (the Python side raises ValueError
// otherwise); reading that flag synchronises with the device, so the GIL is released throughout. The one-pass
// variants (fast_fused, fast_sparse_input, fast_imma) only queue their work and raise the device flag that Python
// reads with y.
#include <pybind11/stl.h>

#include <array>
#include <vector>

#include "../sparse/sparse_conv_cuda.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

struct SparseConv2dArgs {
    std::uintptr_t x = 0;
    std::array<std::uintptr_t, 3> filters{};  // the format's arrays, in its order; unused entries 0
    std::int64_t width = 0;
    std::uintptr_t y = 0, overflow = 0;
    sparse::SparseConvShape shape;

    template <typename T>
    const T* filter(std::size_t i) const { return dptr<const T>(filters[i]); }
    const std::int16_t* x16() const { return dptr<const std::int16_t>(x); }
    std::int32_t* y32() const { return dptr<std::int32_t>(y); }
    int* flag() const { return dptr<int>(overflow); }
};

namespace {

void bind_sparse_types(py::module_& m) {
    using sparse::SparseConvShape;
    py::class_<SparseConvShape>(m, "SparseConvShape",
                                "The NCTU layer's problem: x int16 (C, H, W), filters (M, C, R, S) with R and S odd; "
                                "y int32 (M, H/2, W/2). Launchers validate it.")
        .def(py::init([](std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R,
                         std::int64_t S) {
                 SparseConvShape s;
                 s.C = C, s.H = H, s.W = W, s.M = M, s.R = R, s.S = S;
                 return s;
             }),
             py::arg("C"), py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"), py::arg("S"))
        .def_readonly("C", &SparseConvShape::C)
        .def_readonly("H", &SparseConvShape::H)
        .def_readonly("W", &SparseConvShape::W)
        .def_readonly("M", &SparseConvShape::M)
        .def_readonly("R", &SparseConvShape::R)
        .def_readonly("S", &SparseConvShape::S)
        .def("__repr__", [](const SparseConvShape& s) {
            auto n = [](std::int64_t v) { return std::to_string(v); };
            return "SparseConvShape(C=" + n(s.C) + ", H=" + n(s.H) + ", W=" + n(s.W) + ", M=" + n(s.M) +
                   ", R=" + n(s.R) + ", S=" + n(s.S) + ")";
        });
    py::class_<SparseConv2dArgs>(m, "SparseConv2dArgs",
                                 "One sparse_conv2d call: device addresses of x, the filter arrays of the variant's "
                                 "format (1 or 3), y and the one-pass variants' overflow flag (0: none), the padded "
                                 "slice width (0 for dense) and the shape.")
        .def(py::init([](std::uintptr_t x, const std::vector<std::uintptr_t>& filters, std::int64_t width,
                         std::uintptr_t y, std::uintptr_t overflow, const sparse::SparseConvShape& shape) {
                 GPUOPT_REQUIRE(!filters.empty() && filters.size() <= 3,
                                "SparseConv2dArgs: filters must be 1 (dense w, FAST codes) or 3 (COO data, row, "
                                "col) device addresses, got " + std::to_string(filters.size()));
                 SparseConv2dArgs a;
                 a.x = x, a.width = width, a.y = y, a.overflow = overflow, a.shape = shape;
                 for (std::size_t i = 0; i < filters.size(); ++i) a.filters[i] = filters[i];
                 return a;
             }),
             py::arg("x"), py::arg("filters"), py::arg("width"), py::arg("y"), py::arg("overflow"), py::arg("shape"))
        .def_readonly("shape", &SparseConv2dArgs::shape);
}

}  // namespace

void bind_sparse(py::module_& m) {
    bind_sparse_types(m);
    // The launchers' shape checks (host only): the same for every filter format but two.
    for (const char* variant : {"dense", "coo", "fast", "fast_fused"})
        def_check(m, "sparse_conv2d", variant, &sparse::sparse_conv_check, py::arg("shape"));
    def_check(m, "sparse_conv2d", "fast_sparse_input", &sparse::sparse_conv_sparse_input_check, py::arg("shape"));
    def_check(m, "sparse_conv2d", "fast_imma", &sparse::sparse_conv_imma_check, py::arg("shape"));

    def_variant(m, "sparse_conv2d", "dense", [](const SparseConv2dArgs& a) {
        py::gil_scoped_release release;
        return sparse::sparse_conv_dense(a.x16(), a.filter<std::int16_t>(0), a.y32(), a.shape);
    }, py::arg("args"), "Dense int16 filters (M, C, R, S); y int32 (M, H/2, W/2). True when every sum fits int32 "
                        "(synchronises).");
    def_variant(m, "sparse_conv2d", "coo", [](const SparseConv2dArgs& a) {
        py::gil_scoped_release release;
        return sparse::sparse_conv_coo(a.x16(), a.filter<std::int16_t>(0), a.filter<std::int16_t>(1),
                                       a.filter<std::int16_t>(2), a.width, a.y32(), a.shape);
    }, py::arg("args"), "Padded COO filters, data/row/col int16 (M, C, width). True when every sum fits int32 "
                        "(synchronises).");
    def_variant(m, "sparse_conv2d", "fast", [](const SparseConv2dArgs& a) {
        py::gil_scoped_release release;
        return sparse::sparse_conv_fast(a.x16(), a.filter<std::int32_t>(0), a.width, a.y32(), a.shape);
    }, py::arg("args"), "Padded FAST codes int32 (M, C, width), padding code 0. True when every sum fits int32 "
                        "(synchronises).");
    def_variant(m, "sparse_conv2d", "fast_fused", [](const SparseConv2dArgs& a, int split, const std::string& kernel) {
        const auto k = choice<sparse::FusedKernel>(sparse::kFusedKernels, kernel, "sparse_conv2d fast_fused");
        py::gil_scoped_release release;
        sparse::sparse_conv_fast_fused(a.x16(), a.filter<std::int32_t>(0), a.width, a.y32(), a.flag(), a.shape, split,
                                       k);
    }, py::arg("args"), py::kw_only(), py::arg("split"), py::arg("kernel"),
       "As fast, conv + ReLU + pool in one kernel; split: cluster blocks sharing the channels (0 = auto); "
       "kernel: 'window' (one pool window per thread), 'int32'/'fp32' (register-blocked 3x3), 'auto'. "
       "Queues the work; sets the int32 device flag overflow (zeroed first) to 1 when a sum does not fit int32.");
    def_variant(m, "sparse_conv2d", "fast_sparse_input",
                [](const SparseConv2dArgs& a, std::uintptr_t nz, std::uintptr_t rowptr, std::uintptr_t absmax,
                   bool bound_proven) {
                    sparse::SparseNeuronLists lists;
                    lists.nz = dptr<const int>(nz), lists.rowptr = dptr<const int>(rowptr);
                    lists.absmax = dptr<const int>(absmax), lists.bound_proven = bound_proven;
                    const bool given = nz != 0 || rowptr != 0 || absmax != 0;
                    py::gil_scoped_release release;
                    sparse::sparse_conv_fast_sparse_input(a.x16(), a.filter<std::int32_t>(0), a.width, a.y32(),
                                                          a.flag(), a.shape, given ? &lists : nullptr);
                },
                py::arg("args"), py::kw_only(), py::arg("nz") = 0, py::arg("rowptr") = 0, py::arg("absmax") = 0,
                py::arg("bound_proven") = false,
                "As fast, zero inputs compacted on the device and skipped; nz/rowptr/absmax: x's lists already built "
                "(sparse_neurons_compact; only the planes kernel queued), bound_proven: max|x| * max sum|w_m| <= "
                "INT32_MAX shown by the caller. Queues the work; sets the int32 device flag overflow (zeroed first) "
                "to 1 when a sum does not fit int32.");
    m.def("sparse_neurons_compact",
          [](std::uintptr_t x, std::uintptr_t nz, std::uintptr_t rowptr, std::uintptr_t absmax, std::int64_t C,
             std::int64_t H, std::int64_t W) {
              py::gil_scoped_release release;
              sparse::sparse_neurons_compact(dptr<const std::int16_t>(x), dptr<int>(nz), dptr<int>(rowptr),
                                             dptr<int>(absmax), C, H, W);
          },
          py::arg("x"), py::arg("nz"), py::arg("rowptr"), py::arg("absmax"), py::arg("C"), py::arg("H"), py::arg("W"),
          "gpuopt.sparse.SparseNeurons' lists of int16 x (C, H, W) on the device: nz int32 (C, H*W), rowptr int32 "
          "(C, H+1), absmax int32 (C,) (csrc/sparse/sparse_conv_cuda.hpp). Queued on stream 0.");
    def_variant(m, "sparse_conv2d", "fast_imma", [](const SparseConv2dArgs& a) {
        py::gil_scoped_release release;
        sparse::sparse_conv_fast_imma(a.x16(), a.filter<std::int32_t>(0), a.width, a.y32(), a.flag(), a.shape);
    }, py::arg("args"), "As fast, on the int8 tensor cores (taps expanded, the input split in two bytes, exact). "
                        "Queues the work; sets the int32 device flag overflow (zeroed first) to 1 when a sum does "
                        "not fit int32.");
}

}  // namespace gpuopt::bind
