// The conv2d_pool parameters whose values shape a kernel's launch: each one's allowed values and default, once.
// Plain C++ (no CUDA): gpuopt._core exports them (kernel_choices()) and the registry's Params read them; the plans
// check them with require_choice. 0 picks per shape in each.
#pragma once

#include "../common/choices.hpp"

namespace gpuopt::nn {

// fused (and conv2d's direct_fused, the same kernel unpooled): output channels a block computes (a multiple of 8
// up to 64; 0: all of them, up to 64), images a block computes at once (0: about 256 threads a block) and output
// channels of a thread's 2x4 register tile (0: 4 when C*R*S <= 32, else 8; one instantiation per non-zero entry).
inline constexpr IntChoices<9> kFusedChannelsPerBlock{"channels_per_block", {0, 8, 16, 24, 32, 40, 48, 56, 64}, 0};
inline constexpr IntChoices<11> kFusedImages{"images", {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16}, 0};
inline constexpr IntChoices<3> kFusedChannelsPerThread{"channels_per_thread", {0, 4, 8}, 0};

// direct_smallc: images a block stages (0: the fewest idle lanes, up to 256 threads) and output maps a block
// computes (0: K split evenly into groups of <= 32).
inline constexpr IntChoices<13> kSmallcImages{"images", {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16}, 0};
inline constexpr IntChoices<10> kSmallcMaps{"maps", {0, 4, 6, 8, 12, 16, 24, 32, 48, 64}, 0};

// The input's element type: not a parameter (the array's dtype, which Python passes by name); the bindings turn
// the name into the enum once.
enum class InputType : int { Float32 = 0, Uint8 = 1 };
inline constexpr NameChoices<2> kInputTypes{"input_dtype", {"float32", "uint8"}, 0};

}  // namespace gpuopt::nn
