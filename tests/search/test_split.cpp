// The train / validation split: deterministic in the seed and the shapes alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/search/split.hpp>

using namespace evodispatch;
using namespace evodispatch::search;

TEST(Split, DeterministicAndIndependentOfOrder) {
  const auto shapes = load_workload("paper-safety-160").shapes;
  const ShapeSplit a = split_shapes(shapes, 0.3, 1);
  const ShapeSplit b = split_shapes(shapes, 0.3, 1);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.validation, b.validation);
  EXPECT_EQ(a.validation.size(), 48u);
  EXPECT_EQ(a.train.size() + a.validation.size(), shapes.size());
  EXPECT_TRUE(std::is_sorted(a.train.begin(), a.train.end()));

  // The same shapes listed in another order land on the same sides.
  std::vector<int> perm(shapes.size());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int>(i);
  std::mt19937 g(5);
  std::shuffle(perm.begin(), perm.end(), g);
  std::vector<Shape> shuffled;
  for (int i : perm) shuffled.push_back(shapes[static_cast<std::size_t>(i)]);
  const ShapeSplit c = split_shapes(shuffled, 0.3, 1);
  std::vector<int> back;
  for (int j : c.validation) back.push_back(perm[static_cast<std::size_t>(j)]);
  std::sort(back.begin(), back.end());
  EXPECT_EQ(back, a.validation);
}

TEST(Split, TheSeedChangesTheSplit) {
  const auto shapes = load_workload("paper-safety-160").shapes;
  EXPECT_NE(split_shapes(shapes, 0.3, 1).validation, split_shapes(shapes, 0.3, 2).validation);
}

TEST(Split, EdgeCases) {
  const auto shapes = load_workload("paper-table1").shapes;
  EXPECT_TRUE(split_shapes(shapes, 0.0, 1).validation.empty());
  EXPECT_EQ(split_shapes(shapes, 0.01, 1).validation.size(), 1u);  // at least one when asked for any
  EXPECT_EQ(split_shapes(shapes, 0.9, 1).train.size(), shapes.size() - std::lround(0.9 * shapes.size()));
}
