// The CS6235 conv2d variants: one binding per variant name, each taking the standard conv
// arguments (device pointers, the shape in the reports' names, the activation) and its
// tunable parameters as required keyword arguments (gpuopt's registry supplies the
// defaults), plus conv2d_cs6235_plan, which says what a variant runs on a shape (no GPU
// needed).
#include <cstdint>
#include <string>

#include "../common/activation.hpp"
#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

namespace {


conv::Cs6235Config cs6235_config(conv::Cs6235Variant variant, int block_size, int unroll,
                                 const std::string& loop_order) {
    conv::Cs6235Config cfg;
    cfg.variant = variant;
    cfg.block_size = block_size;
    cfg.unroll = unroll;
    cfg.loop_order = conv::cs6235_loop_order_from_string(loop_order);
    return cfg;
}

void run(conv::Cs6235Variant variant, std::uintptr_t x, std::uintptr_t w, std::uintptr_t bias, std::uintptr_t y,
         const conv::Conv2dShape& s, const std::string& activation, int block_size, int unroll,
         const std::string& loop_order) {
    const Activation act = activation_from_string(activation);
    const conv::Cs6235Config cfg = cs6235_config(variant, block_size, unroll, loop_order);
    py::gil_scoped_release release;
    conv::conv2d_cs6235(dptr<const float>(x), dptr<const float>(w), dptr<const float>(bias), dptr<float>(y), s, act,
                        cfg);
}

}  // namespace

void bind_conv_cs6235(py::module_& m) {
    using conv::Cs6235Variant;
    // x, w, bias (0: none) and y are device addresses; y must hold N*K*P*Q floats.
    // Variants whose only parameter is block_size.
    auto def_block = [&m](const char* name, Cs6235Variant variant) {
        m.def(name, [variant](std::uintptr_t x, std::uintptr_t w, std::uintptr_t bias, std::uintptr_t y, std::int64_t N,
                              std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K, std::int64_t R,
                              std::int64_t S, std::int64_t u, std::int64_t v, std::int64_t ph, std::int64_t pw,
                              const std::string& activation, int block_size) {
            run(variant, x, w, bias, y, conv_shape(N, C, H, W, K, R, S, u, v, ph, pw), activation, block_size, 0,
                "crs");
        }, py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("y"), GPUOPT_CONV_SHAPE_ARGS, py::arg("activation"),
              py::kw_only(), py::arg("block_size"));
    };
    def_block("conv2d_plain", Cs6235Variant::Plain);
    def_block("conv2d_reorder", Cs6235Variant::Reorder);
    def_block("conv2d_unroll_nk", Cs6235Variant::UnrollNK);
    def_block("conv2d_shared_cs6235", Cs6235Variant::Shared);
    def_block("conv2d_general", Cs6235Variant::General);

    m.def("conv2d_unroll_c", [](std::uintptr_t x, std::uintptr_t w, std::uintptr_t bias, std::uintptr_t y,
                                std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K,
                                std::int64_t R, std::int64_t S, std::int64_t u, std::int64_t v, std::int64_t ph,
                                std::int64_t pw, const std::string& activation, int block_size, int unroll) {
        run(Cs6235Variant::UnrollC, x, w, bias, y, conv_shape(N, C, H, W, K, R, S, u, v, ph, pw), activation,
            block_size, unroll, "crs");
    }, py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("y"), GPUOPT_CONV_SHAPE_ARGS, py::arg("activation"),
          py::kw_only(), py::arg("block_size"), py::arg("unroll"));

    m.def("conv2d_unroll_k", [](std::uintptr_t x, std::uintptr_t w, std::uintptr_t bias, std::uintptr_t y,
                                std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K,
                                std::int64_t R, std::int64_t S, std::int64_t u, std::int64_t v, std::int64_t ph,
                                std::int64_t pw, const std::string& activation, int block_size, int unroll,
                                const std::string& loop_order) {
        run(Cs6235Variant::UnrollK, x, w, bias, y, conv_shape(N, C, H, W, K, R, S, u, v, ph, pw), activation,
            block_size, unroll, loop_order);
    }, py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("y"), GPUOPT_CONV_SHAPE_ARGS, py::arg("activation"),
          py::kw_only(), py::arg("block_size"), py::arg("unroll"), py::arg("loop_order"));

    // What a variant runs on a shape: host logic only, so it works without a GPU.
    m.def("conv2d_cs6235_plan", [](const std::string& variant, std::int64_t N, std::int64_t C, std::int64_t H,
                                   std::int64_t W, std::int64_t K, std::int64_t R, std::int64_t S, std::int64_t u,
                                   std::int64_t v, std::int64_t ph, std::int64_t pw, int block_size, int unroll,
                                   const std::string& loop_order) {
        const conv::Cs6235Config cfg =
            cs6235_config(conv::cs6235_variant_from_string(variant), block_size, unroll, loop_order);
        const conv::Cs6235Plan plan = conv::conv2d_cs6235_plan(conv_shape(N, C, H, W, K, R, S, u, v, ph, pw), cfg);
        py::dict out;
        out["mapping"] = plan.map_n_before_k ? "qpnk" : "qpkn";
        out["k_unroll"] = plan.k_unroll;
        out["n_unroll"] = plan.n_unroll;
        out["c_unroll"] = plan.c_unroll;
        out["loop_order"] = plan.loop_order == conv::Cs6235LoopOrder::Rsc ? "rsc" : "crs";
        out["shared"] = plan.shared;
        out["tile_channels"] = plan.tile_channels;
        out["shared_bytes"] = plan.shared_bytes;
        return out;
    }, py::arg("variant"), GPUOPT_CONV_SHAPE_ARGS, py::kw_only(), py::arg("block_size"), py::arg("unroll") = 0,
          py::arg("loop_order") = "crs",
          "The kernel a CS6235 variant runs on a shape: mapping, unroll factors, loop order, shared tile.");
}


}  // namespace gpuopt::bind
