#pragma once
// The runner's own kernels (evaluator/cuda/support.cuh): seeded inputs and the float32
// reference, compiled through the same NVRTC path and cache as the decode family.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/kernels/compiler.hpp>

#include "../cuda/support_params.h"
#include "kernel_cache.hpp"

namespace evodispatch::gpu {

CompileUnit support_compile_unit(std::string_view arch);

class SupportKernels {
 public:
  explicit SupportKernels(KernelCache& cache) : cache_(&cache) {}

  // n 16-bit values drawn from N(0, 1), rounded to `dtype`; value i depends on (seed, i) only.
  void fill_normal(void* dst, std::int64_t n, std::uint64_t seed, Dtype dtype, cudaStream_t s);
  // n bytes of N(0, 1) values rounded to fp8 e4m3 (satfinite); value i depends on (seed, i).
  void fill_normal_e4m3(void* dst, std::int64_t n, std::uint64_t seed, cudaStream_t s);
  // One CTA per query row: rows = batch * seqlen_q * h_q.
  void reference(const ReferenceParams& p, cudaStream_t s);

 private:
  const LoadedKernel& kernel(const char* symbol, int threads);
  KernelCache* cache_;
};

}  // namespace evodispatch::gpu
