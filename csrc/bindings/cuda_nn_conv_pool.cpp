// conv2d_pool fused (csrc/nn/conv2d_pool.cu): its launcher, its check (the plan, host only) and the plan.
#include <string>

#include "../nn/conv2d_pool.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

namespace {

nn::ConvPoolShape conv_pool_shape(const py::tuple& dims) {
    if (dims.size() != 8) throw py::value_error("shape must be (N, C, H, W, K, R, S, pool_size)");
    nn::ConvPoolShape s;
    s.N = dims[0].cast<std::int64_t>(), s.C = dims[1].cast<std::int64_t>(), s.H = dims[2].cast<std::int64_t>();
    s.W = dims[3].cast<std::int64_t>(), s.K = dims[4].cast<std::int64_t>(), s.R = dims[5].cast<std::int64_t>();
    s.S = dims[6].cast<std::int64_t>(), s.pool = dims[7].cast<std::int64_t>();
    return s;
}

nn::PoolKind pool_kind(const std::string& pool) {
    if (pool == "max") return nn::PoolKind::Max;
    if (pool == "avg") return nn::PoolKind::Average;
    throw py::value_error("pool must be 'max' or 'avg', got '" + pool + "'");
}

}  // namespace

void bind_nn_conv_pool(py::module_& m) {
    def_variant(m, "conv2d_pool", "fused",
                [](std::uintptr_t x, const std::string& input_dtype, float input_divisor, std::uintptr_t w,
                   std::uintptr_t bias, std::uintptr_t y, const py::tuple& shape, const std::string& activation,
                   const std::string& pool, int channels_per_block, int images, int channels_per_thread) {
                    const nn::ConvPoolShape s = conv_pool_shape(shape);
                    if (input_dtype != "float32" && input_dtype != "uint8")
                        throw py::value_error("input_dtype must be 'float32' or 'uint8', got '" + input_dtype + "'");
                    const auto type = input_dtype == "uint8" ? nn::InputType::Uint8 : nn::InputType::Float32;
                    const Activation act = activation_from_string(activation);
                    const nn::PoolKind kind = pool_kind(pool);
                    py::gil_scoped_release release;
                    nn::conv2d_pool_fused(reinterpret_cast<const void*>(x), type, input_divisor, dptr<const float>(w),
                                          bias ? dptr<const float>(bias) : nullptr, dptr<float>(y), s, act, kind,
                                          {channels_per_block, images, channels_per_thread});
                },
                py::arg("x"), py::arg("input_dtype"), py::arg("input_divisor"), py::arg("w"), py::arg("bias"),
                py::arg("y"), py::arg("shape"), py::arg("activation"), py::arg("pool"), py::kw_only(),
                py::arg("channels_per_block"), py::arg("images"), py::arg("channels_per_thread"),
                "Fused valid convolution + bias + activation + 2x2 pooling; shape = (N, C, H, W, K, R, S, pool_size).");
    def_check(m, "conv2d_pool", "fused", [](const py::tuple& shape, int channels_per_block, int images,
                                            int channels_per_thread) {
        nn::conv2d_pool_plan(conv_pool_shape(shape), {channels_per_block, images, channels_per_thread});
    }, py::arg("shape"), py::kw_only(), py::arg("channels_per_block"), py::arg("images"),
       py::arg("channels_per_thread"));

    m.def("conv2d_pool_plan", [](const py::tuple& shape, int channels_per_block, int images, int channels_per_thread) {
        const nn::ConvPoolPlan p =
            nn::conv2d_pool_plan(conv_pool_shape(shape), {channels_per_block, images, channels_per_thread});
        py::dict d;
        d["tile_p"] = p.tile_p;
        d["tile_q"] = p.tile_q;
        d["images"] = p.images;
        d["channels_per_block"] = p.channels_per_block;
        d["channels_per_thread"] = p.channels_per_thread;
        d["chunk_channels"] = p.chunk_channels;
        d["threads"] = p.threads;
        d["shared_bytes"] = p.shared_bytes;
        d["blocks"] = p.blocks;
        return d;
    }, py::arg("shape"), py::kw_only(), py::arg("channels_per_block") = 0, py::arg("images") = 0,
       py::arg("channels_per_thread") = 0,
       "The launch conv2d_pool/fused makes for shape (N, C, H, W, K, R, S, pool_size); host only.");
}

}  // namespace gpuopt::bind
