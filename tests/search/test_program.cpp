// Rule-list programs: normalisation, canonical Lua, hashes, JSON, the C++ twin.
#include <gtest/gtest.h>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/search/checker.hpp>
#include <evodispatch/search/lua_text.hpp>
#include <evodispatch/search/operators.hpp>
#include <evodispatch/search/program.hpp>

using namespace evodispatch;
using namespace evodispatch::search;

namespace {

DeviceInfo h100() { return load_sim_profile("h100-sxm").device; }

Program example() {
  Program p = base_program("fixed:1", *builtin_policy_source("fixed:1"));
  Rule a;
  a.when = {{Feature::nblk, Op::le, 4}, {Feature::ctas, Op::ge, 2}, {Feature::nblk, Op::le, 6}, {Feature::batch, Op::ge, 1}};
  a.num_splits.constant = 3;
  a.pack_gqa = true;
  Rule b;
  b.when = {{Feature::head_dim, Op::eq, 128}};
  b.num_splits.quotient = Quotient{Feature::num_sms, Feature::ctas, 2};
  b.num_splits.ceil_div = CeilDiv{Feature::nblk, 2};
  b.num_splits.lo = 1;
  b.num_splits.hi = 32;
  Rule inside_a;  // every shape it takes, rule a takes first
  inside_a.when = {{Feature::nblk, Op::le, 2}, {Feature::ctas, Op::ge, 4}};
  inside_a.num_splits.constant = 7;
  Rule empty;  // batch > 4 and batch < 3
  empty.when = {{Feature::batch, Op::gt, 4}, {Feature::batch, Op::lt, 3}};
  p.rules = {a, b, inside_a, empty};
  return p;
}

std::vector<Shape> varied_shapes() {
  std::vector<Shape> out = load_workload("paper-safety-160").shapes;
  for (const auto& s : load_workload("cliff-8k").shapes) out.push_back(s);
  Shape odd;
  odd.batch = 3;
  odd.seqlen_q = 4;
  odd.seqlen_k = 777;
  odd.h_q = 32;
  odd.h_kv = 32;
  odd.head_dim = 256;
  odd.page_size = 16;
  out.push_back(odd);
  odd.dtype = Dtype::fp8;  // kv_kib counts one byte per element
  odd.seqlen_k = 70000;
  out.push_back(odd);
  return out;
}

}  // namespace

TEST(Program, NormaliseWritesConditionsCanonicallyAndDropsUnreachableRules) {
  const Program n = normalise(example());
  ASSERT_EQ(n.rules.size(), 2u);
  const std::vector<Condition> want = {{Feature::nblk, Op::le, 4}, {Feature::ctas, Op::ge, 2}};
  EXPECT_EQ(n.rules[0].when, want);
  EXPECT_EQ(n.rules[1].when, (std::vector<Condition>{{Feature::head_dim, Op::eq, 128}}));
  EXPECT_EQ(normalise(n), n) << "normalisation is idempotent";

  // Equality is for categorical features: one value of a quantity is a range of width 0.
  Program point = n;
  point.rules[1].when = {{Feature::h_kv, Op::eq, 8}, {Feature::batch, Op::le, 1}};
  EXPECT_EQ(normalise(point).rules[1].when,
            (std::vector<Condition>{{Feature::batch, Op::le, 1}, {Feature::h_kv, Op::ge, 8}, {Feature::h_kv, Op::le, 8}}));

  // An expression that can give one value only is that constant; constants are clamped.
  Program p = n;
  p.rules[1].num_splits.lo = p.rules[1].num_splits.hi = 5;
  p.rules[0].num_splits.constant = 900;
  const Program q = normalise(p, 64);
  EXPECT_TRUE(q.rules[1].num_splits.is_constant());
  EXPECT_EQ(q.rules[1].num_splits.constant, 5);
  EXPECT_EQ(q.rules[0].num_splits.constant, 64);
}

TEST(Program, RendersCanonicalLua) {
  const std::string lua = render_lua(normalise(example()));
  const std::string want =
      "-- evodispatch search program: 2 rule(s) in front of the base policy \"fixed:1\".\n"
      "-- Generated from the rule list stored with it (programs.rules); edit that, not this.\n"
      "local base_dispatch\n"
      "do\n"
      "function dispatch(s, hw)\n"
      "  return { num_splits = 1 }\n"
      "end\n"
      "base_dispatch = dispatch\n"
      "end\n"
      "\n"
      "local function clamp(x, lo, hi) return math.max(lo, math.min(hi, x)) end\n"
      "\n"
      "function dispatch(s, hw)\n"
      "  if s.nblk <= 4 and (s.batch * s.h_kv) >= 2 then return { num_splits = 3, pack_gqa = true, sm_margin = 0 } end\n"
      "  if s.head_dim == 128 then return { num_splits = clamp(math.min(hw.num_sms // ((s.batch * s.h_kv) * 2), "
      "(s.nblk + 1) // 2), 1, 32), sm_margin = 0 } end\n"
      "  return base_dispatch(s, hw)\n"
      "end\n";
  EXPECT_EQ(lua, want);
  EXPECT_NO_THROW(DispatchScript::load("rendered", lua));
}

TEST(Program, HashIsStableAndIgnoresWhatNormalisationRemoves) {
  const Program n = normalise(example());
  // A fixed value: a change here means stored runs can no longer recognise their programs.
  EXPECT_EQ(program_hash(n), "c94932dacb7ffda2d788554ecc376e4c");
  EXPECT_EQ(program_hash(n).size(), 32u);

  Program reordered = example();
  std::reverse(reordered.rules[0].when.begin(), reordered.rules[0].when.end());
  reordered.base_name = "another label";
  reordered.base_source = canonical_lua("-- a comment\n" + *builtin_policy_source("fixed:1") + "\n\n   \n");
  EXPECT_EQ(program_hash(normalise(reordered)), program_hash(n));

  Program changed = n;
  changed.rules[0].num_splits.constant = 4;
  changed.rules[0].num_splits.lo = changed.rules[0].num_splits.hi = 4;
  EXPECT_NE(program_hash(changed), program_hash(n));
  Program other_base = n;
  other_base.base_source = canonical_lua(*builtin_policy_source("fixed:2"));
  EXPECT_NE(program_hash(other_base), program_hash(n));
}

TEST(Program, JsonRoundTrip) {
  const Program n = normalise(example());
  const nlohmann::json j = to_json(n);
  EXPECT_EQ(j["base"], "fixed:1");
  EXPECT_EQ(j["rules"][0]["when"][0], nlohmann::json::array({"nblk", "<=", 4}));
  EXPECT_EQ(j["rules"][1]["num_splits"]["quotient"], nlohmann::json::array({"num_sms", "ctas", 2}));
  const Program back = program_from_json(nlohmann::json::parse(j.dump()), n.base_source);
  EXPECT_EQ(back, n);
  EXPECT_EQ(program_hash(back), program_hash(n));
}

TEST(Program, JsonErrorsNameThePath) {
  const auto error_of = [](const std::string& text) {
    try {
      program_from_json(nlohmann::json::parse(text), "", "$");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"({"rules": [{"when": [["nblk", "<~", 4]], "num_splits": 2}]})"),
            "$.rules[0].when[0][1]: expected one of <, <=, ==, >=, >, got a string");
  EXPECT_EQ(error_of(R"({"rules": [{"when": [["blocks", "<=", 4]], "num_splits": 2}]})"),
            "$.rules[0].when[0][0]: unknown feature \"blocks\"");
  EXPECT_EQ(error_of(R"({"rules": [{"num_splits": 0}]})"), "$.rules[0].num_splits: must be in [1, 256], got 0");
  EXPECT_EQ(error_of(R"({"rules": [{"num_splits": 2, "colour": "red"}]})"), "$.rules[0].colour: unknown field");
  EXPECT_EQ(error_of(R"({"rules": [{"num_splits": {"quotient": ["num_sms", "page_size", 1], "lo": 1, "hi": 4}}]})"),
            "$.rules[0].num_splits.quotient[1]: \"page_size\" can be 0; not a divisor");
  EXPECT_EQ(error_of(R"({"rules": [{"pack_gqa": true}]})"), "$.rules[0].num_splits: missing");
}

TEST(Program, BaseSourceComesBackOutOfTheRenderedProgram) {
  const Program n = normalise(example());
  EXPECT_EQ(extract_base_source(render_lua(n)), n.base_source);
  // A base that is itself a rendered program (an external mutator echoing its parent).
  const Program nested = normalise(base_program("external", render_lua(n)));
  EXPECT_EQ(extract_base_source(render_lua(nested)), nested.base_source);
  EXPECT_FALSE(extract_base_source("function dispatch(s, hw) return {num_splits = 1} end"));
}

TEST(Program, TheStoredSplitPutsTheRenderedProgramBackTogether) {
  for (const std::string base : {std::string("function dispatch(s, hw)\n  return { num_splits = 1 }\nend\n"),
                                 std::string("function dispatch(s, hw) return { num_splits = 2 } end")}) {
    Program p = example();
    p.base_source = base;
    p = normalise(p);
    const SplitSource split = split_source(p);
    EXPECT_EQ(split.base, p.base_source);
    EXPECT_EQ(split.source.find(split.base), std::string::npos);
    EXPECT_EQ(stored_source(split.source, split.base), render_lua(p));
    EXPECT_EQ(stored_source(render_lua(p), std::nullopt), render_lua(p));  // stored whole (schema v1)
  }
}

TEST(Program, CanonicalTextOfABuiltInPolicyDecidesTheSame) {
  const DeviceInfo hw = h100();
  for (const auto& name : builtin_policy_names()) {
    auto original = make_policy(name);
    auto canonical = DispatchScript::load(name, canonical_lua(*builtin_policy_source(name)));
    for (const auto& s : varied_shapes()) {
      const auto a = original->decide(s, hw);
      const auto b = canonical->dispatch(s, hw);
      ASSERT_EQ(a.ok(), b.ok()) << name << " " << describe(s);
      if (a.ok()) {
        ASSERT_EQ(a.decision, b.decision) << name << " " << describe(s);
      }
    }
  }
}

TEST(Program, TheCppTwinAgreesWithTheRenderedLua) {
  const DeviceInfo hw = h100();
  const auto shapes = varied_shapes();
  OperatorContext ctx;
  for (const auto& s : load_workload("paper-safety-160").shapes) ctx.train.push_back(feature_values(s, hw));
  ctx.prepare();
  Rng rng(11);
  Program p = base_program("fixed:1", *builtin_policy_source("fixed:1"));
  int checked = 0;
  for (int i = 0; i < 150; ++i) {
    const OperatorKind kinds[] = {OperatorKind::add_rule, OperatorKind::perturb, OperatorKind::to_expression,
                                  OperatorKind::merge_rules};
    auto child = apply_operator(kinds[rng.below(4)], p, {}, {}, ctx, rng);
    if (!child) continue;
    if (child->rules.size() < 10) p = *child;
    // The program as the search writes it, and the same rules boxed on the training shapes
    // (many of the shapes below lie outside the boxes).
    for (const Program& program : {*child, verify_boxes(*child, ctx.train, box_features(), 64, 2),
                                   verify_boxes(*child, ctx.train, box_features(), 64, 1, {}, 150)}) {
      auto script = DispatchScript::load("program", render_lua(program));
      for (const auto& s : shapes) {
        const auto lua = script->dispatch(s, hw);
        ASSERT_TRUE(lua.ok()) << lua.error;
        const auto twin = eval_rules(program, feature_values(s, hw));
        const Decision want = twin ? resolve(*twin, s) : resolve(Decision{1, std::nullopt, 0}, s);
        ASSERT_EQ(lua.decision, want) << describe(s) << "\n" << render_lua(program);
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(LuaText, CanonicalTextDropsCommentsAndBlankLinesButNotStrings) {
  const std::string src =
      "-- header\n\nlocal a = 1 -- one\nlocal s = \"-- not a comment\"  \n--[[ long\ncomment ]]\n"
      "local t = [[\n-- kept\n\n]]\n\n   local b = .5 --[==[ x ]==] + a\n";
  const std::string want =
      "local a = 1\nlocal s = \"-- not a comment\"\nlocal t = [[\n-- kept\n\n]]\n   local b = .5  + a\n";
  EXPECT_EQ(canonical_lua(src), want);
  EXPECT_EQ(canonical_lua(want), want);
}

TEST(LuaText, LiteralPerturbationChangesOneNumeralOutsideCommentsAndStrings) {
  const std::string src = "-- 17 in a comment\nlocal x = 0x10 + 3 * 0.85 .. \"42\"\n";
  const auto lits = numeric_literals(src);
  ASSERT_EQ(lits.size(), 2u);  // 3 and 0.85; hexadecimal 0x10 is left alone
  EXPECT_EQ(src.substr(lits[0].begin, lits[0].end - lits[0].begin), "3");
  EXPECT_EQ(src.substr(lits[1].begin, lits[1].end - lits[1].begin), "0.85");
  Rng rng(5);
  for (int i = 0; i < 50; ++i) {
    const auto out = perturb_one_literal(src, rng);
    ASSERT_TRUE(out);
    EXPECT_NE(*out, src);
    EXPECT_EQ(out->substr(0, 29), src.substr(0, 29));  // the comment and "local x = 0x10 + " stay
    EXPECT_NE(out->find("\"42\""), std::string::npos);
  }
  Rng r2(1);
  for (int i = 0; i < 20; ++i) {
    const auto v = perturb_numeral("0", r2);  // never negative, never unchanged
    EXPECT_TRUE(v == "1" || v == "2") << v.value_or("nullopt");
  }
  for (int i = 0; i < 20; ++i) {
    const auto v = perturb_numeral("0.85", r2);
    ASSERT_TRUE(v);
    EXPECT_NE(v->find('.'), std::string::npos) << *v;
  }
  EXPECT_FALSE(perturb_numeral("0x1F", r2));
}

namespace {
FeatureValues at(std::int64_t batch, std::int64_t seqlen_k, std::int64_t head_dim = 128) {
  FeatureValues v{};
  v[static_cast<int>(Feature::batch)] = batch;
  v[static_cast<int>(Feature::seqlen_k)] = seqlen_k;
  v[static_cast<int>(Feature::head_dim)] = head_dim;
  return v;
}

// One rule, 8 splits from Lk 700 on, in front of a base that always takes 1.
Program eight_splits_from_lk_700() {
  Program p = base_program("fa3", "function dispatch(s, hw) return { num_splits = 1 } end\n");
  Rule r;
  r.when = {{Feature::seqlen_k, Op::ge, 700}};
  r.num_splits.constant = 8;
  p.rules = {r};
  return p;
}
}  // namespace

TEST(VerifyBoxes, RulesKeepTheirTrainingShapesAndNothingBeyondTheirBox) {
  Program p = base_program("fa3", "function dispatch(s, hw) return { num_splits = 1 } end\n");
  Rule wide;
  wide.when = {{Feature::seqlen_k, Op::ge, 1024}};
  wide.num_splits.constant = 8;
  Rule never;  // takes no training shape: dropped
  never.when = {{Feature::batch, Op::ge, 1000}};
  never.num_splits.constant = 2;
  Rule rest;
  rest.num_splits.constant = 3;
  p.rules = {wide, never, rest};
  const std::vector<FeatureValues> train = {at(1, 1024), at(4, 8192), at(2, 256), at(8, 512)};
  const std::vector<Feature> features = {Feature::batch, Feature::seqlen_k};
  const Program boxed = verify_boxes(p, train, features);

  ASSERT_EQ(boxed.rules.size(), 2u);
  for (const auto& v : train) EXPECT_EQ(eval_rules(boxed, v), eval_rules(p, v));  // training decisions unchanged
  EXPECT_EQ(eval_rules(boxed, at(2, 4096))->num_splits, 8);  // inside the first rule's box
  EXPECT_EQ(eval_rules(p, at(1, 100000))->num_splits, 8);
  EXPECT_FALSE(eval_rules(boxed, at(1, 100000)));  // Lk beyond 8192: no rule, the base decides
  EXPECT_FALSE(eval_rules(boxed, at(16, 2048)));   // batch beyond 4 for the first rule, 8 for the last
  EXPECT_EQ(verify_boxes(boxed, train, features), boxed);  // applying it again changes nothing
}

TEST(VerifyBoxes, ARuleDecidingTooFewTrainingShapesIsDroppedAndItsShapesGoOn) {
  Program p = base_program("fa3", "function dispatch(s, hw) return { num_splits = 1 } end\n");
  Rule lonely;  // takes one training shape
  lonely.when = {{Feature::batch, Op::ge, 8}};
  lonely.num_splits.constant = 5;
  Rule later;  // takes the rest, and that shape once the first is gone
  later.when = {{Feature::seqlen_k, Op::ge, 512}};
  later.num_splits.constant = 4;
  p.rules = {lonely, later};
  const std::vector<FeatureValues> train = {at(8, 512), at(4, 8192), at(2, 1024), at(1, 256)};
  const std::vector<Feature> features = {Feature::batch, Feature::seqlen_k};

  const Program kept = verify_boxes(p, train, features, kMaxSplits, 1);
  ASSERT_EQ(kept.rules.size(), 2u);
  EXPECT_EQ(eval_rules(kept, at(8, 512))->num_splits, 5);

  const Program supported = verify_boxes(p, train, features, kMaxSplits, 2);
  ASSERT_EQ(supported.rules.size(), 1u);
  EXPECT_EQ(eval_rules(supported, at(8, 512))->num_splits, 4);  // now the later rule's
  EXPECT_EQ(supported.rules[0].when, later.when);                 // the rule itself unchanged
  // Its box spans the three shapes it decides: batch 2..8, Lk 512..8192.
  EXPECT_EQ(eval_rules(supported, at(3, 4096))->num_splits, 4);
  EXPECT_FALSE(eval_rules(supported, at(16, 1024)));
  EXPECT_FALSE(eval_rules(supported, at(2, 16384)));
  EXPECT_FALSE(verify_boxes(p, train, features, kMaxSplits, 4).rules.size());  // nobody has 4
}

// Where a rule repeats the base it measured nothing about its own decision: given the
// base's decisions, only the shapes it changes support it and bound its box.
TEST(VerifyBoxes, OnlyTheShapesARuleChangesSupportItAndBoundItsBox) {
  Program p = base_program("fa3", "function dispatch(s, hw) return { num_splits = 1 } end\n");
  Rule eight;  // takes four shapes, changes two of them (the base gives 8 on the others)
  eight.when = {{Feature::seqlen_k, Op::ge, 1024}};
  eight.num_splits.constant = 8;
  Rule three;  // takes the rest; the base already gives 3 on one of them
  three.num_splits.constant = 3;
  p.rules = {eight, three};
  const std::vector<FeatureValues> train = {at(1, 1024), at(2, 2048), at(4, 4096), at(8, 8192), at(1, 256), at(2, 512)};
  const auto d = [](int k) { return Decision{k, false, 0}; };
  const std::vector<Decision> base = {d(8), d(1), d(1), d(8), d(3), d(1)};
  const std::vector<Feature> features = {Feature::batch, Feature::seqlen_k};

  const Program boxed = verify_boxes(p, train, features, kMaxSplits, 1, base);
  ASSERT_EQ(boxed.rules.size(), 2u);
  for (std::size_t k = 0; k < train.size(); ++k) {  // every training decision as the unboxed program's
    const auto unboxed = eval_rules(p, train[k]);
    EXPECT_EQ(eval_rules(boxed, train[k]).value_or(base[k]).num_splits, unboxed->num_splits) << k;
  }
  // The first rule's box spans the two shapes it changes (batch 2..4, Lk 2048..4096), not
  // the four it takes: at B=8 Lk=8192 no rule holds and the base (8 there) decides.
  EXPECT_EQ(eval_rules(boxed, at(3, 3000))->num_splits, 8);
  EXPECT_FALSE(eval_rules(boxed, at(8, 8192)));
  EXPECT_FALSE(eval_rules(boxed, at(16, 8192)));
  EXPECT_EQ(eval_rules(p, at(16, 8192))->num_splits, 8);
  // The second rule changes one shape (B=2 Lk=512): its box is that point, so at(1, 256),
  // where it repeats the base, now goes to the base.
  EXPECT_FALSE(eval_rules(boxed, at(1, 256)));
  EXPECT_EQ(eval_rules(boxed, at(2, 512))->num_splits, 3);

  // min_support counts the same shapes: two for the first rule, one for the second.
  const Program supported = verify_boxes(p, train, features, kMaxSplits, 2, base);
  ASSERT_EQ(supported.rules.size(), 1u);
  EXPECT_EQ(supported.rules[0].when, eight.when);
  // Without the base's decisions every shape a rule takes is its evidence.
  EXPECT_EQ(verify_boxes(p, train, features, kMaxSplits, 2).rules.size(), 2u);
  // A rule that changes nothing is dropped.
  const std::vector<Decision> all_eight(train.size(), d(8));
  Program only_eight = p;
  only_eight.rules = {eight};
  EXPECT_TRUE(verify_boxes(only_eight, train, features, kMaxSplits, 1, all_eight).rules.empty());
  EXPECT_THROW(verify_boxes(p, train, features, kMaxSplits, 1, std::span<const Decision>(base).first(2)), InputError);
}

TEST(VerifyBoxes, TheBoxIsKeptApartInJsonAndMarkedInTheLua) {
  const Program p = eight_splits_from_lk_700();
  const Rule& r = p.rules[0];
  const Program boxed = verify_boxes(p, {at(1, 1024), at(4, 8192)}, {Feature::batch, Feature::seqlen_k});
  ASSERT_EQ(boxed.rules.size(), 1u);
  EXPECT_EQ(boxed.rules[0].when, r.when);
  const nlohmann::json j = to_json(boxed);
  EXPECT_EQ(j["rules"][0]["box"], nlohmann::json::parse(
                                      R"([["batch", "<=", 4], ["seqlen_k", ">=", 1024], ["seqlen_k", "<=", 8192]])"));
  EXPECT_EQ(program_from_json(nlohmann::json::parse(j.dump()), boxed.base_source), boxed);
  EXPECT_NE(program_hash(boxed), program_hash(normalise(p)));
  EXPECT_NE(render_lua(boxed).find("s.seqlen_k >= 700 and --[[verified on]] s.batch <= 4"), std::string::npos)
      << render_lua(boxed);
  // The box changes nothing a mutation starts from: the operators see the rule alone.
  EXPECT_EQ(verify_boxes(boxed, {at(1, 1024), at(4, 8192), at(8, 800), at(2, 900)}, {Feature::batch}),
            verify_boxes(p, {at(1, 1024), at(4, 8192), at(8, 800), at(2, 900)}, {Feature::batch}));
}

// A box over each feature's range takes in every combination of the values its evidence
// had; with reach_percent the rule holds only near one of its evidence shapes.
TEST(VerifyBoxes, AReachedRuleHoldsOnlyNearItsEvidence) {
  const Program p = eight_splits_from_lk_700();
  const std::vector<FeatureValues> train = {at(1, 1024, 128), at(8, 8192, 256), at(2, 256, 128)};
  const std::vector<Feature> features = {Feature::batch, Feature::seqlen_k, Feature::head_dim};
  const Program boxed = verify_boxes(p, train, features);
  const Program near = verify_boxes(p, train, features, kMaxSplits, 1, {}, 200);
  ASSERT_EQ(near.rules.size(), 1u);
  EXPECT_EQ(near.rules[0].reach.size(), 2u);
  for (const auto& v : train) EXPECT_EQ(eval_rules(near, v), eval_rules(p, v));  // training decisions unchanged
  // Inside the box, away from both evidence shapes: the box alone takes it, reach does not.
  EXPECT_EQ(eval_rules(boxed, at(8, 1024, 128))->num_splits, 8);
  EXPECT_FALSE(eval_rules(near, at(8, 1024, 128)));
  EXPECT_FALSE(eval_rules(near, at(3, 1024, 128)));  // batch 3 is more than twice 1 and under half of 8
  // Within a factor of two of the first evidence shape in every quantity...
  EXPECT_EQ(eval_rules(near, at(2, 2048, 128))->num_splits, 8);
  EXPECT_EQ(eval_rules(near, at(4, 4096, 256))->num_splits, 8);  // ... or of the second
  // ... but a categorical feature must equal the evidence's: head dim 256 was verified only at B=8.
  EXPECT_EQ(eval_rules(boxed, at(2, 2048, 256))->num_splits, 8);
  EXPECT_FALSE(eval_rules(near, at(2, 2048, 256)));

  EXPECT_EQ(normalise(near), near);
  EXPECT_EQ(verify_boxes(near, train, features, kMaxSplits, 1, {}, 200), near);
  EXPECT_EQ(verify_boxes(near, train, features), boxed);  // reach 0 removes it again
  EXPECT_NE(program_hash(near), program_hash(boxed));
  const nlohmann::json j = to_json(near);
  ASSERT_TRUE(j["rules"][0].contains("reach"));
  EXPECT_EQ(program_from_json(nlohmann::json::parse(j.dump()), near.base_source), near);
  EXPECT_NE(render_lua(near).find("--[[near its evidence]]"), std::string::npos) << render_lua(near);
  nlohmann::json bad = j;
  bad["rules"][0]["reach"] = nlohmann::json::array();
  try {
    program_from_json(bad, near.base_source);
    ADD_FAILURE() << "an empty reach was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("$.rules[0].reach"), std::string::npos) << e.what();
  }
}

// A later rule inside an earlier rule's box is still reachable where the earlier rule's
// neighbourhoods do not reach: normalise must keep it.
TEST(VerifyBoxes, ARuleBehindAReachedRuleIsKept) {
  Program p = base_program("fa3", "function dispatch(s, hw) return { num_splits = 1 } end\n");
  Rule first;
  first.box = {{Feature::batch, Op::ge, 1}, {Feature::batch, Op::le, 64}};
  first.reach = {{{Feature::batch, Op::le, 2}}};
  first.num_splits.constant = 8;
  Rule second;
  second.when = {{Feature::batch, Op::ge, 4}, {Feature::batch, Op::le, 32}};
  second.num_splits.constant = 3;
  Rule third;  // inside the first rule's neighbourhood: unreachable
  third.when = {{Feature::batch, Op::le, 2}};
  third.num_splits.constant = 5;
  p.rules = {first, second, third};
  const Program n = normalise(p);
  ASSERT_EQ(n.rules.size(), 2u);
  EXPECT_EQ(eval_rules(n, at(16, 100))->num_splits, 3);
  EXPECT_EQ(eval_rules(n, at(2, 100))->num_splits, 8);
}
