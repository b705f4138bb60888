#pragma once
// What GPUs this machine has, through the CUDA runtime (linked statically, so a machine
// without a driver still runs the binary: it simply has no GPU).
#include <cstddef>
#include <string>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

struct GpuInfo {
  int index = 0;
  std::string name;
  int num_sms = 0;
  int cc = 0;  // major*10 + minor
  std::size_t memory_bytes = 0;
  std::size_t l2_bytes = 0;
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
  std::string driver;  // CUDA driver API version, e.g. "13.0"
};

// Every visible GPU. None (no driver, no device, a broken driver) is an empty list, with
// the runtime's reason in *why_none when given; it never throws or aborts.
std::vector<GpuInfo> probe_gpus(std::string* why_none = nullptr);

// The dispatch contract's view of a GPU: nominal bandwidth = 2 (DDR) x clock x bus bytes.
DeviceInfo device_info(const GpuInfo&);

// The GPU's part of a measurement key (name, SMs, cc, memory, driver), the same for every
// backend that measures on it.
std::string gpu_fingerprint(const GpuInfo&);

}  // namespace evodispatch
