// Candidate programs scored per second with every measurement already cached (issue 4
// target: >= 2000/s on two cores). items_per_second is programs scored per second.
//
// BM_SearchStep times whole engine steps: generation, the sandbox check of every program
// on every shape, scoring from the in-memory measurement cache, and the transaction that
// stores the programs, their evaluations and the run state. BM_CheckAndScore times the
// check and the scoring alone.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/results/database.hpp>
#include <evodispatch/search/checker.hpp>
#include <evodispatch/search/config.hpp>
#include <evodispatch/search/engine.hpp>
#include <evodispatch/search/fitness.hpp>
#include <evodispatch/search/measurer.hpp>
#include <evodispatch/search/operators.hpp>
#include <evodispatch/search/program.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/policy.hpp>

namespace evodispatch::search {
namespace {

std::string temp_db(const char* tag) {
  return (std::filesystem::temp_directory_path() / ("evo_bench_" + std::string(tag) + "_" + std::to_string(::getpid()) + ".db")).string();
}

void remove_db(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

SearchConfig bench_config() {
  SearchConfig c = load_search_config("quickstart");
  c.stop.max_evaluations = 0;
  c.stop.minutes = 0;
  c.stop.stagnation_steps = 1 << 30;
  c.cascade.threads = 2;  // the target's two cores
  return c;
}

void BM_SearchStep(benchmark::State& state) {
  const std::string path = temp_db("step");
  remove_db(path);
  {
    auto db = results::Database::open(path);
    SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
    EngineOptions opts;
    opts.evaluators = {&sim};
    opts.device_spec = "sim:h100-sxm";
    auto engine = SearchEngine::start(db, bench_config(), opts, 1);
    // Warm up: the oracle measured every decision of its space; a few steps add the rest.
    for (int i = 0; i < 20; ++i) engine->step();
    const auto before = engine->status();
    for (auto _ : state) engine->step();
    const auto after = engine->status();
    state.SetItemsProcessed(after.evaluations - before.evaluations);
    state.counters["measured_in_loop"] = static_cast<double>(after.measured - before.measured);
  }
  remove_db(path);
}
BENCHMARK(BM_SearchStep)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

// Checking and scoring a fixed batch of 256 mutated programs, without generation or storage.
void BM_CheckAndScore(benchmark::State& state) {
  const Workload w = load_workload("paper-safety-160");
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  auto db = results::Database::open(":memory:");
  Measurer measurer(db, {&sim}, TimingOptions{}, w.shapes, std::nullopt);
  Checker checker(w.shapes, sim.device(), SandboxLimits{}, 2);

  OperatorContext ctx;
  for (const auto& s : w.shapes) ctx.train.push_back(feature_values(s, sim.device()));
  ctx.prepare();
  Rng rng(3);
  std::vector<Program> programs;
  Program p = base_program("fa3", *builtin_policy_source("fa3"));
  while (programs.size() < 256) {
    const auto kind = rng.chance(0.5) ? OperatorKind::add_rule : OperatorKind::perturb;
    if (auto c = apply_operator(kind, p, {}, {}, ctx, rng)) {
      programs.push_back(*c);
      if (c->rules.size() < 6) p = *c;
    }
  }
  std::vector<const Program*> ptrs;
  for (const auto& q : programs) ptrs.push_back(&q);
  const auto base = checker.base("fa3", p.base_source);
  std::vector<LatencyRequest> all;
  for (std::size_t i = 0; i < w.shapes.size(); ++i) all.push_back({static_cast<int>(i), base.decisions[i]});
  const auto base_us = measurer.latencies(all);
  // Measure everything once so the loop below only reads the cache.
  for (const auto& r : checker.check(ptrs)) {
    std::vector<LatencyRequest> req;
    for (std::size_t i = 0; i < w.shapes.size(); ++i) req.push_back({static_cast<int>(i), r.decisions[i]});
    measurer.latencies(req);
  }
  std::int64_t scored = 0;
  for (auto _ : state) {
    for (const auto& r : checker.check(ptrs)) {
      std::vector<LatencyRequest> req;
      for (std::size_t i = 0; i < w.shapes.size(); ++i) req.push_back({static_cast<int>(i), r.decisions[i]});
      const auto us = measurer.latencies(req);
      benchmark::DoNotOptimize(score_latencies(base_us, us, {}, FitnessOptions{}));
      ++scored;
    }
  }
  state.SetItemsProcessed(scored);
}
BENCHMARK(BM_CheckAndScore)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace evodispatch::search

BENCHMARK_MAIN();
