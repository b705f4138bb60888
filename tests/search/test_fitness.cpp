// Fitness arithmetic: geomean speedup, the floor, the oracle fraction.
#include <gtest/gtest.h>

#include <cmath>

#include <evodispatch/search/fitness.hpp>

using namespace evodispatch::search;

TEST(Fitness, GeomeanWorstAndOracleFraction) {
  // Speedups 2, 1, 0.5 ... no: baseline / program = 2, 1, 1.
  const std::vector<double> base = {10, 10, 10};
  const std::vector<double> prog = {5, 10, 10};
  const std::vector<double> oracle = {5, 5, 10};  // the oracle gains 2x on two shapes
  const Fitness f = score_latencies(base, prog, oracle, {0.99, 10});
  ASSERT_TRUE(f.ok);
  EXPECT_TRUE(f.feasible);
  EXPECT_NEAR(f.geomean, std::cbrt(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(f.worst, 1.0);
  EXPECT_EQ(f.below_floor, 0);
  ASSERT_TRUE(f.oracle_fraction);
  EXPECT_NEAR(*f.oracle_fraction, 0.5, 1e-12);  // log 2 of the oracle's 2 log 2
  EXPECT_NEAR(f.score, std::log(2.0) / 3, 1e-12);
  EXPECT_EQ(f.speedups, (std::vector<double>{2, 1, 1}));
}

TEST(Fitness, AShapeUnderTheFloorMakesItInfeasibleAndPenalised) {
  const std::vector<double> base = {10, 10};
  const std::vector<double> prog = {5, 10.5};  // 2x and 0.952x
  const Fitness f = score_latencies(base, prog, {}, {0.99, 10});
  ASSERT_TRUE(f.ok);
  EXPECT_FALSE(f.feasible);
  EXPECT_EQ(f.below_floor, 1);
  EXPECT_EQ(f.worst_index, 1);
  const double shortfall = std::log(0.99) - std::log(10 / 10.5);
  EXPECT_NEAR(f.score, (std::log(2.0) + std::log(10 / 10.5)) / 2 - 10 * shortfall, 1e-12);
  EXPECT_EQ(f.error, "1 shape(s) under the floor of 0.990x (worst 0.952x)");
  EXPECT_FALSE(f.oracle_fraction) << "no oracle, no fraction";

  // Exactly at the floor is allowed.
  const Fitness at = score_latencies(std::vector<double>{99}, std::vector<double>{100}, {}, {0.99, 10});
  EXPECT_TRUE(at.feasible);
}

TEST(Fitness, MissingLatenciesFailTheProgram) {
  const std::vector<double> base = {10, 10};
  const std::vector<double> prog = {5, std::nan("")};
  const Fitness f = score_latencies(base, prog, {}, {});
  EXPECT_FALSE(f.ok);
  EXPECT_FALSE(f.feasible);
  EXPECT_EQ(f.score, kFailedScore);
  EXPECT_EQ(f.error, "1 of 2 shapes have no measurement");
}

TEST(Fitness, AnOracleThatGainsNothingHasNoFraction) {
  const std::vector<double> base = {10, 10};
  const Fitness f = score_latencies(base, base, base, {});
  EXPECT_TRUE(f.feasible);
  EXPECT_DOUBLE_EQ(f.geomean, 1.0);
  EXPECT_FALSE(f.oracle_fraction);
}
