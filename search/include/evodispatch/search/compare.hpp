#pragma once
// `results compare A B`: two runs, policies or distilled heuristics shape by shape, from
// what the database holds (it measures nothing). A run contributes its per-shape
// candidate (results::RunShapes); a policy or a heuristic decides each shape and the
// measurement of that decision on the device and kernel build is looked up.
#include <optional>
#include <string>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/results/database.hpp>

namespace evodispatch {

struct CompareRequest {
  std::string a, b;          // a run id, a policy (built-in or FILE.lua), or DIR/heuristic.json
  std::string workload;      // the shapes when neither side is a run
  std::string device;        // fingerprint or name, when neither side is a run
  std::string kernel_build;  // hash, when neither side is a run
};

struct CompareRow {
  Shape shape;
  std::string a_decision, b_decision;  // describe(Decision); empty: it could not decide
  std::optional<double> a_us, b_us;    // unset: not measured (or failed) on the device and build
  std::optional<double> ratio;         // a_us / b_us: under 1, A is faster
};

struct CompareReport {
  std::string a, b;  // what each side is, in words
  std::string device, kernel_build;
  std::vector<CompareRow> rows;
  std::optional<double> geomean_ratio;  // over the rows with a ratio
  int a_faster = 0, b_faster = 0, equal = 0, missing = 0;  // equal: within 0.5%
};

CompareReport compare_sources(results::Database&, const CompareRequest&);

}  // namespace evodispatch
