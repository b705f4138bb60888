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
#include <evodispatch/search/run_shapes.hpp>
#include <evodispatch/search/bench.hpp>
#include <evodispatch/search/oracle.hpp>

#include "app.hpp"
#include "arguments.hpp"
#include "interrupt.hpp"
#include "progress.hpp"
#include "session.hpp"

namespace evodispatch::cli {

namespace {
struct BenchOptions : CommonOptions {
  std::string policy;
  std::string baseline;
  std::string workload = "paper-safety-160";
  std::string l2 = "cold";
  std::string oracle_splits = "1..64";
  std::string oracle_margins = "0";
  std::string oracle_pack = "both";
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
  TimingOptions timing;
  timing.l2 = parse_l2_option(o.l2, "--l2");
  const Workload workload = load_workload(o.workload);
  const bool oracle = o.policy == "oracle";
  std::unique_ptr<Policy> candidate;
  if (!oracle) candidate = make_policy(o.policy);
  std::unique_ptr<Policy> baseline;
  if (!o.baseline.empty()) baseline = make_policy(o.baseline);
  DecisionSpace space;
  if (oracle) {
    space.splits = parse_int_list(o.oracle_splits, "--oracle-splits", 1, kMaxSplits);
    space.sm_margins = parse_int_list(o.oracle_margins, "--oracle-margins", 0, 1 << 20);
    if (o.oracle_pack == "on") space.pack_gqa = {true};
    else if (o.oracle_pack == "off") space.pack_gqa = {false};
    else if (o.oracle_pack != "both") throw UsageError("--oracle-pack: must be on, off or both, got '" + o.oracle_pack + "'");
  }

  nlohmann::json config = {{"policy", o.policy}, {"baseline", o.baseline}, {"workload", workload.name},
                           {"l2", o.l2}, {"remeasure", o.remeasure}};
  if (oracle) config["oracle"] = {{"splits", o.oracle_splits}, {"margins", o.oracle_margins}, {"pack", o.oracle_pack}};
  RunSession session = open_run_session("bench", o.device, o.db, config, &workload);
  Evaluator& evaluator = *session.evaluator;

  StoredEvaluator stored(session.db, evaluator, timing, o.remeasure, session.run_id);
  Progress progress("bench " + workload.name);
  const auto on_progress = [&](std::size_t d, std::size_t t) { progress.update(d, t); };
  BenchReport report;
  try {
    report = oracle ? run_oracle_bench(space, baseline.get(), workload, stored, on_progress, interrupt_requested)
                    : run_bench(*candidate, baseline.get(), workload, stored, on_progress, interrupt_requested);
  } catch (const StoredEvaluator::Stopped&) {
    session.interrupted();
    throw Interrupted();
  }
  session.finish(to_json(report.summary), run_shapes(report));

  if (o.json) {
    nlohmann::json j = {{"run_id", session.run_id}, {"device", evaluator.spec()}, {"workload", workload.name},
                        {"policy", o.policy}, {"summary", to_json(report.summary)}};
    if (!o.baseline.empty()) j["baseline"] = o.baseline;
    j["rows"] = nlohmann::json::array();
    for (const auto& row : report.rows) j["rows"].push_back(to_json(row));
    std::cout << j.dump() << "\n";
  } else {
    print_table(report, baseline != nullptr);
    print_summary(report, o, evaluator, session.run_id);
  }
  return report.summary.failed ? kFailure : kOk;
}
}  // namespace

void add_bench(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("bench", "measure a policy, script or heuristic on a workload, "
                                           "optionally against a baseline");
  auto o = std::make_shared<BenchOptions>();
  verb->add_option("--policy", o->policy,
                   "fa3 | fa3-kvcache | fa2 | seq-aware | flashinfer | fixed:N | FILE.lua | oracle (the best "
                   "decision of --oracle-splits x pack_gqa on/off x --oracle-margins, measured per shape)")
      ->required();
  verb->add_option("--oracle-splits", o->oracle_splits, "the oracle's num_splits range")->capture_default_str();
  verb->add_option("--oracle-pack", o->oracle_pack, "the oracle's pack_gqa values: on, off or both")->capture_default_str();
  verb->add_option("--oracle-margins", o->oracle_margins, "the oracle's sm_margin values (e.g. 0 or 0,8,16)")
      ->capture_default_str();
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
