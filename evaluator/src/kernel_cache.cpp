#include "kernel_cache.hpp"

#include "cuda_util.hpp"

namespace evodispatch::gpu {

KernelCache::~KernelCache() {
  for (auto& [key, e] : entries_)
    if (e->library) cudaLibraryUnload(e->library);
}

const LoadedKernel* KernelCache::get(const KernelSpec& spec, std::string* error) {
  const std::string key = "spec:" + spec.name();
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (!it->second->error.empty()) *error = it->second->error;
    return it->second->error.empty() ? &it->second->kernel : nullptr;
  }
  const CompiledKernel compiled = compiler_.compile(spec);
  const std::string symbol = compiled.ok ? compiled.lowered_name(spec.kernel_expression()) : "";
  return load(key, compiled, symbol, spec.name(), spec.threads(), spec.smem_bytes(), error);
}

const LoadedKernel* KernelCache::get(const CompileUnit& unit, const std::string& symbol, int threads,
                                     std::string* error) {
  const std::string key = "unit:" + unit.name + ":" + symbol;
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (!it->second->error.empty()) *error = it->second->error;
    return it->second->error.empty() ? &it->second->kernel : nullptr;
  }
  return load(key, compiler_.compile(unit), symbol, symbol, threads, 0, error);
}

const LoadedKernel* KernelCache::load(const std::string& key, const CompiledKernel& compiled,
                                      const std::string& symbol, const std::string& name, int threads, int smem,
                                      std::string* error) {
  auto entry = std::make_unique<Entry>();
  Entry& e = *entry;
  if (!compiled.ok) {
    e.error = "compile of " + name + " failed:\n" + compiled.log;
  } else if (symbol.empty()) {
    e.error = "compile of " + name + ": no lowered name for its kernel";
  }
  if (!e.error.empty()) {
    *error = e.error;
    entries_.emplace(key, std::move(entry));
    return nullptr;
  }
  check(cudaLibraryLoadData(&e.library, compiled.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        ("cudaLibraryLoadData(" + name + ")").c_str());
  check(cudaLibraryGetKernel(&e.kernel.kernel, e.library, symbol.c_str()), ("cudaLibraryGetKernel(" + name + ")").c_str());
  e.kernel.name = name;
  e.kernel.threads = threads;
  e.kernel.dynamic_smem = smem;
  e.kernel.resources = compiled.resources;
  // Above 48 KiB a kernel must opt in to its dynamic shared memory.
  check(cudaFuncSetAttribute(e.kernel.func(), cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
        ("cudaFuncSetAttribute(MaxDynamicSharedMemorySize, " + name + ")").c_str());
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&e.kernel.ctas_per_sm, e.kernel.func(), threads,
                                                      static_cast<std::size_t>(smem)),
        ("cudaOccupancyMaxActiveBlocksPerMultiprocessor(" + name + ")").c_str());
  if (e.kernel.ctas_per_sm < 1) {
    *error = name + ": no CTA fits an SM (" + std::to_string(threads) + " threads, " + std::to_string(smem) +
             " bytes of shared memory, " + std::to_string(compiled.resources.registers) + " registers)";
    e.error = *error;
    entries_.emplace(key, std::move(entry));
    return nullptr;
  }
  const LoadedKernel* out = &e.kernel;
  entries_.emplace(key, std::move(entry));
  return out;
}

}  // namespace evodispatch::gpu
