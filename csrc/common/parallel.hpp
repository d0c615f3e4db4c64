// OpenMP helpers for the CPU references; everything degrades to serial without OpenMP.
#pragma once

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace gpuopt {

inline int cpu_threads() {
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}

inline bool openmp_enabled() {
#if defined(_OPENMP)
    return true;
#else
    return false;
#endif
}

}  // namespace gpuopt
