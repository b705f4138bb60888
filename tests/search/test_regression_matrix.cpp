// regress --domain: the grid, then a fresh sample of a domain that holds none of its shapes.
#include <gtest/gtest.h>

#include <algorithm>

#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/search/regress.hpp>

using namespace evodispatch;

TEST(RegressionMatrix, TheGridThenFreshShapesOfTheDomain) {
  const Workload grid = load_workload("paper-safety-160");
  const Workload domain = load_workload("models-decode");
  const Workload m = regression_matrix(grid, &domain, 50, 3);
  ASSERT_EQ(m.shapes.size(), grid.shapes.size() + 50);
  EXPECT_TRUE(std::equal(grid.shapes.begin(), grid.shapes.end(), m.shapes.begin()));
  for (std::size_t i = grid.shapes.size(); i < m.shapes.size(); ++i) {
    const Shape& s = m.shapes[i];
    EXPECT_TRUE(std::find(grid.shapes.begin(), grid.shapes.end(), s) == grid.shapes.end()) << describe(s);
    EXPECT_TRUE(domain_contains(*domain.domain, s)) << describe(s);
  }
  EXPECT_NE(m.name.find("50 fresh shapes of models-decode (seed 3)"), std::string::npos) << m.name;
  EXPECT_EQ(regression_matrix(grid, &domain, 50, 3).shapes, m.shapes);  // the seed decides
  EXPECT_NE(regression_matrix(grid, &domain, 50, 4).shapes, m.shapes);
}

TEST(RegressionMatrix, WithoutADomainTheGridAloneAndAListIsNoDomain) {
  const Workload grid = load_workload("paper-table1");
  EXPECT_EQ(regression_matrix(grid, nullptr, 50, 3).shapes, grid.shapes);
  EXPECT_THROW(regression_matrix(grid, &grid, 50, 3), InputError);
}
