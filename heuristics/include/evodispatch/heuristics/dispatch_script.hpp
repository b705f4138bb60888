#pragma once
// A Lua dispatch script run in the sandbox of DESIGN.md §2.
//
// Every script gets its own lua_State, allocator budget and instruction budget, so
// nothing one script does (globals, the string metatable, memory) reaches another.
// Errors never escape as Lua panics: loading reports an InputError, a call reports
// a DispatchOutcome whose error names the script, the line and the shape.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

struct SandboxLimits {
  std::uint64_t max_instructions = 1'000'000;  // per load and per dispatch call
  std::size_t max_memory_bytes = 8u << 20;     // whole lua_State
};

// The answer to one dispatch call: a resolved decision (pack_gqa set), or an error.
struct DispatchOutcome {
  Decision decision;
  std::string error;  // empty on success
  bool ok() const { return error.empty(); }
};

class DispatchScript {
 public:
  // Loads `source` (text only) and runs its chunk under the limits. Throws InputError
  // "<name>:<line>: <message>" when it does not compile, fails or exceeds a budget
  // while loading, or leaves no global function `dispatch`.
  static std::unique_ptr<DispatchScript> load(std::string name, std::string_view source,
                                              const SandboxLimits& limits = {});
  ~DispatchScript();
  DispatchScript(const DispatchScript&) = delete;
  DispatchScript& operator=(const DispatchScript&) = delete;

  // Calls dispatch(s, hw) and validates the returned table against the contract.
  DispatchOutcome dispatch(const Shape& shape, const DeviceInfo& hw);

  const std::string& name() const;

 private:
  struct State;
  explicit DispatchScript(std::unique_ptr<State>);
  std::unique_ptr<State> state_;
};

}  // namespace evodispatch
