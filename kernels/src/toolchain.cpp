#include <evodispatch/kernels/toolchain.hpp>

#include <nvrtc.h>

namespace evodispatch {

std::string nvrtc_version() {
  int major = 0, minor = 0;
  const nvrtcResult r = nvrtcVersion(&major, &minor);
  if (r != NVRTC_SUCCESS) return std::string("unavailable: ") + nvrtcGetErrorString(r);
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace evodispatch
