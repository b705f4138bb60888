#pragma once
// Run-time compilation of the kernel specialisations with NVRTC (no GPU needed), and the
// on-disk cubin cache of DESIGN.md §3: keyed by a hash of (source, headers, options, NVRTC
// version, arch), written atomically, and locked per key so that two processes (or
// threads) never compile the same key twice. A compile failure is a result with its log
// (ok = false), never an exception.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <evodispatch/kernels/kernel_spec.hpp>

namespace evodispatch {

// What ptxas reported for one kernel (-1 where it said nothing).
struct ResourceReport {
  std::string kernel;        // mangled name
  int registers = -1;
  int stack_bytes = 0;       // stack frame
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int static_smem_bytes = 0; // the kernels use dynamic shared memory; see KernelSpec::smem_bytes
  int barriers = 0;
  bool operator==(const ResourceReport&) const = default;
};

// Parses `ptxas info` lines (as --ptxas-options=-v writes them into NVRTC's log).
std::vector<ResourceReport> parse_ptxas_report(std::string_view log);

// One NVRTC program: a source, the headers it may include by name, the template
// instantiations to look up, and the options.
struct CompileUnit {
  std::string name;  // program name in diagnostics, e.g. "decode_d128_....cu"
  std::string source;
  std::vector<std::pair<std::string, std::string>> headers;  // (include name, text)
  std::vector<std::string> name_expressions;
  std::vector<std::string> options;
};

// The unit of a spec: its source, the embedded kernel headers, its kernel expression.
CompileUnit compile_unit(const KernelSpec&, std::string_view arch);

struct CompiledKernel {
  bool ok = false;
  std::string log;                          // NVRTC's log (ptxas report included), or why it failed
  std::vector<char> cubin;
  std::vector<std::string> name_expressions;
  std::vector<std::string> lowered_names;   // parallel to name_expressions
  std::string cache_key;                    // 64 hex digits
  bool cache_hit = false;
  double compile_seconds = 0;               // NVRTC time (0 on a hit)
  ResourceReport resources;                 // of the first kernel (one per spec)

  // The mangled name of `expression`, or "" if it was not part of the unit.
  std::string lowered_name(std::string_view expression) const;
};

// $EVODISPATCH_CACHE_DIR, else $XDG_CACHE_HOME/evodispatch/cubin, else
// ~/.cache/evodispatch/cubin.
std::filesystem::path default_cache_dir();

// The NVRTC target for a compute capability (cc 90 -> "sm_90a", 100 -> "sm_100a",
// others "sm_<cc>").
std::string arch_for_cc(int cc);

// Calls of nvrtcCompileProgram made by this process (tests check cache hits with it).
std::uint64_t nvrtc_compile_count();

class KernelCompiler {
 public:
  // An empty cache_dir disables the cache.
  explicit KernelCompiler(std::string arch = "sm_90a", std::filesystem::path cache_dir = default_cache_dir());

  CompiledKernel compile(const KernelSpec&) const;
  CompiledKernel compile(const CompileUnit&) const;

  const std::string& arch() const { return arch_; }
  const std::filesystem::path& cache_dir() const { return cache_dir_; }

 private:
  std::string arch_;
  std::filesystem::path cache_dir_;
};

// The cache key of a unit: SHA-256 over NVRTC's version, the options (the arch among
// them), the source, the headers and the name expressions.
std::string cache_key(const CompileUnit&);

// The variants spec_for picks over a fixed grid of shapes and decisions, hashed: it
// changes with the selection rules.
std::string variant_choice_digest();

// Identifies the kernel build in measurement keys: a hash of every embedded kernel
// source, of every specialisation's expression and options (arch-independent) and of
// variant_choice_digest(). 16 hex digits.
std::string kernel_build_hash();

}  // namespace evodispatch
