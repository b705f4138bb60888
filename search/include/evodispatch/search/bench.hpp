#pragma once
// bench: measure a policy on a workload, optionally against a baseline policy, through
// the store. Speedup is baseline latency / candidate latency (> 1: the candidate wins).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/search/stored_evaluator.hpp>

namespace evodispatch {

struct BenchRow {
  Shape shape;
  DispatchOutcome candidate;
  std::optional<DispatchOutcome> baseline;
  std::optional<Measurement> candidate_m;
  std::optional<Measurement> baseline_m;
  std::optional<double> speedup;
  std::string error;  // the first thing that went wrong for this shape, if anything
};

struct BenchSummary {
  int shapes = 0;
  int failed = 0;          // shapes with a dispatch or measurement error
  int changed = 0;         // shapes where the two policies decide differently
  std::optional<double> geomean_speedup;
  std::optional<double> worst_speedup;
  std::optional<double> best_speedup;
  std::optional<Shape> worst_shape;
  double candidate_total_us = 0;  // sum over measured shapes
};

struct BenchReport {
  std::vector<BenchRow> rows;
  BenchSummary summary;
  MeasureStats stats;
};

BenchReport run_bench(Policy& candidate, Policy* baseline, const Workload& workload, StoredEvaluator& evaluator,
                      const std::function<void(std::size_t, std::size_t)>& progress = {},
                      const std::function<bool()>& stop = {});

// Fills report.summary from report.rows.
void summarise(BenchReport& report);

nlohmann::json to_json(const BenchRow&);
nlohmann::json to_json(const BenchSummary&);

}  // namespace evodispatch
