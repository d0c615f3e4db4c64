// conv2d_pool fused (csrc/nn/conv2d_pool.cu): its launcher, its check (the plan, host only) and the plan;
// conv2d_pool direct_smallc (csrc/nn/conv2d_pool_smallc.cu), the same three; conv2d_pool zero_skip
// (csrc/nn/conv2d_pool_skip.cu), its launcher and check; and conv2d_pool winograd (csrc/conv/conv2d_winograd.cu with the pool fused after the output transform).
#include <string>

#include "../conv/conv2d_cuda.hpp"
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
    return choice<nn::PoolKind>(nn::kPoolKinds, pool, "conv2d_pool pool");
}

// The winograd launcher's view of a conv2d_pool shape: a valid (unpadded) stride-1 convolution, pooled 2x2.
conv::Conv2dShape winograd_shape(const nn::ConvPoolShape& p) {
    if (p.pool != 2) throw py::value_error("conv2d_pool winograd: pool_size must be 2 (m x m tiles pool in pairs)");
    conv::Conv2dShape s;
    s.N = p.N, s.C = p.C, s.H = p.H, s.W = p.W, s.K = p.K, s.R = p.R, s.S = p.S;
    return s;
}

// The array's dtype (Python passes its name) as the launchers' enum.
nn::InputType input_type(const std::string& input_dtype) {
    return choice<nn::InputType>(nn::kInputTypes, input_dtype, "conv2d_pool x");
}

conv::WinogradPool winograd_pool(const std::string& pool) {
    return pool_kind(pool) == nn::PoolKind::Max ? conv::WinogradPool::Max : conv::WinogradPool::Average;
}

conv::WinogradProducts winograd_products(const std::string& products) {
    return choice<conv::WinogradProducts>(conv::kWinogradProducts, products, "conv2d_pool winograd");
}

}  // namespace

void bind_nn_conv_pool(py::module_& m) {
    def_variant(m, "conv2d_pool", "fused",
                [](std::uintptr_t x, const std::string& input_dtype, float input_divisor, std::uintptr_t w,
                   std::uintptr_t bias, std::uintptr_t y, const py::tuple& shape, const std::string& activation,
                   const std::string& pool, int channels_per_block, int images, int channels_per_thread) {
                    const nn::ConvPoolShape s = conv_pool_shape(shape);
                    const nn::InputType type = input_type(input_dtype);
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

    def_variant(m, "conv2d_pool", "direct_smallc",
                [](std::uintptr_t x, const std::string& input_dtype, float input_divisor, std::uintptr_t w,
                   std::uintptr_t bias, std::uintptr_t y, const py::tuple& shape, const std::string& activation,
                   const std::string& pool, int images, int maps) {
                    const nn::ConvPoolShape s = conv_pool_shape(shape);
                    const nn::InputType type = input_type(input_dtype);
                    const Activation act = activation_from_string(activation);
                    const nn::PoolKind kind = pool_kind(pool);
                    py::gil_scoped_release release;
                    nn::conv2d_pool_direct_smallc(reinterpret_cast<const void*>(x), type, input_divisor,
                                                  dptr<const float>(w), bias ? dptr<const float>(bias) : nullptr,
                                                  dptr<float>(y), s, act, kind, {images, maps});
                },
                py::arg("x"), py::arg("input_dtype"), py::arg("input_divisor"), py::arg("w"), py::arg("bias"),
                py::arg("y"), py::arg("shape"), py::arg("activation"), py::arg("pool"), py::kw_only(),
                py::arg("images"), py::arg("maps"),
                "First-layer convolution (C*R*S <= 100) + bias + activation + 2x2 pooling, input patches in registers; "
                "shape = (N, C, H, W, K, R, S, pool_size).");
    def_check(m, "conv2d_pool", "direct_smallc", [](const py::tuple& shape, int images, int maps) {
        nn::conv2d_pool_smallc_plan(conv_pool_shape(shape), {images, maps});
    }, py::arg("shape"), py::kw_only(), py::arg("images"), py::arg("maps"));
    m.def("conv2d_pool_smallc_plan", [](const py::tuple& shape, int images, int maps) {
        const nn::SmallcLaunch p = nn::conv2d_pool_smallc_plan(conv_pool_shape(shape), {images, maps});
        py::dict d;
        d["images"] = p.images;
        d["maps"] = p.maps;
        d["patches"] = p.patches;
        d["threads"] = p.threads;
        d["rows"] = p.rows;
        d["pitch"] = p.pitch;
        d["shared_bytes"] = p.shared_bytes;
        d["blocks"] = p.blocks;
        return d;
    }, py::arg("shape"), py::kw_only(), py::arg("images") = 0, py::arg("maps") = 0,
       "The launch conv2d_pool/direct_smallc makes for shape (N, C, H, W, K, R, S, pool_size); host only.");

    def_variant(m, "conv2d_pool", "zero_skip",
                [](std::uintptr_t x, const std::string& input_dtype, float input_divisor, std::uintptr_t w,
                   std::uintptr_t bias, std::uintptr_t y, const py::tuple& shape, const std::string& activation,
                   const std::string& pool) {
                    (void)input_divisor;
                    if (input_type(input_dtype) != nn::InputType::Float32)
                        throw py::value_error("conv2d_pool zero_skip: x must be float32 (uint8 images go through the "
                                              "fused variant), got '" + input_dtype + "'");
                    const nn::ConvPoolShape s = conv_pool_shape(shape);
                    const Activation act = activation_from_string(activation);
                    const nn::PoolKind kind = pool_kind(pool);
                    py::gil_scoped_release release;
                    nn::conv2d_pool_skip(dptr<const float>(x), dptr<const float>(w),
                                         bias ? dptr<const float>(bias) : nullptr, dptr<float>(y), s, act, kind);
                },
                py::arg("x"), py::arg("input_dtype"), py::arg("input_divisor"), py::arg("w"), py::arg("bias"),
                py::arg("y"), py::arg("shape"), py::arg("activation"), py::arg("pool"),
                "Convolution + bias + activation + 2x2 pooling by scattering the input, zeros skipped by a warp-uniform "
                "test; shape = (N, C, H, W, K, R, S, 2).");
    def_check(m, "conv2d_pool", "zero_skip", [](const py::tuple& shape) {
        nn::conv2d_pool_skip_check(conv_pool_shape(shape));
    }, py::arg("shape"));

    def_variant(m, "conv2d_pool", "winograd",
                [](std::uintptr_t x, const std::string& input_dtype, float input_divisor, std::uintptr_t w,
                   std::uintptr_t bias, std::uintptr_t y, const py::tuple& shape, const std::string& activation,
                   const std::string& pool, int tile, const std::string& products) {
                    (void)input_divisor;
                    if (input_type(input_dtype) != nn::InputType::Float32)
                        throw py::value_error("conv2d_pool winograd: x must be float32 (uint8 images go through the "
                                              "fused variant), got '" + input_dtype + "'");
                    const conv::Conv2dShape s = winograd_shape(conv_pool_shape(shape));
                    const Activation act = activation_from_string(activation);
                    const conv::WinogradPool kind = winograd_pool(pool);
                    const conv::WinogradProducts prod = winograd_products(products);
                    py::gil_scoped_release release;
                    conv::conv2d_winograd(dptr<const float>(x), dptr<const float>(w),
                                          bias ? dptr<const float>(bias) : nullptr, dptr<float>(y), s, act, tile, kind,
                                          prod);
                },
                py::arg("x"), py::arg("input_dtype"), py::arg("input_divisor"), py::arg("w"), py::arg("bias"),
                py::arg("y"), py::arg("shape"), py::arg("activation"), py::arg("pool"), py::kw_only(), py::arg("m"),
                py::arg("products"), "Fused Winograd convolution + bias + activation + 2x2 pooling; shape = (N, C, H, W, K, R, S, 2).");
    def_check(m, "conv2d_pool", "winograd", [](const py::tuple& shape, int tile, const std::string& products) {
        conv::conv2d_winograd_check(winograd_shape(conv_pool_shape(shape)), tile, conv::WinogradPool::Max,
                                    winograd_products(products));
    }, py::arg("shape"), py::kw_only(), py::arg("m"), py::arg("products"));

    m.def("conv2d_pool_plan", [](const py::tuple& shape, int channels_per_block, int images, int channels_per_thread) {
        const nn::ConvPoolLaunch p =
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
