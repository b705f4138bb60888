// The external mutator command: its failures are results, never exceptions, and in a
// search they become rows while the search goes on.
#include <gtest/gtest.h>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/results/results.hpp>
#include <evodispatch/search/engine.hpp>
#include <evodispatch/search/external_mutator.hpp>

#include "search_fixtures.hpp"

using namespace evodispatch;
using namespace evodispatch::search;
using namespace evodispatch::search::testing;
using namespace std::chrono_literals;

namespace {
ExternalResult run_mode(const std::string& mode, std::chrono::milliseconds timeout = 5000ms) {
  return run_external_mutator({"sh", mutator_script(), mode}, R"({"parent": {}})" "\n", timeout, 1 << 20);
}
}  // namespace

TEST(ExternalMutator, ASuccessfulCommandGivesItsOutput) {
  const auto r = run_mode("ok");
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_NE(r.output.find("function dispatch(s, hw)"), std::string::npos);
}

TEST(ExternalMutator, GarbageIsStillAnAnswerTheSandboxJudges) {
  const auto r = run_mode("garbage");
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.output, "this is not ((( lua\n");
}

TEST(ExternalMutator, ATimeoutKillsTheCommandAndEverythingItStarted) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_mode("slow", 300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.timed_out);
  EXPECT_NE(r.error.find("timed out after"), std::string::npos) << r.error;
  EXPECT_LT(took, 5s) << "the sleeping child must not hold the pipes open";
}

TEST(ExternalMutator, ANonZeroExitIsReportedWithItsStderr) {
  const auto r = run_mode("fail");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_EQ(r.error, "exited with status 3: mutator: out of ideas");
}

TEST(ExternalMutator, NoOutputAndNoProgramAreFailuresToo) {
  EXPECT_EQ(run_mode("silent").error, "wrote nothing on stdout");
  const auto r = run_external_mutator({"/no/such/mutator"}, "{}", 2000ms, 1024);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_status, 127);
  EXPECT_NE(r.error.find("cannot run /no/such/mutator"), std::string::npos) << r.error;
  const auto big = run_external_mutator({"sh", "-c", "yes lua"}, "", 5000ms, 1000);
  EXPECT_FALSE(big.ok);
  EXPECT_EQ(big.error, "wrote more than 1000 bytes (killed)");
}

// In a search, every external attempt is a program row (or a failed one) with its
// evaluation, and the search carries on to its end.
TEST(ExternalMutator, InASearchFailuresAreRows) {
  ScratchDir dir;
  const std::string workload = dir.write("mini.json", mini_workload_json());
  for (const std::string mode : {"ok", "garbage", "fail"}) {
    SCOPED_TRACE(mode);
    nlohmann::json cfg = mini_config_json(workload, 60);
    cfg["operators"] = {{"external", 1.0}, {"perturb", 0.0}, {"add_rule", 0.0}, {"drop_rule", 0.0},
                        {"swap_rules", 0.0}, {"merge_rules", 0.0}, {"to_expression", 0.0}, {"crossover", 0.0},
                        {"base_literal", 0.0}};
    cfg["external"] = {{"command", {"sh", mutator_script(), mode}}, {"timeout_s", 10}};
    cfg["islands"] = {{"count", 1}, {"batch", 3}};
    cfg["stop"] = {{"max_evaluations", 4}, {"stagnation_steps", 3}};
    auto db = results::Database::open(":memory:");
    SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
    EngineOptions opts;
    opts.evaluators = {&sim};
    opts.device_spec = "sim:h100-sxm";
    auto engine = SearchEngine::start(db, parse_search_config(cfg, "test"), opts, 1);
    const auto summary = engine->run();
    const auto programs = results::Programs(db).list_by_run(engine->run_id());
    const auto evals = results::Evaluations(db).list_by_run(engine->run_id(), results::Split::train);
    int external = 0, sandbox_failures = 0;
    for (const auto& p : programs) external += p.origin == "external" ? 1 : 0;
    for (const auto& e : evals) sandbox_failures += e.stage == "sandbox" ? 1 : 0;
    if (mode != std::string("fail")) {
      // The same answer every time: one program, then duplicates that are not scored again.
      EXPECT_EQ(external, 1);
      EXPECT_EQ(sandbox_failures, mode == std::string("ok") ? 0 : 1);
      EXPECT_GT(summary["duplicates"].get<int>(), 0);
    } else {
      EXPECT_GE(external, 3);  // each failed attempt is a row of its own
      EXPECT_EQ(sandbox_failures, external);
      for (const auto& e : evals)
        if (e.stage == "sandbox") {
          EXPECT_FALSE(e.ok);
          if (mode == std::string("fail")) {
            EXPECT_EQ(e.error, "external mutator: exited with status 3: mutator: out of ideas");
          }
        }
    }
    EXPECT_EQ(summary["failures"].get<int>(), sandbox_failures);
  }
}
