#pragma once
// The first stage of the cascade: every program runs in the Lua sandbox on every shape
// of the workload before anything is measured for it, and what it decides there is
// what gets measured.
//
// A program is its rules in front of a base policy. The base is checked once per run
// (per distinct base source): its script runs on every shape and its decisions are
// kept. A program's own rules then run in the sandbox on every shape as rendered, with
// the base's call answered by a stub that reports the fall-through (render_rules_lua),
// and every answer is held to the rule list's C++ twin; shapes no rule takes get the
// base's checked decision. Because dispatch is pure, this is the
// program's behaviour, at a small fraction of the cost of re-running the base for each
// of thousands of programs. check_full() runs a whole rendered source end to end, and
// the engine does so for every finalist before it is declared the winner.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/heuristics/dispatch_script.hpp>
#include <evodispatch/search/program.hpp>

namespace evodispatch::search {

struct CheckResult {
  bool ok = false;
  std::string error;                // the first problem, naming the shape
  std::vector<Decision> decisions;  // resolved, one per shape, when ok
};

class Checker {
 public:
  // `threads` 0: one per hardware thread.
  Checker(std::vector<Shape> shapes, DeviceInfo hw, SandboxLimits limits, int threads);

  // The base's decisions on every shape (computed once per distinct source).
  const CheckResult& base(const std::string& name, const std::string& source);

  // Checks programs in parallel; results in the same order.
  std::vector<CheckResult> check(std::span<const Program* const> programs);
  CheckResult check_one(const Program&);

  // Runs a complete Lua source on every shape.
  CheckResult check_full(const std::string& name, const std::string& source);

  const std::vector<Shape>& shapes() const { return shapes_; }
  const DeviceInfo& device() const { return hw_; }
  int threads() const { return threads_; }

 private:
  CheckResult check_rules(const Program&, const CheckResult& base);

  std::vector<Shape> shapes_;
  std::vector<FeatureValues> features_;
  DeviceInfo hw_;
  SandboxLimits limits_;
  int threads_;
  std::mutex bases_mu_;
  std::unordered_map<std::string, std::unique_ptr<CheckResult>> bases_;  // by content hash of the source
};

}  // namespace evodispatch::search
