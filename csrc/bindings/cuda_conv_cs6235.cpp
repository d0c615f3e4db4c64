// The CS6235 conv2d variants (conv2d_cs6235.cu): one binding per variant name, its check (the plan, which
// validates without a GPU) and conv2d_cs6235_plan (what a variant runs on a shape). The general variant's
// switch thresholds are kernel limits (_core.kernel_limits()).
#include <string>

#include "../conv/conv2d_cuda.hpp"
#include "conv_args.hpp"

namespace gpuopt::bind {

namespace {

using conv::Cs6235Variant;

// The variants without an unroll or a loop order get 0 and crs (their fixed order; the launcher checks them).
conv::Cs6235Config cs6235_config(Cs6235Variant variant, int block_size, int unroll = 0,
                                 const std::string& loop_order = "crs") {
    conv::Cs6235Config cfg;
    cfg.variant = variant;
    cfg.block_size = block_size;
    cfg.unroll = unroll;
    cfg.loop_order = choice<conv::Cs6235LoopOrder>(conv::kCs6235LoopOrders, loop_order, "conv2d unroll_k");
    return cfg;
}

// Binds one variant whose keyword parameters, of types P, are (block_size, unroll, loop_order) or a prefix of
// them: cs6235_config fills the rest (no unroll, crs). Its check is the plan, which validates without a GPU.
template <typename... P, typename... Params>
void def_cs6235(py::module_& m, const char* name, Cs6235Variant variant, const Params&... params) {
    def_conv2d(m, name,
               [variant](const Conv2dArgs& a, P... p) {
                   const conv::Cs6235Config cfg = cs6235_config(variant, p...);
                   run_conv(a, [&cfg](auto... q) { conv::conv2d_cs6235(q..., cfg); });
               },
               [variant](const conv::Conv2dShape& s, P... p) {
                   conv::conv2d_cs6235_plan(s, cs6235_config(variant, p...));
               },
               params...);
}

}  // namespace

void bind_conv_cs6235(py::module_& m) {
    const auto block_size = py::arg("block_size"), unroll = py::arg("unroll"), loop_order = py::arg("loop_order");
    def_cs6235<int>(m, "plain", Cs6235Variant::Plain, block_size);
    def_cs6235<int>(m, "reorder", Cs6235Variant::Reorder, block_size);
    def_cs6235<int, int, const std::string&>(m, "unroll_k", Cs6235Variant::UnrollK, block_size, unroll, loop_order);
    def_cs6235<int, int>(m, "unroll_c", Cs6235Variant::UnrollC, block_size, unroll);
    def_cs6235<int>(m, "unroll_nk", Cs6235Variant::UnrollNK, block_size);
    def_cs6235<int>(m, "shared", Cs6235Variant::Shared, block_size);
    def_cs6235<int>(m, "general", Cs6235Variant::General, block_size);

    // What a variant runs on a shape: host logic only, so it works without a GPU.
    m.def("conv2d_cs6235_plan", [](const std::string& variant, const conv::Conv2dShape& s, int block_size, int unroll,
                                   const std::string& loop_order) {
        const conv::Cs6235Config cfg =
            cs6235_config(conv::cs6235_variant_from_string(variant), block_size, unroll, loop_order);
        const conv::Cs6235Launch plan = conv::conv2d_cs6235_plan(s, cfg);
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
    }, py::arg("variant"), py::arg("shape"), py::kw_only(), py::arg("block_size"), py::arg("unroll") = 0,
          py::arg("loop_order") = "crs",
          "The kernel a CS6235 variant runs on a shape: mapping, unroll factors, loop order, shared tile.");
}

}  // namespace gpuopt::bind
