// The distiller: IR, emitters, tree fit, compile-and-check (heuristics/distill.hpp).
// CPU only; needs the system C++ compiler (and python3 for the Python test, else skipped).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/heuristics/policy.hpp>

#include "../support/scratch.hpp"
#include "../support/devices.hpp"

namespace fs = std::filesystem;
using namespace evodispatch;
using namespace evodispatch::distill;

namespace {

DeviceInfo h100() { return test::h100_sxm(); }

fs::path temp_dir(const std::string& name) {
  fs::path p = test::scratch_path(name);
  fs::create_directories(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Rules with conditions on shape and device features and every split expression form,
// in front of the fa3 fallback.
DecisionFunction sample_rules() {
  DecisionFunction fn;
  fn.method = "rules";
  fn.fallback = Fallback::fa3;
  Rule a;  // B*Hkv < 16 and nblk >= 8: fill the SMs once, two tiles per split at least
  a.when = {Bound{Feature::ctas, INT64_MIN, 15}, Bound{Feature::nblk, 8, INT64_MAX}};
  a.num_splits.quotient = Quotient{Feature::num_sms, Feature::ctas, 1};
  a.num_splits.ceil_div = CeilDiv{Feature::nblk, 2};
  a.num_splits.lo = 1;
  a.num_splits.hi = 64;
  Rule b;  // exactly h_kv == 8: ceil(nblk / 4), MHA unpacked
  b.when = {Bound{Feature::h_kv, 8, 8}, Bound{Feature::seqlen_k, 2049, INT64_MAX}};
  b.num_splits.ceil_div = CeilDiv{Feature::nblk, 4};
  b.num_splits.hi = 16;
  b.pack_gqa = false;
  Rule c;  // big batches: constant 1 with an SM margin
  c.when = {Bound{Feature::batch, 64, INT64_MAX}, Bound{Feature::num_sms, 100, 200}};
  c.num_splits.constant = 1;
  c.sm_margin = 4;
  fn.rules = {a, b, c};
  fn.provenance = {{"test", "sample_rules"}};
  return fn;
}

std::vector<Shape> small_grid() { return grid_shapes(Domain::small()); }

}  // namespace

TEST(Distill, JsonRoundTripAndStrictReader) {
  const DecisionFunction fn = sample_rules();
  EXPECT_EQ(decision_function_from_json(to_json(fn)), fn);
  auto j = to_json(fn);
  j["rules"][0]["when"][0]["feature"] = "bogus";
  try {
    decision_function_from_json(j);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("$.rules[0].when[0].feature"), std::string::npos) << e.what();
  }
  auto k = to_json(fn);
  k["schema"] = 99;
  EXPECT_THROW(decision_function_from_json(k), InputError);
}

TEST(Distill, Fa3FallbackCompiledAgreesWithLuaPolicyExactly) {
  DecisionFunction fn;
  fn.method = "rules";
  fn.fallback = Fallback::fa3;
  const fs::path dir = temp_dir("fa3");
  write_exports(fn, dir);
  auto compiled = CompiledHeuristic::build(dir);
  ASSERT_TRUE(fs::exists(dir / "libheuristic.so"));
  auto script = DispatchScript::load("fa3", *builtin_policy_source("fa3"));
  const DeviceInfo hw = h100();
  // The dense grid's D/dtype/paged variety matters for fa3: use a wide domain.
  Domain d = Domain::small();
  d.head_dim = {64, 96, 128, 192, 256};
  d.dtype = {Dtype::bf16, Dtype::fp16, Dtype::fp8};
  d.page_size = {0, 64, 256};
  d.seqlen_q = {1, 4};
  d.causal = {true, false};
  const auto rep = check(*script, [&](const Shape& s) { return compiled->decide(s, hw); }, hw, grid_shapes(d),
                         random_shapes(d, 5000, 7));
  EXPECT_TRUE(rep.ok()) << rep.mismatches << " differ, first " << (rep.first.empty() ? "" : describe(rep.first[0].shape));
  // Also the C++ twin itself.
  for (const Shape& s : random_shapes(d, 2000, 9))
    ASSERT_EQ(compiled->decide(s, hw), resolve(fa3_reference(s, hw), s)) << describe(s);
}

TEST(Distill, RuleExpressionsCompiledAgreeWithInterpreter) {
  const DecisionFunction fn = sample_rules();
  const fs::path dir = temp_dir("rules");
  write_exports(fn, dir);
  auto compiled = CompiledHeuristic::build(dir);
  Domain d = Domain::dense();
  for (const auto& hw_sms : {132, 114, 80}) {
    DeviceInfo hw = h100();
    hw.num_sms = hw_sms;
    for (const Shape& s : random_shapes(d, 20000, hw_sms))
      ASSERT_EQ(compiled->decide(s, hw), evaluate(fn, s, hw)) << describe(s) << " sms " << hw_sms;
  }
  // The rules fire where they should.
  Shape s;
  s.batch = 1;
  s.h_kv = 1;
  s.h_q = 8;
  s.seqlen_k = 4096;  // nblk 32: min(132 // 1, 16) = 16
  EXPECT_EQ(compiled->decide(s, h100()).num_splits, 16);
  s.batch = 128;
  s.h_kv = 2;
  s.h_q = 16;
  EXPECT_EQ(compiled->decide(s, h100()).sm_margin, 4);
}

TEST(Distill, TreeFitsAHandWrittenScriptExactly) {
  // Not a rule list: arithmetic, locals, nested branches.
  const std::string lua = R"(
function dispatch(s, hw)
  local ctas = s.batch * s.h_kv
  if ctas >= 64 then return { num_splits = 1 } end
  if s.seqlen_k > 2048 then
    if s.qpk >= 8 then return { num_splits = 8, pack_gqa = true } end
    return { num_splits = 4, pack_gqa = false }
  end
  if s.seqlen_k > 128 and ctas < 4 then return { num_splits = 2, sm_margin = 2 } end
  return { num_splits = 1 }
end
)";
  auto script = DispatchScript::load("hand.lua", lua);
  const DeviceInfo hw = h100();
  const auto grid = small_grid();
  const DecisionFunction fn = fit_tree(*script, hw, grid);
  EXPECT_EQ(fn.method, "tree");
  EXPECT_EQ(fn.fallback, Fallback::none);
  EXPECT_GE(fn.rules.size(), 5u);
  EXPECT_LE(fn.rules.size(), 12u);
  const fs::path dir = temp_dir("tree");
  write_exports(fn, dir);
  auto compiled = CompiledHeuristic::build(dir);
  const auto rep = check(*script, [&](const Shape& s) { return compiled->decide(s, hw); }, hw, grid,
                         random_shapes(Domain::small(), 20000, 3));
  EXPECT_TRUE(rep.ok()) << rep.mismatches << " differ; first: "
                        << (rep.first.empty() ? "" : describe(rep.first[0].shape) + " script " + rep.first[0].expected +
                                                         " distilled " + rep.first[0].got);
}

TEST(Distill, TreeThresholdsBetweenGridValuesAreBisectedToTheScriptsOwn) {
  auto script = DispatchScript::load("between.lua", R"(
function dispatch(s, hw)
  if s.seqlen_k > 3000 and s.batch >= 20 then return { num_splits = 3 } end
  if s.seqlen_k >= 700 then return { num_splits = 2 } end
  return { num_splits = 1 }
end
)");
  const DeviceInfo hw = h100();
  const DecisionFunction fn = fit_tree(*script, hw, small_grid());  // seqlen_k 512, 1024, 2049, 4096; batch 17, 32
  bool seen_3001 = false, seen_20 = false, seen_700 = false;
  for (const auto& r : fn.rules)
    for (const auto& b : r.when) {
      seen_3001 |= b.feature == Feature::seqlen_k && (b.lo == 3001 || b.hi == 3000);
      seen_700 |= b.feature == Feature::seqlen_k && (b.lo == 700 || b.hi == 699);
      seen_20 |= b.feature == Feature::batch && (b.lo == 20 || b.hi == 19);
    }
  EXPECT_TRUE(seen_3001 && seen_20 && seen_700) << to_json(fn).dump();
  const auto rep = check(*script, [&](const Shape& s) { return evaluate(fn, s, hw); }, hw, small_grid(),
                         random_shapes(Domain::small(), 20000, 5));
  EXPECT_TRUE(rep.ok()) << rep.mismatches;
}

TEST(Distill, CheckerListsTheFirstDifferingShapes) {
  auto script = DispatchScript::load("two.lua", "function dispatch(s, hw) return { num_splits = 2 } end");
  const DeviceInfo hw = h100();
  const auto rep = check(
      *script, [](const Shape& s) { Decision d; d.num_splits = s.batch >= 8 ? 1 : 2; return d; }, hw, small_grid(),
      {});
  EXPECT_FALSE(rep.ok());
  EXPECT_GT(rep.mismatches, 10u);
  ASSERT_EQ(rep.first.size(), 10u);
  EXPECT_GE(rep.first[0].shape.batch, 8);
  EXPECT_NE(rep.first[0].expected.find("splits=2"), std::string::npos);
}

TEST(Distill, TreeRefusesScriptsThatReadBeyondTheFeatures) {
  auto script = DispatchScript::load(
      "l2.lua", "function dispatch(s, hw) if s.seqlen_k * 256 > hw.l2_bytes then return { num_splits = 2 } end "
                "return { num_splits = 1 } end");
  // Equal features on two devices cannot be told apart: one device is fine...
  EXPECT_NO_THROW(fit_tree(*script, h100(), small_grid()));
  auto failing = DispatchScript::load("bad.lua", "function dispatch(s, hw) return { num_splits = 0 } end");
  EXPECT_THROW(fit_tree(*failing, h100(), small_grid()), InputError);
}

TEST(Distill, HeaderCompilesStandaloneAndNeedsOnlyTheStandardLibrary) {
  for (const auto& fn : {sample_rules(), DecisionFunction{{Rule{}}, Fallback::none, "tree", nlohmann::json::object()}}) {
    const fs::path dir = temp_dir("standalone");
    write_exports(fn, dir);
    const std::string hpp = slurp(dir / "heuristic.hpp");
    for (const std::string& line : {std::string("#include <algorithm>"), std::string("#include <cmath>"),
                                    std::string("#include <cstdint>")})
      EXPECT_NE(hpp.find(line), std::string::npos);
    EXPECT_EQ(hpp.find("evodispatch/"), std::string::npos);  // no project include
    EXPECT_EQ(hpp.find("lua"), std::string::npos);
    // As the issue states it, and warning-free in a translation unit that includes it.
    const std::string cmd = "g++ -std=c++17 -fsyntax-only '" + (dir / "heuristic.hpp").string() + "' 2>'" +
                            (dir / "syntax.log").string() + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(dir / "syntax.log");
    std::ofstream(dir / "use.cpp") << "#include \"heuristic.hpp\"\nint main() { return "
                                      "evodispatch::distilled::dispatch({}, {}).num_splits > 0 ? 0 : 1; }\n";
    const std::string use = "g++ -std=c++17 -Wall -Wextra -Werror -o '" + (dir / "use").string() + "' '" +
                            (dir / "use.cpp").string() + "' 2>'" + (dir / "use.log").string() + "' && '" +
                            (dir / "use").string() + "'";
    EXPECT_EQ(std::system(use.c_str()), 0) << slurp(dir / "use.log");
  }
}

TEST(Distill, PythonModuleAgreesWithCppOnTheGrid) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not installed";
  const DecisionFunction fn = sample_rules();
  const fs::path dir = temp_dir("python");
  write_exports(fn, dir);
  auto compiled = CompiledHeuristic::build(dir);
  Domain d = Domain::small();
  d.head_dim = {64, 128, 256};
  d.dtype = {Dtype::bf16, Dtype::fp8};
  d.page_size = {0, 64};
  d.seqlen_q = {1, 4};
  nlohmann::json rows = nlohmann::json::array();
  for (int sms : {132, 78}) {
    DeviceInfo hw = h100();
    hw.num_sms = sms;
    for (const Shape& s : grid_shapes(d)) {
      const Decision c = compiled->decide(s, hw);
      rows.push_back({s.batch, s.seqlen_q, s.seqlen_k, s.h_q, s.h_kv, s.head_dim, int(s.dtype), s.page_size,
                      s.causal ? 1 : 0, hw.num_sms, hw.cc, c.num_splits, *c.pack_gqa ? 1 : 0, c.sm_margin});
    }
  }
  std::ofstream(dir / "rows.json") << rows.dump();
  const std::string py = slurp(dir / "heuristic.py");
  EXPECT_EQ(py.find("import torch"), std::string::npos);
  EXPECT_EQ(py.find("numpy"), std::string::npos);
  const std::string cmd = "cd '" + dir.string() + "' && python3 heuristic.py --check rows.json > py.log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(dir / "py.log");
  EXPECT_NE(slurp(dir / "py.log").find(" 0 differ"), std::string::npos) << slurp(dir / "py.log");
}

TEST(Distill, Fa3BodyProducedOnlyForFeaturesItsSignatureCarries) {
  // Rules on num_sms only, in front of fa3: exact.
  DecisionFunction ok;
  ok.method = "rules";
  ok.fallback = Fallback::fa3;
  Rule r;
  r.when = {Bound{Feature::num_sms, INT64_MIN, 100}};
  r.num_splits.constant = 2;
  ok.rules = {r};
  const Fa3Body body = emit_fa3_body(ok);
  ASSERT_TRUE(body.body) << body.refusal;
  EXPECT_NE(body.body->find("inline int num_splits_heuristic(int total_mblocks, int num_SMs, int num_n_blocks"),
            std::string::npos);
  EXPECT_NE(body.body->find("num_sms <= (long long)(100)"), std::string::npos) << *body.body;
  // It compiles in a FA3-like context.
  const fs::path dir = temp_dir("fa3body");
  std::ofstream(dir / "fa3.cpp") << "#include <algorithm>\n#include <cmath>\n#include <vector>\n"
                                 << *body.body << "int main() { return num_splits_heuristic(4, 80, 40, 1, 1<<20, false, 128) == 2 ? 0 : 1; }\n";
  const std::string cmd = "g++ -std=c++17 -o '" + (dir / "fa3").string() + "' '" + (dir / "fa3.cpp").string() +
                          "' 2>'" + (dir / "cc.log").string() + "' && '" + (dir / "fa3").string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(dir / "cc.log");

  // nblk counts 128-row tiles; FA3's num_n_blocks counts kBlockN (176 at D=128): refused.
  const Fa3Body refused = emit_fa3_body(sample_rules());
  EXPECT_FALSE(refused.body);
  EXPECT_NE(refused.refusal.find("'batch'"), std::string::npos) << refused.refusal;
  DecisionFunction margin = ok;
  margin.rules[0].sm_margin = 3;
  EXPECT_NE(emit_fa3_body(margin).refusal.find("sm_margin"), std::string::npos);
  // write_exports leaves the reason next to the other files.
  write_exports(sample_rules(), dir);
  EXPECT_TRUE(fs::exists(dir / "fa3_refused.txt"));
  EXPECT_FALSE(fs::exists(dir / "fa3_num_splits_heuristic.inc"));
}
