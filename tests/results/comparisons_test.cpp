// A comparison row's direction: set_measured turns an evaluator comparison into a
// speedup from either side, and the row keeps which side ran the baseline.
#include "support.hpp"

namespace evodispatch::results {
namespace {

// An evaluator comparison with a: 100 us, b: 80 us, ratio time(a) / time(b) in [lo, hi].
Comparison measured(double ratio, double lo, double hi) {
  Comparison c;
  c.ok = true;
  c.a.ok = c.b.ok = true;
  c.a.median_us = 100;
  c.b.median_us = 80;
  c.ratio = ratio;
  c.ratio_lo = lo;
  c.ratio_hi = hi;
  c.pairs = 30;
  return c;
}

ComparisonRecord row(std::int64_t run, int batch) {
  ComparisonRecord r;
  r.run_id = run;
  r.shape = test::sample_shape(batch, 8192);
  r.device = "h100-sxm-80gb/132sm/driver-580";
  r.kernel_build = "build-abc123";
  r.candidate = Decision{3, true, 0};
  r.baseline = Decision{1, true, 0};
  return r;
}

TEST(SetMeasured, BaselineOnSideAReadsTheRatioAsTheSpeedup) {
  ComparisonRecord r;
  set_measured(r, measured(1.25, 1.2, 1.3), BaselineSide::a);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.baseline_side, BaselineSide::a);
  EXPECT_EQ(r.baseline_us, 100);
  EXPECT_EQ(r.candidate_us, 80);
  EXPECT_EQ(r.speedup, 1.25);
  EXPECT_EQ(r.speedup_lo, 1.2);
  EXPECT_EQ(r.speedup_hi, 1.3);
  EXPECT_EQ(r.pairs, 30);
}

TEST(SetMeasured, BaselineOnSideBInvertsTheRatioAndSwapsTheIntervalEnds) {
  ComparisonRecord r;
  set_measured(r, measured(0.8, 0.5, 1.0), BaselineSide::b);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.baseline_side, BaselineSide::b);
  EXPECT_EQ(r.baseline_us, 80);
  EXPECT_EQ(r.candidate_us, 100);
  EXPECT_DOUBLE_EQ(r.speedup, 1.25);
  EXPECT_DOUBLE_EQ(r.speedup_lo, 1.0);  // 1 / ratio_hi
  EXPECT_DOUBLE_EQ(r.speedup_hi, 2.0);  // 1 / ratio_lo
  EXPECT_LE(r.speedup_lo, r.speedup);
  EXPECT_LE(r.speedup, r.speedup_hi);
}

TEST(SetMeasured, ARatioOfZeroIsAFailedRowWhicheverTheSide) {
  for (const BaselineSide side : {BaselineSide::a, BaselineSide::b}) {
    ComparisonRecord r;
    r.speedup = 7;  // a stale figure must not survive
    set_measured(r, measured(0, 0, 0), side);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "a ratio of 0");
    EXPECT_EQ(r.speedup, 0);
    EXPECT_EQ(r.speedup_lo, 0);
    EXPECT_EQ(r.speedup_hi, 0);
    EXPECT_EQ(r.baseline_side, side);
  }
}

TEST(SetMeasured, AFailedComparisonKeepsItsError) {
  Comparison c = measured(1.1, 1.0, 1.2);
  c.ok = false;
  c.error = "b: cudaErrorIllegalAddress";
  ComparisonRecord r;
  set_measured(r, c, BaselineSide::b);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "b: cudaErrorIllegalAddress");
  EXPECT_EQ(r.speedup, 0);
}

TEST(Comparisons, TheBaselineSideRoundTrips) {
  Database db = Database::open(":memory:");
  const std::int64_t run = Runs(db).create(test::run("regress"));
  Comparisons comparisons(db);
  ComparisonRecord on_a = row(run, 1);
  set_measured(on_a, measured(1.25, 1.2, 1.3), BaselineSide::a);
  ComparisonRecord on_b = row(run, 2);
  set_measured(on_b, measured(0.8, 0.5, 1.0), BaselineSide::b);
  comparisons.insert(on_a);
  comparisons.insert(on_b);

  const auto rows = comparisons.list_by_run(run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].baseline_side, BaselineSide::a);
  EXPECT_EQ(rows[1].baseline_side, BaselineSide::b);
  EXPECT_EQ(rows[1].speedup, on_b.speedup);
  EXPECT_EQ(rows[1].speedup_lo, on_b.speedup_lo);
  EXPECT_EQ(rows[1].baseline_us, 80);
}

TEST(Comparisons, TheSchemaRefusesAnUnknownSide) {
  Database db = Database::open(":memory:");
  const std::int64_t run = Runs(db).create(test::run("regress"));
  Comparisons(db).insert(row(run, 1));
  EXPECT_THROW(db.execute("UPDATE comparisons SET baseline_side = 'c'"), DbError);
  EXPECT_THROW(db.execute("UPDATE comparisons SET baseline_side = NULL"), DbError);
}

}  // namespace
}  // namespace evodispatch::results
