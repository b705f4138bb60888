#pragma once
// Policies: anything that answers the dispatch question for a shape on a device.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/heuristics/dispatch_script.hpp>

namespace evodispatch {

class Policy {
 public:
  virtual ~Policy() = default;
  virtual const std::string& name() const = 0;
  virtual DispatchOutcome decide(const Shape&, const DeviceInfo&) = 0;
};

// A policy from a spec: a built-in name ("fa3", "fa3-kvcache", "fa2", "seq-aware",
// "flashinfer"), "fixed:N", or the path of a Lua script. Throws InputError for an
// unknown name, a bad N, an unreadable file or a script that does not load.
std::unique_ptr<Policy> make_policy(std::string_view spec, const SandboxLimits& limits = {});

// A policy from Lua source held in memory (search programs, tests).
std::unique_ptr<Policy> make_script_policy(std::string name, std::string_view source,
                                           const SandboxLimits& limits = {});

// The names make_policy accepts besides fixed:N and paths, in a stable order.
std::vector<std::string> builtin_policy_names();

// The Lua source of a built-in policy (also for fixed:N), or nullopt.
std::optional<std::string> builtin_policy_source(std::string_view name);

// FlashAttention-3's Hopper default as C++ (heuristics/fa3_reference.cpp), the twin
// that tests hold the Lua policy "fa3" to.
Decision fa3_reference(const Shape&, const DeviceInfo&);

// FlashAttention-3 as flash_attn_with_kvcache runs it with cache_seqlens (the serving
// path): fa3_reference's static rules counted with batch 1, then the dynamic per-request
// split of flash_prepare_scheduler.cu. The twin of the Lua policy "fa3-kvcache".
Decision fa3_kvcache_reference(const Shape&, const DeviceInfo&);

}  // namespace evodispatch
