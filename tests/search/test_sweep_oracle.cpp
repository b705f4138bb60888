#include <gtest/gtest.h>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/search/oracle.hpp>
#include <evodispatch/search/sweep.hpp>

using namespace evodispatch;

namespace {
Shape shape(int batch, int seqlen_k, int h_q = 64, int h_kv = 1) {
  Shape s;
  s.batch = batch;
  s.seqlen_k = seqlen_k;
  s.h_q = h_q;
  s.h_kv = h_kv;
  return s;
}
}  // namespace

TEST(DecisionSpace, PackIsOneChoiceWithoutGrouping) {
  DecisionSpace space;
  space.splits = {1, 2, 3};
  EXPECT_EQ(space.decisions(shape(1, 512, 64, 1)).size(), 6u);
  EXPECT_EQ(space.decisions(shape(1, 512, 8, 8)).size(), 3u);  // MHA: pack is moot
  space.sm_margins = {0, 8};
  EXPECT_EQ(space.decisions(shape(1, 512, 64, 8)).size(), 12u);
}

TEST(Oracle, PicksTheFastestDecisionAndNeverLosesToTheBaseline) {
  auto db = results::Database::open(":memory:");
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  StoredEvaluator stored(db, sim, TimingOptions{});
  auto fa3 = make_policy("fa3");
  Workload w;
  w.shapes = {shape(1, 512), shape(4, 4096, 64, 8), shape(8, 128, 64, 32)};
  DecisionSpace space;
  const BenchReport r = run_oracle_bench(space, fa3.get(), w, stored);
  ASSERT_EQ(r.rows.size(), 3u);
  for (const auto& row : r.rows) {
    ASSERT_TRUE(row.error.empty()) << row.error;
    // Every decision of the space is at least as slow as the chosen one.
    for (const auto& d : space.decisions(row.shape)) {
      const auto m = sim.measure(row.shape, d, TimingOptions{});
      EXPECT_GE(m.median_us, row.candidate_m->median_us) << describe(d);
    }
    EXPECT_GE(*row.speedup, 1.0 - 1e-12);  // fa3's decision lies in the space here
  }
  EXPECT_GT(*r.summary.geomean_speedup, 1.0);
}

TEST(Sweep, SplitCurveMarksTheMinimum) {
  auto db = results::Database::open(":memory:");
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  StoredEvaluator stored(db, sim, TimingOptions{});
  // One request over 8 KV heads: splitting fills the SMs until the combine dominates.
  const SplitCurve c = sweep_splits(stored, shape(1, 8192, 64, 8), {1, 2, 3, 4, 8, 16, 64}, {true}, 0);
  ASSERT_EQ(c.points.size(), 7u);
  ASSERT_GE(c.best, 0);
  for (const auto& p : c.points) EXPECT_GE(p.measurement.median_us, c.points[c.best].measurement.median_us);
  // The U: the best is neither end.
  EXPECT_GT(c.best, 0);
  EXPECT_LT(c.best, 6);
}

TEST(Sweep, BatchCurveFindsTheWaveCliff) {
  auto db = results::Database::open(":memory:");
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  StoredEvaluator stored(db, sim, TimingOptions{});
  auto one_split = make_policy("fixed:1");
  std::vector<Shape> shapes;
  for (int b = 40; b >= 1; --b) {  // any order
    shapes.push_back(shape(b, 8192, 64, 8));
    shapes.back().dtype = Dtype::fp8;  // paged fp8 KV: no three-CTA variant to absorb the cliff
    shapes.back().page_size = 256;
  }
  const BatchCurve c = sweep_batch(stored, *one_split, shapes);
  ASSERT_EQ(c.points.size(), 40u);
  EXPECT_EQ(c.points.front().shape.batch, 1);
  EXPECT_FALSE(c.points.front().step);
  ASSERT_GE(c.worst, 0);
  // 8 packed CTAs per request, two per SM on 132 SMs (264 slots): the 34th request starts
  // a second wave (the H100 showed the same cliff under fa3: +18% from B=33 to 34).
  EXPECT_EQ(c.points[c.worst].shape.batch, 34);
  EXPECT_GT(*c.points[c.worst].excess, 0.05);
  EXPECT_DOUBLE_EQ(*c.points[5].step, c.points[5].measurement->median_us / c.points[4].measurement->median_us);

  // 16-bit KV runs 265..396 CTAs three to an SM, one wave, contiguous or paged: no step past
  // 1% up to B=40.
  for (int page_size : {0, 256}) {
    for (auto& s : shapes) s.dtype = Dtype::bf16, s.page_size = page_size;
    const BatchCurve dense = sweep_batch(stored, *one_split, shapes);
    ASSERT_GE(dense.worst, 0);
    EXPECT_LT(*dense.points[dense.worst].excess, 0.01) << describe(dense.points[dense.worst].shape);
  }
}

TEST(Oracle, HoldsTheBaselinesDecisionWhenItsSpaceMissesIt) {
  auto db = results::Database::open(":memory:");
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  StoredEvaluator stored(db, sim, TimingOptions{});
  auto eight = make_policy("fixed:8");
  Workload w;
  w.shapes = {shape(1, 8192)};  // one CTA for 64 heads of one KV head: 8 splits beat 1 by far
  DecisionSpace space;
  space.splits = {1};  // a space without the baseline's decision
  const BenchReport r = run_oracle_bench(space, eight.get(), w, stored);
  ASSERT_EQ(r.rows.size(), 1u);
  ASSERT_TRUE(r.rows[0].speedup);
  EXPECT_EQ(r.rows[0].candidate.decision.num_splits, 8);
  EXPECT_DOUBLE_EQ(*r.rows[0].speedup, 1.0);
}
