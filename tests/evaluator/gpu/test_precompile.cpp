// Fills the cubin cache with every unit the runner may compile, in parallel, so that the
// GPU tests and benchmarks spend no time in NVRTC. Needs no GPU when
// EVODISPATCH_PRECOMPILE_ARCH names the target (scripts/gpu-check.sh --precompile runs it
// here before the build travels); on a GPU machine it uses that GPU's arch.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <evodispatch/kernels/compiler.hpp>

#include "gpu_support.hpp"

namespace evodispatch::gputest {
namespace {

TEST(GpuPrecompile, EveryUnitOfTheRunnerCompiles) {
  std::string arch;
  if (const char* a = std::getenv("EVODISPATCH_PRECOMPILE_ARCH"); a && *a) arch = a;
  else if (gpu()) arch = arch_for_cc(gpu()->gpu().cc);
  else GTEST_SKIP() << "no GPU and no EVODISPATCH_PRECOMPILE_ARCH";
  const auto units = gpu_runner_compile_units(arch);
  const KernelCompiler compiler(arch);
  std::atomic<std::size_t> next{0};
  std::atomic<int> hits{0};
  std::mutex mu;
  std::vector<std::string> failures;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i)
    pool.emplace_back([&] {
      for (std::size_t u; (u = next++) < units.size();) {
        const CompiledKernel k = compiler.compile(units[u]);
        hits += k.cache_hit;
        if (!k.ok) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(units[u].name + ": " + k.log.substr(0, 2000));
        }
      }
    });
  for (auto& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[precompile] %zu units for %s in %.1f s (%d cache hits) into %s\n", units.size(), arch.c_str(), s,
              hits.load(), compiler.cache_dir().c_str());
  for (const auto& f : failures) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace evodispatch::gputest
