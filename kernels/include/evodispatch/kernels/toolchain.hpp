#pragma once
// The compiler the kernels are built with at run time.
#include <string>

namespace evodispatch {

// NVRTC's version, e.g. "13.0", or "unavailable: <why>".
std::string nvrtc_version();

}  // namespace evodispatch
