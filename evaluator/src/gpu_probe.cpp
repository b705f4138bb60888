#include <evodispatch/evaluator/gpu_probe.hpp>

#include <cuda_runtime_api.h>

namespace evodispatch {

namespace {
std::string driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}
}  // namespace

std::vector<GpuInfo> probe_gpus(std::string* why_none) {
  std::vector<GpuInfo> gpus;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why_none) *why_none = err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device";
    cudaGetLastError();  // the error is an answer here, not a sticky state for later calls
    return gpus;
  }
  const std::string driver = driver_version();
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (const cudaError_t e = cudaGetDeviceProperties(&prop, i); e != cudaSuccess) {
      if (why_none && gpus.empty()) *why_none = std::string("cuda:") + std::to_string(i) + ": " + cudaGetErrorString(e);
      continue;
    }
    GpuInfo g;
    g.index = i;
    g.name = prop.name;
    g.num_sms = prop.multiProcessorCount;
    g.cc = prop.major * 10 + prop.minor;
    g.memory_bytes = prop.totalGlobalMem;
    g.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
    // CUDA 13 dropped the memory clock from cudaDeviceProp; the attribute remains.
    cudaDeviceGetAttribute(&g.memory_clock_khz, cudaDevAttrMemoryClockRate, i);
    g.memory_bus_bits = prop.memoryBusWidth;
    g.driver = driver;
    gpus.push_back(std::move(g));
  }
  if (gpus.empty() && why_none && why_none->empty()) *why_none = "no usable CUDA device";
  return gpus;
}

DeviceInfo device_info(const GpuInfo& g) {
  DeviceInfo d;
  d.name = g.name;
  d.num_sms = g.num_sms;
  d.l2_bytes = static_cast<std::int64_t>(g.l2_bytes);
  d.mem_bw_bytes_per_s = 2.0 * g.memory_clock_khz * 1e3 * (g.memory_bus_bits / 8.0);
  d.cc = g.cc;
  return d;
}

std::string gpu_fingerprint(const GpuInfo& g) {
  return g.name + "/" + std::to_string(g.num_sms) + "sm/cc" + std::to_string(g.cc) + "/" +
         std::to_string(g.memory_bytes >> 20) + "MiB/driver" + g.driver;
}

}  // namespace evodispatch
