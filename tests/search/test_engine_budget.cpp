// The search's budget is search time: setup (the store, the baseline, the oracle) is
// counted and reported apart, so a slow setup cannot eat stop.minutes.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/results/results.hpp>
#include <evodispatch/search/engine.hpp>

#include "search_fixtures.hpp"

using namespace evodispatch;
using namespace evodispatch::search;
using namespace evodispatch::search::testing;

namespace {

// The simulator at the pace of a slow device: every measurement takes `delay`.
class SlowSimulator : public SimulatorEvaluator {
 public:
  explicit SlowSimulator(std::chrono::microseconds delay)
      : SimulatorEvaluator(load_sim_profile("h100-sxm")), delay_(delay) {}
  Measurement measure(const Shape& s, const Decision& d, const TimingOptions& t) override {
    std::this_thread::sleep_for(delay_);
    return SimulatorEvaluator::measure(s, d, t);
  }

 private:
  std::chrono::microseconds delay_;
};

}  // namespace

TEST(EngineBudget, SetupLongerThanTheBudgetLeavesTheSearchItsMinutes) {
  ScratchDir dir;
  const std::string wl = dir.write("mini.json", mini_workload_json());
  // 36 shapes x 16 splits x 2 packings of oracle at 2 ms: about 2.3 s of setup, twice the
  // budget, which leaves a first step room on a loaded two-core machine (at 0.6 s it did not).
  nlohmann::json j = mini_config_json(wl, 0);
  j["stop"]["minutes"] = 0.02;  // 1.2 s
  const SearchConfig config = parse_search_config(j, "budget");
  SlowSimulator slow(std::chrono::microseconds(2000));
  auto db = results::Database::open(dir.file("budget.db"));
  EngineOptions opts;
  opts.evaluators = {&slow};
  opts.device_spec = "sim:h100-sxm";
  const nlohmann::json summary = SearchEngine::start(db, config, opts)->run();

  EXPECT_EQ(summary["stop_reason"], "minutes");
  const double setup = summary["setup_s"].get<double>(), search = summary["search_s"].get<double>();
  EXPECT_GT(setup, 1.2) << "the setup of this test is meant to outlast the budget";
  EXPECT_GE(search, 1.2) << "the search got less than its budget";
  EXPECT_GE(summary["steps"].get<int>(), 1) << "the search stopped before its first step";
  EXPECT_NEAR(summary["elapsed_s"].get<double>(), setup + search, 1e-9);
}

TEST(EngineBudget, AResumedRunAddsItsSetupToTheStoredOne) {
  ScratchDir dir;
  const std::string wl = dir.write("mini.json", mini_workload_json());
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  auto db = results::Database::open(dir.file("resume.db"));
  EngineOptions opts;
  opts.evaluators = {&sim};
  opts.device_spec = "sim:h100-sxm";
  std::int64_t run = 0;
  {
    auto engine = SearchEngine::start(db, mini_config(wl, 200), opts);
    run = engine->run_id();
    engine->step();
  }
  const double first_setup = results::Runs(db).get(run)->state["setup_s"].get<double>();
  EXPECT_GT(first_setup, 0);
  const nlohmann::json summary = SearchEngine::resume(db, run, opts)->run();
  EXPECT_GT(summary["setup_s"].get<double>(), first_setup);
}
