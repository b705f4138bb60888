// evodispatch regress: the regression matrix of a distilled heuristic (search/regress.hpp)
// on a workload, stored as a run; prints the matrix as it is measured and a summary.
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/search/run_shapes.hpp>
#include <evodispatch/search/regress.hpp>

#include "app.hpp"
#include "interrupt.hpp"
#include "session.hpp"

namespace evodispatch::cli {

namespace {
struct RegressCliOptions : CommonOptions {
  std::string heuristic;
  std::string baseline = "fa3";
  std::string workload = "paper-safety-160";
  std::string domain;
  int domain_samples = 200;
  std::uint64_t domain_seed = 3;
  double floor = 0.99;
  int pairs = 30;
  std::string l2 = "cold";
  std::string out;
};

RegressOptions regress_options(const RegressCliOptions& o) {
  const auto l2 = parse_l2_mode(o.l2);
  if (!l2) throw UsageError("--l2: must be cold or hot, got '" + o.l2 + "'");
  RegressOptions r;
  r.floor = o.floor;
  r.pairs = o.pairs;
  r.l2 = *l2;
  if (const std::string why = invalid_regress_options(r); !why.empty()) throw UsageError("--" + why);
  return r;
}

std::string cell(const Decision& d) {
  std::ostringstream o;
  o << d.num_splits << (d.pack_gqa.value_or(false) ? "p" : "");
  if (d.sm_margin) o << "-" << d.sm_margin;
  return o.str();
}

void print_header() {
  std::cout << std::left << std::setw(44) << "shape" << std::right << std::setw(8) << "heur" << std::setw(8) << "base"
            << std::setw(10) << "heur us" << std::setw(10) << "base us" << std::setw(9) << "speedup" << std::setw(18)
            << "p10..p90" << "  verdict\n"
            << std::fixed;
}

void print_row(const RegressRow& row) {
  std::cout << std::left << std::setw(44) << describe(row.shape);
  if (!row.first) {
    std::cout << "  " << verdict_text(row) << "\n";
    return;
  }
  const results::ComparisonRecord& m = *row.first;
  std::ostringstream ci;
  ci << std::fixed << std::setprecision(3) << m.speedup_lo << ".." << m.speedup_hi;
  std::cout << std::right << std::setw(8) << cell(row.heuristic) << std::setw(8) << cell(*row.baseline)
            << std::setprecision(2) << std::setw(10) << m.candidate_us << std::setw(10) << m.baseline_us
            << std::setprecision(3) << std::setw(9) << m.speedup << std::setw(18) << ci.str() << "  "
            << verdict_text(row) << "\n";
}

void print_summary(const RegressReport& r) {
  const RegressSummary& s = r.summary;
  std::cout << std::setprecision(3) << "\n"
            << r.heuristic << " vs " << r.baseline << " on " << r.workload << " (" << s.shapes << " shapes) on "
            << r.device << ": geomean " << s.geomean_speedup << "x, worst " << s.worst_speedup << "x; floor "
            << r.floor << ": " << s.below_floor_first << " below once, " << s.confirmed_regressions << " confirmed"
            << (s.failed ? ", " + std::to_string(s.failed) + " failed" : "") << " (run " << r.run_id << ")\n";
}

int regress(const RegressCliOptions& o) {
  const RegressOptions options = regress_options(o);
  const DistilledHeuristic heuristic = load_distilled(o.heuristic);
  if (!o.domain.empty() && o.domain_samples < 1) throw UsageError("--domain-samples: must be >= 1");
  std::optional<Workload> domain;
  if (!o.domain.empty()) domain = load_workload(o.domain);
  const Workload workload = regression_matrix(load_workload(o.workload), domain ? &*domain : nullptr,
                                              static_cast<std::size_t>(o.domain_samples), o.domain_seed);
  auto baseline = make_policy(o.baseline);

  nlohmann::json config = {{"heuristic", o.heuristic}, {"baseline", o.baseline}, {"workload", workload.name},
                           {"floor", o.floor},         {"pairs", o.pairs},       {"l2", o.l2},
                           {"provenance", heuristic.function.provenance}};
  RunSession session = open_run_session("regress", o.device, o.db, config, &workload);
  if (!o.json) print_header();
  const auto on_row = [&](const RegressRow& row, std::size_t, std::size_t) {
    if (!o.json) print_row(row);
  };
  RegressReport report;
  try {
    report = run_regress(heuristic, *baseline, workload, options, *session.evaluator, session.db, session.run_id,
                         on_row, interrupt_requested);
  } catch (const StoredEvaluator::Stopped&) {
    session.interrupted();
    throw Interrupted();
  }
  const nlohmann::json doc = to_json(report);
  session.finish(doc, run_shapes(report));
  if (!o.out.empty()) {
    std::ofstream f(o.out);
    f << doc.dump(2) << "\n";
    if (!f) throw InputError("--out: cannot write '" + o.out + "'");
  }
  if (o.json)
    std::cout << doc.dump() << "\n";
  else
    print_summary(report);
  return report.summary.passed() ? kOk : kFailure;
}
}  // namespace

void add_regress(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("regress", "run the regression matrix: the compiled distilled function against "
                                             "a baseline on every shape, interleaved A/B");
  auto o = std::make_shared<RegressCliOptions>();
  verb->add_option("--heuristic", o->heuristic, "DIR/heuristic.json written by distill")->required();
  verb->add_option("--baseline", o->baseline, "the policy to hold it to")->capture_default_str();
  verb->add_option("--workload", o->workload, "shipped workload name or JSON file")->capture_default_str();
  verb->add_option("--domain", o->domain,
                   "also a fresh sample of this domain (models-decode, ...), none of the workload's shapes");
  verb->add_option("--domain-samples", o->domain_samples, "shapes drawn from --domain")->capture_default_str();
  verb->add_option("--domain-seed", o->domain_seed, "the seed of that sample")->capture_default_str();
  verb->add_option("--floor", o->floor, "fail when a shape's speedup is confirmed below this")->capture_default_str();
  verb->add_option("--pairs", o->pairs, "interleaved pairs per comparison")->capture_default_str();
  verb->add_option("--l2", o->l2, "cold (default) or hot")->capture_default_str();
  verb->add_option("--out", o->out, "also write the report as JSON to this file");
  add_device_option(*verb, *o);
  add_db_option(*verb, *o);
  add_json_option(*verb, *o);
  verb->callback([&action, o] { action = [o] { return regress(*o); }; });
}

}  // namespace evodispatch::cli
