// conv2d_pool fused (csrc/nn/conv2d_pool.cu): its launcher, its check (the plan, host only) and the plan;
// conv2d_pool direct_smallc (csrc/nn/conv2d_pool_smallc.cu), the same three; conv2d_pool zero_skip
// (csrc/nn/conv2d_pool_skip.cu), its launcher and check; and conv2d_pool winograd (csrc/conv/conv2d_winograd.cu with the pool fused after the output transform).
// Every launcher also gets a planner (plan.conv2d_pool_<variant>, def_conv2d_pool) for gpuopt's plan cache.
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

conv::WinogradProducts winograd_products(const std::string& products) {
    return choice<conv::WinogradProducts>(conv::kWinogradProducts, products, "conv2d_pool winograd");
}

}  // namespace

// The one argument struct of every conv2d_pool launcher, conv2d_pool_<variant>(args, *, <parameters>): the device
// addresses of x (float32, or uint8 images scaled by 1 / input_divisor), w, bias (0: none) and y, the shape and
// the epilogue (activation, pool kind), converted from their names once, here.
struct ConvPoolArgs {
    std::uintptr_t x = 0;
    nn::InputType input = nn::InputType::Float32;
    float input_divisor = 1.f;
    std::uintptr_t w = 0, bias = 0, y = 0;
    nn::ConvPoolShape shape;
    Activation act = Activation::None;
    nn::PoolKind pool = nn::PoolKind::Max;

    const float* pw() const { return dptr<const float>(w); }
    const float* pbias() const { return bias ? dptr<const float>(bias) : nullptr; }
    float* py() const { return dptr<float>(y); }
    // The variants that read float32 images only (uint8 ones go through fused).
    void require_float32(const char* variant) const {
        if (input != nn::InputType::Float32)
            throw py::value_error(std::string("conv2d_pool ") + variant + ": x must be float32 (uint8 images go "
                                  "through the fused variant), got 'uint8'");
    }
};

namespace {

ConvPoolArgs conv_pool_args(std::uintptr_t x, const std::string& input_dtype, float input_divisor, std::uintptr_t w,
                            std::uintptr_t bias, std::uintptr_t y, const py::tuple& shape,
                            const std::string& activation, const std::string& pool) {
    return ConvPoolArgs{x, input_type(input_dtype), input_divisor, w, bias, y, conv_pool_shape(shape),
                        activation_from_string(activation), pool_kind(pool)};
}

// How conv2d_pool launchers take their problem (make_planner): plan.conv2d_pool_<variant>(input_dtype,
// input_divisor, shape, activation, pool, **params) -> LaunchPlan(x, w, bias, y), the ConvPoolArgs but its
// addresses converted once.
struct ConvPoolProblem {
    using Given = std::tuple<const std::string&, float, const py::tuple&, const std::string&, const std::string&>;
    static constexpr std::size_t head = 1;  // (const ConvPoolArgs&)
    using Fixed = ConvPoolArgs;
    static Fixed fix(const std::string& input_dtype, float input_divisor, const py::tuple& shape,
                     const std::string& activation, const std::string& pool) {
        return conv_pool_args(0, input_dtype, input_divisor, 0, 0, 0, shape, activation, pool);
    }
    template <typename L, typename... P>
    static void launch(const L& l, Fixed a, std::uintptr_t x, std::uintptr_t w, std::uintptr_t bias, std::uintptr_t y,
                       const P&... p) {
        a.x = x, a.w = w, a.bias = bias, a.y = y;
        l(a, p...);
    }
};

// Binds conv2d_pool variant `variant` with its keyword parameters `params` (py::arg..., written once):
// `launch(const ConvPoolArgs&, params...)` as conv2d_pool_<variant>, `check(shape, params...)` as
// check.conv2d_pool_<variant> and the launcher's planner as plan.conv2d_pool_<variant>.
template <typename Launch, typename Check, typename... Params>
void def_conv2d_pool(py::module_& m, const char* variant, Launch launch, Check check, const char* doc,
                     const Params&... params) {
    const char* op = "conv2d_pool";
    auto planner = make_planner<ConvPoolProblem>(launch);
    auto given = [](auto&& def) {
        def(py::arg("input_dtype"), py::arg("input_divisor"), py::arg("shape"), py::arg("activation"),
            py::arg("pool"));
    };
    if constexpr (sizeof...(Params) == 0) {
        given([&](const auto&... g) { def_planner(m, op, variant, std::move(planner), g...); });
        def_variant(m, op, variant, std::move(launch), py::arg("args"), doc);
        def_check(m, op, variant, std::move(check), py::arg("shape"));
    } else {
        given([&](const auto&... g) { def_planner(m, op, variant, std::move(planner), g..., py::kw_only(), params...); });
        def_variant(m, op, variant, std::move(launch), py::arg("args"), py::kw_only(), params..., doc);
        def_check(m, op, variant, std::move(check), py::arg("shape"), py::kw_only(), params...);
    }
}

}  // namespace

void bind_nn_conv_pool(py::module_& m) {
    py::class_<ConvPoolArgs>(m, "ConvPoolArgs",
                             "One conv2d_pool call: device addresses of x, w, bias (0: none) and y; x's dtype name "
                             "('float32' or 'uint8') and divisor; shape = (N, C, H, W, K, R, S, pool_size); the "
                             "activation ('none', 'relu', 'tanh') and the pool ('max', 'avg').")
        .def(py::init(&conv_pool_args),
             py::arg("x"), py::arg("input_dtype"), py::arg("input_divisor"), py::arg("w"), py::arg("bias"),
             py::arg("y"), py::arg("shape"), py::arg("activation"), py::arg("pool"));

    def_conv2d_pool(m, "fused",
                    [](const ConvPoolArgs& a, int channels_per_block, int images, int channels_per_thread) {
                        py::gil_scoped_release release;
                        nn::conv2d_pool_fused(reinterpret_cast<const void*>(a.x), a.input, a.input_divisor, a.pw(),
                                              a.pbias(), a.py(), a.shape, a.act, a.pool,
                                              {channels_per_block, images, channels_per_thread});
                    },
                    [](const py::tuple& shape, int channels_per_block, int images, int channels_per_thread) {
                        nn::conv2d_pool_plan(conv_pool_shape(shape), {channels_per_block, images, channels_per_thread});
                    },
                    "Fused valid convolution + bias + activation + 2x2 pooling.", py::arg("channels_per_block"),
                    py::arg("images"), py::arg("channels_per_thread"));

    def_conv2d_pool(m, "direct_smallc",
                    [](const ConvPoolArgs& a, int images, int maps) {
                        py::gil_scoped_release release;
                        nn::conv2d_pool_direct_smallc(reinterpret_cast<const void*>(a.x), a.input, a.input_divisor,
                                                      a.pw(), a.pbias(), a.py(), a.shape, a.act, a.pool,
                                                      {images, maps});
                    },
                    [](const py::tuple& shape, int images, int maps) {
                        nn::conv2d_pool_smallc_plan(conv_pool_shape(shape), {images, maps});
                    },
                    "First-layer convolution (C*R*S <= 100) + bias + activation + 2x2 pooling, input patches in "
                    "registers.",
                    py::arg("images"), py::arg("maps"));
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

    def_conv2d_pool(m, "zero_skip",
                    [](const ConvPoolArgs& a) {
                        a.require_float32("zero_skip");
                        py::gil_scoped_release release;
                        nn::conv2d_pool_skip(dptr<const float>(a.x), a.pw(), a.pbias(), a.py(), a.shape, a.act,
                                             a.pool);
                    },
                    [](const py::tuple& shape) { nn::conv2d_pool_skip_check(conv_pool_shape(shape)); },
                    "Convolution + bias + activation + 2x2 pooling by scattering the input, zeros skipped by a "
                    "warp-uniform test; pool_size 2.");

    def_conv2d_pool(m, "winograd",
                    [](const ConvPoolArgs& a, int tile, const std::string& products) {
                        a.require_float32("winograd");
                        const conv::Conv2dShape s = winograd_shape(a.shape);
                        const conv::WinogradPool kind =
                            a.pool == nn::PoolKind::Max ? conv::WinogradPool::Max : conv::WinogradPool::Average;
                        const conv::WinogradProducts prod = winograd_products(products);
                        py::gil_scoped_release release;
                        conv::conv2d_winograd(dptr<const float>(a.x), a.pw(), a.pbias(), a.py(), s, a.act, tile, kind,
                                              prod);
                    },
                    [](const py::tuple& shape, int tile, const std::string& products) {
                        conv::conv2d_winograd_check(winograd_shape(conv_pool_shape(shape)), tile,
                                                    conv::WinogradPool::Max, winograd_products(products));
                    },
                    "Fused Winograd convolution + bias + activation + 2x2 pooling; pool_size 2.", py::arg("m"),
                    py::arg("products"));

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
