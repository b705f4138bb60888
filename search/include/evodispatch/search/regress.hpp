#pragma once
// regress: the regression matrix of a distilled heuristic (DESIGN.md §6). The compiled
// function (not the script) decides every shape; each shape is measured against the
// baseline with an interleaved comparison, none assumed unchanged; a shape under the
// floor is measured a second time, and the matrix fails when that confirms it. Every
// comparison is a row of `comparisons`, speedup = baseline / heuristic (> 1: it wins).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/results/comparisons.hpp>
#include <evodispatch/results/database.hpp>
#include <evodispatch/search/stored_evaluator.hpp>

namespace evodispatch {

// What `distill` wrote, as regress runs it: the function of heuristic.json and its
// compiled twin.
struct DistilledHeuristic {
  std::string path;  // heuristic.json as given: the name reports use
  distill::DecisionFunction function;
  std::unique_ptr<distill::CompiledHeuristic> compiled;
};

// Reads DIR/heuristic.json (an InputError naming it when it cannot be read or is no
// heuristic) and loads DIR/libheuristic.so, or, without one, compiles the function now
// from its emitted header in a scratch directory.
DistilledHeuristic load_distilled(const std::string& heuristic_json);
// The function of DIR/heuristic.json alone (distill::evaluate interprets it; nothing compiled).
distill::DecisionFunction read_heuristic(const std::string& heuristic_json);

// The matrix a regress run measures: the shapes of `grid`, then, with a domain, `samples`
// fresh shapes of it drawn with `seed` and none of the grid's (shapes the heuristic's
// search never saw). Throws InputError when `domain` is no domain.
Workload regression_matrix(const Workload& grid, const Workload* domain, std::size_t samples, std::uint64_t seed);

struct RegressOptions {
  double floor = 0.99;  // a shape confirmed under this speedup fails the matrix
  int pairs = 30;       // interleaved pairs per comparison
  L2Mode l2 = L2Mode::cold;
};

// Why run_regress would refuse the options ("floor: must be > 0"), or empty.
std::string invalid_regress_options(const RegressOptions&);

enum class Verdict {
  ok,          // measured, at or over the floor
  failed,      // the baseline could not decide, or the first comparison failed
  below_once,  // under the floor once, not confirmed by the second comparison
  regression,  // under the floor twice
  same,        // under the floor once, deciding as the baseline: the same kernels, so noise
};

struct RegressRow {
  Shape shape;
  Decision heuristic;               // resolved
  std::optional<Decision> baseline;  // resolved; unset when the baseline could not decide
  std::string error;                 // why the baseline could not decide ("baseline: ...")
  std::optional<results::ComparisonRecord> first;   // as stored
  std::optional<results::ComparisonRecord> second;  // only for a first one under the floor
  Verdict verdict = Verdict::failed;
};

// "ok", "error: WHY", "below floor once, not confirmed", "REGRESSION (confirmed 0.973)".
std::string verdict_text(const RegressRow&);

struct RegressSummary {
  int shapes = 0;
  double geomean_speedup = 0;  // over the first comparisons that succeeded; 0: none did
  double worst_speedup = 0;    // likewise
  int below_floor_first = 0;
  int confirmed_regressions = 0;
  int failed = 0;
  bool passed() const { return confirmed_regressions == 0 && failed == 0; }
};

struct RegressReport {
  // What ran, where: the names the JSON report carries.
  std::int64_t run_id = 0;
  std::string device;              // the evaluator's spec
  std::string device_fingerprint;
  std::string kernel_build;
  std::string heuristic;           // DistilledHeuristic::path
  std::string baseline;            // the baseline policy's name
  std::string workload;
  double floor = 0;
  nlohmann::json provenance = nlohmann::json::object();  // the heuristic's
  std::vector<RegressRow> rows;
  RegressSummary summary;
};

// Runs the matrix of `workload`, storing each comparison under `run_id` (a run the
// caller opened and finishes) as it is taken. `progress(row, done, total)` is called as
// each shape is done; when `stop()` turns true before a shape, StoredEvaluator::Stopped
// is thrown (the rows taken so far are stored). Throws InputError for invalid options.
RegressReport run_regress(const DistilledHeuristic&, Policy& baseline, const Workload&, const RegressOptions&,
                          Evaluator&, results::Database&, std::int64_t run_id,
                          const std::function<void(const RegressRow&, std::size_t, std::size_t)>& progress = {},
                          const std::function<bool()>& stop = {});

// Fills report.summary from report.rows.
void summarise(RegressReport&);

// The JSON of `regress --json` and `--out`: the summary's figures and names, "passed",
// the provenance and "rows".
nlohmann::json to_json(const RegressRow&);
nlohmann::json to_json(const RegressReport&);

}  // namespace evodispatch
