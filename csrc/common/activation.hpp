// Fused activations shared by conv2d and the nn blocks (host and device).
#pragma once

#include <cmath>
#include <string>
#include <type_traits>

#include "choices.hpp"
#include "error.hpp"

#if defined(__CUDACC__)
#define GPUOPT_HD __host__ __device__ __forceinline__
#else
#define GPUOPT_HD inline
#endif

namespace gpuopt {

enum class Activation : int { None = 0, Relu = 1, Tanh = 2 };
inline constexpr NameChoices<3> kActivations{"activation", {"none", "relu", "tanh"}, 0};

// For the bindings: the activation's name ("" is none); InvalidArgument naming the allowed ones. (The lines
// above apply_activation keep its line numbers: with -lineinfo they reach the PTX, and changed the SASS.)
inline Activation activation_from_string(const std::string& name) {
    return name.empty() ? Activation::None : choice<Activation>(kActivations, name, "activation");
}

// ReLU keeps NaN (x < 0 is false for NaN), as PyTorch and NumPy's maximum do.
template <typename T>
GPUOPT_HD T apply_activation(T v, Activation act) {
    switch (act) {
        case Activation::Relu: return v < T(0) ? T(0) : v;
        case Activation::Tanh:
#if defined(__CUDA_ARCH__)
            return tanh(v);
#else
            return std::tanh(v);
#endif
        default: return v;
    }
}

// Calls f(std::integral_constant<Activation, ACT>) for the run-time activation, so a kernel is instantiated once
// per activation with ACT a compile-time constant (host side, in launchers).
template <class F>
void with_activation(Activation act, F&& f) {
    switch (act) {
        case Activation::Relu: f(std::integral_constant<Activation, Activation::Relu>{}); break;
        case Activation::Tanh: f(std::integral_constant<Activation, Activation::Tanh>{}); break;
        default: f(std::integral_constant<Activation, Activation::None>{}); break;
    }
}

}  // namespace gpuopt
