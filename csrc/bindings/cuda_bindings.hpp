// One binding function per op family, all registered by cuda_module.cpp. Device pointers
// cross the boundary as integers (the __cuda_array_interface__ convention).
//
// The binding rule, the one place that joins a GPU variant to its launcher: variant V of op O
// is launched by `O_V` (def_variant), and where its launcher has host-side checks that need no
// device memory, they are `check.O_V` (def_check), with the same keyword parameters. Every `O_V`
// is listed in the module's `variant_bindings` ({op: [variant, ...]}), which gpuopt's registry
// is tested against.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/activation.hpp"
#include "../common/error.hpp"
#include "../common/memory_pool.hpp"
#include "../common/stream.hpp"
#include "../matmul/matmul_cuda.hpp"

namespace gpuopt::bind {

namespace py = pybind11;

template <typename T>
T* dptr(std::uintptr_t p) {
    return reinterpret_cast<T*>(p);
}

// Registers/shared memory/spills of one kernel instantiation as a dict (matmul_kernel_info,
// conv2d_gemm_kernel_info).
py::dict kernel_info_dict(const KernelInfo& k);
// The same for a kernel family's instantiations, as a list (conv2d_*_kernel_info).
py::list kernel_info_list(const std::vector<KernelInfo>& infos);

inline std::string binding_name(const char* op, const char* variant) { return std::string(op) + "_" + variant; }

// A block of device memory from gpuopt's pool, allocated on the current stream; freed in that stream's order
// when the Python object dies. gpuopt.DeviceArray wraps it with a shape and dtype.
class Buffer {
public:
    explicit Buffer(std::size_t nbytes) : block_(pool_alloc(nbytes)) {}
    ~Buffer() {
        if (users_.empty()) pool_free(block_);
        else pool_free_after(block_, users_.data(), users_.size());
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    std::uintptr_t ptr() const { return reinterpret_cast<std::uintptr_t>(block_.ptr); }
    std::size_t nbytes() const { return block_.bytes; }
    // The stream it was allocated on, as a handle (0: the legacy default stream).
    std::uintptr_t stream() const { return reinterpret_cast<std::uintptr_t>(block_.stream); }
    // An op on stream `handle` used it: its free (queued on its own stream) waits for that stream's work then, as
    // PyTorch's record_stream does, so its bytes are not reused under a kernel still queued elsewhere.
    void used_on(std::uintptr_t handle) {
        const cudaStream_t s = stream_from_handle(handle);
        if (s == block_.stream) return;
        for (cudaStream_t u : users_)
            if (u == s) return;
        users_.push_back(s);
    }

private:
    PoolBlock block_;
    std::vector<cudaStream_t> users_;  // streams other than block_.stream that used it
};

// One launch of a variant with everything but the device addresses fixed (shape, activation, parameters, all
// converted once): gpuopt's plan cache makes one per distinct problem (plan.<op>_<variant>), so a repeated call
// crosses into C++ once, with four integers, instead of building argument objects and parsing keywords.
// With an output set (set_output), run_new(...) also allocates the output from the pool and returns it as a
// gpuopt DeviceArray: a replay is then one call into C++. Both run on the stream handle they are given (stream.hpp).
class LaunchPlan {
public:
    using Fn = std::function<void(std::uintptr_t, std::uintptr_t, std::uintptr_t, std::uintptr_t)>;
    explicit LaunchPlan(Fn fn) : fn_(std::move(fn)) {}
    void operator()(std::uintptr_t a, std::uintptr_t b, std::uintptr_t c, std::uintptr_t d, std::uintptr_t stream) const {
        StreamScope scope(stream_from_handle(stream));
        fn_(a, b, c, d);
    }

    // The output: a `cls` (gpuopt.DeviceArray) of `shape` and `dtype`, `nbytes` long, passed as address `slot`
    // (1: y of (x, y), 2: c of (a, b, c), 3: d of (a, b, c, d)); the inputs fill the other slots in order.
    void set_output(py::object cls, py::tuple shape, py::object dtype, std::size_t nbytes, int slot) {
        GPUOPT_REQUIRE(slot >= 0 && slot <= 3, "LaunchPlan.set_output: slot must be 0 to 3");
        GPUOPT_REQUIRE(PyType_Check(cls.ptr()), "LaunchPlan.set_output: cls must be a class");
        cls_ = std::move(cls), shape_ = std::move(shape), dtype_ = std::move(dtype), nbytes_ = nbytes, slot_ = slot;
    }

    // Launch on a new output (the addresses of the inputs in the other slots) on `stream` and return it.
    py::object run_new(std::uintptr_t a, std::uintptr_t b, std::uintptr_t c, std::uintptr_t stream) const {
        GPUOPT_REQUIRE(slot_ >= 0, "LaunchPlan.run_new: no output set");
        StreamScope scope(stream_from_handle(stream));
        auto buf = std::make_unique<Buffer>(nbytes_);
        const std::uintptr_t out = buf->ptr();
        const std::uintptr_t in[3] = {a, b, c};
        std::uintptr_t at[4];
        for (int i = 0, j = 0; i < 4; ++i) at[i] = i == slot_ ? out : in[j++];
        fn_(at[0], at[1], at[2], at[3]);
        py::object owner = py::cast(std::move(buf));
        auto* type = reinterpret_cast<PyTypeObject*>(cls_.ptr());
        py::object array = py::reinterpret_steal<py::object>(type->tp_alloc(type, 0));
        if (!array) throw py::error_already_set();
        // Interned once and never released (a static py::object would be released after the interpreter).
        static PyObject* const names[5] = {PyUnicode_InternFromString("_shape"), PyUnicode_InternFromString("_dtype"),
                                           PyUnicode_InternFromString("_ptr"), PyUnicode_InternFromString("_owner"),
                                           PyUnicode_InternFromString("_stream")};
        py::int_ address(out), on(stream == 1 ? 0 : stream);
        PyObject* const values[5] = {shape_.ptr(), dtype_.ptr(), address.ptr(), owner.ptr(), on.ptr()};
        for (int i = 0; i < 5; ++i)
            if (PyObject_SetAttr(array.ptr(), names[i], values[i]) != 0) throw py::error_already_set();
        return array;
    }

private:
    Fn fn_;
    py::object cls_, shape_, dtype_;
    std::size_t nbytes_ = 0;
    int slot_ = -1;  // none set
};

// The parameter types of a launcher (a lambda or a function pointer), so a planner can be derived from it;
// `known` is false for what cannot be inspected (a generic lambda): such a variant simply has no planner.
template <typename F, typename = void>
struct Signature {
    static constexpr bool known = false;
};
template <typename F>
struct Signature<F, std::void_t<decltype(&F::operator())>> : Signature<decltype(&F::operator())> {};
template <typename C, typename R, typename... A>
struct Signature<R (C::*)(A...) const, void> {
    static constexpr bool known = true;
    using args = std::tuple<A...>;
};
template <typename R, typename... A>
struct Signature<R (*)(A...), void> {
    static constexpr bool known = true;
    using args = std::tuple<A...>;
};

// The launcher's parameters after its first N (the addresses and the problem): the variant's own parameters.
template <std::size_t N, typename Tuple, typename = std::make_index_sequence<std::tuple_size_v<Tuple> - N>>
struct DropFront;
template <std::size_t N, typename Tuple, std::size_t... I>
struct DropFront<N, Tuple, std::index_sequence<I...>> {
    using type = std::tuple<std::tuple_element_t<N + I, Tuple>...>;
};

// The one planner of every op: plan.<op>_<variant>(<problem>, **params) -> LaunchPlan, the launcher with all but
// the device addresses bound (gpuopt's plan cache). `Problem` says how an op's launchers take their problem:
//   Given                 the planner's leading arguments (a std::tuple of their types), what fixes the problem
//   head                  how many leading launcher parameters carry the addresses and the problem
//   Fixed fix(Given...)   the problem, converted once
//   launch(l, fixed, a, b, c, d, params...)   calls launcher l on addresses a, b, c, d (d: 0 where unused)
// The variant's parameters are the launcher's after `head`. A `replay` (launcher, fixed, params...) -> LaunchPlan::Fn
// replaces the plain launch (matmul's prepared launches); nullptr: none.
template <typename Problem, typename Launch, typename Given, typename Params>
struct Planner;
template <typename Problem, typename Launch, typename... G, typename... P>
struct Planner<Problem, Launch, std::tuple<G...>, std::tuple<P...>> {
    template <typename Replay>
    static auto make(Launch launch, Replay replay) {
        return [launch, replay](G... g, P... p) {
            const typename Problem::Fixed fixed = Problem::fix(g...);
            if constexpr (std::is_same_v<Replay, std::nullptr_t>)
                return LaunchPlan([launch, fixed, p...](std::uintptr_t a, std::uintptr_t b, std::uintptr_t c,
                                                        std::uintptr_t d) { Problem::launch(launch, fixed, a, b, c, d, p...); });
            else
                return LaunchPlan(replay(launch, fixed, p...));
        };
    }
};

// The planner of `launch` (a lambda or function pointer whose signature can be inspected).
template <typename Problem, typename Launch, typename Replay = std::nullptr_t>
auto make_planner(Launch launch, Replay replay = nullptr) {
    using Sig = Signature<Launch>;
    static_assert(Sig::known, "a planned launcher's parameter types must be inspectable (no generic lambdas)");
    using Params = typename DropFront<Problem::head, typename Sig::args>::type;
    return Planner<Problem, Launch, typename Problem::Given, Params>::make(std::move(launch), std::move(replay));
}

// How a planner is given a value its launcher takes: as itself, or an enum by its name (converted once, at plan
// time; the launcher's binding converts it per call).
template <typename T>
struct PlanArg {
    using Given = T;
    static T from(T v) { return v; }
};
template <>
struct PlanArg<Activation> {
    using Given = const std::string&;
    static Activation from(const std::string& name) { return activation_from_string(name); }
};

// std::uintptr_t for each index of a pack (the address parameters of a launcher's binding).
template <std::size_t I>
struct Address {
    using type = std::uintptr_t;
};

// How launchers whose first N parameters are device addresses and whose others (V...) are the problem's values
// take their problem (make_planner): plan.<op>_<variant>(values...) -> LaunchPlan(addresses...), e.g. relu's
// (x, y, n) as plan.relu_cuda(n) -> LaunchPlan(x, y). `bind` makes the launcher's own binding, the values given
// as PlanArg says.
template <std::size_t N, typename Values>
struct AddressesThen;
template <std::size_t N, typename... V>
struct AddressesThen<N, std::tuple<V...>> {
    static_assert(N >= 1 && N <= 4, "a LaunchPlan passes 1 to 4 addresses");
    using Given = std::tuple<typename PlanArg<std::decay_t<V>>::Given...>;
    static constexpr std::size_t head = N + sizeof...(V);
    using Fixed = std::tuple<std::decay_t<V>...>;
    static Fixed fix(typename PlanArg<std::decay_t<V>>::Given... g) {
        return Fixed{PlanArg<std::decay_t<V>>::from(g)...};
    }
    template <typename L>
    static void launch(const L& l, const Fixed& f, std::uintptr_t a, std::uintptr_t b, std::uintptr_t c,
                       std::uintptr_t d) {
        const std::uintptr_t at[4] = {a, b, c, d};
        call(l, f, at, std::make_index_sequence<N>{}, std::index_sequence_for<V...>{});
    }
    template <typename L>
    static auto bind(L l) {
        return bind(std::move(l), std::make_index_sequence<N>{});
    }

private:
    template <typename L, std::size_t... I, std::size_t... J>
    static void call(const L& l, const Fixed& f, const std::uintptr_t* at, std::index_sequence<I...>,
                     std::index_sequence<J...>) {
        l(at[I]..., std::get<J>(f)...);
    }
    template <typename L, std::size_t... I>
    static auto bind(L l, std::index_sequence<I...>) {
        return [l](typename Address<I>::type... a, typename PlanArg<std::decay_t<V>>::Given... g) {
            l(a..., PlanArg<std::decay_t<V>>::from(g)...);
        };
    }
};
template <std::size_t N, typename Launch>
using AddressProblem = AddressesThen<N, typename DropFront<N, typename Signature<Launch>::args>::type>;

// Creates the `variant_bindings` table and the `check` and `plan` submodules, and the LaunchPlan type;
// cuda_module.cpp calls it first.
inline void init_variant_tables(py::module_& m) {
    m.attr("variant_bindings") = py::dict();
    m.def_submodule("check", "Host-side checks of the GPU variants' launchers (no device memory, nothing runs): "
                             "check.<op>_<variant>(shape, **params) raises ValueError for what the launcher rejects.");
    m.def_submodule("plan", "Planners of the GPU variants' launchers: plan.<op>_<variant>(<problem>, **params) "
                            "returns a LaunchPlan, called with the device addresses only (gpuopt's plan cache).");
    py::class_<LaunchPlan>(m, "LaunchPlan", "A variant's launch with all but the device addresses fixed.")
        .def("__call__", &LaunchPlan::operator(), py::arg("a"), py::arg("b"), py::arg("c"), py::arg("d") = 0,
             py::arg("stream") = 0)
        .def("set_output", &LaunchPlan::set_output, py::arg("cls"), py::arg("shape"), py::arg("dtype"),
             py::arg("nbytes"), py::arg("slot"))
        .def("run_new", &LaunchPlan::run_new, py::arg("a"), py::arg("b"), py::arg("c") = 0, py::arg("stream") = 0);
}

// Binds the launcher of GPU variant `variant` of `op` as `<op>_<variant>` and lists it in `variant_bindings`.
template <typename Fn, typename... Extra>
void def_variant(py::module_& m, const char* op, const char* variant, Fn&& fn, const Extra&... extra) {
    const std::string name = binding_name(op, variant);
    m.def(name.c_str(), std::forward<Fn>(fn), extra...);
    py::dict table = m.attr("variant_bindings");
    if (!table.contains(op)) table[op] = py::list();
    py::list(table[op]).append(variant);
}

// Binds the host-side checks of that launcher as `check.<op>_<variant>`.
template <typename Fn, typename... Extra>
void def_check(py::module_& m, const char* op, const char* variant, Fn&& fn, const Extra&... extra) {
    py::module_ check = m.attr("check");
    check.def(binding_name(op, variant).c_str(), std::forward<Fn>(fn), extra...);
}

// Binds the planner of that launcher as `plan.<op>_<variant>`.
template <typename Fn, typename... Extra>
void def_planner(py::module_& m, const char* op, const char* variant, Fn&& fn, const Extra&... extra) {
    py::module_ plan = m.attr("plan");
    plan.def(binding_name(op, variant).c_str(), std::forward<Fn>(fn), extra...);
}

// def(py::arg(names[I])...).
template <typename Def, std::size_t... I>
void with_names(Def&& def, const char* const* names, std::index_sequence<I...>) {
    def(py::arg(names[I])...);
}

// Binds `launch(addresses..., values...)` (its first N parameters device addresses, AddressProblem) as
// <op>_<variant>(<names>) and its planner as plan.<op>_<variant>(<the names after the first N>).
template <std::size_t N, typename Launch, typename... Names>
void def_addressed(py::module_& m, const char* op, const char* variant, Launch launch, const Names&... names) {
    using Problem = AddressProblem<N, Launch>;
    static_assert(sizeof...(Names) == Problem::head, "one name per launcher parameter");
    const char* const all[] = {names...};
    with_names([&](const auto&... args) { def_planner(m, op, variant, make_planner<Problem>(launch), args...); },
               all + N, std::make_index_sequence<Problem::head - N>{});
    with_names([&](const auto&... args) { def_variant(m, op, variant, Problem::bind(launch), args...); }, all,
               std::make_index_sequence<Problem::head>{});
}

void bind_runtime(py::module_& m);
void bind_dlpack(py::module_& m);  // cuda_dlpack.cpp: DLPack export and import
void bind_matmul(py::module_& m);
void bind_conv(py::module_& m);
void bind_conv_cs6235(py::module_& m);
void bind_conv_ece408(py::module_& m);
void bind_conv_gemm(py::module_& m);
void bind_conv_direct(py::module_& m);
void bind_conv_winograd(py::module_& m);
void bind_kmeans(py::module_& m);
void bind_sparse(py::module_& m);
void bind_nn(py::module_& m);            // cuda_nn.cpp: the layer ops
void bind_nn_conv_pool(py::module_& m);  // cuda_nn_conv_pool.cpp: fused convolution + activation + pooling

}  // namespace gpuopt::bind
