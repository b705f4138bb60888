// evodispatch regress: the regression matrix of a distilled heuristic. The compiled
// function (not the script) decides every shape; each shape is measured against the
// baseline with an interleaved comparison, none assumed unchanged; a shape under the
// floor is measured a second time, and the verb fails when that confirms it.
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/results/results.hpp>

#include "app.hpp"
#include "interrupt.hpp"
#include "session.hpp"

namespace evodispatch::cli {

namespace {
namespace fs = std::filesystem;

struct RegressOptions : CommonOptions {
  std::string heuristic;
  std::string baseline = "fa3";
  std::string workload = "paper-safety-160";
  double floor = 0.99;
  int pairs = 30;
  std::string l2 = "cold";
  std::string out;
};

// The compiled function of DIR: DIR/libheuristic.so when it is there, else compiled now
// from the header emitted from heuristic.json (in a scratch directory).
std::unique_ptr<distill::CompiledHeuristic> load_compiled(const fs::path& json_path,
                                                          const distill::DecisionFunction& fn) {
  const fs::path dir = json_path.parent_path().empty() ? fs::path(".") : json_path.parent_path();
  if (fs::exists(dir / "libheuristic.so")) return distill::CompiledHeuristic::load(dir / "libheuristic.so");
  const fs::path scratch = fs::temp_directory_path() / ("evodispatch-regress-" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  std::ofstream(scratch / "heuristic.hpp") << distill::emit_cpp_header(fn);
  return distill::CompiledHeuristic::build(scratch);
}

std::string cell(const Decision& d) {
  std::ostringstream o;
  o << d.num_splits << (d.pack_gqa.value_or(false) ? "p" : "");
  if (d.sm_margin) o << "-" << d.sm_margin;
  return o.str();
}

int regress(const RegressOptions& o) {
  const auto l2 = parse_l2_mode(o.l2);
  if (!l2) throw InputError("--l2: must be cold or hot, got '" + o.l2 + "'");
  if (!(o.floor > 0)) throw InputError("--floor: must be > 0");
  if (o.pairs < 1) throw InputError("--pairs: must be >= 1");
  std::ifstream jf(o.heuristic);
  if (!jf) throw InputError("--heuristic: cannot read '" + o.heuristic + "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(jf);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(o.heuristic + ": not JSON: " + e.what());
  }
  const distill::DecisionFunction fn = distill::decision_function_from_json(j, o.heuristic);
  const auto compiled = load_compiled(o.heuristic, fn);
  const Workload workload = load_workload(o.workload);
  auto baseline = make_policy(o.baseline);
  TimingOptions timing;
  timing.l2 = *l2;

  nlohmann::json config = {{"heuristic", o.heuristic}, {"baseline", o.baseline}, {"workload", workload.name},
                           {"floor", o.floor},         {"pairs", o.pairs},       {"l2", o.l2},
                           {"provenance", fn.provenance}};
  RunSession session = open_run_session("regress", o.device, o.db, config, &workload);
  Evaluator& ev = *session.evaluator;
  const DeviceInfo& hw = ev.device();
  std::optional<std::int64_t> program_id;
  if (fn.provenance.contains("program") && fn.provenance["program"].is_number_integer()) {
    // Only a program of this database can be referenced.
    const auto id = fn.provenance["program"].get<std::int64_t>();
    if (results::Programs(session.db).get(id)) program_id = id;
  }

  nlohmann::json rows = nlohmann::json::array();
  int confirmed = 0, below_first = 0, failed = 0;
  std::vector<double> speedups;
  auto record = [&](const Shape& s, const Decision& c, const Decision& b, const Comparison& cmp, int attempt) {
    results::ComparisonRecord r;
    r.run_id = session.run_id;
    r.program_id = program_id;
    r.shape = s;
    r.device = ev.fingerprint();
    r.kernel_build = ev.kernel_build();
    r.l2 = *l2;
    r.candidate = c;
    r.baseline = b;
    r.attempt = attempt;
    r.ok = cmp.ok;
    r.error = cmp.error;
    r.candidate_us = cmp.a.median_us;
    r.baseline_us = cmp.b.median_us;
    if (cmp.ok && cmp.ratio > 0) {
      r.speedup = 1.0 / cmp.ratio;
      r.speedup_lo = cmp.ratio_hi > 0 ? 1.0 / cmp.ratio_hi : 0;
      r.speedup_hi = cmp.ratio_lo > 0 ? 1.0 / cmp.ratio_lo : 0;
    }
    r.pairs = cmp.pairs;
    session.db.in_transaction([&] { return results::Comparisons(session.db).insert(r); });
    return r;
  };

  if (!o.json)
    std::cout << std::left << std::setw(44) << "shape" << std::right << std::setw(8) << "heur" << std::setw(8)
              << "base" << std::setw(10) << "heur us" << std::setw(10) << "base us" << std::setw(9) << "speedup"
              << std::setw(18) << "p10..p90" << "  verdict\n"
              << std::fixed;
  for (const Shape& s : workload.shapes) {
    if (interrupt_requested()) {
      session.interrupted();
      throw Interrupted();
    }
    const Decision c = resolve(compiled->decide(s, hw), s);
    nlohmann::json row = {{"shape", to_json(s)}, {"heuristic", to_json(c)}};
    const DispatchOutcome bo = baseline->decide(s, hw);
    if (!bo.ok()) {
      ++failed;
      row["error"] = "baseline: " + bo.error;
      rows.push_back(row);
      if (!o.json) std::cout << std::left << std::setw(44) << describe(s) << "  error: baseline: " << bo.error << "\n";
      continue;
    }
    const Decision b = resolve(bo.decision, s);
    row["baseline"] = to_json(b);
    const auto r1 = record(s, c, b, ev.compare(s, c, b, timing, o.pairs), 1);
    std::string verdict = "ok";
    auto r = r1;
    if (!r1.ok) {
      ++failed;
      verdict = "error: " + r1.error;
    } else if (r1.speedup < o.floor) {
      ++below_first;
      const auto r2 = record(s, c, b, ev.compare(s, c, b, timing, o.pairs), 2);
      row["second"] = {{"speedup", r2.speedup}, {"speedup_lo", r2.speedup_lo}, {"speedup_hi", r2.speedup_hi}};
      if (r2.ok && r2.speedup < o.floor) {
        ++confirmed;
        verdict = "REGRESSION (confirmed " + [&] {
          std::ostringstream t;
          t << std::fixed << std::setprecision(3) << r2.speedup;
          return t.str();
        }() + ")";
      } else {
        verdict = "below floor once, not confirmed";
      }
    }
    if (r1.ok) speedups.push_back(r1.speedup);
    row["heuristic_us"] = r.candidate_us;
    row["baseline_us"] = r.baseline_us;
    row["speedup"] = r.speedup;
    row["speedup_lo"] = r.speedup_lo;
    row["speedup_hi"] = r.speedup_hi;
    row["pairs"] = r.pairs;
    row["verdict"] = verdict;
    rows.push_back(row);
    if (!o.json) {
      std::ostringstream ci;
      ci << std::fixed << std::setprecision(3) << r.speedup_lo << ".." << r.speedup_hi;
      std::cout << std::left << std::setw(44) << describe(s) << std::right << std::setw(8) << cell(c) << std::setw(8)
                << cell(b) << std::setprecision(2) << std::setw(10) << r.candidate_us << std::setw(10)
                << r.baseline_us << std::setprecision(3) << std::setw(9) << r.speedup << std::setw(18) << ci.str()
                << "  " << verdict << "\n";
    }
  }
  double log_sum = 0;
  double worst = speedups.empty() ? 0 : speedups.front();
  for (double x : speedups) {
    log_sum += std::log(x);
    worst = std::min(worst, x);
  }
  const double geomean = speedups.empty() ? 0 : std::exp(log_sum / speedups.size());
  nlohmann::json summary = {{"run_id", session.run_id},
                            {"device", ev.spec()},
                            {"device_fingerprint", ev.fingerprint()},
                            {"kernel_build", ev.kernel_build()},
                            {"heuristic", o.heuristic},
                            {"baseline", o.baseline},
                            {"workload", workload.name},
                            {"floor", o.floor},
                            {"shapes", workload.shapes.size()},
                            {"geomean_speedup", geomean},
                            {"worst_speedup", worst},
                            {"below_floor_first", below_first},
                            {"confirmed_regressions", confirmed},
                            {"failed", failed},
                            {"passed", confirmed == 0 && failed == 0},
                            {"provenance", fn.provenance}};
  nlohmann::json doc = summary;
  doc["rows"] = rows;
  session.finish(doc);
  if (!o.out.empty()) {
    std::ofstream f(o.out);
    f << doc.dump(2) << "\n";
    if (!f) throw InputError("--out: cannot write '" + o.out + "'");
  }
  if (o.json) {
    std::cout << doc.dump() << "\n";
  } else {
    std::cout << std::setprecision(3) << "\n"
              << o.heuristic << " vs " << o.baseline << " on " << workload.name << " (" << workload.shapes.size()
              << " shapes) on " << ev.spec() << ": geomean " << geomean << "x, worst " << worst << "x; floor "
              << o.floor << ": " << below_first << " below once, " << confirmed << " confirmed"
              << (failed ? ", " + std::to_string(failed) + " failed" : "") << " (run " << session.run_id << ")\n";
  }
  return confirmed == 0 && failed == 0 ? kOk : kFailure;
}
}  // namespace

void add_regress(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("regress", "run the regression matrix: the compiled distilled function against "
                                             "a baseline on every shape, interleaved A/B");
  auto o = std::make_shared<RegressOptions>();
  verb->add_option("--heuristic", o->heuristic, "DIR/heuristic.json written by distill")->required();
  verb->add_option("--baseline", o->baseline, "the policy to hold it to")->capture_default_str();
  verb->add_option("--workload", o->workload, "shipped workload name or JSON file")->capture_default_str();
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
