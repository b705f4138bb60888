// Rule-list programs distilled: exact translation (rules + fa3 fallback) and rules in
// front of a fitted base, both compiled and held to the rendered Lua program.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/heuristics/latency_model.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/search/distill_adapter.hpp>
#include <evodispatch/search/program.hpp>

#include "../support/scratch.hpp"
#include "../support/devices.hpp"

namespace fs = std::filesystem;
using namespace evodispatch;
using namespace evodispatch::search;

namespace {

DeviceInfo h100() { return test::h100_sxm(); }

fs::path temp_dir(const std::string& name) { return test::scratch_path(name); }

Program rules_on(std::string base_name, std::string_view base_source) {
  Program p = base_program(std::move(base_name), base_source);
  Rule a;  // ctas < 16 and nblk > 7: min(num_sms // (ctas * 2), ceil(nblk / 3)) in [2, 48]
  a.when = {{Feature::ctas, Op::lt, 16}, {Feature::nblk, Op::gt, 7}};
  a.num_splits.quotient = Quotient{Feature::num_sms, Feature::ctas, 2};
  a.num_splits.ceil_div = CeilDiv{Feature::nblk, 3};
  a.num_splits.lo = 2;
  a.num_splits.hi = 48;
  // Verified only on H100s at batch >= 2 and Lk <= 20000 (the checks below run on 78 SMs
  // too, and on shapes beyond the box, which the export must leave to the later rules).
  a.box = {{Feature::batch, Op::ge, 2}, {Feature::seqlen_k, Op::le, 20000}, {Feature::num_sms, Op::eq, 132}};
  // And inside the box, only near two evidence shapes: exported as one rule per neighbourhood.
  a.reach = {{{Feature::batch, Op::le, 4}, {Feature::nblk, Op::ge, 16}},
             {{Feature::head_dim, Op::eq, 128}, {Feature::seqlen_k, Op::ge, 9000}}};
  Rule b;  // h_kv == 8 and seqlen_k >= 4000: 3 splits, unpacked, margin 2
  b.when = {{Feature::h_kv, Op::eq, 8}, {Feature::seqlen_k, Op::ge, 4000}};
  b.num_splits.constant = 3;
  b.pack_gqa = false;
  b.sm_margin = 2;
  Rule c;  // qpk <= 4 and batch in [2, 40]: ceil(nblk / 16)
  c.when = {{Feature::qpk, Op::le, 4}, {Feature::batch, Op::ge, 2}, {Feature::batch, Op::le, 40}};
  c.num_splits.ceil_div = CeilDiv{Feature::nblk, 16};
  c.num_splits.hi = 8;
  Rule d;  // under half a wave: one split per 512 KiB of KV (the features that carry across GPUs)
  d.when = {{Feature::waves_pct, Op::lt, 50}};
  d.num_splits.ceil_div = CeilDiv{Feature::kv_kib, 512};
  d.num_splits.hi = 64;
  p.rules = {a, b, c, d};
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
  ASSERT_EQ(fn.rules.size(), 5u);  // rule a twice, once per neighbourhood
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
  d.dtype = {Dtype::bf16, Dtype::fp8};
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

// The model-based family: rules in front of a latency model whose baseline is FA3's own
// dispatch (fa3, or fa3-kvcache on FA3's serving path) export the model itself, and the
// compiled header and the Python module decide exactly as the rendered Lua program on a
// dense grid and on random shapes far outside it.
static void expect_model_exported_exactly(const std::string& baseline, distill::Fallback fallback) {
  LatencyModel m;
  m.splits = {1, 2, 3, 4, 6, 8, 16, 32, 64};
  m.sm_margins = {0, 4};
  m.min_gain_permille = 30;
  // Fitted on D <= 128, Lq 1, KV up to 200 000: FA3 decides the other shapes below.
  m.box[0] = {64, 128};
  m.box[1] = {1, 1};
  m.box[5] = {1, 200000};
  const std::string base = base_program(baseline, *builtin_policy_source(baseline)).base_source;
  const Program p = rules_on("model", render_lua(m, base));
  const DeviceInfo hw = h100();
  const distill::DecisionFunction fn = to_decision_function(p, hw, distill::grid_shapes(distill::Domain::small()));
  EXPECT_EQ(fn.method, "rules+model");
  EXPECT_EQ(fn.fallback, fallback);
  ASSERT_TRUE(fn.model.has_value());
  EXPECT_EQ(*fn.model, m);
  EXPECT_EQ(distill::decision_function_from_json(distill::to_json(fn)), fn);
  EXPECT_FALSE(distill::emit_fa3_body(fn).body.has_value());

  const fs::path dir = temp_dir("model-" + baseline);
  distill::write_exports(fn, dir);
  auto compiled = distill::CompiledHeuristic::build(dir);
  auto script = DispatchScript::load("program", render_lua(p));
  distill::Domain d = distill::Domain::small();
  d.head_dim = {64, 128, 256};
  d.dtype = {Dtype::bf16, Dtype::fp8};
  d.seqlen_k = {1, 100, 1000, 100000, 1000000};
  d.batch = {1, 3, 64, 1000};
  d.seqlen_q = {1, 4};
  nlohmann::json rows = nlohmann::json::array();
  int from_model = 0;
  for (int sms : {132, 78}) {
    DeviceInfo dev = hw;
    dev.num_sms = sms;
    const auto random = distill::random_shapes(d, 5000, sms);
    const auto rep = distill::check(*script, [&](const Shape& s) { return compiled->decide(s, dev); }, dev,
                                    distill::grid_shapes(d), random);
    EXPECT_TRUE(rep.ok()) << rep.mismatches << " differ; first "
                          << (rep.first.empty() ? "" : describe(rep.first[0].shape) + ": script " +
                                                           rep.first[0].expected + ", distilled " + rep.first[0].got);
    for (const Shape& s : random) {
      const Decision c = compiled->decide(s, dev);
      const Decision own = fallback == distill::Fallback::fa3 ? fa3_reference(s, dev) : fa3_kvcache_reference(s, dev);
      from_model += !eval_rules(p, feature_values(s, dev)) && c != resolve(own, s);
      rows.push_back({s.batch, s.seqlen_q, s.seqlen_k, s.h_q, s.h_kv, s.head_dim, int(s.dtype), s.page_size,
                      s.causal ? 1 : 0, dev.num_sms, dev.cc, c.num_splits, *c.pack_gqa ? 1 : 0, c.sm_margin});
    }
  }
  EXPECT_GT(from_model, 100);  // the model, not only the rules and FA3, decided
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not installed";
  std::ofstream(dir / "rows.json") << rows.dump();
  const std::string cmd = "cd '" + dir.string() + "' && python3 heuristic.py --check rows.json > py.log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream log(dir / "py.log");
  const std::string out((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(out.find(" 0 differ"), std::string::npos) << out;
}

TEST(DistillAdapter, RulesInFrontOfALatencyModelExportTheModelExactly) {
  expect_model_exported_exactly("fa3", distill::Fallback::fa3);
}

// A search on FA3's own kernels: the model's baseline is fa3-kvcache.
TEST(DistillAdapter, ALatencyModelOverFa3KvcacheExportsExactlyToo) {
  expect_model_exported_exactly("fa3-kvcache", distill::Fallback::fa3_kvcache);
}

// Rules over fa3-kvcache (FA3 deciding on its serving path, the base of searches on FA3's
// own kernels) translate exactly too: the header and the Python module carry fa3-kvcache's
// twin, dynamic split included, and agree with the Lua program everywhere.
TEST(DistillAdapter, RulesOverFa3KvcacheTranslateExactly) {
  const Program p = rules_on("fa3-kvcache", *builtin_policy_source("fa3-kvcache"));
  const DeviceInfo hw = h100();
  const distill::DecisionFunction fn = to_decision_function(p, hw, distill::grid_shapes(distill::Domain::small()));
  EXPECT_EQ(fn.method, "rules");
  EXPECT_EQ(fn.fallback, distill::Fallback::fa3_kvcache);
  EXPECT_EQ(distill::decision_function_from_json(distill::to_json(fn)), fn);
  const fs::path dir = temp_dir("kvcache");
  const distill::Fa3Body body = distill::write_exports(fn, dir);
  EXPECT_NE(body.refusal.find("fa3-kvcache"), std::string::npos) << body.refusal;
  auto compiled = distill::CompiledHeuristic::build(dir);
  auto script = DispatchScript::load("program", render_lua(p));
  distill::Domain d = distill::Domain::small();
  d.head_dim = {64, 128, 256};
  d.page_size = {0, 16, 256};
  d.seqlen_q = {1, 4};
  d.batch = {1, 7, 64, 992, 993};  // 993: past the dynamic stage
  nlohmann::json rows = nlohmann::json::array();
  int dynamic_lowered = 0;
  for (int sms : {132, 78}) {
    DeviceInfo dev = hw;
    dev.num_sms = sms;
    const auto random = distill::random_shapes(d, 5000, sms);
    const auto rep = distill::check(*script, [&](const Shape& s) { return compiled->decide(s, dev); }, dev,
                                    distill::grid_shapes(d), random);
    EXPECT_TRUE(rep.ok()) << rep.mismatches << " differ; first "
                          << (rep.first.empty() ? "" : describe(rep.first[0].shape) + ": script " +
                                                           rep.first[0].expected + ", distilled " + rep.first[0].got);
    for (const Shape& s : random) {
      const Decision c = compiled->decide(s, dev);
      dynamic_lowered += !eval_rules(p, feature_values(s, dev)) && c.num_splits < fa3_reference(s, dev).num_splits;
      rows.push_back({s.batch, s.seqlen_q, s.seqlen_k, s.h_q, s.h_kv, s.head_dim, int(s.dtype), s.page_size,
                      s.causal ? 1 : 0, dev.num_sms, dev.cc, c.num_splits, *c.pack_gqa ? 1 : 0, c.sm_margin});
    }
  }
  EXPECT_GT(dynamic_lowered, 10);  // the dynamic stage decided, not only the rules
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not installed";
  std::ofstream(dir / "rows.json") << rows.dump();
  const std::string cmd = "cd '" + dir.string() + "' && python3 heuristic.py --check rows.json > py.log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream log(dir / "py.log");
  const std::string out((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(out.find(" 0 differ"), std::string::npos) << out;
}
