#include "cuda_bindings.hpp"

namespace gpuopt::bind {

void bind_nn_conv_pool(py::module_& m) { (void)m; }

}  // namespace gpuopt::bind
