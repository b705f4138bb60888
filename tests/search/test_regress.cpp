// The regression matrix as a library: a distilled heuristic, compiled, against a baseline
// on the simulator; what it decides, what it stores and the report it writes.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <filesystem>
#include <set>

#include <unistd.h>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/results/results.hpp>
#include <evodispatch/search/regress.hpp>

#include "../support/scratch.hpp"

using namespace evodispatch;

namespace {

Shape shape(int batch, int seqlen_k, int h_kv) {
  Shape s;
  s.batch = batch;
  s.seqlen_k = seqlen_k;
  s.h_q = 64;
  s.h_kv = h_kv;
  return s;
}

Workload tiny() {
  Workload w;
  w.name = "tiny";
  w.shapes = {shape(1, 8192, 1), shape(2, 512, 8), shape(4, 2048, 8)};
  return w;
}

// FlashAttention-3's own dispatch: no rule, the fa3 fallback.
distill::DecisionFunction fa3_twin() {
  distill::DecisionFunction fn;
  fn.method = "rules";
  fn.fallback = distill::Fallback::fa3;
  return fn;
}

// One unconditional rule: `splits` splits on every shape.
distill::DecisionFunction constant_splits(int splits) {
  distill::Rule always;
  always.num_splits.constant = splits;
  distill::DecisionFunction fn;
  fn.method = "rules";
  fn.rules = {always};
  return fn;
}

// What distill leaves in a directory: heuristic.json and the exports, and, when
// `with_library`, libheuristic.so (else regress compiles the function itself).
DistilledHeuristic distilled(const distill::DecisionFunction& fn, const test::ScratchDir& dir,
                             bool with_library = false) {
  distill::write_exports(fn, dir.path());
  if (with_library) distill::CompiledHeuristic::build(dir.path());
  return load_distilled(dir.file("heuristic.json"));
}

// A run to store rows under, the simulator, and the pair most tests hold each other to:
// FlashAttention-3's twin, distilled, against fa3 itself.
class Regress : public ::testing::Test {
 protected:
  Regress() {
    results::RunRecord record;
    record.kind = "regress";
    run_id = results::Runs(db).create(record);
  }
  std::vector<results::ComparisonRecord> stored() { return results::Comparisons(db).list_by_run(run_id); }
  // The fa3 twin as distill leaves it, compiled by regress (or by distill, `with_library`).
  DistilledHeuristic twin(bool with_library = false) { return distilled(fa3_twin(), dir, with_library); }
  RegressReport run(const DistilledHeuristic& h, const Workload& w, const RegressOptions& o = {}) {
    return run_regress(h, *fa3, w, o, sim, db, run_id);
  }

  results::Database db = results::Database::open(":memory:");
  SimulatorEvaluator sim{load_sim_profile("h100-sxm")};
  std::int64_t run_id = 0;
  test::ScratchDir dir;
  std::unique_ptr<Policy> fa3 = make_policy("fa3");
};

// The simulator with a scripted compare(): each call answers the next ratio
// (time(a) / time(b)); 0 is a failed comparison.
class ScriptedEvaluator : public SimulatorEvaluator {
 public:
  explicit ScriptedEvaluator(std::deque<double> ratios)
      : SimulatorEvaluator(load_sim_profile("h100-sxm")), ratios_(std::move(ratios)) {}
  Comparison compare(const Shape&, const Decision&, const Decision&, const TimingOptions&, int pairs) override {
    Comparison c;
    const double ratio = ratios_.front();
    ratios_.pop_front();
    c.ok = ratio > 0;
    if (!c.ok) c.error = "worker crashed";
    c.a.median_us = 10 * ratio;
    c.b.median_us = 10;
    c.ratio = c.ratio_lo = c.ratio_hi = ratio;
    c.pairs = pairs;
    return c;
  }

 private:
  std::deque<double> ratios_;
};

}  // namespace

TEST_F(Regress, TheTwinOfItsBaselinePasses) {
  std::size_t calls = 0;
  const auto progress = [&](const RegressRow&, std::size_t done, std::size_t total) {
    EXPECT_EQ(done, ++calls);
    EXPECT_EQ(total, 3u);
  };
  const RegressReport r = run_regress(twin(), *fa3, tiny(), RegressOptions{}, sim, db, run_id, progress);
  EXPECT_EQ(calls, 3u);
  ASSERT_EQ(r.rows.size(), 3u);
  for (const RegressRow& row : r.rows) {
    EXPECT_EQ(row.verdict, Verdict::ok) << verdict_text(row);
    ASSERT_TRUE(row.first && row.baseline);
    EXPECT_EQ(row.heuristic, *row.baseline);
    EXPECT_DOUBLE_EQ(row.first->speedup, 1.0);
    EXPECT_FALSE(row.second);
  }
  EXPECT_TRUE(r.summary.passed());
  EXPECT_DOUBLE_EQ(r.summary.geomean_speedup, 1.0);
  EXPECT_EQ(r.summary.below_floor_first, 0);
  EXPECT_EQ(stored().size(), 3u);
  EXPECT_EQ(r.heuristic, dir.file("heuristic.json"));
  EXPECT_EQ(r.baseline, "fa3");
  EXPECT_EQ(r.device, "sim:h100-sxm");
}

TEST_F(Regress, CompilingTheFunctionLeavesNothingInTheTempDirectory) {
  const auto scratch = std::filesystem::temp_directory_path() / ("evodispatch-regress-" + std::to_string(::getpid()));
  const RegressReport r = run(twin(), tiny());
  EXPECT_TRUE(r.summary.passed());
  EXPECT_FALSE(std::filesystem::exists(scratch)) << scratch;
  EXPECT_FALSE(std::filesystem::exists(dir.file("libheuristic.so"))) << "the heuristic's directory stays as distill left it";
}

TEST_F(Regress, AHighFloorConfirmsARegressionOnEveryShape) {
  // Ratios are heuristic / baseline time: every comparison 1.0 against a floor of 1.01.
  ScriptedEvaluator ev({1.0, 1.0, 1.0, 1.0, 1.0, 1.0});
  RegressOptions o;
  o.floor = 1.01;
  test::ScratchDir own;
  const RegressReport r = run_regress(distilled(constant_splits(64), own, true), *fa3, tiny(), o, ev, db, run_id);
  for (const RegressRow& row : r.rows) {
    EXPECT_EQ(row.verdict, Verdict::regression);
    ASSERT_TRUE(row.second);
    EXPECT_EQ(verdict_text(row), "REGRESSION (confirmed 1.000)");
  }
  EXPECT_FALSE(r.summary.passed());
  EXPECT_EQ(r.summary.below_floor_first, 3);
  EXPECT_EQ(r.summary.confirmed_regressions, 3);
  EXPECT_EQ(r.summary.failed, 0);
  // Each shape twice: the first comparison and its confirmation.
  const auto rows = stored();
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].attempt, 1);
  EXPECT_EQ(rows[1].attempt, 2);
  EXPECT_EQ(to_json(r)["passed"], false);
  EXPECT_EQ(to_json(r.rows[0])["second"]["speedup"], 1.0);
}

// The baseline's own decision cannot regress: the same kernels run. Under the floor it
// measured noise, and is neither confirmed nor counted.
TEST_F(Regress, TheBaselinesOwnDecisionUnderTheFloorIsNoise) {
  RegressOptions o;
  o.floor = 1.01;
  const RegressReport r = run(twin(/*with_library=*/true), tiny(), o);
  for (const RegressRow& row : r.rows) {
    EXPECT_EQ(row.heuristic, *row.baseline);
    EXPECT_EQ(row.verdict, Verdict::same);
    EXPECT_FALSE(row.second);
    EXPECT_EQ(verdict_text(row), "below floor, but the baseline's own decision (noise)");
  }
  EXPECT_TRUE(r.summary.passed());
  EXPECT_EQ(r.summary.below_floor_first, 0);
  EXPECT_EQ(r.summary.confirmed_regressions, 0);
  EXPECT_EQ(stored().size(), 3u);  // one comparison per shape
}

TEST_F(Regress, StoredRowsSayBaselineOverHeuristic) {
  auto one_split = make_policy("fixed:1");
  Workload w;
  w.name = "one";
  w.shapes = {shape(1, 8192, 1)};  // one CTA unsplit: four splits win
  const RegressReport r =
      run_regress(distilled(constant_splits(4), dir), *one_split, w, RegressOptions{}, sim, db, run_id);
  ASSERT_EQ(r.rows.size(), 1u);
  const auto rows = stored();
  ASSERT_EQ(rows.size(), 1u);
  const results::ComparisonRecord& c = rows[0];
  EXPECT_EQ(c.candidate.num_splits, 4);
  EXPECT_EQ(c.baseline.num_splits, 1);
  EXPECT_EQ(r.rows[0].first->baseline_side, results::BaselineSide::b);  // as measured, not as read back
  // The heuristic's time is the heuristic's, and the speedup is baseline / heuristic.
  const Shape& s = w.shapes[0];
  EXPECT_DOUBLE_EQ(c.candidate_us, sim.measure(s, c.candidate, {}).median_us);
  EXPECT_DOUBLE_EQ(c.baseline_us, sim.measure(s, c.baseline, {}).median_us);
  EXPECT_DOUBLE_EQ(c.speedup, c.baseline_us / c.candidate_us);
  EXPECT_GT(c.speedup, 1.0);
  EXPECT_LE(c.speedup_lo, c.speedup);
  EXPECT_GE(c.speedup_hi, c.speedup);
  EXPECT_EQ(r.rows[0].verdict, Verdict::ok);
  EXPECT_DOUBLE_EQ(r.summary.worst_speedup, c.speedup);
  EXPECT_FALSE(c.program_id);  // the provenance names no program
}

TEST_F(Regress, ABaselineThatCannotDecideFailsItsShape) {
  auto picky = make_script_policy("picky.lua",
                                  "function dispatch(s, hw)\n"
                                  "  if s.batch == 2 then error('no batch of two') end\n"
                                  "  return { num_splits = 1 }\nend\n");
  const RegressReport r = run_regress(twin(), *picky, tiny(), RegressOptions{}, sim, db, run_id);
  ASSERT_EQ(r.rows.size(), 3u);
  const RegressRow& bad = r.rows[1];
  EXPECT_EQ(bad.verdict, Verdict::failed);
  EXPECT_FALSE(bad.baseline);
  EXPECT_FALSE(bad.first);
  EXPECT_EQ(bad.error.rfind("baseline: ", 0), 0u) << bad.error;
  EXPECT_NE(bad.error.find("no batch of two"), std::string::npos) << bad.error;
  EXPECT_EQ(verdict_text(bad), "error: " + bad.error);
  const nlohmann::json j = to_json(bad);
  EXPECT_EQ(j["error"], bad.error);
  EXPECT_FALSE(j.contains("verdict"));
  EXPECT_EQ(r.summary.failed, 1);
  EXPECT_FALSE(r.summary.passed());
  EXPECT_EQ(stored().size(), 2u);  // nothing stored for the shape that was not compared
}

TEST_F(Regress, OnceUnderTheFloorIsNotARegressionAndAFailedComparisonFails) {
  // Ratios are heuristic / baseline time. Shape 1: 0.8x, then 1.0x on the second look.
  // Shape 2: the comparison fails. Shape 3: 1.25x.
  ScriptedEvaluator ev({1.25, 1.0, 0.0, 0.8});
  test::ScratchDir own;
  const RegressReport r = run_regress(distilled(constant_splits(64), own), *fa3, tiny(), RegressOptions{}, ev, db, run_id);
  EXPECT_EQ(r.rows[0].verdict, Verdict::below_once);
  EXPECT_EQ(verdict_text(r.rows[0]), "below floor once, not confirmed");
  EXPECT_DOUBLE_EQ(r.rows[0].first->speedup, 0.8);
  EXPECT_EQ(r.rows[1].verdict, Verdict::failed);
  EXPECT_EQ(verdict_text(r.rows[1]), "error: worker crashed");
  EXPECT_EQ(r.rows[2].verdict, Verdict::ok);
  EXPECT_EQ(r.summary.below_floor_first, 1);
  EXPECT_EQ(r.summary.confirmed_regressions, 0);
  EXPECT_EQ(r.summary.failed, 1);
  // Over the first comparisons that succeeded: sqrt(0.8 * 1.25) = 1.
  EXPECT_DOUBLE_EQ(r.summary.geomean_speedup, 1.0);
  EXPECT_DOUBLE_EQ(r.summary.worst_speedup, 0.8);
  EXPECT_EQ(stored().size(), 4u);
}

TEST(RegressSummary, OfNothingIsZero) {
  RegressReport r;
  summarise(r);
  EXPECT_EQ(r.summary.shapes, 0);
  EXPECT_EQ(r.summary.geomean_speedup, 0.0);
  EXPECT_EQ(r.summary.worst_speedup, 0.0);
  EXPECT_TRUE(r.summary.passed());
}

TEST_F(Regress, RowsReferenceTheProgramTheProvenanceNamesWhenStored) {
  results::ProgramRecord p;
  p.run_id = run_id;
  p.hash = "p";
  p.source = "function dispatch(s, hw) return { num_splits = 1 } end\n";
  const std::int64_t program = results::Programs(db).insert(p).id;
  Workload w;
  w.shapes = {shape(1, 512, 1)};
  for (const std::int64_t named : {program, program + 100}) {
    distill::DecisionFunction fn = fa3_twin();
    fn.provenance = {{"program", named}};
    test::ScratchDir own;
    run(distilled(fn, own), w);
  }
  const auto rows = stored();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].program_id, program);
  EXPECT_FALSE(rows[1].program_id);  // not a program of this database
}

TEST_F(Regress, StopsBeforeAShapeWithWhatItTookStored) {
  std::size_t done = 0;
  const auto progress = [&](const RegressRow&, std::size_t d, std::size_t) { done = d; };
  const auto stop = [&] { return done == 1; };
  EXPECT_THROW(run_regress(twin(), *fa3, tiny(), RegressOptions{}, sim, db, run_id, progress, stop),
               StoredEvaluator::Stopped);
  EXPECT_EQ(stored().size(), 1u);
}

TEST_F(Regress, RefusesOptionsItCannotRun) {
  RegressOptions o;
  EXPECT_EQ(invalid_regress_options(o), "");
  o.floor = 0;
  EXPECT_EQ(invalid_regress_options(o), "floor: must be > 0");
  o.floor = std::nan("");
  EXPECT_EQ(invalid_regress_options(o), "floor: must be > 0");
  o.floor = 0.99;
  o.pairs = 0;
  EXPECT_EQ(invalid_regress_options(o), "pairs: must be >= 1");
  EXPECT_THROW(run(twin(), tiny(), o), InputError);
  EXPECT_TRUE(stored().empty());
}

TEST(LoadDistilled, NamesTheFile) {
  test::ScratchDir dir;
  try {
    load_distilled(dir.file("missing.json"));
    FAIL() << "loaded a missing file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.json: cannot read"), std::string::npos) << e.what();
  }
  const std::string junk = dir.write("heuristic.json", "{not json");
  try {
    load_distilled(junk);
    FAIL() << "loaded junk";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(junk + ": not JSON"), std::string::npos) << e.what();
  }
}

TEST_F(Regress, TheReportHasTheKeysOfRegressJson) {
  RegressOptions o;
  o.floor = 1.01;
  Workload w;
  w.name = "one";
  w.shapes = {shape(1, 512, 1)};
  ScriptedEvaluator ev({1.0, 1.0});  // under the floor of 1.01 twice: a confirmed row
  test::ScratchDir own;
  const nlohmann::json j = to_json(run_regress(distilled(constant_splits(64), own), *fa3, w, o, ev, db, run_id));
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"run_id", "device", "device_fingerprint", "kernel_build", "heuristic",
                                         "baseline", "workload", "floor", "shapes", "geomean_speedup",
                                         "worst_speedup", "below_floor_first", "confirmed_regressions", "failed",
                                         "passed", "provenance", "rows"}));
  std::set<std::string> row_keys;
  for (const auto& [k, v] : j["rows"][0].items()) row_keys.insert(k);
  EXPECT_EQ(row_keys, (std::set<std::string>{"shape", "heuristic", "baseline", "heuristic_us", "baseline_us",
                                             "speedup", "speedup_lo", "speedup_hi", "pairs", "verdict", "second"}));
  EXPECT_EQ(j["shapes"], 1);
  EXPECT_EQ(j["workload"], "one");
  EXPECT_EQ(j["rows"][0]["verdict"], "REGRESSION (confirmed 1.000)");
}
