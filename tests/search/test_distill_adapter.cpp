// Rule-list programs distilled: exact translation (rules + fa3 fallback) and rules in
// front of a fitted base, both compiled and held to the rendered Lua program.
#include <gtest/gtest.h>

#include <filesystem>

#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/search/distill_adapter.hpp>
#include <evodispatch/search/program.hpp>

#include "../support/scratch.hpp"

namespace fs = std::filesystem;
using namespace evodispatch;
using namespace evodispatch::search;

namespace {

DeviceInfo h100() {
  DeviceInfo hw;
  hw.name = "H100 SXM";
  hw.num_sms = 132;
  hw.l2_bytes = 50 << 20;
  hw.cc = 90;
  return hw;
}

fs::path temp_dir(const std::string& name) { return test::scratch_path(name); }

Program rules_on(std::string base_name, std::string_view base_source) {
  Program p = base_program(std::move(base_name), base_source);
  Rule a;  // ctas < 16 and nblk > 7: min(num_sms // (ctas * 2), ceil(nblk / 3)) in [2, 48]
  a.when = {{Feature::ctas, Op::lt, 16}, {Feature::nblk, Op::gt, 7}};
  a.num_splits.quotient = Quotient{Feature::num_sms, Feature::ctas, 2};
  a.num_splits.ceil_div = CeilDiv{Feature::nblk, 3};
  a.num_splits.lo = 2;
  a.num_splits.hi = 48;
  Rule b;  // h_kv == 8 and seqlen_k >= 4000: 3 splits, unpacked, margin 2
  b.when = {{Feature::h_kv, Op::eq, 8}, {Feature::seqlen_k, Op::ge, 4000}};
  b.num_splits.constant = 3;
  b.pack_gqa = false;
  b.sm_margin = 2;
  Rule c;  // qpk <= 4 and batch in [2, 40]: ceil(nblk / 16)
  c.when = {{Feature::qpk, Op::le, 4}, {Feature::batch, Op::ge, 2}, {Feature::batch, Op::le, 40}};
  c.num_splits.ceil_div = CeilDiv{Feature::nblk, 16};
  c.num_splits.hi = 8;
  p.rules = {a, b, c};
  return normalise(p);
}

}  // namespace

TEST(DistillAdapter, RuleListWithFa3BaseTranslatesExactly) {
  const Program p = rules_on("fa3", *builtin_policy_source("fa3"));
  ASSERT_TRUE(base_is_fa3(p));
  const DeviceInfo hw = h100();
  const auto grid = distill::grid_shapes(distill::Domain::small());
  const distill::DecisionFunction fn = to_decision_function(p, hw, grid);
  EXPECT_EQ(fn.method, "rules");
  EXPECT_EQ(fn.fallback, distill::Fallback::fa3);
  ASSERT_EQ(fn.rules.size(), 3u);
  // heuristic.json is what regress loads: the function survives it, expressions included.
  EXPECT_EQ(distill::decision_function_from_json(distill::to_json(fn)), fn);
  const fs::path dir = temp_dir("fa3");
  distill::write_exports(fn, dir);
  auto compiled = distill::CompiledHeuristic::build(dir);
  auto script = DispatchScript::load("program", render_lua(p));
  distill::Domain d = distill::Domain::small();
  d.head_dim = {64, 128, 256};
  d.page_size = {0, 256};
  d.seqlen_q = {1, 2};
  for (int sms : {132, 78}) {
    DeviceInfo dev = hw;
    dev.num_sms = sms;
    const auto rep = distill::check(*script, [&](const Shape& s) { return compiled->decide(s, dev); }, dev,
                                    distill::grid_shapes(d), distill::random_shapes(d, 20000, sms));
    EXPECT_TRUE(rep.ok()) << rep.mismatches << " differ; first "
                          << (rep.first.empty() ? "" : describe(rep.first[0].shape) + ": script " +
                                                           rep.first[0].expected + ", distilled " + rep.first[0].got);
  }
  // And the C++ twin of the rules agrees with the translated interpreter.
  for (const Shape& s : distill::random_shapes(d, 5000, 5)) {
    const auto twin = eval_rules(p, feature_values(s, hw));
    const Decision want = twin ? resolve(*twin, s) : resolve(fa3_reference(s, hw), s);
    ASSERT_EQ(distill::evaluate(fn, s, hw), want) << describe(s);
  }
}

TEST(DistillAdapter, RulesInFrontOfANonRuleBaseFitTheBase) {
  const std::string base = R"(
function dispatch(s, hw)
  if s.batch * s.h_kv >= 32 then return { num_splits = 1 } end
  if s.seqlen_k >= 2049 then return { num_splits = 6 } end
  return { num_splits = 2, pack_gqa = false }
end
)";
  const Program p = rules_on("seed:base.lua", base);
  EXPECT_FALSE(base_is_fa3(p));
  const DeviceInfo hw = h100();
  const auto grid = distill::grid_shapes(distill::Domain::small());
  const distill::DecisionFunction fn = to_decision_function(p, hw, grid);
  EXPECT_EQ(fn.method, "rules+tree");
  EXPECT_EQ(fn.fallback, distill::Fallback::none);
  EXPECT_GT(fn.rules.size(), 3u);
  const fs::path dir = temp_dir("tree");
  distill::write_exports(fn, dir);
  auto compiled = distill::CompiledHeuristic::build(dir);
  auto script = DispatchScript::load("program", render_lua(p));
  const auto rep = distill::check(*script, [&](const Shape& s) { return compiled->decide(s, hw); }, hw, grid,
                                  distill::random_shapes(distill::Domain::small(), 20000, 11));
  EXPECT_TRUE(rep.ok()) << rep.mismatches << " differ; first "
                        << (rep.first.empty() ? "" : describe(rep.first[0].shape) + ": script " +
                                                         rep.first[0].expected + ", distilled " + rep.first[0].got);
}
