#pragma once
// The device the host-only tests decide for: an H100 SXM as its profile describes it.
#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch::test {

inline DeviceInfo h100_sxm() {
  DeviceInfo hw;
  hw.name = "H100 SXM";
  hw.num_sms = 132;
  hw.l2_bytes = 50 << 20;
  hw.mem_bw_bytes_per_s = 3.35e12;
  hw.cc = 90;
  return hw;
}

}  // namespace evodispatch::test
