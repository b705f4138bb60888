#pragma once
// The HTML report of one run (DESIGN.md §7, `results report`): plain data gathered from
// the database by load_report (report_data.cpp), drawn by render_report_html
// (report_html.cpp) as one self-contained page of inline SVG: no network, no external
// script or style. Each part holds only what its panel draws; an empty part means the run
// recorded nothing for that panel, and the page says so in place of the plot.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/results/database.hpp>

namespace evodispatch::results {

// Where the numbers come from.
struct ReportProvenance {
  std::int64_t run_id = 0;
  std::string kind;    // "search", "bench", "sweep-splits", "sweep-batch", "regress", ...
  std::string status;  // "finished", "running", ...
  std::string started_at, finished_at;  // UTC ISO-8601; finished_at empty while running
  std::optional<double> duration_s;
  std::string workload;  // name, empty for none
  std::string device_name, device_fingerprint, driver;
  int num_sms = 0;
  double mem_bw = 0;  // the device's DRAM bandwidth, bytes per second; 0: unknown
  std::string kernel_build, kernel_build_description;
  std::string candidate;  // what was measured: a policy, a script, the winner, a heuristic
  std::string baseline;   // what it is held to; empty: no baseline
  std::string evodispatch_version;
  nlohmann::json config = nlohmann::json::object();  // the run's config as stored
  nlohmann::json headline = nlohmann::json::object();  // figure name -> value, shown on top
};

// A search's progress: the best fitness reached so far against the evaluations spent.
struct ProgressPoint {
  std::int64_t evaluations = 0;  // evaluations of the run so far (all islands)
  double best = 0;               // best feasible fitness so far (geomean speedup over the baseline)
};
struct IslandProgress {
  int island = 0;
  std::vector<ProgressPoint> train;  // one point where the island's best improved, then the last
};
struct SearchProgress {
  std::vector<IslandProgress> islands;
  std::vector<ProgressPoint> validation;  // each finalist's validation fitness, at its evaluation count
  std::vector<std::int64_t> failures;     // evaluation counts at which a program failed
  std::int64_t evaluations = 0, duplicates = 0;
};

// One shape of the run: the candidate (policy, winner or heuristic), the baseline and
// the oracle (the best measured decision), each as a decision label and a median time.
struct ReportShape {
  Shape shape;
  std::string split;  // "workload" (a bench, sweep or regress shape), "train", "validation", "test"
  std::string candidate_decision, baseline_decision, oracle_decision;  // e.g. "8 splits, packed"
  std::optional<double> candidate_us, baseline_us, oracle_us;
  std::optional<double> p10_us, p90_us;  // the candidate's measurement spread
  std::optional<double> speedup;         // baseline_us / candidate_us
  std::optional<double> oracle_speedup;  // baseline_us / oracle_us
  double kv_bytes = 0;                   // K and V bytes the shape reads
};

// A split-count U-curve of one shape (sweep splits).
struct CurvePoint {
  int num_splits = 0;
  bool pack_gqa = false;
  std::optional<double> us, p10_us, p90_us;  // unset: the point failed
};
struct SplitCurve {
  Shape shape;
  std::vector<CurvePoint> points;
  std::string policy;                // the policy whose split is marked (`results report`: fa3)
  std::optional<int> policy_splits;  // the split that policy picks, marked on the curve
};

// A batch-size cliff curve (sweep batch): the policy's latency as the batch grows.
struct BatchPoint {
  int batch = 0;
  std::string decision;
  std::optional<double> us, p10_us, p90_us;
};
struct BatchCurve {
  Shape family;  // batch is the swept field
  std::string policy;
  std::vector<BatchPoint> points;
};

struct ReportData {
  ReportProvenance provenance;
  std::optional<SearchProgress> progress;  // search runs
  std::vector<ReportShape> shapes;
  std::vector<SplitCurve> split_curves;
  std::vector<BatchCurve> batch_curves;
  std::string rules;  // the winner's rules (or the heuristic's) as text; empty: none
};

// Reads run `run_id` and what it measured; InputError when there is no such run.
// with_progress: also a search's progress (one pass over all its evaluations).
ReportData load_report(Database&, std::int64_t run_id, const std::string& evodispatch_version,
                       bool with_progress = true);

// The page: every panel present (an empty one says why), ids "panel-progress",
// "panel-speedup", "panel-curves", "panel-bandwidth", "panel-noise", "panel-rules",
// "panel-provenance".
std::string render_report_html(const ReportData&);

}  // namespace evodispatch::results
