// The test split (DESIGN.md §5): fresh shapes of a domain, drawn with their own seed when
// the run starts and stored with it, disjoint from the workload. They select nothing:
// once the winner is chosen it is measured on them against the baseline (and the oracle),
// every shape it puts under the floor is re-measured interleaved, and the figures are
// only reported.
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
nlohmann::json SearchEngine::Impl::test_report(const std::optional<Program>& winner) {
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
  const std::vector<double> oracle = test_oracle(m, base_us);
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
  j["under_floor"] = confirm_test_shapes(f, base.decisions, mine.decisions);
  return j;
}

// The oracle's space measured on the test shapes, with the baseline's decision in it; empty
// without an oracle.
std::vector<double> SearchEngine::Impl::test_oracle(Measurer& m, const std::vector<double>& base_us) {
  if (!config.oracle.enabled) return {};
  const std::vector<LatencyRequest> requests = oracle_requests(test_shapes, options.evaluators.front()->device());
  report("test", "measuring the oracle on the test shapes", 0, requests.size());
  const auto us = measure(m, requests);
  std::vector<double> best = base_us;
  for (std::size_t j = 0; j < requests.size(); ++j) {
    auto& b = best[static_cast<std::size_t>(requests[j].shape)];
    if (std::isfinite(us[j])) b = std::min(b, us[j]);
  }
  return best;
}

// Every test shape the winner measured under the floor, re-measured interleaved against
// the baseline. Reported only: the test split selects nothing, so its re-measurements are
// not comparison rows of a program.
nlohmann::json SearchEngine::Impl::confirm_test_shapes(const Fitness& f, const std::vector<Decision>& base,
                                                       const std::vector<Decision>& mine) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < f.speedups.size(); ++i) {
    if (f.speedups[i] >= config.fitness.floor || base[i] == mine[i]) continue;
    if (stop_requested()) interrupt();
    Evaluator& ev = *options.evaluators.front();
    Comparison cmp;
    try {
      cmp = ev.compare(test_shapes[i], base[i], mine[i], measurer->timing(), config.final.confirm_pairs);
    } catch (const std::exception& ex) {
      cmp.error = std::string("the evaluator failed: ") + ex.what();
    }
    results::ComparisonRecord c;
    results::set_measured(c, cmp, results::BaselineSide::a);
    nlohmann::json row = {{"shape", to_json(test_shapes[i])}, {"first", f.speedups[i]},
                          {"confirmed_under_floor", !c.ok || c.speedup < config.fitness.floor}};
    row["confirmed"] = c.ok ? nlohmann::json(c.speedup) : nlohmann::json(c.error);
    out.push_back(row);
  }
  return out;
}

}  // namespace evodispatch::search
