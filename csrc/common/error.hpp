// Error handling shared by every op family. No Python here: the bindings layer maps
// InvalidArgument to ValueError and std::runtime_error (CudaError included) to RuntimeError.
#pragma once

#include <stdexcept>
#include <string>

namespace gpuopt {

// An argument the library cannot accept (shape mismatch, out-of-range parameter, ...).
// The Python layer validates first and gives friendlier messages; these checks are the
// safety net that keeps direct C++ callers from reading out of bounds.
class InvalidArgument : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

namespace detail {
// Messages are built with std::string, not iostreams: an ostringstream crashed in the
// H200 image's Python (GCC 13 build), and string concatenation needs no locale.
[[noreturn]] inline void fail_argument(const char* file, int line, const std::string& msg) {
    throw InvalidArgument(msg + " (" + file + ":" + std::to_string(line) + ")");
}
}  // namespace detail

}  // namespace gpuopt

#define GPUOPT_REQUIRE(cond, msg)                                             \
    do {                                                                      \
        if (!(cond)) ::gpuopt::detail::fail_argument(__FILE__, __LINE__, (msg)); \
    } while (0)
