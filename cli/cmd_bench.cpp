// evodispatch bench: measure a policy (or script) on a workload, optionally against a
// baseline, through the results database.
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/results/results.hpp>
#include <evodispatch/search/bench.hpp>

#include "app.hpp"
#include "interrupt.hpp"
#include "progress.hpp"

namespace evodispatch::cli {

namespace {
struct BenchOptions : CommonOptions {
  std::string policy;
  std::string baseline;
  std::string workload = "paper-safety-160";
  std::string l2 = "cold";
  bool remeasure = false;
};

std::string decision_cell(const std::optional<DispatchOutcome>& d) {
  if (!d || !d->ok()) return "-";
  std::ostringstream o;
  o << d->decision.num_splits << (*d->decision.pack_gqa ? "p" : "") ;
  if (d->decision.sm_margin) o << "-" << d->decision.sm_margin;
  return o.str();
}

void print_table(const BenchReport& r, bool with_baseline) {
  std::cout << std::left << std::setw(44) << "shape" << std::right << std::setw(8) << "split";
  if (with_baseline) std::cout << std::setw(8) << "base";
  std::cout << std::setw(11) << "us";
  if (with_baseline) std::cout << std::setw(11) << "base us" << std::setw(9) << "speedup";
  std::cout << "\n" << std::fixed;
  for (const auto& row : r.rows) {
    std::cout << std::left << std::setw(44) << describe(row.shape) << std::right << std::setw(8)
              << decision_cell(row.candidate);
    if (with_baseline) std::cout << std::setw(8) << decision_cell(row.baseline);
    if (!row.error.empty()) {
      std::cout << "  error: " << row.error << "\n";
      continue;
    }
    std::cout << std::setprecision(2) << std::setw(11) << row.candidate_m->median_us;
    if (with_baseline)
      std::cout << std::setw(11) << row.baseline_m->median_us << std::setprecision(3) << std::setw(9) << *row.speedup;
    std::cout << "\n";
  }
}

void print_summary(const BenchReport& r, const BenchOptions& o, const Evaluator& ev, std::int64_t run_id) {
  const auto& s = r.summary;
  std::cout << std::fixed << std::setprecision(3) << "\n"
            << o.policy << " on " << o.workload << " (" << s.shapes << " shapes) on " << ev.spec() << ", l2 " << o.l2
            << "\n";
  if (s.geomean_speedup)
    std::cout << "  speedup over " << o.baseline << ": geomean " << *s.geomean_speedup << "x, worst "
              << *s.worst_speedup << "x (" << describe(*s.worst_shape) << "), best " << *s.best_speedup
              << "x; decisions differ on " << s.changed << " shapes\n";
  std::cout << "  measured " << r.stats.measured << ", reused " << r.stats.reused << " from " << o.db << " (run "
            << run_id << ")";
  if (s.failed) std::cout << "; " << s.failed << " shapes failed";
  std::cout << "\n";
}

int bench(const BenchOptions& o) {
  const auto l2 = parse_l2_mode(o.l2);
  if (!l2) throw InputError("--l2: must be cold or hot, got '" + o.l2 + "'");
  const Workload workload = load_workload(o.workload);
  auto candidate = make_policy(o.policy);
  std::unique_ptr<Policy> baseline;
  if (!o.baseline.empty()) baseline = make_policy(o.baseline);
  auto evaluator = make_evaluator(o.device);
  auto db = results::Database::open(o.db);

  TimingOptions timing;
  timing.l2 = *l2;
  results::RunRecord run;
  run.kind = "bench";
  run.device = evaluator->fingerprint();
  run.config = {{"policy", o.policy}, {"baseline", o.baseline}, {"workload", workload.name},
                {"device", evaluator->spec()}, {"l2", o.l2}, {"remeasure", o.remeasure}};
  nlohmann::json spec = {{"shapes", nlohmann::json::array()}};
  for (const auto& s : workload.shapes) spec["shapes"].push_back(to_json(s));
  const std::int64_t run_id = db.in_transaction([&] {
    results::Devices(db).upsert({0, evaluator->fingerprint(), evaluator->device(), "", {}, ""});
    run.workload_id = results::Workloads(db).upsert(workload.name, spec);
    return results::Runs(db).create(run);
  });

  StoredEvaluator stored(db, *evaluator, timing, o.remeasure, run_id);
  Progress progress("bench " + workload.name);
  BenchReport report;
  try {
    report = run_bench(*candidate, baseline.get(), workload, stored,
                       [&](std::size_t d, std::size_t t) { progress.update(d, t); }, interrupt_requested);
  } catch (const StoredEvaluator::Stopped&) {
    results::Runs(db).finish(run_id, results::RunStatus::interrupted);
    throw Interrupted();
  }
  results::Runs(db).finish(run_id, results::RunStatus::finished, to_json(report.summary));

  if (o.json) {
    nlohmann::json j = {{"run_id", run_id}, {"device", evaluator->spec()}, {"workload", workload.name},
                        {"policy", o.policy}, {"summary", to_json(report.summary)}};
    if (!o.baseline.empty()) j["baseline"] = o.baseline;
    j["rows"] = nlohmann::json::array();
    for (const auto& row : report.rows) j["rows"].push_back(to_json(row));
    std::cout << j.dump() << "\n";
  } else {
    print_table(report, baseline != nullptr);
    print_summary(report, o, *evaluator, run_id);
  }
  return report.summary.failed ? kFailure : kOk;
}
}  // namespace

void add_bench(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("bench", "measure a policy, script or heuristic on a workload, "
                                           "optionally against a baseline");
  auto o = std::make_shared<BenchOptions>();
  verb->add_option("--policy", o->policy, "fa3 | fa3-kvcache | fa2 | seq-aware | flashinfer | fixed:N | FILE.lua")
      ->required();
  verb->add_option("--baseline", o->baseline, "a second policy to compare against (speedup = baseline / policy)");
  verb->add_option("--workload", o->workload, "shipped workload name or JSON file")->capture_default_str();
  verb->add_option("--l2", o->l2, "cold: rotate inputs beyond twice the L2 (default); hot: reuse one set")
      ->capture_default_str();
  verb->add_flag("--remeasure", o->remeasure, "measure again even when the database has the measurement");
  add_device_option(*verb, *o);
  add_db_option(*verb, *o);
  add_json_option(*verb, *o);
  verb->callback([&action, o] { action = [o] { return bench(*o); }; });
}

}  // namespace evodispatch::cli
