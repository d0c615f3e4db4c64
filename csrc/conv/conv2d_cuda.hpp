// conv2d on the GPU: device pointers, NCHW input, KCRS filters, NKPQ output, float32, stream 0.
// Same semantics as conv2d_cpu (conv2d.hpp): y = act(conv(x, w) + bias), bias nullable.
// Launchers validate the shape and check every CUDA call and launch.
#pragma once

#include <string>

#include "../common/activation.hpp"
#include "conv2d.hpp"

namespace gpuopt::conv {

// "basic": one thread per output element y[n][k][p][q] (the starting kernel of the CS6235
// and ECE408 reports), q fastest so a warp writes consecutive outputs; bias and activation
// fused. Any shape, stride and padding.
void conv2d_basic(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                  Activation act);

#if defined(GPUOPT_WITH_CUDNN)
// cuDNN forward in strict FP32 (no TF32), the algorithm found once per shape and cached;
// bias and activation by a small epilogue kernel when asked for.
void conv2d_cudnn(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                  Activation act);

// Name of the cuDNN algorithm conv2d_cudnn uses for this shape (e.g. "IMPLICIT_PRECOMP_GEMM");
// finds and caches it first if this shape has not run yet.
std::string conv2d_cudnn_algorithm(const Conv2dShape& s);
#endif

}  // namespace gpuopt::conv
