// conv2d depthwise's rows kernel (conv2d_depthwise_rows.cu), internal to the conv family: conv2d_depthwise
// (conv2d_depthwise.cu) dispatches to it. Host only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/activation.hpp"
#include "../common/kernel_info.hpp"
#include "conv2d.hpp"

namespace gpuopt::conv {

// What the rows kernel runs for a shape: units (persistent blocks loop over them, two buffers each) of `unit_planes` whole input planes (bands == 1) or
// of one plane's band of `band_rows` output rows; the dynamic shared memory a block needs.
struct DepthwiseRowsPlan {
    bool whole_planes = false;
    int unit_planes = 1, bands = 1, band_rows = 0;
    int taps_offset = 0;    // floats: the staged input run (padded to 16 bytes), then the unit's taps
    int buffer_floats = 0;  // one of a block's two buffers
    std::int64_t units = 0;
    std::size_t shared_bytes = 0;
};

// "" when the rows kernel takes a validated depthwise shape, else what it takes (for a message): square 3x3, 5x5
// or 7x7 filters, stride 1 or 2, no dilation, its narrowest unit's rows within the GPU's shared memory
// (conv2d_depthwise_rows_min_shared_bytes).
std::string depthwise_rows_unfit(const Conv2dShape& s);
DepthwiseRowsPlan depthwise_rows_plan(const Conv2dShape& s);

void conv2d_depthwise_rows(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                           Activation act);
std::vector<KernelInfo> conv2d_depthwise_rows_kernel_info();

}  // namespace gpuopt::conv
