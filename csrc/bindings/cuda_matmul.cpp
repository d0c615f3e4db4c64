#include <string>
#include <tuple>

#include "../matmul/matmul_cuda.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

// The arguments every matmul binding takes: device addresses of a (M x K), b (K x N) and
// c (M x N), row-major float32, then the shape.
#define GPUOPT_MATMUL_ARGS py::arg("a"), py::arg("b"), py::arg("c"), py::arg("M"), py::arg("N"), py::arg("K")
using std::int64_t;
using std::uintptr_t;

namespace {

// plan.matmul_<variant>(M, N, K, **params): the launcher with all but the addresses bound (gpuopt's plan cache).
template <typename Fn, typename Args>
struct MatmulPlanner;
template <typename Fn, typename A, typename B, typename C, typename Mt, typename Nt, typename Kt, typename... P>
struct MatmulPlanner<Fn, std::tuple<A, B, C, Mt, Nt, Kt, P...>> {
    static auto make(Fn fn) {
        return [fn](int64_t M, int64_t N, int64_t K, P... p) {
            return LaunchPlan([fn, M, N, K, p...](uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t) {
                fn(a, b, c, M, N, K, p...);
            });
        };
    }
};

// Binds matmul variant `variant` (fn(a, b, c, M, N, K, params...)) as matmul_<variant> and its planner.
template <typename Fn, typename... Params>
void def_matmul(py::module_& m, const char* variant, Fn fn, const Params&... params) {
    using Sig = Signature<Fn>;
    static_assert(Sig::known, "a matmul launcher's parameter types must be inspectable (no generic lambdas)");
    if constexpr (sizeof...(Params) == 0) {
        def_planner(m, "matmul", variant, MatmulPlanner<Fn, typename Sig::args>::make(fn), py::arg("M"), py::arg("N"),
                    py::arg("K"));
        def_variant(m, "matmul", variant, fn, GPUOPT_MATMUL_ARGS);
    } else {
        def_planner(m, "matmul", variant, MatmulPlanner<Fn, typename Sig::args>::make(fn), py::arg("M"), py::arg("N"),
                    py::arg("K"), py::kw_only(), params...);
        def_variant(m, "matmul", variant, fn, GPUOPT_MATMUL_ARGS, py::kw_only(), params...);
    }
}

}  // namespace

py::dict kernel_info_dict(const matmul::KernelInfo& k) {
    py::dict d;
    d["kernel"] = k.kernel;
    d["threads"] = k.threads_per_block;
    d["registers"] = k.registers_per_thread;
    d["static_shared_bytes"] = k.static_shared_bytes;
    d["dynamic_shared_bytes"] = k.dynamic_shared_bytes;
    d["local_bytes"] = k.local_bytes_per_thread;
    d["max_blocks_per_sm"] = k.max_active_blocks_per_sm;
    return d;
}

void bind_matmul(py::module_& m) {
    // Variants (the ladder's order is gpuopt's registry's, not this file's): matmul_<variant>(a, b, c, M, N, K,
    // *, <the variant's parameters>).
    using Fn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t);
    auto def = [&m](const char* variant, Fn fn) {
        def_matmul(m, variant, [fn](uintptr_t a, uintptr_t b, uintptr_t c, int64_t M, int64_t N, int64_t K) {
            py::gil_scoped_release release;
            fn(dptr<const float>(a), dptr<const float>(b), dptr<float>(c), M, N, K);
        });
    };
    def("naive", &matmul::matmul_naive);
    def("blocktile_1d", &matmul::matmul_blocktile_1d);
    def("cublas", &matmul::matmul_cublas);
    def("cublas_tf32", &matmul::matmul_cublas_tf32);

    def_matmul(m, "coalesced", [](uintptr_t a, uintptr_t b, uintptr_t c, int64_t M, int64_t N, int64_t K,
                                 const std::string& warp_layout) {
        py::gil_scoped_release release;
        matmul::matmul_coalesced(dptr<const float>(a), dptr<const float>(b), dptr<float>(c), M, N, K, warp_layout);
    }, py::arg("warp_layout"));
    def_matmul(m, "shared", [](uintptr_t a, uintptr_t b, uintptr_t c, int64_t M, int64_t N, int64_t K, int block) {
        py::gil_scoped_release release;
        matmul::matmul_shared(dptr<const float>(a), dptr<const float>(b), dptr<float>(c), M, N, K, block);
    }, py::arg("block"));
    def_matmul(m, "tile_buffer", [](uintptr_t a, uintptr_t b, uintptr_t c, int64_t M, int64_t N, int64_t K, int tile_sz) {
        py::gil_scoped_release release;
        matmul::matmul_tile_buffer(dptr<const float>(a), dptr<const float>(b), dptr<float>(c), M, N, K, tile_sz);
    }, py::arg("tile_sz"));

    using TileFn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, const std::string&);
    auto def_tile = [&m](const char* variant, TileFn fn) {
        def_matmul(m, variant, [fn](uintptr_t a, uintptr_t b, uintptr_t c, int64_t M, int64_t N, int64_t K, const std::string& tile) {
            py::gil_scoped_release release;
            fn(dptr<const float>(a), dptr<const float>(b), dptr<float>(c), M, N, K, tile);
        }, py::arg("tile"));
    };
    def_tile("blocktile_2d", &matmul::matmul_blocktile_2d);
    def_tile("vectorized", &matmul::matmul_vectorized);
    def_tile("warptile", &matmul::matmul_warptile);

    def_matmul(m, "async", [](uintptr_t a, uintptr_t b, uintptr_t c, int64_t M, int64_t N, int64_t K,
                             const std::string& tile, int stages, int split_k) {
        py::gil_scoped_release release;
        matmul::matmul_async(dptr<const float>(a), dptr<const float>(b), dptr<float>(c), M, N, K, tile, stages,
                             split_k);
    }, py::arg("tile"), py::arg("stages"), py::arg("split_k"));

    def_matmul(m, "tf32x3", [](uintptr_t a, uintptr_t b, uintptr_t c, int64_t M, int64_t N, int64_t K,
                              int stages, int flush_k, const std::string& split) {
        py::gil_scoped_release release;
        matmul::matmul_tf32x3(dptr<const float>(a), dptr<const float>(b), dptr<float>(c), M, N, K, stages, flush_k,
                              split);
    }, py::arg("stages"), py::arg("flush_k"), py::arg("split"));

    def_matmul(m, "tf32x3_wgmma", [](uintptr_t a, uintptr_t b, uintptr_t c, int64_t M, int64_t N, int64_t K) {
        py::gil_scoped_release release;
        matmul::matmul_tf32x3_wgmma(dptr<const float>(a), dptr<const float>(b), dptr<float>(c), M, N, K);
    });

    m.def("matmul_kernel_info", [](const std::string& variant, int64_t M, int64_t N, int64_t K, int block, int tile_sz,
                                   const std::string& warp_layout, const std::string& tile, int stages, int split_k,
                                   int flush_k, const std::string& split) {
        matmul::KernelParams p;
        p.block = block;
        p.tile_sz = tile_sz;
        p.warp_layout = warp_layout;
        p.tile = tile;
        p.stages = stages;
        p.split_k = split_k;
        p.flush_k = flush_k;
        p.split = split;
        return kernel_info_dict(matmul::matmul_kernel_info(variant, p, M, N, K));
    }, py::arg("variant"), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("block") = 16, py::arg("tile_sz") = 1,
          py::arg("warp_layout") = "row", py::arg("tile") = "auto", py::arg("stages") = 3, py::arg("split_k") = 0,
          py::arg("flush_k") = 16, py::arg("split") = "fragment",
          "Registers, shared memory, local memory and occupancy of the kernel `variant` runs for an M x N x K "
          "product with 16-byte aligned operands.");
}

#undef GPUOPT_MATMUL_ARGS

}  // namespace gpuopt::bind
