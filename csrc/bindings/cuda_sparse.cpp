// The sparse convolution layer's CUDA variants, sparse_conv2d_<variant>, and their shared check. dense/coo/fast
// return True when every pre-activation sum fitted in int32 (the Python side raises ValueError otherwise);
// reading that flag synchronises with the device, so the GIL is released throughout. The one-pass variants
// (fast_fused, fast_sparse_input, fast_imma) only queue their work and raise a device flag that Python reads with y.
#include "../sparse/sparse_conv_cuda.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

namespace {
sparse::SparseConvShape shape_of(std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R,
                                 std::int64_t S) {
    sparse::SparseConvShape s;
    s.C = C, s.H = H, s.W = W, s.M = M, s.R = R, s.S = S;
    return s;
}
}  // namespace

void bind_sparse(py::module_& m) {
    // The launchers' shape checks (host only): the same for every filter format.
    for (const char* variant : {"dense", "coo", "fast", "fast_fused"})
        def_check(m, "sparse_conv2d", variant,
                  [](std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R, std::int64_t S) {
                      sparse::sparse_conv_check(shape_of(C, H, W, M, R, S));
                  },
                  py::arg("C"), py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"), py::arg("S"));
    def_check(m, "sparse_conv2d", "fast_sparse_input",
              [](std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R, std::int64_t S) {
                  sparse::sparse_conv_sparse_input_check(shape_of(C, H, W, M, R, S));
              },
              py::arg("C"), py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"), py::arg("S"));
    def_check(m, "sparse_conv2d", "fast_imma",
              [](std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R, std::int64_t S) {
                  sparse::sparse_conv_imma_check(shape_of(C, H, W, M, R, S));
              },
              py::arg("C"), py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"), py::arg("S"));

    def_variant(m, "sparse_conv2d", "dense",
                [](std::uintptr_t x, std::uintptr_t w, std::uintptr_t y, std::int64_t C, std::int64_t H, std::int64_t W,
                   std::int64_t M, std::int64_t R, std::int64_t S) {
                    py::gil_scoped_release release;
                    return sparse::sparse_conv_dense(dptr<const std::int16_t>(x), dptr<const std::int16_t>(w),
                                                     dptr<std::int32_t>(y), shape_of(C, H, W, M, R, S));
                },
                py::arg("x"), py::arg("w"), py::arg("y"), py::arg("C"), py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"),
                py::arg("S"),
                "Dense int16 filters (M, C, R, S); y int32 (M, H/2, W/2). True when every sum fits int32 (synchronises).");
    def_variant(m, "sparse_conv2d", "coo",
                [](std::uintptr_t x, std::uintptr_t data, std::uintptr_t row, std::uintptr_t col, std::int64_t width,
                   std::uintptr_t y, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R,
                   std::int64_t S) {
                    py::gil_scoped_release release;
                    return sparse::sparse_conv_coo(dptr<const std::int16_t>(x), dptr<const std::int16_t>(data),
                                                   dptr<const std::int16_t>(row), dptr<const std::int16_t>(col), width,
                                                   dptr<std::int32_t>(y), shape_of(C, H, W, M, R, S));
                },
                py::arg("x"), py::arg("data"), py::arg("row"), py::arg("col"), py::arg("width"), py::arg("y"), py::arg("C"),
                py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"), py::arg("S"),
                "Padded COO filters, data/row/col int16 (M, C, width). True when every sum fits int32 (synchronises).");
    def_variant(m, "sparse_conv2d", "fast",
                [](std::uintptr_t x, std::uintptr_t codes, std::int64_t width, std::uintptr_t y, std::int64_t C,
                   std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R, std::int64_t S) {
                    py::gil_scoped_release release;
                    return sparse::sparse_conv_fast(dptr<const std::int16_t>(x), dptr<const std::int32_t>(codes), width,
                                                    dptr<std::int32_t>(y), shape_of(C, H, W, M, R, S));
                },
                py::arg("x"), py::arg("codes"), py::arg("width"), py::arg("y"), py::arg("C"), py::arg("H"), py::arg("W"),
                py::arg("M"), py::arg("R"), py::arg("S"),
                "Padded FAST codes int32 (M, C, width), padding code 0. True when every sum fits int32 (synchronises).");
    def_variant(m, "sparse_conv2d", "fast_fused",
                [](std::uintptr_t x, std::uintptr_t codes, std::int64_t width, std::uintptr_t y, std::uintptr_t overflow,
                   std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R, std::int64_t S,
                   int split, const std::string& kernel) {
                    const auto k = choice<sparse::FusedKernel>(sparse::kFusedKernels, kernel, "sparse_conv2d fast_fused");
                    py::gil_scoped_release release;
                    sparse::sparse_conv_fast_fused(dptr<const std::int16_t>(x), dptr<const std::int32_t>(codes), width,
                                                   dptr<std::int32_t>(y), dptr<int>(overflow), shape_of(C, H, W, M, R, S),
                                                   split, k);
                },
                py::arg("x"), py::arg("codes"), py::arg("width"), py::arg("y"), py::arg("overflow"), py::arg("C"),
                py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"), py::arg("S"), py::arg("split") = 0,
                py::arg("kernel") = sparse::kFusedKernels.default_name(),
                "As fast, conv + ReLU + pool in one kernel; split: cluster blocks sharing the channels (0 = auto); "
                "kernel: 'window' (one pool window per thread), 'int32'/'fp32' (register-blocked 3x3), 'auto'. "
                "Queues the work; sets the int32 device flag overflow (zeroed first) to 1 when a sum does not fit int32.");
    def_variant(m, "sparse_conv2d", "fast_sparse_input",
                [](std::uintptr_t x, std::uintptr_t codes, std::int64_t width, std::uintptr_t y, std::uintptr_t overflow,
                   std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R, std::int64_t S,
                   std::uintptr_t nz, std::uintptr_t rowptr, std::uintptr_t absmax, bool bound_proven) {
                    sparse::SparseNeuronLists lists;
                    lists.nz = dptr<const int>(nz), lists.rowptr = dptr<const int>(rowptr);
                    lists.absmax = dptr<const int>(absmax), lists.bound_proven = bound_proven;
                    const bool given = nz != 0 || rowptr != 0 || absmax != 0;
                    py::gil_scoped_release release;
                    sparse::sparse_conv_fast_sparse_input(dptr<const std::int16_t>(x), dptr<const std::int32_t>(codes),
                                                          width, dptr<std::int32_t>(y), dptr<int>(overflow),
                                                          shape_of(C, H, W, M, R, S), given ? &lists : nullptr);
                },
                py::arg("x"), py::arg("codes"), py::arg("width"), py::arg("y"), py::arg("overflow"), py::arg("C"),
                py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"), py::arg("S"), py::kw_only(), py::arg("nz") = 0,
                py::arg("rowptr") = 0, py::arg("absmax") = 0, py::arg("bound_proven") = false,
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
    def_variant(m, "sparse_conv2d", "fast_imma",
                [](std::uintptr_t x, std::uintptr_t codes, std::int64_t width, std::uintptr_t y, std::uintptr_t overflow,
                   std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t M, std::int64_t R, std::int64_t S) {
                    py::gil_scoped_release release;
                    sparse::sparse_conv_fast_imma(dptr<const std::int16_t>(x), dptr<const std::int32_t>(codes), width,
                                                  dptr<std::int32_t>(y), dptr<int>(overflow), shape_of(C, H, W, M, R, S));
                },
                py::arg("x"), py::arg("codes"), py::arg("width"), py::arg("y"), py::arg("overflow"), py::arg("C"),
                py::arg("H"), py::arg("W"), py::arg("M"), py::arg("R"), py::arg("S"),
                "As fast, on the int8 tensor cores (taps expanded, the input split in two bytes, exact). Queues the "
                "work; sets the int32 device flag overflow (zeroed first) to 1 when a sum does not fit int32.");
}

}  // namespace gpuopt::bind
