// The FA3 patch export (distill.hpp emit_fa3_patch): applied with `git apply` to our own
// stand-in for FA3's sources (tests/heuristics/fa3_fixture, no FA3 code), compiled with
// the system compiler, and held to distill::evaluate on many shapes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <evodispatch/heuristics/distill.hpp>

#include "../support/devices.hpp"
#include "../support/run_command.hpp"
#include "../support/scratch.hpp"

namespace fs = std::filesystem;
using namespace evodispatch;
using namespace evodispatch::distill;

namespace {

const fs::path kFixture = fs::path(EVO_SOURCE_DIR) / "tests/heuristics/fa3_fixture";
constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::map<std::string, std::string> fixture_files() {
  return {{"hopper/flash_api.cpp", slurp(kFixture / "hopper/flash_api.cpp")},
          {"hopper/flash_api_stable.cpp", slurp(kFixture / "hopper/flash_api_stable.cpp")}};
}

bool have_git() { return std::system("git --version >/dev/null 2>&1") == 0; }

test::CommandResult sh(const std::string& cmd) { return test::run_command(cmd); }

// Rules of every kind in front of FA3's own dispatch: a quotient with a ceil_div, a
// pack_gqa = false rule, one with an sm_margin (which the patch cannot apply), one on cc.
DecisionFunction rules_with_fa3() {
  DecisionFunction fn;
  fn.method = "rules";
  fn.fallback = Fallback::fa3;
  Rule a;  // B*Hkv < 16 and nblk >= 8: min(num_sms // (ctas * 2), ceil(nblk / 3)) in [2, 48]
  a.when = {Bound{Feature::ctas, INT64_MIN, 15}, Bound{Feature::nblk, 8, INT64_MAX}};
  a.num_splits.quotient = Quotient{Feature::num_sms, Feature::ctas, 2};
  a.num_splits.ceil_div = CeilDiv{Feature::nblk, 3};
  a.num_splits.lo = 2;
  a.num_splits.hi = 48;
  Rule b;  // h_kv == 8, long KV: unpacked, one split
  b.when = {Bound{Feature::h_kv, 8, 8}, Bound{Feature::seqlen_k, 4000, INT64_MAX}};
  b.num_splits.constant = 1;
  b.pack_gqa = false;
  Rule c;  // big batches: 3 splits and an SM margin
  c.when = {Bound{Feature::batch, 64, INT64_MAX}};
  c.num_splits.constant = 3;
  c.sm_margin = 2;
  Rule d;  // pre-Hopper: ceil(kv_kib / 512)
  d.when = {Bound{Feature::cc, INT64_MIN, 89}};
  d.num_splits.ceil_div = CeilDiv{Feature::kv_kib, 512};
  d.num_splits.hi = 64;
  fn.rules = {a, b, c, d};
  fn.provenance = {{"policy", "test-rules"}, {"device", {{"name", "H100 SXM"}, {"num_sms", 132}, {"cc", 90}}}};
  return fn;
}

// A fitted-style function: unpacked short KV, then an unconditional last rule.
DecisionFunction tree_like() {
  DecisionFunction fn;
  fn.method = "tree";
  Rule a;
  a.when = {Bound{Feature::seqlen_k, INT64_MIN, 1024}, Bound{Feature::qpk, 2, INT64_MAX}};
  a.num_splits.constant = 1;
  a.pack_gqa = false;
  Rule b;
  b.num_splits.quotient = Quotient{Feature::num_sms, Feature::ctas, 1};
  b.num_splits.hi = 32;
  fn.rules = {a, b};
  return fn;
}

// A copy of the fixture as a git work tree, `patch` applied with git apply.
fs::path patched_checkout(const test::ScratchDir& dir, const std::string& patch) {
  const fs::path repo = dir.path() / "flash-attention";
  fs::create_directories(repo);
  fs::copy(kFixture / "hopper", repo / "hopper", fs::copy_options::recursive);
  EXPECT_EQ(sh("git -C '" + repo.string() + "' init -q").code, 0);
  std::ofstream(dir.path() / "fa3.patch", std::ios::binary) << patch;
  const auto r = sh("git -C '" + repo.string() + "' apply '" + (dir.path() / "fa3.patch").string() + "'");
  EXPECT_EQ(r.code, 0) << r.err << "\n" << patch;
  return repo;
}

// A driver that includes the patched FA3 file (its functions are inline), sets the params
// as mha_fwd does (num_splits first, then pack_gqa) and prints both for every input row.
constexpr const char* kDriver = R"CPP(
#include <cstdio>
int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::FILE* in = std::fopen(argv[1], "r");
  if (!in) return 2;
  int b, lq, lk, h, hk, d, dtype, page, causal, sms, arch, tma;
  while (std::fscanf(in, "%d %d %d %d %d %d %d %d %d %d %d %d", &b, &lq, &lk, &h, &hk, &d, &dtype, &page, &causal,
                     &sms, &arch, &tma) == 12) {
    Flash_fwd_params p{};
    p.b = b; p.seqlen_q = lq; p.seqlen_k = lk; p.h = h; p.h_k = hk; p.d = d;
    p.is_e4m3 = dtype == 2; p.is_bf16 = dtype == 0;
    p.page_table = page ? reinterpret_cast<int*>(1) : nullptr;
    p.page_size = page ? page : 1;  // as FA3 sets it without a page table
    p.pagedkv_tma = tma != 0; p.is_causal = causal != 0; p.num_sm = sms; p.arch = arch;
    p.num_splits = get_num_splits(p);
    p.pack_gqa = get_pack_gqa(p);
    std::printf("%d %d\n", p.num_splits, p.pack_gqa ? 1 : 0);
  }
  return 0;
}
)CPP";

std::string compile_driver(const fs::path& repo, const std::string& file, const std::string& defines) {
  const fs::path src = repo / ("driver_" + fs::path(file).stem().string() + ".cpp");
  std::ofstream(src) << "#include \"" << file << "\"\n" << kDriver;
  const fs::path exe = fs::path(src).replace_extension(defines.empty() ? "" : ".nosplit");
  const char* cxx = std::getenv("CXX");
  const std::string cmd = std::string(cxx && *cxx ? cxx : "c++") + " -std=c++17 -O1 -Wall -Werror " + defines + " -I'" +
                          repo.string() + "' -o '" + exe.string() + "' '" + src.string() + "'";
  const auto r = sh(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.err << r.out;
  return exe.string();
}

struct Case {
  Shape shape;
  DeviceInfo hw;
  bool pagedkv_tma = false;
};

std::vector<Case> cases() {
  Domain d = Domain::small();
  d.head_dim = {64, 128, 256};
  d.page_size = {0, 64, 256};
  d.seqlen_q = {1, 4};
  d.dtype = {Dtype::bf16, Dtype::fp16, Dtype::fp8};
  d.h_kv = {1, 2, 8};
  d.qpk = {1, 4, 8};
  std::vector<Case> out;
  int i = 0;
  for (auto [sms, cc] : {std::pair{132, 90}, std::pair{78, 90}, std::pair{108, 80}}) {
    DeviceInfo hw = test::h100_sxm();
    hw.num_sms = sms;
    hw.cc = cc;
    for (const Shape& s : random_shapes(d, 1500, static_cast<std::uint64_t>(sms)))
      out.push_back({s, hw, s.page_size > 0 && ++i % 2 == 0});  // paged with and without TMA
  }
  return out;
}

// Runs the driver on every case; the expected decision is evaluate()'s, packed where FA3
// must pack. Returns the number of differences (the first ones are reported).
int differences(const std::string& exe, const DecisionFunction& fn, const std::vector<Case>& all, bool no_split) {
  const fs::path rows = fs::path(exe).replace_extension(".rows");
  {
    std::ofstream f(rows);
    for (const Case& c : all) {
      const Shape& s = c.shape;
      f << s.batch << ' ' << s.seqlen_q << ' ' << s.seqlen_k << ' ' << s.h_q << ' ' << s.h_kv << ' ' << s.head_dim << ' '
        << static_cast<int>(s.dtype) << ' ' << s.page_size << ' ' << (s.causal ? 1 : 0) << ' ' << c.hw.num_sms << ' '
        << c.hw.cc << ' ' << (c.pagedkv_tma ? 1 : 0) << '\n';
    }
  }
  const auto r = sh("'" + exe + "' '" + rows.string() + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  std::istringstream out(r.out);
  int bad = 0;
  for (const Case& c : all) {
    int splits = -1, pack = -1;
    out >> splits >> pack;
    const Decision want = evaluate(fn, c.shape, c.hw);
    const int want_splits = no_split ? 1 : want.num_splits;
    const bool forced = c.hw.cc < 90 || (c.shape.page_size > 0 && !c.pagedkv_tma) || want_splits > 1;
    const int want_pack = forced ? 1 : (*want.pack_gqa ? 1 : 0);
    if (splits != want_splits || pack != want_pack) {
      if (++bad <= 5)
        ADD_FAILURE() << exe << ": " << describe(c.shape) << " on " << c.hw.num_sms << " SMs cc " << c.hw.cc
                      << " (tma " << c.pagedkv_tma << "): got " << splits << "/" << pack << ", want " << want_splits
                      << "/" << want_pack;
    }
  }
  return bad;
}

}  // namespace

TEST(Fa3Patch, AppliesToBothFilesAndTheCompiledFunctionsDecideAsTheDistilledOne) {
  if (!have_git()) GTEST_SKIP() << "git not installed";
  const auto all = cases();
  for (const DecisionFunction& fn : {rules_with_fa3(), tree_like()}) {
    test::ScratchDir dir;
    const std::string patch = emit_fa3_patch(fn, fixture_files(), kCommit);
    const fs::path repo = patched_checkout(dir, patch);
    ASSERT_TRUE(fs::exists(repo / "hopper/evodispatch_heuristic.h"));
    for (const char* file : {"hopper/flash_api.cpp", "hopper/flash_api_stable.cpp"}) {
      const std::string text = slurp(repo / file);
      // Our include comes after flash.h and outside the fixture's #ifdef.
      const auto inc = text.find("#include \"evodispatch_heuristic.h\"");
      ASSERT_NE(inc, std::string::npos) << file;
      EXPECT_LT(text.find("#include \"flash.h\""), inc) << file;
      EXPECT_EQ(text.find("#endif\n#include \"evodispatch_heuristic.h\""), std::string::npos) << file;
      EXPECT_EQ(differences(compile_driver(repo, file, ""), fn, all, false), 0) << file;
    }
    // The split guard is kept: with it, one split and FA3's forced-pack rule on top.
    EXPECT_EQ(differences(compile_driver(repo, "hopper/flash_api.cpp", "-DFLASHATTENTION_DISABLE_SPLIT"), fn, all, true),
              0);
    // What the fixture holds outside the two functions is untouched.
    EXPECT_NE(slurp(repo / "hopper/flash_api.cpp").find("inline int fixture_after() { return 7; }"), std::string::npos);
  }
}

TEST(Fa3Patch, HeaderSaysWhatItChangesAndWhichRulesSetAnSmMargin) {
  const std::string patch = emit_fa3_patch(rules_with_fa3(), fixture_files(), kCommit);
  const std::string head = patch.substr(0, patch.find("diff --git"));
  for (const char* want : {"Generated by `evodispatch distill`", kCommit, "policy test-rules",
                           "device H100 SXM (132 SMs, cc 90)", "get_scheduler_metadata",
                           "flash_prepare_scheduler.cu", "pretending batch = 1", "Setting one: rule 3 (sm_margin 2).",
                           "git -C flash-attention apply fa3.patch"})
    EXPECT_NE(head.find(want), std::string::npos) << want << "\n" << head;
  // Nothing in the header reads as a diff line to git apply.
  std::istringstream lines(head);
  for (std::string line; std::getline(lines, line);)
    for (const char* bad : {"---", "+++", "@@", "diff ", "index "}) EXPECT_NE(line.rfind(bad, 0), 0u) << line;
  EXPECT_NE(emit_fa3_patch(tree_like(), fixture_files(), kCommit).find("Setting one: none."), std::string::npos);
  // The new file first, then the two sources.
  EXPECT_LT(patch.find("+++ b/hopper/evodispatch_heuristic.h"), patch.find("+++ b/hopper/flash_api.cpp"));
  EXPECT_LT(patch.find("+++ b/hopper/flash_api.cpp"), patch.find("+++ b/hopper/flash_api_stable.cpp"));
}

TEST(Fa3Patch, AMissingFunctionIsAnInputErrorNamingFileAndFunction) {
  auto files = fixture_files();
  std::string& api = files["hopper/flash_api.cpp"];
  api.replace(api.find("inline bool get_pack_gqa("), 25, "inline bool get_pack_gqa_renamed(");
  try {
    emit_fa3_patch(tree_like(), files, kCommit);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("hopper/flash_api.cpp"), std::string::npos) << what;
    EXPECT_NE(what.find("get_pack_gqa(Flash_fwd_params const& params)"), std::string::npos) << what;
  }
  // Only declared, never defined: not found either.
  auto declared = fixture_files();
  std::string& stable = declared["hopper/flash_api_stable.cpp"];
  const auto at = stable.find("inline int get_num_splits(");
  stable = stable.substr(0, at) + "inline int get_num_splits(Flash_fwd_params const& params);\n";
  try {
    emit_fa3_patch(tree_like(), declared, kCommit);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hopper/flash_api_stable.cpp: `inline int get_num_splits"), std::string::npos)
        << e.what();
  }
  // An already patched source is refused rather than patched twice.
  auto twice = fixture_files();
  twice["hopper/flash_api.cpp"].insert(0, "#include \"evodispatch_heuristic.h\"\n");
  EXPECT_THROW(emit_fa3_patch(tree_like(), twice, kCommit), InputError);
}

TEST(Fa3Patch, SourceNeedsACommitWhenNotAGitCheckoutAndTheStableFileIsOptional) {
  test::ScratchDir dir;
  const fs::path src = dir.path() / "fa";
  fs::create_directories(src / "hopper");
  try {
    read_fa3_source(src, kCommit);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find((src / "hopper/flash_api.cpp").string()), std::string::npos) << e.what();
  }
  fs::copy_file(kFixture / "hopper/flash_api.cpp", src / "hopper/flash_api.cpp");
  try {
    read_fa3_source(src, "");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--fa3-commit"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_fa3_source(src, "not-a-sha"), InputError);
  const Fa3Source only_api = read_fa3_source(src, kCommit);
  EXPECT_EQ(only_api.commit, kCommit);
  ASSERT_EQ(only_api.files.size(), 1u);
  EXPECT_EQ(only_api.files.begin()->first, "hopper/flash_api.cpp");
  // Written whole, beside nothing half-written.
  write_fa3_patch(tree_like(), only_api, dir.path() / "out");
  EXPECT_NE(slurp(dir.path() / "out/fa3.patch").find("+++ b/hopper/flash_api.cpp"), std::string::npos);
  EXPECT_EQ(slurp(dir.path() / "out/fa3.patch").find("flash_api_stable"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.path() / "out/fa3.patch.tmp"));
}

TEST(Fa3Patch, AGitCheckoutGivesItsHead) {
  if (!have_git()) GTEST_SKIP() << "git not installed";
  test::ScratchDir dir;
  const fs::path src = dir.path() / "flash-attention";
  fs::create_directories(src);
  fs::copy(kFixture / "hopper", src / "hopper", fs::copy_options::recursive);
  const std::string git = "git -C '" + src.string() + "' -c user.name=t -c user.email=t@t ";
  ASSERT_EQ(sh(git + "init -q && " + git + "add hopper && " + git + "commit -q -m fixture").code, 0);
  const auto head = sh(git + "rev-parse HEAD");
  ASSERT_EQ(head.code, 0);
  const std::string sha = head.out.substr(0, 40);
  const Fa3Source s = read_fa3_source(src, "");
  EXPECT_EQ(s.commit, sha);
  EXPECT_EQ(s.files.size(), 2u);
  EXPECT_EQ(read_fa3_source(src, sha.substr(0, 10)).commit, sha);  // a prefix of HEAD agrees
  try {
    read_fa3_source(src, std::string(40, 'a'));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("differs from"), std::string::npos) << e.what();
  }
  // A folder inside another checkout is not one: that HEAD is not FA3's commit.
  fs::create_directories(src / "vendor");
  fs::copy(kFixture / "hopper", src / "vendor/hopper", fs::copy_options::recursive);
  try {
    read_fa3_source(src / "vendor", "");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--fa3-commit"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_fa3_source(src / "vendor", kCommit).commit, kCommit);
}
