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
// Which cuDNN algorithms the search may pick. Precise: the GEMM family and DIRECT, which
// sum products like the reference does (errors ~1e-7 relative). Any: also FFT and Winograd,
// whose transforms lose accuracy on larger filters (seen on the H200: 3e-4 relative on a
// 5x5 layer); faster on some shapes, and what a framework's benchmark mode would pick.
enum class CudnnAlgorithms : int { Precise = 0, Any = 1 };
CudnnAlgorithms cudnn_algorithms_from_string(const std::string& name);

// cuDNN forward in strict FP32 (no TF32), the algorithm found once per shape and cached;
// bias and activation by a small epilogue kernel when asked for.
void conv2d_cudnn(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                  Activation act, CudnnAlgorithms algorithms = CudnnAlgorithms::Precise);

// Name of the cuDNN algorithm conv2d_cudnn uses for this shape (e.g. "IMPLICIT_PRECOMP_GEMM");
// finds and caches it first if this shape has not run yet.
std::string conv2d_cudnn_algorithm(const Conv2dShape& s, CudnnAlgorithms algorithms = CudnnAlgorithms::Precise);
#endif

}  // namespace gpuopt::conv
