#include "cuda_bindings.hpp"

namespace gpuopt::bind {

void bind_conv_ece408(py::module_& m) { (void)m; }

}  // namespace gpuopt::bind
