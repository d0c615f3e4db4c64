#include "cuda_bindings.hpp"

namespace gpuopt::bind {

void bind_nn(py::module_& m) { (void)m; }

}  // namespace gpuopt::bind
