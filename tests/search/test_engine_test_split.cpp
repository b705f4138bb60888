// The test split: fresh shapes of a domain, drawn with their own seed when the run starts,
// disjoint from the workload; they select nothing and are only reported.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/results/results.hpp>
#include <evodispatch/search/engine.hpp>
#include <evodispatch/search/fitness.hpp>
#include <evodispatch/search/program.hpp>

#include "search_fixtures.hpp"

using namespace evodispatch;
using namespace evodispatch::search;
using namespace evodispatch::search::testing;

namespace {

struct SearchRun {
  nlohmann::json summary;
  nlohmann::json stored_test;  // the run config's "test"
  std::vector<results::RunShapeRecord> shapes;  // what the run stored per shape
};

SearchRun run_search(const ScratchDir& dir, const std::string& db_name, int test_samples, const std::string& test_workload = "") {
  const std::string wl = dir.write("mini-domain.json", mini_domain_json("mini-domain", 64, 32768, 1));
  nlohmann::json j = mini_config_json(wl, 300);
  j["test"] = {{"samples", test_samples}, {"seed", 5}};
  if (!test_workload.empty()) j["test"]["workload"] = test_workload;
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  auto db = results::Database::open(dir.file(db_name));
  EngineOptions opts;
  opts.evaluators = {&sim};
  opts.device_spec = "sim:h100-sxm";
  auto engine = SearchEngine::start(db, parse_search_config(j, "test-split"), opts);
  SearchRun r;
  r.summary = engine->run();
  r.stored_test = results::Runs(db).get(engine->run_id())->config["test"];
  r.shapes = results::RunShapes(db).list(engine->run_id());
  return r;
}

}  // namespace

TEST(TestSplit, FreshShapesOfTheDomainDisjointFromTheWorkloadAndOnlyReported) {
  ScratchDir dir;
  const SearchRun with = run_search(dir, "with.db", 40);
  const SearchRun without = run_search(dir, "without.db", 0);

  ASSERT_TRUE(with.stored_test.is_object());
  const auto& test_shapes = with.stored_test["shapes"];
  ASSERT_EQ(test_shapes.size(), 40u);
  const evodispatch::Workload domain = evodispatch::load_workload(dir.file("mini-domain.json"));
  for (const auto& j : test_shapes) {
    const Shape s = shape_from_json(j);
    EXPECT_TRUE(std::find(domain.shapes.begin(), domain.shapes.end(), s) == domain.shapes.end())
        << describe(s) << " is a workload shape";
    EXPECT_TRUE(domain_contains(*domain.domain, s)) << describe(s);
  }
  // It selects nothing: the same winner as the run without a test split.
  EXPECT_EQ(with.summary["winner"]["hash"], without.summary["winner"]["hash"]);
  EXPECT_TRUE(without.summary["test"].is_null());
  EXPECT_EQ(without.stored_test, nullptr);

  const auto& t = with.summary["test"];
  ASSERT_TRUE(t.is_object()) << with.summary.dump();
  EXPECT_EQ(t["shapes"], 40);
  EXPECT_EQ(t["workload"], "mini-domain");
  EXPECT_GT(t["geomean"].get<double>(), 0);
  EXPECT_GE(t["oracle_geomean"].get<double>(), 1.0);  // the oracle's space holds the baseline's decisions
  EXPECT_EQ(with.summary["shapes"]["test"], 40);
  // Every shape under the floor was re-measured, and only those.
  EXPECT_EQ(t["under_floor"].size(), static_cast<std::size_t>(t["below_floor"].get<int>()));
  // The winner and the oracle re-measured interleaved against the baseline: on the
  // deterministic simulator, the same figures as the independent measurements.
  const auto& c = t["confirmed"];
  ASSERT_TRUE(c.is_object()) << t.dump();
  EXPECT_EQ(c["shapes"], 40);
  EXPECT_EQ(c["failed"], 0);
  EXPECT_NEAR(c["geomean"].get<double>(), t["geomean"].get<double>(), 1e-9);
  EXPECT_NEAR(c["oracle_geomean"].get<double>(), t["oracle_geomean"].get<double>(), 1e-9);
  EXPECT_EQ(c["below_floor"], t["below_floor"]);
  if (t["oracle_fraction"].is_number())
    EXPECT_NEAR(c["oracle_fraction"].get<double>(), t["oracle_fraction"].get<double>(), 1e-6);
}

// Every shape of each split is stored with the baseline's, the winner's and the oracle's
// decisions and times, and the stored speedups give the summary's figures back.
TEST(TestSplit, TheRunStoresEveryShapeOfEachSplit) {
  ScratchDir dir;
  const SearchRun run = run_search(dir, "shapes.db", 40);
  std::map<results::ShapeSplit, std::vector<double>> speedups;
  for (const auto& r : run.shapes) {
    ASSERT_TRUE(r.baseline && r.candidate && r.oracle) << describe(r.shape);
    ASSERT_TRUE(r.speedup && r.oracle_speedup) << describe(r.shape);
    EXPECT_NEAR(*r.speedup, *r.baseline_us / *r.candidate_us, 1e-12);
    EXPECT_GE(*r.oracle_speedup, 1.0) << "the oracle's space holds the baseline's decision: " << describe(r.shape);
    speedups[r.split].push_back(*r.speedup);
  }
  const auto& counts = run.summary["shapes"];
  EXPECT_EQ(speedups[results::ShapeSplit::train].size(), counts["train"].get<std::size_t>());
  EXPECT_EQ(speedups[results::ShapeSplit::validation].size(), counts["validation"].get<std::size_t>());
  EXPECT_EQ(speedups[results::ShapeSplit::test].size(), 40u);
  EXPECT_NEAR(geomean(speedups[results::ShapeSplit::validation]),
              run.summary["winner"]["validation"]["geomean"].get<double>(), 1e-9);
  EXPECT_NEAR(geomean(speedups[results::ShapeSplit::test]), run.summary["test"]["geomean"].get<double>(), 1e-9);
}

TEST(TestSplit, DrawnWithItsOwnSeedTheSameEveryTime) {
  ScratchDir dir;
  const SearchRun a = run_search(dir, "a.db", 20), b = run_search(dir, "b.db", 20);
  EXPECT_EQ(a.stored_test, b.stored_test);
  EXPECT_EQ(a.summary["test"], b.summary["test"]);
}

TEST(TestSplit, ATestWorkloadMustBeADomain) {
  ScratchDir dir;
  EXPECT_THROW(run_search(dir, "bad.db", 20, "paper-table1"), InputError);
}

TEST(TestSplit, AListWorkloadCanBeTestedOnAShippedDomain) {
  ScratchDir dir;
  const std::string wl = dir.write("mini.json", mini_workload_json());
  nlohmann::json j = mini_config_json(wl, 200);
  j["test"] = {{"workload", "models-decode"}, {"samples", 30}};
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  auto db = results::Database::open(dir.file("list.db"));
  EngineOptions opts;
  opts.evaluators = {&sim};
  opts.device_spec = "sim:h100-sxm";
  const nlohmann::json summary = SearchEngine::start(db, parse_search_config(j, "list"), opts)->run();
  ASSERT_TRUE(summary["test"].is_object());
  EXPECT_EQ(summary["test"]["workload"], "models-decode");
  EXPECT_EQ(summary["test"]["shapes"], 30);
}

TEST(TestSplit, WithVerifiedBoxesNoRuleFiresOutsideWhatTheWorkloadCovers) {
  ScratchDir dir;
  const std::string wl = dir.write("mini.json", mini_workload_json());
  nlohmann::json j = mini_config_json(wl, 400);
  j["decisions"]["verified_boxes"] = true;
  // Fresh shapes around the mini workload (B 1-4, Hkv 1-8, Lk 256-8192 at Hq 64): some
  // inside what it covers, many beyond it.
  const std::string around = dir.write("around.json", R"({"name": "around", "domain": {
    "models": [{"name": "a", "h_q": 64, "h_kv": 8, "head_dim": 128, "source": "test"},
               {"name": "b", "h_q": 64, "h_kv": 1, "head_dim": 128, "source": "test"}],
    "batch": {"from": 1, "to": 16}, "seqlen_k": {"from": 128, "to": 65536}}})");
  j["test"] = {{"workload", around}, {"samples", 120}};
  // On sim:h100-pcie this search's winner has rules; on sim:h100-sxm, since short splits
  // merge in their clusters, its winner is the baseline, which would leave nothing to check.
  SimulatorEvaluator sim(load_sim_profile("h100-pcie"));
  auto db = results::Database::open(dir.file("boxes.db"));
  EngineOptions opts;
  opts.evaluators = {&sim};
  opts.device_spec = "sim:h100-pcie";
  auto engine = SearchEngine::start(db, parse_search_config(j, "boxes"), opts);
  const nlohmann::json summary = engine->run();
  ASSERT_FALSE(summary["winner"].is_null());
  const auto& w = summary["winner"];
  const Program winner = program_from_json(w["rules_json"], *extract_base_source(w["source"].get<std::string>()), "winner");
  ASSERT_FALSE(winner.rules.empty());

  // The hull of the workload's shapes (the training shapes are among them).
  FeatureValues lo, hi;
  lo.fill(std::numeric_limits<std::int64_t>::max());
  hi.fill(std::numeric_limits<std::int64_t>::min());
  for (const Shape& s : evodispatch::load_workload(wl).shapes) {
    const FeatureValues v = feature_values(s, sim.device());
    for (int f = 0; f < kNumFeatures; ++f) lo[f] = std::min(lo[f], v[f]), hi[f] = std::max(hi[f], v[f]);
  }
  int outside = 0;
  const nlohmann::json test_shapes = results::Runs(db).get(engine->run_id())->config["test"]["shapes"];
  for (const auto& t : test_shapes) {
    const FeatureValues v = feature_values(shape_from_json(t), sim.device());
    bool beyond = false;
    for (int f = 0; f < kNumFeatures; ++f) beyond = beyond || v[f] < lo[f] || v[f] > hi[f];
    if (!beyond) continue;
    ++outside;
    EXPECT_FALSE(eval_rules(winner, v)) << "a rule fired beyond the workload: " << describe(shape_from_json(t));
  }
  EXPECT_GT(outside, 20) << "too few fresh shapes beyond the workload for the check to mean anything";
}
