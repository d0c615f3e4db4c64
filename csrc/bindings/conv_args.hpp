// The one argument struct of every conv2d variant's binding, and the helpers that bind a variant.
//
//   conv2d_<variant>(args: Conv2dArgs, *, <the variant's parameters>)   runs it (GIL released)
//   check.conv2d_<variant>(shape: Conv2dShape, *, <the same parameters>) its launcher's host-side checks
//                                                                        (where it has some)
//
// Conv2dShape is the problem in the reports' names (N, C, H, W, K, R, S, stride u, v, padding ph, pw);
// Conv2dArgs adds the device addresses of x, w, bias (0: none) and y and the activation. gpuopt.conv builds
// both once per call; the variants' parameters come from gpuopt's registry (no defaults here). Every variant also
// gets a planner, plan.conv2d_<variant>(shape, activation, **params) -> LaunchPlan(x, w, bias, y), derived from its
// launcher's signature, for gpuopt's plan cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../common/activation.hpp"
#include "../conv/conv2d.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

struct Conv2dArgs {
    std::uintptr_t x = 0, w = 0, bias = 0, y = 0;
    conv::Conv2dShape shape;
    Activation act = Activation::None;
};

// Conv2dShape and Conv2dArgs as Python classes; bind_conv calls it before any conv2d binding.
void bind_conv_types(py::module_& m);

// Runs launch(x, w, bias, y, shape, act) on a call's arguments with the GIL released.
template <typename Launch>
void run_conv(const Conv2dArgs& a, Launch&& launch) {
    py::gil_scoped_release release;
    launch(dptr<const float>(a.x), dptr<const float>(a.w), dptr<const float>(a.bias), dptr<float>(a.y), a.shape,
           a.act);
}

// How conv2d launchers take their problem (make_planner): plan.conv2d_<variant>(shape, activation, **params) ->
// LaunchPlan(x, w, bias, y).
struct ConvProblem {
    using Given = std::tuple<const conv::Conv2dShape&, const std::string&>;
    static constexpr std::size_t head = 1;  // (const Conv2dArgs&)
    using Fixed = Conv2dArgs;
    static Fixed fix(const conv::Conv2dShape& shape, const std::string& activation) {
        return Conv2dArgs{0, 0, 0, 0, shape, activation_from_string(activation)};
    }
    template <typename L, typename... P>
    static void launch(const L& l, Fixed a, std::uintptr_t x, std::uintptr_t w, std::uintptr_t bias, std::uintptr_t y,
                       const P&... p) {
        a.x = x, a.w = w, a.bias = bias, a.y = y;
        l(a, p...);
    }
};

// No host-side checks of its own (def_conv2d's `check` argument): the launcher's run at launch.
struct NoCheck {};

// Binds conv2d variant `variant` with its keyword parameters `params` (py::arg..., written once):
// `launch(const Conv2dArgs&, params...)` as conv2d_<variant> and, unless `check` is NoCheck,
// `check(const Conv2dShape&, params...)` as check.conv2d_<variant>.
template <typename Launch, typename Check, typename... Params>
void def_conv2d(py::module_& m, const char* variant, Launch&& launch, Check&& check, const Params&... params) {
    using Sig = Signature<std::decay_t<Launch>>;
    if constexpr (Sig::known) {
        auto planner = make_planner<ConvProblem, std::decay_t<Launch>>(launch);
        if constexpr (sizeof...(Params) == 0)
            def_planner(m, "conv2d", variant, std::move(planner), py::arg("shape"), py::arg("activation"));
        else
            def_planner(m, "conv2d", variant, std::move(planner), py::arg("shape"), py::arg("activation"),
                        py::kw_only(), params...);
    }
    if constexpr (sizeof...(Params) == 0) {
        def_variant(m, "conv2d", variant, std::forward<Launch>(launch), py::arg("args"));
        if constexpr (!std::is_same_v<std::decay_t<Check>, NoCheck>)
            def_check(m, "conv2d", variant, std::forward<Check>(check), py::arg("shape"));
    } else {
        def_variant(m, "conv2d", variant, std::forward<Launch>(launch), py::arg("args"), py::kw_only(), params...);
        if constexpr (!std::is_same_v<std::decay_t<Check>, NoCheck>)
            def_check(m, "conv2d", variant, std::forward<Check>(check), py::arg("shape"), py::kw_only(), params...);
    }
}

}  // namespace gpuopt::bind
