#include <gtest/gtest.h>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/results/measurements.hpp>
#include <evodispatch/search/bench.hpp>
#include <evodispatch/search/stored_evaluator.hpp>

using namespace evodispatch;

namespace {

// Counts what reaches the simulator, so tests see what was measured and what was reused.
class CountingEvaluator : public SimulatorEvaluator {
 public:
  CountingEvaluator() : SimulatorEvaluator(load_sim_profile("h100-sxm")) {}
  Measurement measure(const Shape& s, const Decision& d, const TimingOptions& t) override {
    ++calls;
    return SimulatorEvaluator::measure(s, d, t);
  }
  int calls = 0;
};

Shape shape(int batch, int seqlen_k) {
  Shape s;
  s.batch = batch;
  s.seqlen_k = seqlen_k;
  s.h_q = 64;
  s.h_kv = 1;
  return s;
}

}  // namespace

TEST(StoredEvaluator, MeasuresOnlyWhatTheStoreLacks) {
  auto db = results::Database::open(":memory:");
  CountingEvaluator sim;
  StoredEvaluator stored(db, sim, TimingOptions{});
  const std::vector<MeasureRequest> first = {{shape(1, 512), {1, true, 0}}, {shape(1, 512), {3, true, 0}}};
  const auto a = stored.measure(first);
  EXPECT_EQ(sim.calls, 2);
  EXPECT_EQ(results::Measurements(db).count(), 2);

  // pack_gqa unset resolves to true for qpk = 64, so this is the same key as first[0].
  const std::vector<MeasureRequest> second = {{shape(1, 512), {1, std::nullopt, 0}}, {shape(2, 512), {1, true, 0}}};
  const auto b = stored.measure(second);
  EXPECT_EQ(sim.calls, 3);
  EXPECT_EQ(b[0].median_us, a[0].median_us);
  EXPECT_EQ(stored.stats().reused, 1);
  EXPECT_EQ(stored.stats().measured, 3);
}

TEST(StoredEvaluator, IdenticalRequestsAreMeasuredOnce) {
  auto db = results::Database::open(":memory:");
  CountingEvaluator sim;
  StoredEvaluator stored(db, sim, TimingOptions{});
  const std::vector<MeasureRequest> reqs(5, MeasureRequest{shape(4, 1024), {2, true, 0}});
  const auto out = stored.measure(reqs);
  EXPECT_EQ(sim.calls, 1);
  EXPECT_EQ(out.size(), 5u);
  for (const auto& m : out) EXPECT_EQ(m.median_us, out[0].median_us);
}

TEST(StoredEvaluator, RemeasureMeasuresAgainAndReplaces) {
  auto db = results::Database::open(":memory:");
  CountingEvaluator sim;
  const std::vector<MeasureRequest> reqs = {{shape(1, 4096), {8, true, 0}}};
  StoredEvaluator(db, sim, TimingOptions{}).measure(reqs);
  StoredEvaluator again(db, sim, TimingOptions{}, /*remeasure=*/true);
  again.measure(reqs);
  EXPECT_EQ(sim.calls, 2);
  EXPECT_EQ(results::Measurements(db).count(), 1);
}

TEST(StoredEvaluator, HotAndColdAreDifferentMeasurements) {
  auto db = results::Database::open(":memory:");
  CountingEvaluator sim;
  const std::vector<MeasureRequest> reqs = {{shape(1, 512), {1, true, 0}}};
  TimingOptions hot;
  hot.l2 = L2Mode::hot;
  StoredEvaluator(db, sim, TimingOptions{}).measure(reqs);
  StoredEvaluator(db, sim, hot).measure(reqs);
  EXPECT_EQ(sim.calls, 2);
}

TEST(StoredEvaluator, StopCommitsWhatWasTakenThenThrows) {
  auto db = results::Database::open(":memory:");
  CountingEvaluator sim;
  StoredEvaluator stored(db, sim, TimingOptions{});
  std::vector<MeasureRequest> reqs;
  for (int b = 1; b <= 10; ++b) reqs.push_back({shape(b, 512), {1, true, 0}});
  EXPECT_THROW(stored.measure(reqs, {}, [&] { return sim.calls == 4; }), StoredEvaluator::Stopped);
  EXPECT_EQ(results::Measurements(db).count(), 4);
  // Resuming measures only the remaining six.
  StoredEvaluator resumed(db, sim, TimingOptions{});
  resumed.measure(reqs);
  EXPECT_EQ(sim.calls, 10);
  EXPECT_EQ(resumed.stats().reused, 4);
}

TEST(Bench, SpeedupIsBaselineOverCandidate) {
  auto db = results::Database::open(":memory:");
  CountingEvaluator sim;
  StoredEvaluator stored(db, sim, TimingOptions{});
  auto one = make_policy("fixed:1");
  auto eight = make_policy("fixed:8");
  Workload w;
  w.name = "t";
  w.shapes = {shape(1, 4096), shape(1, 8192)};
  const BenchReport r = run_bench(*eight, one.get(), w, stored);
  ASSERT_EQ(r.rows.size(), 2u);
  for (const auto& row : r.rows) {
    ASSERT_TRUE(row.speedup);
    EXPECT_DOUBLE_EQ(*row.speedup, row.baseline_m->median_us / row.candidate_m->median_us);
    EXPECT_GT(*row.speedup, 1.0);  // one CTA for 64 heads of one KV head: splitting must help
  }
  EXPECT_EQ(r.summary.changed, 2);
  EXPECT_EQ(r.summary.failed, 0);
  EXPECT_NEAR(*r.summary.geomean_speedup, std::sqrt(*r.rows[0].speedup * *r.rows[1].speedup), 1e-12);
}

TEST(Bench, AScriptErrorIsARowNotAnException) {
  auto db = results::Database::open(":memory:");
  CountingEvaluator sim;
  StoredEvaluator stored(db, sim, TimingOptions{});
  auto bad = make_script_policy("bad.lua", "function dispatch(s, hw)\n if s.batch > 1 then return {num_splits = 0} end\n return {num_splits = 1}\nend\n");
  Workload w;
  w.shapes = {shape(1, 512), shape(2, 512)};
  const BenchReport r = run_bench(*bad, nullptr, w, stored);
  EXPECT_TRUE(r.rows[0].error.empty());
  EXPECT_NE(r.rows[1].error.find("bad.lua"), std::string::npos);
  EXPECT_EQ(r.summary.failed, 1);
  EXPECT_EQ(sim.calls, 1);
}
