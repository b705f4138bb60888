// Every operator yields programs the sandbox accepts, within the run's limits and
// features, and the same generator state gives the same child.
#include <gtest/gtest.h>

#include <set>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/search/checker.hpp>
#include <evodispatch/search/operators.hpp>

using namespace evodispatch;
using namespace evodispatch::search;

namespace {

struct World {
  std::vector<Shape> shapes = load_workload("paper-safety-160").shapes;
  DeviceInfo hw = load_sim_profile("h100-sxm").device;
  OperatorContext ctx;
  explicit World(FeatureSet allowed = {}) {
    ctx.allowed = allowed;
    ctx.max_rules = 8;
    ctx.max_splits = 64;
    for (const auto& s : shapes) {
      ctx.train.push_back(feature_values(s, hw));
      ctx.train_oracle.push_back(resolve(Decision{static_cast<int>(1 + ctx.train.size() % 9), std::nullopt, 0}, s));
    }
    ctx.prepare();
  }
};

Program fa3() { return base_program("fa3", *builtin_policy_source("fa3")); }

}  // namespace

TEST(Operators, EveryOperatorProducesSandboxValidPrograms) {
  World w;
  Checker checker(w.shapes, w.hw, SandboxLimits{}, 1);
  std::vector<double> losses(w.shapes.size());
  for (std::size_t i = 0; i < losses.size(); ++i) losses[i] = 0.01 * static_cast<double>(i % 7);
  Rng rng(42);
  for (int k = 0; k < kNumOperators; ++k) {
    const auto kind = static_cast<OperatorKind>(k);
    if (kind == OperatorKind::external) continue;  // a command: see test_external_mutator
    SCOPED_TRACE(std::string(to_string(kind)));
    // Parents with some rules, grown with add_rule, so that every operator applies.
    std::vector<Program> pool = {fa3()};
    while (pool.size() < 6) {
      auto c = apply_operator(OperatorKind::add_rule, pool.back(), {}, losses, w.ctx, rng);
      ASSERT_TRUE(c);
      pool.push_back(*c);
    }
    // Until 40 children came out (the operators that need two rules do not apply to the
    // smaller parents the pool also collects), within a bound that only an operator that
    // hardly ever applies can reach.
    int produced = 0, full_checks = 0;
    for (int i = 0; i < 1000 && produced < 40; ++i) {
      const Program& parent = pool[rng.below(pool.size())];
      const Program* other = &pool[rng.below(pool.size())];
      auto child = apply_operator(kind, parent, std::span<const Program* const>(&other, 1), losses, w.ctx, rng);
      if (!child) continue;
      ++produced;
      EXPECT_EQ(normalise(*child, w.ctx.max_splits), *child) << "children come out normalised";
      EXPECT_LE(static_cast<int>(child->rules.size()), w.ctx.max_rules);
      const CheckResult r = checker.check_one(*child);
      // A perturbed literal can break the base script itself (an index that becomes nil,
      // a loop that runs away): that is a failed trial, a row, and the sandbox says why.
      if (kind == OperatorKind::base_literal && !r.ok) {
        EXPECT_NE(r.error.find("the base policy fails"), std::string::npos) << r.error;
        continue;
      }
      ASSERT_TRUE(r.ok) << r.error << "\n" << render_lua(*child);
      if (kind == OperatorKind::base_literal || i % 10 == 0) {
        // The whole rendered program, base included, end to end.
        const CheckResult full = checker.check_full("child", render_lua(*child));
        ASSERT_TRUE(full.ok) << full.error;
        EXPECT_EQ(full.decisions, r.decisions);
        ++full_checks;
      }
      if (child->rules.size() < 6) pool.push_back(*child);
    }
    EXPECT_EQ(produced, 40);
    EXPECT_GT(full_checks, 0);
  }
}

TEST(Operators, RulesUseOnlyTheAllowedFeatures) {
  // FA3's num_splits_heuristic sees batch * heads (ctas here), the SM count and nblk.
  const FeatureSet allowed({Feature::ctas, Feature::num_sms, Feature::nblk});
  World w(allowed);
  Rng rng(7);
  Program p = fa3();
  std::set<Feature> seen;
  for (int i = 0; i < 400; ++i) {
    const auto kind = static_cast<OperatorKind>(rng.below(7));  // the structural operators
    auto child = apply_operator(kind, p, std::span<const Program* const>(), {}, w.ctx, rng);
    if (!child) continue;
    for (Feature f : features_used(*child).list()) {
      EXPECT_TRUE(allowed.contains(f)) << name(f);
      seen.insert(f);
    }
    if (child->rules.size() < 6) p = *child;
  }
  EXPECT_TRUE(seen.count(Feature::ctas) && seen.count(Feature::nblk));
}

TEST(Operators, TheSameGeneratorStateGivesTheSameChild) {
  World w;
  Program p = fa3();
  Rng seed_rng(3);
  for (int i = 0; i < 5; ++i) p = *apply_operator(OperatorKind::add_rule, p, {}, {}, w.ctx, seed_rng);
  for (int k = 0; k < kNumOperators - 1; ++k) {
    Rng a(99), b(99);
    const Program* other = &p;
    const auto x = apply_operator(static_cast<OperatorKind>(k), p, std::span<const Program* const>(&other, 1), {}, w.ctx, a);
    const auto y = apply_operator(static_cast<OperatorKind>(k), p, std::span<const Program* const>(&other, 1), {}, w.ctx, b);
    EXPECT_EQ(x, y) << to_string(static_cast<OperatorKind>(k));
    EXPECT_EQ(a, b);
  }
}

TEST(Operators, AddRuleAimsAtTheShapesWithTheLargestLoss) {
  World w;
  std::vector<double> losses(w.shapes.size(), 0.0);
  losses[17] = 5.0;  // one shape far from the oracle
  Rng rng(1);
  int aimed = 0;
  for (int i = 0; i < 50; ++i) {
    const auto child = apply_operator(OperatorKind::add_rule, fa3(), {}, losses, w.ctx, rng);
    ASSERT_TRUE(child);
    aimed += holds(child->rules.front(), w.ctx.train[17]) ? 1 : 0;
  }
  EXPECT_GT(aimed, 40);
}

TEST(Operators, EqualityOnlyOnCategoricalFeaturesAndBoundsBetweenTrainingValues) {
  World w;
  Rng rng(11);
  Program p = fa3();
  int bounds = 0, between = 0;
  for (int i = 0; i < 600; ++i) {
    const auto kind = static_cast<OperatorKind>(rng.below(7));  // the structural operators
    const Program* other = &p;
    auto child = apply_operator(kind, p, std::span<const Program* const>(&other, 1), {}, w.ctx, rng);
    if (!child) continue;
    for (const Rule& r : child->rules)
      for (const Condition& c : r.when) {
        if (c.op == Op::eq) {
          EXPECT_TRUE(categorical(c.feature)) << name(c.feature) << " == " << c.value;
          continue;
        }
        const auto& vals = w.ctx.distinct[static_cast<int>(c.feature)];
        if (c.value <= vals.front() || c.value >= vals.back()) continue;  // at an end of the range
        ++bounds;
        between += !std::binary_search(vals.begin(), vals.end(), c.value);
      }
    if (child->rules.size() < 6) p = *child;
  }
  ASSERT_GT(bounds, 100);
  // A bound inside the range lies between two training values (halfway in log space),
  // unless they are neighbouring integers.
  EXPECT_GT(between, bounds * 3 / 4) << between << " of " << bounds;
}
