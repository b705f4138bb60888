// End-to-end tests of the evodispatch binary: exit codes, output formats, the database.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/results/database.hpp>
#include <evodispatch/results/measurements.hpp>

#include "../support/run_command.hpp"

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace evodispatch;

namespace {

using Result = test::CommandResult;
Result run(const std::string& args) { return test::run_evodispatch(args); }

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

fs::path temp_db(const std::string& name) { return test::scratch_path(name + ".db"); }

const fs::path kHostile = fs::path(EVO_SOURCE_DIR) / "tests/heuristics/hostile";

}  // namespace

TEST(Cli, BadUsageExitsTwo) {
  EXPECT_EQ(run("").code, 2);
  EXPECT_EQ(run("frobnicate").code, 2);
  EXPECT_EQ(run("decide").code, 2);  // --policy is required
  EXPECT_EQ(run("decide --policy fa3 --bogus").code, 2);
}

TEST(Cli, HelpWorksEverywhere) {
  for (const char* verb : {"", "env ", "check ", "decide ", "bench "}) {
    const Result r = run(std::string(verb) + "--help");
    EXPECT_EQ(r.code, 0) << verb;
    EXPECT_THAT(r.out, HasSubstr("Usage")) << verb;
  }
}

TEST(Cli, EnvReportsProfilesAndGpuStatus) {
  const Result r = run("env --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["sim_profiles"].size(), 4u);
  EXPECT_TRUE(j["gpus"].is_array());
  if (j["gpus"].empty()) EXPECT_FALSE(j["no_gpu_reason"].get<std::string>().empty());
}

TEST(Cli, DecideJsonCarriesShapeAndDecisionFields) {
  const Result r = run("decide --policy fa3 --workload paper-safety-160 --device sim:h100-sxm --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 160u);
  for (const auto& l : ls) {
    const auto j = nlohmann::json::parse(l);
    for (const char* f : {"batch", "seqlen_q", "seqlen_k", "h_q", "h_kv", "head_dim", "dtype", "page_size", "causal",
                          "num_splits", "pack_gqa", "sm_margin"})
      EXPECT_TRUE(j.contains(f)) << f << " missing in " << l;
    EXPECT_GE(j["num_splits"].get<int>(), 1);
  }
}

TEST(Cli, DecideUnknownPolicyIsAClearError) {
  const Result r = run("decide --policy nonsense --workload paper-table1 --device sim:h100-sxm");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("unknown policy 'nonsense'"));
}

TEST(Cli, DecideBadWorkloadNamesThePath) {
  const fs::path w = test::scratch_path("bad-workload.json");
  std::ofstream(w) << R"({"shapes": [{"seqlen_k": 512, "h_q": 64, "h_kv": 1}, {"seqlen_k": 1, "h_q": 8, "hkv": 1}]})";
  const Result r = run("decide --policy fa3 --device sim:h100-sxm --workload " + w.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr(w.string()));
  EXPECT_THAT(r.err, HasSubstr("$.shapes[1].hkv: unknown field"));
  fs::remove(w);
}

TEST(Cli, CheckAcceptsEveryBuiltinPolicy) {
  for (const char* p : {"fa3", "fa3-kvcache", "fa2", "seq-aware", "flashinfer", "fixed:7"}) {
    const Result r = run(std::string("check ") + p + " --device sim:h100-sxm");
    EXPECT_EQ(r.code, 0) << p << ": " << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("ok: ")) << p;
  }
}

// Every hostile script: one clear line on stdout or stderr naming the script, exit 1.
TEST(Cli, CheckRejectsEveryHostileScriptWithOneLine) {
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(kHostile)) {
    if (entry.path().extension() != ".lua") continue;
    ++seen;
    const Result r = run("check " + entry.path().string() + " --device sim:h100-sxm --workload paper-table1");
    EXPECT_EQ(r.code, 1) << entry.path() << "\n" << r.out << r.err;
    const std::string text = r.out + r.err;
    EXPECT_EQ(lines(text).size(), 1u) << entry.path() << "\n" << text;
    EXPECT_THAT(text, HasSubstr(entry.path().filename().string())) << text;
  }
  EXPECT_GT(seen, 20);
}

TEST(Cli, BenchStoresMeasurementsAndReusesThem) {
  const fs::path db = temp_db("bench");
  const std::string args = "bench --policy seq-aware --baseline fa3 --workload paper-table1 --device sim:h100-sxm --json --db " + db.string();
  const Result first = run(args);
  ASSERT_EQ(first.code, 0) << first.err;
  const auto j = nlohmann::json::parse(first.out);
  EXPECT_EQ(j["rows"].size(), 18u);
  EXPECT_TRUE(j["summary"].contains("geomean_speedup"));
  for (const auto& row : j["rows"]) {
    EXPECT_GT(row["median_us"].get<double>(), 0);
    EXPECT_NEAR(row["speedup"].get<double>(), row["baseline_median_us"].get<double>() / row["median_us"].get<double>(), 1e-9);
  }
  const Result second = run(args);
  ASSERT_EQ(second.code, 0) << second.err;
  const auto k = nlohmann::json::parse(second.out);
  EXPECT_EQ(k["rows"], j["rows"]);  // the same stored measurements
  EXPECT_GT(k["run_id"].get<int>(), j["run_id"].get<int>());
  const Result text = run("bench --policy seq-aware --baseline fa3 --workload paper-table1 --device sim:h100-sxm --db " + db.string());
  EXPECT_THAT(text.out, HasSubstr("measured 0, reused"));
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
}

TEST(Cli, BenchRefusesANewerDatabase) {
  const fs::path db = temp_db("newer");
  ASSERT_EQ(run("bench --policy fa3 --workload paper-table1 --device sim:a100 --db " + db.string()).code, 0);
  results::Database::open(db.string()).execute("PRAGMA user_version = 99");
  const Result r = run("bench --policy fa3 --workload paper-table1 --device sim:a100 --db " + db.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("schema version 99"));
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
}

TEST(Cli, SweepSplitsPrintsTheCurve) {
  const fs::path db = temp_db("sweep");
  const Result r = run("sweep splits --shape batch=1,seqlen_k=512,h_q=64,h_kv=1 --splits 1..8 --pack both --json "
                       "--device sim:h100-sxm --db " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["curves"][0]["points"].size(), 16u);
  EXPECT_TRUE(j["curves"][0].contains("best"));
  const Result bad = run("sweep splits --shape batch=1,seqlen_k=512,hq=64 --device sim:h100-sxm --db " + db.string());
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("--shape.hq: unknown field"));
  EXPECT_EQ(run("sweep splits --shape batch=1,seqlen_k=512,h_q=64 --splits 0..3 --device sim:h100-sxm --db " + db.string()).code, 1);
  EXPECT_EQ(run("sweep").code, 2);
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
}

TEST(Cli, SweepBatchReportsTheLargestExcess) {
  const fs::path db = temp_db("sweepb");
  const Result r = run("sweep batch --shape seqlen_k=8192,h_q=64,h_kv=8 --batch 1..24 --policy fa3 --json "
                       "--device sim:h100-sxm --db " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["points"].size(), 24u);
  EXPECT_TRUE(j.contains("worst_excess"));
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
}

TEST(Cli, BenchOracleBeatsOrMatchesTheBaseline) {
  const fs::path db = temp_db("oracle");
  const Result r = run("bench --policy oracle --oracle-splits 1..16 --baseline fa3 --workload paper-table1 --json "
                       "--device sim:h100-sxm --db " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& row : j["rows"]) EXPECT_GE(row["speedup"].get<double>(), 1.0 - 1e-12) << row.dump();
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
}

namespace {
// A database holding "GPU" rows: what a slower-launching H100 would have measured.
void fill_gpu_rows(const fs::path& db_path, const std::string& fingerprint) {
  auto db = results::Database::open(db_path.string());
  results::Measurements store(db);
  SimProfile gpu = load_sim_profile("h100-sxm");
  gpu.model.launch_first_us *= 2;
  gpu.model.dram_efficiency *= 0.85;
  std::vector<Measurement> rows;
  for (const Shape& s : load_workload("paper-safety-160").shapes)
    for (int splits : {1, 4, 16}) {
      Measurement m;
      m.key = MeasurementKey{fingerprint, "test-build@sm_90a", s, resolve(Decision{splits, true, 0}, s), L2Mode::cold};
      m.ok = true;
      m.median_us = m.p10_us = m.p90_us = predict_us(gpu, sim_plan(gpu, s, m.key.decision));
      m.samples = 30;
      rows.push_back(m);
    }
  store.put_many(rows);
}
}  // namespace

TEST(Cli, CalibrateFitsAProfileToTheGpuRows) {
  const fs::path db = temp_db("calibrate");
  const fs::path out = test::scratch_path("fitted.json");
  // No GPU rows yet: a clear error, nothing written.
  { auto d = results::Database::open(db.string()); }
  Result none = run("calibrate --db " + db.string() + " --out " + out.string());
  EXPECT_EQ(none.code, 1);
  EXPECT_THAT(none.err, HasSubstr("no successful GPU measurement"));
  EXPECT_FALSE(fs::exists(out));

  fill_gpu_rows(db, "Test GPU/132sm/cc90");
  Result r = run("calibrate --db " + db.string() + " --out " + out.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_LT(j.at("after").at("median_abs_rel_error").get<double>(), 0.02);
  EXPECT_GT(j.at("before").at("median_abs_rel_error").get<double>(), 0.05);
  EXPECT_TRUE(j.contains("held_out"));
  // The written profile is a profile: it loads by path, and says what it was fitted on.
  const SimProfile fitted = load_sim_profile(out.string());
  EXPECT_EQ(fitted.calibration.at("device_fingerprint"), "Test GPU/132sm/cc90");
  EXPECT_EQ(fitted.device, load_sim_profile("h100-sxm").device);

  // Two GPUs in one database: the user must choose.
  fill_gpu_rows(db, "Other GPU/114sm/cc90");
  Result two = run("calibrate --db " + db.string() + " --out " + out.string());
  EXPECT_EQ(two.code, 1);
  EXPECT_THAT(two.err, HasSubstr("--fingerprint"));
  Result chosen = run("calibrate --db " + db.string() + " --no-fit --fingerprint 'Other GPU/114sm/cc90'");
  EXPECT_EQ(chosen.code, 0) << chosen.err;
  EXPECT_THAT(chosen.out, HasSubstr("paper-safety-160"));
  fs::remove(out);
}
