// The test split (DESIGN.md §5): fresh shapes of a domain, drawn with their own seed when
// the run starts and stored with it, disjoint from the workload. They select nothing:
// once the winner is chosen it is measured on them against the baseline (and the oracle),
// then the winner's and the oracle's decisions are re-measured interleaved against the
// baseline on every shape where they differ from it, and the figures are only reported.
// The re-measurement matters on a GPU: the oracle is the least of many independent
// measurements of each shape, and that minimum is biased by their noise.
#include <algorithm>
#include <cmath>

#include <evodispatch/results/results.hpp>

#include "engine_impl.hpp"

namespace evodispatch::search {

namespace {
std::optional<Domain> test_domain(const SearchConfig& config, const Workload& workload, std::string& name) {
  if (config.test.workload.empty()) {
    name = workload.name;
    return workload.domain;
  }
  const Workload w = load_workload(config.test.workload);
  if (!w.domain) throw InputError("test.workload: " + config.test.workload + " is not a domain (it lists its shapes)");
  name = w.name;
  return w.domain;
}
}  // namespace

nlohmann::json draw_test_split(const SearchConfig& config, const Workload& workload) {
  if (config.test.samples == 0) return nullptr;
  std::string name;
  const auto domain = test_domain(config, workload, name);
  if (!domain) return nullptr;
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& s : sample_domain(*domain, static_cast<std::size_t>(config.test.samples), config.test.seed,
                                     workload.shapes))
    shapes.push_back(to_json(s));
  return {{"workload", name}, {"seed", config.test.seed}, {"shapes", shapes}};
}

void SearchEngine::Impl::load_test_split(const nlohmann::json& stored) {
  test_shapes.clear();
  test_workload.clear();
  if (!stored.is_object()) return;
  test_workload = stored.value("workload", std::string());
  const auto& shapes = stored.at("shapes");
  for (std::size_t i = 0; i < shapes.size(); ++i)
    test_shapes.push_back(shape_from_json(shapes[i], "test.shapes[" + std::to_string(i) + "]"));
}

// The winner (or, without one, the baseline itself) on the test shapes.
nlohmann::json SearchEngine::Impl::test_report(const std::optional<Program>& winner,
                                               std::vector<results::RunShapeRecord>* rows) {
  if (test_shapes.empty()) return nullptr;
  report("test", "", 0, 1);
  const DeviceInfo& hw = options.evaluators.front()->device();
  SandboxLimits limits;
  limits.max_instructions = config.sandbox.max_instructions;
  limits.max_memory_bytes = config.sandbox.max_memory_bytes;
  Checker checker(test_shapes, hw, limits, config.cascade.threads);
  const CheckResult base = checker.check_full("baseline " + baseline_name, baseline_source);
  if (!base.ok) return {{"error", "the baseline fails on the test shapes: " + base.error}};
  const CheckResult mine = winner ? checker.check_full("the winner", render_lua(*winner)) : base;
  if (!mine.ok) return {{"error", "the winner fails on the test shapes: " + mine.error}};

  Measurer m(*db, options.evaluators, measurer->timing(), test_shapes, run_id);
  m.load();
  std::vector<LatencyRequest> requests;
  for (std::size_t i = 0; i < test_shapes.size(); ++i) requests.push_back({static_cast<int>(i), base.decisions[i]});
  for (std::size_t i = 0; i < test_shapes.size(); ++i) requests.push_back({static_cast<int>(i), mine.decisions[i]});
  const auto us = measure(m, requests);
  const std::size_t n = test_shapes.size();
  const std::vector<double> base_us(us.begin(), us.begin() + static_cast<long>(n));
  const std::vector<double> mine_us(us.begin() + static_cast<long>(n), us.end());
  std::vector<Decision> oracle_decisions = base.decisions;
  const std::vector<double> oracle = test_oracle(m, base_us, oracle_decisions);
  if (rows) *rows = test_shape_rows(base.decisions, base_us, mine.decisions, mine_us, oracle_decisions, oracle);
  const Fitness f = score_latencies(base_us, mine_us, oracle, fitness_options());

  nlohmann::json j = {{"workload", test_workload}, {"shapes", n}, {"geomean", f.geomean}, {"worst", f.worst},
                      {"below_floor", f.below_floor}};
  j["oracle_fraction"] = f.oracle_fraction ? nlohmann::json(*f.oracle_fraction) : nlohmann::json(nullptr);
  j["worst_shape"] = f.ok ? to_json(test_shapes[static_cast<std::size_t>(f.worst_index)]) : nlohmann::json(nullptr);
  if (!f.ok) j["error"] = f.error;
  if (!oracle.empty()) {
    std::vector<double> gain;
    for (std::size_t i = 0; i < n; ++i) gain.push_back(base_us[i] / oracle[i]);
    j["oracle_geomean"] = geomean(gain);
  }
  const auto mine_confirmed = confirm_on_test(base.decisions, mine.decisions, "the winner");
  j["under_floor"] = under_floor_rows(f, base.decisions, mine.decisions, mine_confirmed);
  j["confirmed"] = confirmed_figures(mine_confirmed, oracle.empty() ? std::vector<std::optional<double>>{}
                                                                    : confirm_on_test(base.decisions, oracle_decisions,
                                                                                      "the oracle"));
  return j;
}

std::vector<results::RunShapeRecord> SearchEngine::Impl::test_shape_rows(
    const std::vector<Decision>& base, const std::vector<double>& base_us, const std::vector<Decision>& mine,
    const std::vector<double>& mine_us, const std::vector<Decision>& oracle, const std::vector<double>& oracle_us) const {
  std::vector<results::RunShapeRecord> out;
  for (std::size_t i = 0; i < test_shapes.size(); ++i)
    out.push_back(shape_row(results::ShapeSplit::test, test_shapes[i], {base[i], base_us[i]},
                            TimedDecision{mine[i], mine_us[i]},
                            oracle_us.empty() ? std::nullopt : std::optional(TimedDecision{oracle[i], oracle_us[i]})));
  return out;
}

// The oracle's space measured on the test shapes, with the baseline's decision in it; empty
// without an oracle.
// `decisions` comes back with the oracle's choice on each shape.
std::vector<double> SearchEngine::Impl::test_oracle(Measurer& m, const std::vector<double>& base_us,
                                                    std::vector<Decision>& decisions) {
  if (!config.oracle.enabled) return {};
  const std::vector<LatencyRequest> requests = oracle_requests(test_shapes, options.evaluators.front()->device());
  report("test", "measuring the oracle on the test shapes", 0, requests.size());
  const auto us = measure(m, requests);
  std::vector<double> best = base_us;
  for (std::size_t j = 0; j < requests.size(); ++j) {
    const auto i = static_cast<std::size_t>(requests[j].shape);
    if (std::isfinite(us[j]) && us[j] < best[i]) {
      best[i] = us[j];
      decisions[i] = requests[j].decision;
    }
  }
  return best;
}

// The speedup over the baseline of `decisions` on each test shape, re-measured interleaved
// where they differ from the baseline's (1 where they are the same; nullopt where the
// comparison failed). Reported only: the test split selects nothing, so these are not
// comparison rows of a program.
std::vector<std::optional<double>> SearchEngine::Impl::confirm_on_test(const std::vector<Decision>& base,
                                                                       const std::vector<Decision>& decisions,
                                                                       const std::string& whose) {
  std::vector<std::optional<double>> out(test_shapes.size(), 1.0);
  std::size_t differ = 0, done = 0;
  for (std::size_t i = 0; i < out.size(); ++i) differ += base[i] == decisions[i] ? 0 : 1;
  const std::string what = "re-measuring " + whose + " against the baseline";
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (base[i] == decisions[i]) continue;
    if (stop_requested()) interrupt();
    report("test", what, done++, differ);
    Comparison cmp;
    try {
      cmp = options.evaluators.front()->compare(test_shapes[i], base[i], decisions[i], measurer->timing(),
                                                 config.final.confirm_pairs);
    } catch (const std::exception& ex) {
      cmp.error = std::string("the evaluator failed: ") + ex.what();
    }
    results::ComparisonRecord c;
    results::set_measured(c, cmp, results::BaselineSide::a);
    out[i] = c.ok ? std::optional<double>(c.speedup) : std::nullopt;
  }
  return out;
}

// Every test shape the winner measured under the floor, with its re-measured speedup.
nlohmann::json SearchEngine::Impl::under_floor_rows(const Fitness& f, const std::vector<Decision>& base,
                                                    const std::vector<Decision>& mine,
                                                    const std::vector<std::optional<double>>& confirmed) const {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < f.speedups.size(); ++i) {
    if (f.speedups[i] >= config.fitness.floor || base[i] == mine[i]) continue;
    const auto& c = confirmed[i];
    nlohmann::json row = {{"shape", to_json(test_shapes[i])}, {"first", f.speedups[i]},
                          {"confirmed_under_floor", !c || *c < config.fitness.floor}};
    row["confirmed"] = c ? nlohmann::json(*c) : nlohmann::json("the interleaved comparison failed");
    out.push_back(row);
  }
  return out;
}

// The winner's and the oracle's test figures from the interleaved re-measurements, scored
// as any latencies are (the baseline at 1, each side at 1 / its speedup): the winner's
// share of the oracle's gain without the bias of the oracle's minimum.
nlohmann::json SearchEngine::Impl::confirmed_figures(const std::vector<std::optional<double>>& mine,
                                                     const std::vector<std::optional<double>>& oracle) const {
  std::vector<double> base, m, o;
  std::size_t failed = 0;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (!mine[i] || (!oracle.empty() && !oracle[i])) {
      ++failed;
      continue;
    }
    base.push_back(1.0);
    m.push_back(1.0 / *mine[i]);
    if (!oracle.empty()) o.push_back(1.0 / *oracle[i]);
  }
  if (m.empty()) return nullptr;
  const Fitness f = score_latencies(base, m, o, fitness_options());
  nlohmann::json j = {{"shapes", m.size()}, {"failed", failed}, {"geomean", f.geomean},
                      {"worst", f.worst},   {"below_floor", f.below_floor}};
  j["oracle_geomean"] = o.empty() ? nlohmann::json(nullptr) : nlohmann::json(1.0 / geomean(o));
  j["oracle_fraction"] = f.oracle_fraction ? nlohmann::json(*f.oracle_fraction) : nlohmann::json(nullptr);
  return j;
}

}  // namespace evodispatch::search
