#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>

#include "../matmul/matmul_cuda.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

using std::int64_t;
using std::uintptr_t;

// The one argument struct of every matmul variant's binding, matmul_<variant>(args, *, <parameters>): device
// addresses of a (M x K), b (K x N) and c (M x N), row-major float32, and the shape.
struct MatmulArgs {
    uintptr_t a = 0, b = 0, c = 0;
    int64_t M = 0, N = 0, K = 0;

    const float* pa() const { return dptr<const float>(a); }
    const float* pb() const { return dptr<const float>(b); }
    float* pc() const { return dptr<float>(c); }
};

namespace {

// How matmul launchers take their problem (make_planner): plan.matmul_<variant>(M, N, K, **params) ->
// LaunchPlan(a, b, c).
struct MatmulProblem {
    using Given = std::tuple<int64_t, int64_t, int64_t>;
    static constexpr std::size_t head = 1;  // (const MatmulArgs&)
    using Fixed = MatmulArgs;
    static Fixed fix(int64_t M, int64_t N, int64_t K) { return MatmulArgs{0, 0, 0, M, N, K}; }
    template <typename L, typename... P>
    static void launch(const L& l, Fixed f, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t, const P&... p) {
        f.a = a, f.b = b, f.c = c;
        l(f, p...);
    }
};

// A planner's replay with a `prep` (M, N, K, params...) -> PreparedLaunch: the launch is resolved once and a replay on
// 16-byte aligned operands only launches it (about 3 us less per call on the H200 host than re-planning); other
// operands run the launcher.
template <typename Prep>
auto prepared_replay(Prep prep) {
    return [prep](const auto& fn, const MatmulProblem::Fixed& f, const auto&... p) -> LaunchPlan::Fn {
        // Resolved on the first aligned replay, not here: planning needs no GPU (the tile choice does).
        auto l = std::make_shared<std::optional<matmul::PreparedLaunch>>();
        return [fn, prep, l, f, p...](uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t) {
            if (((a | b | c) & 15) != 0) return fn(MatmulArgs{a, b, c, f.M, f.N, f.K}, p...);
            if (!*l) *l = prep(f.M, f.N, f.K, p...);  // (the GIL is held: one thread resolves it)
            py::gil_scoped_release release;
            matmul::run_prepared(**l, dptr<const float>(a), dptr<const float>(b), dptr<float>(c));
        };
    };
}

// Binds matmul variant `variant` (fn(const MatmulArgs&, params...)) as matmul_<variant> and its planner (with a
// prepared launch where `prep` is not nullptr).
template <typename Fn, typename Prep, typename... Params>
void def_matmul(py::module_& m, const char* variant, Fn fn, Prep prep, const Params&... params) {
    auto planner = [&] {
        if constexpr (std::is_same_v<Prep, std::nullptr_t>) return make_planner<MatmulProblem>(fn);
        else return make_planner<MatmulProblem>(fn, prepared_replay(prep));
    }();
    if constexpr (sizeof...(Params) == 0) {
        def_planner(m, "matmul", variant, planner, py::arg("M"), py::arg("N"), py::arg("K"));
        def_variant(m, "matmul", variant, fn, py::arg("args"));
    } else {
        def_planner(m, "matmul", variant, planner, py::arg("M"), py::arg("N"), py::arg("K"), py::kw_only(), params...);
        def_variant(m, "matmul", variant, fn, py::arg("args"), py::kw_only(), params...);
    }
}

// matmul_prepare(variant, params set by `set`, M, N, K) as a planner's prep.
template <typename... P, typename Set>
auto prep_of(const char* variant, Set set) {
    const auto step = choice<matmul::Step>(matmul::kSteps, variant, "matmul");
    return [step, set](int64_t M, int64_t N, int64_t K, P... p) {
        matmul::KernelParams params{};
        set(params, p...);
        return matmul::matmul_prepare(step, params, M, N, K);
    };
}

// String parameters become the launchers' enums here, once (matmul_choices.hpp's tables).
matmul::WarpLayout warp_layout_of(const std::string& w) {
    return choice<matmul::WarpLayout>(matmul::kWarpLayouts, w, "matmul coalesced");
}
matmul::AsyncTile async_tile_of(const std::string& tile) {
    return choice<matmul::AsyncTile>(matmul::kAsyncTiles, tile, "matmul async");
}
matmul::Tf32x3Split split_of(const std::string& split) {
    return choice<matmul::Tf32x3Split>(matmul::kTf32x3Splits, split, "matmul tf32x3");
}

}  // namespace

py::dict kernel_info_dict(const KernelInfo& k) {
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

py::list kernel_info_list(const std::vector<KernelInfo>& infos) {
    py::list out;
    for (const auto& k : infos) out.append(kernel_info_dict(k));
    return out;
}

void bind_matmul(py::module_& m) {
    py::class_<MatmulArgs>(m, "MatmulArgs",
                           "One matmul call: device addresses of a (M x K), b (K x N) and c (M x N), row-major "
                           "float32, and the shape.")
        .def(py::init([](uintptr_t a, uintptr_t b, uintptr_t c, int64_t M, int64_t N, int64_t K) {
                 return MatmulArgs{a, b, c, M, N, K};
             }),
             py::arg("a"), py::arg("b"), py::arg("c"), py::arg("M"), py::arg("N"), py::arg("K"))
        .def_readonly("M", &MatmulArgs::M)
        .def_readonly("N", &MatmulArgs::N)
        .def_readonly("K", &MatmulArgs::K);

    // Variants (the ladder's order is gpuopt's registry's, not this file's): matmul_<variant>(args, *, <the
    // variant's parameters>).
    using Fn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t);
    auto def = [&m](const char* variant, Fn fn, bool prepared) {
        auto launcher = [fn](const MatmulArgs& x) {
            py::gil_scoped_release release;
            fn(x.pa(), x.pb(), x.pc(), x.M, x.N, x.K);
        };
        if (prepared) def_matmul(m, variant, launcher, prep_of<>(variant, [](matmul::KernelParams&) {}));
        else def_matmul(m, variant, launcher, nullptr);
    };
    def("naive", &matmul::matmul_naive, false);  // (a 2-D grid: not one planned kernel)
    def("blocktile_1d", &matmul::matmul_blocktile_1d, true);
    def("cublas", &matmul::matmul_cublas, false);
    def("cublas_tf32", &matmul::matmul_cublas_tf32, false);

    def_matmul(m, "coalesced", [](const MatmulArgs& x, const std::string& warp_layout) {
        const matmul::WarpLayout layout = warp_layout_of(warp_layout);
        py::gil_scoped_release release;
        matmul::matmul_coalesced(x.pa(), x.pb(), x.pc(), x.M, x.N, x.K, layout);
    }, prep_of<const std::string&>("coalesced", [](matmul::KernelParams& p, const std::string& w) {
        p.warp_layout = warp_layout_of(w);
    }),
       py::arg("warp_layout"));
    def_matmul(m, "shared", [](const MatmulArgs& x, int block) {
        py::gil_scoped_release release;
        matmul::matmul_shared(x.pa(), x.pb(), x.pc(), x.M, x.N, x.K, block);
    }, prep_of<int>("shared", [](matmul::KernelParams& p, int block) { p.block = block; }), py::arg("block"));
    def_matmul(m, "tile_buffer", [](const MatmulArgs& x, int tile_sz) {
        py::gil_scoped_release release;
        matmul::matmul_tile_buffer(x.pa(), x.pb(), x.pc(), x.M, x.N, x.K, tile_sz);
    }, prep_of<int>("tile_buffer", [](matmul::KernelParams& p, int tile_sz) { p.tile_sz = tile_sz; }), py::arg("tile_sz"));

    // blocktile_2d, vectorized (kTiles2d) and warptile (kWarpTiles): a tile name, converted through the table.
    auto def_tile = [&m](const char* variant, auto fn, auto table, auto set) {
        using Tile = std::decay_t<std::tuple_element_t<1, typename Signature<decltype(set)>::args>>;
        def_matmul(m, variant, [fn, table, variant](const MatmulArgs& x, const std::string& tile) {
            const Tile t = choice<Tile>(table, tile, variant);
            py::gil_scoped_release release;
            fn(x.pa(), x.pb(), x.pc(), x.M, x.N, x.K, t);
        }, prep_of<const std::string&>(variant, [table, variant, set](matmul::KernelParams& p, const std::string& tile) {
            set(p, choice<Tile>(table, tile, variant));
        }), py::arg("tile"));
    };
    def_tile("blocktile_2d", &matmul::matmul_blocktile_2d, matmul::kTiles2d,
             [](matmul::KernelParams& p, matmul::Tile2d t) { p.tile_2d = t; });
    def_tile("vectorized", &matmul::matmul_vectorized, matmul::kTiles2d,
             [](matmul::KernelParams& p, matmul::Tile2d t) { p.tile_2d = t; });
    def_tile("warptile", &matmul::matmul_warptile, matmul::kWarpTiles,
             [](matmul::KernelParams& p, matmul::WarpTile t) { p.warp_tile = t; });

    def_matmul(m, "async", [](const MatmulArgs& x, const std::string& tile, int stages, int split_k) {
        const matmul::AsyncTile t = async_tile_of(tile);
        py::gil_scoped_release release;
        matmul::matmul_async(x.pa(), x.pb(), x.pc(), x.M, x.N, x.K, t, stages, split_k);
    }, prep_of<const std::string&, int, int>("async", [](matmul::KernelParams& p, const std::string& tile, int stages,
                                                         int split_k) {
        p.async_tile = async_tile_of(tile), p.stages = stages, p.split_k = split_k;
    }),
       py::arg("tile"), py::arg("stages"), py::arg("split_k"));

    def_matmul(m, "tf32x3", [](const MatmulArgs& x, int stages, int flush_k, const std::string& split) {
        const matmul::Tf32x3Split s = split_of(split);
        py::gil_scoped_release release;
        matmul::matmul_tf32x3(x.pa(), x.pb(), x.pc(), x.M, x.N, x.K, stages, flush_k, s);
    }, prep_of<int, int, const std::string&>("tf32x3", [](matmul::KernelParams& p, int stages, int flush_k,
                                                          const std::string& split) {
        p.stages = stages, p.flush_k = flush_k, p.split = split_of(split);
    }), py::arg("stages"), py::arg("flush_k"), py::arg("split"));

    def_matmul(m, "tf32x3_wgmma", [](const MatmulArgs& x) {
        py::gil_scoped_release release;
        matmul::matmul_tf32x3_wgmma(x.pa(), x.pb(), x.pc(), x.M, x.N, x.K);
    }, nullptr);

    // The parameters not given are the tables' defaults (the variant's own for tile and stages).
    m.def("matmul_kernel_info", [](const std::string& variant, int64_t M, int64_t N, int64_t K, std::optional<int> block,
                                   std::optional<int> tile_sz, std::optional<std::string> warp_layout,
                                   std::optional<std::string> tile, std::optional<int> stages, std::optional<int> split_k,
                                   std::optional<int> flush_k, std::optional<std::string> split) {
        using namespace matmul;
        const auto step = choice<Step>(kSteps, variant, "matmul_kernel_info");
        KernelParams p{};
        p.block = block.value_or(kSharedBlocks.default_value());
        p.tile_sz = tile_sz.value_or(kTileBufferSizes.default_value());
        p.warp_layout = warp_layout ? warp_layout_of(*warp_layout) : static_cast<WarpLayout>(kWarpLayouts.default_index);
        p.tile_2d = static_cast<Tile2d>(step == Step::Vectorized ? kVectorizedDefaultTile : kTiles2d.default_index);
        p.warp_tile = static_cast<WarpTile>(kWarpTiles.default_index);
        p.async_tile = static_cast<AsyncTile>(kAsyncTiles.default_index);
        if (tile && (step == Step::Blocktile2d || step == Step::Vectorized))
            p.tile_2d = choice<Tile2d>(kTiles2d, *tile, variant.c_str());
        else if (tile && step == Step::Warptile)
            p.warp_tile = choice<WarpTile>(kWarpTiles, *tile, variant.c_str());
        else if (tile)
            p.async_tile = async_tile_of(*tile);
        p.stages = stages.value_or(step == Step::Tf32x3 ? kTf32x3Stages.default_value() : kAsyncStages.default_value());
        p.split_k = split_k.value_or(kAsyncSplitK.default_value());
        p.flush_k = flush_k.value_or(kTf32x3FlushK.default_value());
        p.split = split ? split_of(*split) : static_cast<Tf32x3Split>(kTf32x3Splits.default_index);
        return kernel_info_dict(matmul_kernel_info(step, p, M, N, K));
    }, py::arg("variant"), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("block") = py::none(),
          py::arg("tile_sz") = py::none(), py::arg("warp_layout") = py::none(), py::arg("tile") = py::none(),
          py::arg("stages") = py::none(), py::arg("split_k") = py::none(), py::arg("flush_k") = py::none(),
          py::arg("split") = py::none(),
          "Registers, shared memory, local memory and occupancy of the kernel `variant` runs for an M x N x K "
          "product with 16-byte aligned operands.");
}

}  // namespace gpuopt::bind
