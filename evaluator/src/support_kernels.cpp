#include "support_kernels.hpp"

#include <span>
#include <stdexcept>

#include <evodispatch/heuristics/embedded.hpp>
#include <evodispatch/kernels/decode_params.hpp>

#include "cuda_util.hpp"

namespace evodispatch {
namespace embedded {
std::span<const EmbeddedFile> support_kernel_files();  // evaluator/cuda/* (CMake)
}

namespace gpu {

CompileUnit support_compile_unit(std::string_view arch) {
  CompileUnit u;
  u.name = "evo_support.cu";
  u.source = "#include \"support.cuh\"\n";
  for (const auto& f : embedded::support_kernel_files()) u.headers.emplace_back(std::string(f.name), std::string(f.text));
  u.options = {"--gpu-architecture=" + std::string(arch), "-std=c++17"};
  return u;
}

const LoadedKernel& SupportKernels::kernel(const char* symbol, int threads) {
  std::string error;
  const LoadedKernel* k = cache_->get(support_compile_unit(cache_->compiler().arch()), symbol, threads, &error);
  // The support kernels are part of the runner: if they do not build, nothing can be measured.
  if (!k) throw std::runtime_error("the runner's support kernels: " + error);
  return *k;
}

void SupportKernels::fill_normal(void* dst, std::int64_t n, std::uint64_t seed, Dtype dtype, cudaStream_t s) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  const LoadedKernel& k = kernel("evo_fill_normal", kThreads);
  long long count = n;
  unsigned long long sd = seed;
  int dt = dtype == Dtype::fp16 ? kDtypeFp16 : kDtypeBf16;
  void* args[] = {&dst, &count, &sd, &dt};
  const std::int64_t blocks = std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65536);
  check(cudaLaunchKernel(k.func(), dim3(static_cast<unsigned>(blocks)), dim3(kThreads), args, 0, s),
        "launch evo_fill_normal");
}

void SupportKernels::fill_normal_e4m3(void* dst, std::int64_t n, std::uint64_t seed, cudaStream_t s) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  const LoadedKernel& k = kernel("evo_fill_normal_e4m3", kThreads);
  long long count = n;
  unsigned long long sd = seed;
  void* args[] = {&dst, &count, &sd};
  const std::int64_t blocks = std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65536);
  check(cudaLaunchKernel(k.func(), dim3(static_cast<unsigned>(blocks)), dim3(kThreads), args, 0, s),
        "launch evo_fill_normal_e4m3");
}

void SupportKernels::reference(const ReferenceParams& p, cudaStream_t s) {
  const LoadedKernel& k = kernel("evo_reference_attention", kReferenceThreads);
  const std::int64_t rows = std::int64_t{p.batch} * p.seqlen_q * p.h_q;
  ReferenceParams copy = p;
  void* args[] = {&copy};
  check(cudaLaunchKernel(k.func(), dim3(static_cast<unsigned>(rows)), dim3(kReferenceThreads), args, 0, s),
        "launch evo_reference_attention");
}

}  // namespace gpu
}  // namespace evodispatch
