#pragma once
// Compiled kernels, loaded once per process: NVRTC (through the on-disk cubin cache) ->
// cudaLibraryLoadData -> cudaKernel_t. Only the runtime API is used, so the binary still
// starts on a machine without a driver. A compile failure is remembered and returned as
// text, so a spec that does not build is not compiled again for every shape.
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>

#include <evodispatch/kernels/compiler.hpp>
#include <evodispatch/kernels/kernel_spec.hpp>

namespace evodispatch::gpu {

struct LoadedKernel {
  std::string name;             // spec name or symbol, for messages
  cudaKernel_t kernel = nullptr;
  int threads = 0;
  int dynamic_smem = 0;
  int ctas_per_sm = 0;          // occupancy at (threads, dynamic_smem) on the current device
  ResourceReport resources;     // ptxas report
  // The runtime takes a cudaKernel_t wherever it takes a kernel function pointer.
  const void* func() const { return reinterpret_cast<const void*>(kernel); }
};

class KernelCache {
 public:
  explicit KernelCache(KernelCompiler compiler) : compiler_(std::move(compiler)) {}
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The loaded kernel, or nullptr with *error set (the compiler's log, or the CUDA error).
  // CUDA errors other than a failed compile throw CudaError (they may be sticky).
  const LoadedKernel* get(const KernelSpec&, std::string* error);
  // A unit with one extern "C" kernel `symbol`, launched with `threads` and no dynamic
  // shared memory.
  const LoadedKernel* get(const CompileUnit&, const std::string& symbol, int threads, std::string* error);

  const KernelCompiler& compiler() const { return compiler_; }

 private:
  struct Entry {
    cudaLibrary_t library = nullptr;
    LoadedKernel kernel;
    std::string error;  // set: this key failed and stays failed
  };
  const LoadedKernel* load(const std::string& key, const CompiledKernel&, const std::string& symbol,
                           const std::string& name, int threads, int smem, std::string* error);

  KernelCompiler compiler_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // by spec name / unit name + symbol
};

}  // namespace evodispatch::gpu
