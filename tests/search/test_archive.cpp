// MAP-Elites cells, insertion, the island ring's migration, and the state's JSON.
#include <gtest/gtest.h>

#include <map>

#include <evodispatch/search/archive.hpp>

using namespace evodispatch;
using namespace evodispatch::search;

namespace {
struct Scores {
  std::map<std::int64_t, double> s;
  ScoreOf fn() const {
    return [this](std::int64_t id) { return s.at(id); };
  }
};
}  // namespace

TEST(Archive, CellsFromRuleCountAndRegion) {
  const CellSpace cs({1, 2, 4, 8}, {{Feature::ctas, {8, 32}}, {Feature::nblk, {5, 16}}});
  EXPECT_EQ(cs.regions(), 9);
  EXPECT_EQ(cs.cells(), 5 * 10);
  EXPECT_EQ(cs.rule_bucket(0), 0);
  EXPECT_EQ(cs.rule_bucket(1), 1);
  EXPECT_EQ(cs.rule_bucket(3), 2);
  EXPECT_EQ(cs.rule_bucket(7), 3);
  EXPECT_EQ(cs.rule_bucket(30), 4);

  FeatureValues v{};
  v[static_cast<int>(Feature::ctas)] = 8;   // bucket 1 of ctas
  v[static_cast<int>(Feature::nblk)] = 4;   // bucket 0 of nblk
  EXPECT_EQ(cs.region_of_shape(v), 1 * 3 + 0);
  v[static_cast<int>(Feature::nblk)] = 64;
  EXPECT_EQ(cs.region_of_shape(v), 1 * 3 + 2);

  // The region a program gains most in; "none" (= regions()) when it gains nowhere.
  const std::vector<int> regions = {0, 0, 4, 4, 4};
  EXPECT_EQ(cs.region_of_program(std::vector<double>{1.5, 1.0, 1.1, 1.1, 1.1}, regions), 0);
  EXPECT_EQ(cs.region_of_program(std::vector<double>{1.1, 1.0, 1.1, 1.1, 1.1}, regions), 4);
  EXPECT_EQ(cs.region_of_program(std::vector<double>{1.0, 0.9, 1.0, 1.0, 1.0}, regions), 9);
  EXPECT_EQ(cs.cell(3, 4), 2 * 10 + 4);
}

TEST(Archive, AnEliteKeepsItsCellUntilSomethingScoresHigher) {
  Scores sc;
  sc.s = {{1, 0.10}, {2, 0.05}, {3, 0.10}, {4, 0.20}, {5, 0.30}};
  Island isl;
  EXPECT_TRUE(offer(isl, 7, 1, sc.fn()));
  EXPECT_FALSE(offer(isl, 7, 2, sc.fn()));  // worse
  EXPECT_FALSE(offer(isl, 7, 3, sc.fn()));  // a tie keeps the incumbent
  EXPECT_TRUE(offer(isl, 7, 4, sc.fn()));
  EXPECT_TRUE(offer(isl, 2, 2, sc.fn()));   // an empty cell takes anything
  EXPECT_EQ(isl.archive.at(7), 4);
  EXPECT_EQ(isl.best, 4);
  EXPECT_EQ(ranked_elites(isl, sc.fn()), (std::vector<std::int64_t>{4, 2}));
  for (std::int64_t id = 1; id <= 5; ++id) remember(isl, id, 3);
  EXPECT_EQ(isl.recent, (std::vector<std::int64_t>{3, 4, 5}));
}

TEST(Archive, MigrationSendsEachIslandsBestToTheNextOnTheRing) {
  Scores sc;
  sc.s = {{10, 0.1}, {11, 0.5}, {20, 0.2}, {30, 0.9}, {31, 0.3}};
  std::map<std::int64_t, int> cell = {{10, 0}, {11, 1}, {20, 0}, {30, 5}, {31, 6}};
  std::vector<Island> isl(3);
  offer(isl[0], 0, 10, sc.fn());
  offer(isl[0], 1, 11, sc.fn());
  offer(isl[1], 0, 20, sc.fn());
  offer(isl[2], 5, 30, sc.fn());
  offer(isl[2], 6, 31, sc.fn());
  migrate(isl, 1, [&](std::int64_t id) { return cell.at(id); }, sc.fn());
  // 0 -> 1: program 11 (island 0's best) arrives in cell 1 of island 1.
  EXPECT_EQ(isl[1].archive.at(1), 11);
  EXPECT_EQ(isl[1].best, 11);
  // 1 -> 2: program 20 lands in an empty cell 0 of island 2.
  EXPECT_EQ(isl[2].archive.at(0), 20);
  // 2 -> 0: program 30, not 31, travels (one each); emigrants were chosen before arrivals.
  EXPECT_EQ(isl[0].archive.at(5), 30);
  EXPECT_EQ(isl[0].archive.count(6), 0u);
  EXPECT_EQ(isl[2].archive.count(1), 0u) << "program 11 arrived in island 1 after island 1 chose its emigrant";
}

TEST(Archive, IslandsRoundTripThroughJson) {
  Scores sc;
  sc.s = {{1, 0.1}, {2, 0.2}};
  Island isl;
  offer(isl, 3, 1, sc.fn());
  offer(isl, 9, 2, sc.fn());
  remember(isl, 1, 8);
  remember(isl, 2, 8);
  const Island back = island_from_json(nlohmann::json::parse(to_json(isl).dump()), "$.islands[0]");
  EXPECT_EQ(back.archive, isl.archive);
  EXPECT_EQ(back.recent, isl.recent);
  EXPECT_EQ(back.best, isl.best);
  EXPECT_THROW(island_from_json(nlohmann::json::object(), "$.islands[0]"), InputError);
}
