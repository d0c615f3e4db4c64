// A parameter's allowed values and its default, in one constexpr table: the one place they are written.
// The launchers take the table's index (an enum or the value itself); the bindings turn Python's value into
// that index once (choice_index: ValueError naming the parameter and the allowed values); gpuopt._core exports
// every table (kernel_choices()), and the registry's Params read them. Plain C++ (no CUDA): _core includes it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>    // (for the dispatchers: a tiling type list per table, indexed by the entry)
#include <type_traits>
#include <utility>

#include "error.hpp"

namespace gpuopt {

// Values spelled as names ("64x64x8", "rsc"): index i stands for the launcher's enum value i.
template <std::size_t N>
struct NameChoices {
    const char* param;      // the keyword, e.g. "tile"
    const char* names[N];   // allowed values, in the registry's display order
    std::size_t default_index;

    static constexpr std::size_t size() { return N; }
    constexpr const char* default_name() const { return names[default_index]; }
    // Index of `name`, or N when it is not allowed.
    constexpr std::size_t find(std::string_view name) const {
        for (std::size_t i = 0; i < N; ++i)
            if (std::string_view(names[i]) == name) return i;
        return N;
    }
};

// Values that are numbers (block sizes, unroll factors): the launcher takes the number itself. zero_name: how
// Python spells 0 where 0 means "choose from the shape" ("auto"), else nullptr.
template <std::size_t N>
struct IntChoices {
    const char* param;
    int values[N];
    std::size_t default_index;
    const char* zero_name = nullptr;

    static constexpr std::size_t size() { return N; }
    constexpr int default_value() const { return values[default_index]; }
    // Index of `v`, or N when it is not allowed.
    constexpr std::size_t find(int v) const {
        for (std::size_t i = 0; i < N; ++i)
            if (values[i] == v) return i;
        return N;
    }
    constexpr bool contains(int v) const { return find(v) < N; }
};

// "'a', 'b' or 'c'": the allowed values for a message.
template <std::size_t N>
std::string choices_text(const NameChoices<N>& c) {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
        if (i > 0) out += i + 1 == N ? " or " : ", ";
        out += std::string("'") + c.names[i] + "'";
    }
    return out;
}

// "0 (auto), 8 or 16": the allowed numbers for a message.
template <std::size_t N>
std::string choices_text(const IntChoices<N>& c) {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
        if (i > 0) out += i + 1 == N ? " or " : ", ";
        out += std::to_string(c.values[i]);
        if (c.values[i] == 0 && c.zero_name != nullptr) out += std::string(" (") + c.zero_name + ")";
    }
    return out;
}

// `v` when the table allows it; else InvalidArgument (ValueError in Python) naming `what`, the parameter and the
// allowed values. Where a launcher takes a number, this is its check (the message is the table's, not restated).
template <std::size_t N>
int require_choice(const IntChoices<N>& c, int v, const std::string& what) {
    if (!c.contains(v))
        detail::fail_argument(__FILE__, __LINE__,
                              what + ": " + c.param + " must be " + choices_text(c) + ", got " + std::to_string(v));
    return v;
}

// The index of `name` in `c`; InvalidArgument (ValueError in Python) naming `what`, the parameter and the
// allowed values when it is not one of them. For the bindings: string parameters are parsed here, once.
template <std::size_t N>
std::size_t choice_index(const NameChoices<N>& c, std::string_view name, const char* what) {
    const std::size_t i = c.find(name);
    if (i == N)
        detail::fail_argument(__FILE__, __LINE__,
                              std::string(what) + ": " + c.param + " must be " + choices_text(c) + ", got '" +
                                  std::string(name) + "'");
    return i;
}

// The enum E whose values are the table's indices.
template <class E, std::size_t N>
E choice(const NameChoices<N>& c, std::string_view name, const char* what) {
    return static_cast<E>(choice_index(c, name, what));
}

// BM, BN, BK of a tile name "BMxBNxBK" (compile time: the instantiations are checked against the table).
struct TileDims {
    int bm = 0, bn = 0, bk = 0;
};
constexpr TileDims tile_dims(const char* name) {
    int v[3] = {0, 0, 0};
    int i = 0;
    for (const char* p = name; *p != '\0' && i < 3; ++p) {
        if (*p == 'x') ++i;
        else if (*p >= '0' && *p <= '9') v[i] = v[i] * 10 + (*p - '0');
        else break;  // a suffix ("_k2") ends the sizes
    }
    return {v[0], v[1], v[2]};
}

// Whether the tiling types of Tuple (each with BM, BN, BK) are, in order, the sizes the table's names say: the
// compile-time check that a dispatcher's type list and its table agree entry by entry.
template <class Tuple, std::size_t N, std::size_t... I>
constexpr bool tilings_match(const NameChoices<N>& table, std::index_sequence<I...>) {
    return ((std::tuple_element_t<I, Tuple>::BM == tile_dims(table.names[I]).bm &&
             std::tuple_element_t<I, Tuple>::BN == tile_dims(table.names[I]).bn &&
             std::tuple_element_t<I, Tuple>::BK == tile_dims(table.names[I]).bk) && ...);
}
template <class Tuple, std::size_t N>
constexpr bool tilings_match(const NameChoices<N>& table) {
    static_assert(std::tuple_size_v<Tuple> == N, "one tiling per table entry");
    return tilings_match<Tuple>(table, std::make_index_sequence<N>{});
}

// f(std::integral_constant<std::size_t, I>{}) for the I == i of 0..N-1 (i < N, checked by the caller): how a
// dispatcher turns a table entry's runtime index into its instantiation. Instantiated in index order; f may
// return a value (the result; value-initialised when i >= N) or nothing.
template <std::size_t N, class F, std::size_t... I>
auto at_index(std::size_t i, F&& f, std::index_sequence<I...>) {
    using R = decltype(f(std::integral_constant<std::size_t, 0>{}));
    if constexpr (std::is_void_v<R>) {  // a launch: nothing to return
        ((i == I ? f(std::integral_constant<std::size_t, I>{}) : void()), ...);
    } else {
        R out{};
        ((i == I ? (void)(out = f(std::integral_constant<std::size_t, I>{})) : void()), ...);
        return out;
    }
}
template <std::size_t N, class F>
auto at_index(std::size_t i, F&& f) {
    return at_index<N>(i, std::forward<F>(f), std::make_index_sequence<N>{});
}

// f(std::integral_constant<int, Table.values[I]>{}) for the entry equal to v: how a dispatcher turns a number of
// an IntChoices table into the instantiation for it, one per entry, in table order. v must be allowed (checked
// first with require_choice); otherwise f is not called and the result is value-initialised.
template <const auto& Table, class F>
auto at_value(int v, F&& f) {
    constexpr std::size_t n = std::decay_t<decltype(Table)>::size();
    return at_index<n>(Table.find(v), [&f](auto i) {
        return f(std::integral_constant<int, Table.values[decltype(i)::value]>{});
    });
}

// at_value for a table whose 0 means "choose from the shape" (resolved before the dispatch): f is instantiated
// for the non-zero entries only, in table order; v = 0 gives the value-initialised result.
template <const auto& Table>
constexpr int first_nonzero_value() {
    for (int v : Table.values)
        if (v != 0) return v;
    return 0;
}
template <const auto& Table, class F>
auto at_nonzero_value(int v, F&& f) {
    using R = decltype(f(std::integral_constant<int, first_nonzero_value<Table>()>{}));
    return at_value<Table>(v, [&f](auto c) -> R {
        if constexpr (decltype(c)::value != 0) return f(c);
        else if constexpr (!std::is_void_v<R>) return R{};
    });
}

}  // namespace gpuopt
