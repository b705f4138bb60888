// `evodispatch results` on a large database (issue 17 targets): `results runs` and
// `results run N` answer in under 200 ms on a 1 GB database; the report of a 40 000-program
// search is written in under 3 s and is under 5 MB. Each benchmark runs the verb as a
// user does (a process of its own, output discarded); real time per iteration.
//
// The database is built once and kept: a 40 000-evaluation search on the simulator (run 1),
// then synthetic measurements on a padding device until the file holds EVO_BENCH_DB_GB GB
// (default 1). EVO_BENCH_RESULTS_DB names the file (default: results-bench.db in the
// temp directory); delete it to build it again.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <evodispatch/results/measurements.hpp>
#include <evodispatch/results/runs.hpp>

namespace fs = std::filesystem;

namespace evodispatch {
namespace {

std::string db_path() {
  const char* env = std::getenv("EVO_BENCH_RESULTS_DB");
  return env ? env : (fs::temp_directory_path() / "results-bench.db").string();
}

double target_bytes() {
  const char* env = std::getenv("EVO_BENCH_DB_GB");
  return (env ? std::atof(env) : 1.0) * 1e9;
}

void shell(const std::string& cmd) {
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
}

// Synthetic rows on a device of their own, so they never meet the search's: distinct
// shapes (batch x seqlen_k x h_kv) x 20 split counts, in transactions of 100 000 rows.
void pad(const std::string& path) {
  auto db = results::Database::open(path);
  results::Measurements store(db);
  std::vector<Measurement> chunk;
  for (int batch = 1; fs::file_size(path) < target_bytes(); ++batch)
    for (int seqlen_k = 64; seqlen_k <= 131072; seqlen_k = seqlen_k * 9 / 8 + 1)
      for (int h_kv : {1, 2, 4, 8})
        for (int splits = 1; splits <= 20; ++splits) {
          Measurement m;
          m.key.device = "bench-padding";
          m.key.kernel_build = "bench-padding-build";
          m.key.shape = Shape{batch, 1, seqlen_k, 64, h_kv, 128};
          m.key.decision = Decision{splits, true, 0};
          m.ok = true;
          m.median_us = m.p10_us = m.p90_us = 5.0 + splits;
          m.samples = 30;
          chunk.push_back(m);
          if (chunk.size() == 100'000) {
            store.put_many(chunk);
            chunk.clear();
          }
        }
  store.put_many(chunk);
}

const std::string& database() {
  static const std::string path = [] {
    const std::string p = db_path();
    if (!fs::exists(p)) {
      const std::string config = p + ".search.json";
      std::ofstream(config) << R"({"name":"bench-40k","workload":"paper-safety-160","baseline":"fa3",
        "islands":{"count":4,"batch":16,"migration_interval":5},"stop":{"max_evaluations":40000,"minutes":60}})";
      shell(std::string(EVO_BINARY) + " search --config " + config + " --device sim:h100-sxm --db " + p + " > /dev/null");
      pad(p);
    }
    return p;
  }();
  return path;
}

void time_verb(benchmark::State& state, const std::string& args) {
  const std::string cmd = std::string(EVO_BINARY) + " results " + args + " --db " + database() + " > /dev/null";
  for (auto _ : state) shell(cmd);
  state.counters["db_GB"] = static_cast<double>(fs::file_size(database())) / 1e9;
}

void BM_ResultsRuns(benchmark::State& state) { time_verb(state, "runs"); }
void BM_ResultsRun(benchmark::State& state) { time_verb(state, "run 1"); }
void BM_ResultsReport(benchmark::State& state) {
  const std::string out = database() + ".report.html";
  time_verb(state, "report --run 1 --out " + out);
  auto db = results::Database::open(database());
  state.counters["programs"] = results::Runs(db).get(1)->summary.value("evaluations", 0.0);
  state.counters["report_MB"] = static_cast<double>(fs::file_size(out)) / 1e6;
}

BENCHMARK(BM_ResultsRuns)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(10);
BENCHMARK(BM_ResultsRun)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(10);
BENCHMARK(BM_ResultsReport)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

}  // namespace
}  // namespace evodispatch

BENCHMARK_MAIN();
