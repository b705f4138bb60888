#include <evodispatch/kernels/compiler.hpp>

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <regex>
#include <utility>

#include <evodispatch/heuristics/embedded.hpp>
#include <evodispatch/kernels/kernel_spec.hpp>
#include <evodispatch/kernels/plan.hpp>
#include <evodispatch/kernels/toolchain.hpp>

#include "cubin_cache.hpp"

namespace evodispatch {

namespace embedded {
std::span<const EmbeddedFile> kernel_files();  // kernels/cuda/*.cuh + decode_params.hpp (CMake)
}

namespace {

std::atomic<std::uint64_t> g_nvrtc_compiles{0};

std::string nvrtc_error(const char* what, nvrtcResult r) {
  return std::string(what) + ": " + nvrtcGetErrorString(r);
}

// Compiles without the cache. Every NVRTC failure becomes ok = false with the log.
CompiledKernel compile_uncached(const CompileUnit& unit) {
  CompiledKernel out;
  out.name_expressions = unit.name_expressions;
  const auto t0 = std::chrono::steady_clock::now();

  std::vector<const char*> header_texts, header_names;
  for (const auto& [name, text] : unit.headers) {
    header_names.push_back(name.c_str());
    header_texts.push_back(text.c_str());
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, unit.source.c_str(), unit.name.c_str(), static_cast<int>(unit.headers.size()),
                                     header_texts.data(), header_names.data());
  if (r != NVRTC_SUCCESS) {
    out.log = nvrtc_error("nvrtcCreateProgram", r);
    return out;
  }
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};

  for (const auto& e : unit.name_expressions) {
    r = nvrtcAddNameExpression(prog, e.c_str());
    if (r != NVRTC_SUCCESS) {
      out.log = nvrtc_error(("nvrtcAddNameExpression(" + e + ")").c_str(), r);
      return out;
    }
  }
  std::vector<const char*> opts;
  for (const auto& o : unit.options) opts.push_back(o.c_str());
  ++g_nvrtc_compiles;
  const nvrtcResult compiled = nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());

  std::size_t log_size = 0;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    nvrtcGetProgramLog(prog, out.log.data());
    out.log.resize(log_size - 1);  // drop the terminating NUL
  }
  out.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (compiled != NVRTC_SUCCESS) {
    out.log = nvrtc_error("nvrtcCompileProgram", compiled) + "\n" + out.log;
    return out;
  }

  std::size_t cubin_size = 0;
  r = nvrtcGetCUBINSize(prog, &cubin_size);
  if (r != NVRTC_SUCCESS || cubin_size == 0) {
    out.log += "\n" + nvrtc_error("nvrtcGetCUBINSize (is the arch a real sm_XX target?)", r);
    return out;
  }
  out.cubin.resize(cubin_size);
  r = nvrtcGetCUBIN(prog, out.cubin.data());
  if (r != NVRTC_SUCCESS) {
    out.log += "\n" + nvrtc_error("nvrtcGetCUBIN", r);
    out.cubin.clear();
    return out;
  }
  for (const auto& e : unit.name_expressions) {
    const char* lowered = nullptr;
    r = nvrtcGetLoweredName(prog, e.c_str(), &lowered);
    if (r != NVRTC_SUCCESS || !lowered) {
      out.log += "\n" + nvrtc_error(("nvrtcGetLoweredName(" + e + ")").c_str(), r);
      out.cubin.clear();
      return out;
    }
    out.lowered_names.emplace_back(lowered);
  }
  const auto reports = parse_ptxas_report(out.log);
  if (!reports.empty()) {
    out.resources = reports.front();
    if (!out.lowered_names.empty())
      for (const auto& rep : reports)
        if (rep.kernel == out.lowered_names.front()) out.resources = rep;
  }
  out.ok = true;
  return out;
}

}  // namespace

std::vector<ResourceReport> parse_ptxas_report(std::string_view log) {
  // ptxas -v writes, per entry function:
  //   ptxas info    : Compiling entry function '_Z...' for 'sm_90a'
  //   ptxas         .     16 bytes stack frame, 24 bytes spill stores, 20 bytes spill loads
  //   ptxas info    : Used 255 registers, used 1 barriers, 16 bytes smem, ...
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex barriers(R"(used (\d+) barriers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::vector<ResourceReport> out;
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t eol = log.find('\n', pos);
    if (eol == std::string_view::npos) eol = log.size();
    const std::string line(log.substr(pos, eol - pos));
    pos = eol + 1;
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      out.emplace_back();
      out.back().kernel = m[1];
      continue;
    }
    if (out.empty()) continue;
    ResourceReport& r = out.back();
    if (std::regex_search(line, m, frame)) {
      r.stack_bytes = std::stoi(m[1]);
      r.spill_store_bytes = std::stoi(m[2]);
      r.spill_load_bytes = std::stoi(m[3]);
    }
    if (std::regex_search(line, m, used)) {
      r.registers = std::stoi(m[1]);
      if (std::regex_search(line, m, barriers)) r.barriers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) r.static_smem_bytes = std::stoi(m[1]);
    }
  }
  return out;
}

CompileUnit compile_unit(const KernelSpec& spec, std::string_view arch) {
  CompileUnit u;
  u.name = spec.name() + ".cu";
  u.source = spec.source();
  for (const auto& f : embedded::kernel_files()) u.headers.emplace_back(std::string(f.name), std::string(f.text));
  u.name_expressions = {spec.kernel_expression()};
  u.options = spec.nvrtc_options(arch);
  return u;
}

std::string CompiledKernel::lowered_name(std::string_view expression) const {
  for (std::size_t i = 0; i < name_expressions.size() && i < lowered_names.size(); ++i)
    if (name_expressions[i] == expression) return lowered_names[i];
  return "";
}

std::filesystem::path default_cache_dir() {
  if (const char* d = std::getenv("EVODISPATCH_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "evodispatch" / "cubin";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "evodispatch" / "cubin";
  return std::filesystem::temp_directory_path() / "evodispatch-cubin";
}

std::string arch_for_cc(int cc) {
  // The "a" targets unlock the architecture-specific instructions (wgmma, setmaxnreg);
  // the cubin then runs on exactly that architecture, which is what a cache keyed by
  // arch wants anyway.
  if (cc == 90 || cc == 100 || cc == 103) return "sm_" + std::to_string(cc) + "a";
  return "sm_" + std::to_string(cc);
}

std::uint64_t nvrtc_compile_count() { return g_nvrtc_compiles.load(); }

std::string cache_key(const CompileUnit& u) {
  detail::Sha256 h;
  h.field("evodispatch-cubin-v1").field(nvrtc_version());
  for (const auto& o : u.options) h.field(o);
  h.field(u.source);
  auto headers = u.headers;
  std::sort(headers.begin(), headers.end());
  for (const auto& [name, text] : headers) h.field(name).field(text);
  for (const auto& e : u.name_expressions) h.field(e);
  return h.hex();
}

KernelCompiler::KernelCompiler(std::string arch, std::filesystem::path cache_dir)
    : arch_(std::move(arch)), cache_dir_(std::move(cache_dir)) {}

CompiledKernel KernelCompiler::compile(const KernelSpec& spec) const {
  if (const std::string why = spec_error(spec); !why.empty()) {
    CompiledKernel k;
    k.log = spec.name() + ": " + why;
    return k;
  }
  return compile(compile_unit(spec, arch_));
}

CompiledKernel KernelCompiler::compile(const CompileUnit& unit) const {
  const std::string key = cache_key(unit);
  auto finish = [&](CompiledKernel k) {
    k.cache_key = key;
    return k;
  };
  if (cache_dir_.empty()) return finish(compile_uncached(unit));

  const auto path = detail::cache_entry_path(cache_dir_, unit.name, key);
  if (auto hit = detail::cache_read(path, key)) return *hit;

  std::error_code ec;
  std::filesystem::create_directories(cache_dir_, ec);
  if (ec) {
    CompiledKernel k = compile_uncached(unit);
    k.log += "\n(cubin cache disabled: cannot create " + cache_dir_.string() + ": " + ec.message() + ")";
    return finish(std::move(k));
  }
  // One compiler per key: whoever holds the lock compiles; the others wait, then read.
  detail::FileLock lock(cache_dir_ / (key + ".lock"));
  if (auto hit = detail::cache_read(path, key)) return *hit;
  CompiledKernel k = finish(compile_uncached(unit));
  if (k.ok && !detail::cache_write(path, k)) k.log += "\n(could not write the cubin cache entry " + path.string() + ")";
  return k;
}

std::string variant_choice_digest() {
  detail::Sha256 h;
  Shape s;
  for (int d : {64, 128, 256})
    for (Dtype dt : {Dtype::bf16, Dtype::fp8})
      for (int page : {0, 16})
        for (const auto& [hq, hkv] : {std::pair{64, 8}, {64, 1}, {32, 32}, {28, 4}, {71, 1}})
          for (int lq : {1, 4})
            for (int lk : {100, 4096})
              for (int batch : {1, 4, 8, 9, 16, 17, 33, 34, 49, 50, 64, 77, 256})
                for (int splits : {1, 3, 8, 64})
                  for (bool pack : {true, false})
                    for (int margin : {0, 100})
                      for (const auto& [sms, dram] : {std::pair{132, 3.35e12}, {78, 3.35e12}, {132, 4.8e12}}) {
                        s = Shape{batch, lq, lk, hq, hkv, d, dt, page, true};
                        const Decision decision{splits, pack, std::min(margin, sms - 1)};
                        DeviceInfo hw;
                        hw.num_sms = sms;
                        hw.mem_bw_bytes_per_s = dram;
                        hw.cc = kClusterMinCc;  // the rules of a Hopper, the cluster merge's too
                        const KernelSpec spec = spec_for(s, decision, hw);
                        // The grid too: the items against the slots of the spec's own occupancy.
                        const std::int64_t items = decompose_work(s, decision, spec.block_m).items;
                        const std::int64_t slots = std::int64_t{sms} * spec.min_ctas_per_sm;
                        const bool by_items = hardware_scheduled_grid(s, decision, items, slots, spec.min_ctas_per_sm);
                        h.field(spec.name()).field(by_items ? "items" : "strided");
                      }
  return h.hex();
}

std::string kernel_build_hash() {
  detail::Sha256 h;
  h.field("evodispatch-kernels-v1");
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& f : embedded::kernel_files()) files.emplace_back(std::string(f.name), std::string(f.text));
  std::sort(files.begin(), files.end());
  for (const auto& [name, text] : files) h.field(name).field(text);
  for (const auto& spec : all_kernel_specs()) {
    h.field(spec.kernel_expression());
    for (const auto& o : spec.nvrtc_options("<arch>")) h.field(o);
  }
  // Which variant runs a decision is part of what a measurement measured: a change to
  // spec_for's rules must not let a database hand back rows of the old choice.
  h.field(variant_choice_digest());
  return h.hex().substr(0, 16);
}

}  // namespace evodispatch
