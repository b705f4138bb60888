// FlashAttention-3's own kernels through the FA3 worker (--device fa3:cuda:0): the real FA3
// build named by EVODISPATCH_FA3_PATH (its hopper/ folder, made by scripts/fa3-build.sh).
// Each test skips cleanly without a GPU or without an FA3 build that imports.
// scripts/gpu-fa3.sh gpu-tests builds FA3 and runs them.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/worker.hpp>
#include <evodispatch/heuristics/policy.hpp>

#include "../../support/run_command.hpp"
#include "gpu_support.hpp"

namespace evodispatch::gputest {
namespace {

using nlohmann::json;

std::string fa3_path() {
  const char* p = std::getenv("EVODISPATCH_FA3_PATH");
  return p ? p : "";
}

bool fa3_installed() {
  return test::run_command("/usr/bin/env python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); "
                           "import flash_attn_interface' '" + fa3_path() + "'").code == 0;
}

#define EVO_REQUIRE_FA3()                                                                     \
  EVO_REQUIRE_GPU();                                                                          \
  if (!fa3_installed()) GTEST_SKIP() << "FA3 is not installed (EVODISPATCH_FA3_PATH: hopper/)"; \
  else                                                                                        \
    (void)0

std::unique_ptr<RemoteEvaluator> fa3_worker() {
  return std::make_unique<RemoteEvaluator>("fa3:cuda:0",
                                           fa3_worker_command("fa3:cuda:0", 0, gpu()->device(), gpu()->fingerprint()));
}

TEST(GpuFa3, ItsKernelsPassTheNumericCheckAndFollowTheKnobs) {
  EVO_REQUIRE_FA3();
  const auto worker = fa3_worker();
  RemoteEvaluator& fa3 = *worker;
  EXPECT_EQ(fa3.fingerprint(), gpu()->fingerprint());  // the same GPU row as the built-in kernels
  EXPECT_EQ(fa3.kernel_build().rfind("fa3:", 0), 0u) << fa3.kernel_build();
  const Shape s = S().b(1).lk(32768).heads(32, 8);  // 8 CTAs at one split
  const Measurement one = fa3.measure(s, Decision{1, true, 0}, TimingOptions{});
  const Measurement eight = fa3.measure(s, Decision{8, true, 0}, TimingOptions{});
  ASSERT_TRUE(one.ok && eight.ok) << one.error << eight.error;
  EXPECT_EQ(one.plan["fa3_splits"], json::array({1}));
  EXPECT_EQ(eight.plan["fa3_splits"], json::array({8}));
  EXPECT_LT(eight.median_us, one.median_us / 2) << "8 splits fill 64 SMs instead of 8";
  for (const Measurement* m : {&one, &eight}) {
    ASSERT_TRUE(m->rel_error.has_value());
    EXPECT_LT(*m->rel_error, 1e-2);
    EXPECT_EQ(m->plan["gpu"]["cold_l2_met"], true);
  }
  // A paged cache and unpacked heads reach FA3 too, and pass the check.
  const Measurement paged = fa3.measure(S().b(4).lk(3000).heads(32, 8).page(16), Decision{3, false, 0}, TimingOptions{});
  ASSERT_TRUE(paged.ok) << paged.error;
  EXPECT_EQ(paged.plan["fa3"]["pack_gqa"], false);
  EXPECT_LT(*paged.rel_error, 1e-2);
  EXPECT_EQ(fa3.restarts(), 0);
}

// An fp8 cache runs FA3's e4m3 kernels (a build made with fa3-build.sh --fp8; skipped on a
// build without them, which the worker refuses): within e4m3's tolerance against the reference
// on the dequantized inputs, and at about half the 16-bit call's time on a cache that streams.
TEST(GpuFa3, AnFp8CacheRunsFa3sE4m3Kernels) {
  EVO_REQUIRE_FA3();
  const auto worker = fa3_worker();
  const Shape bf16 = S().b(4).lk(16384).heads(32, 8);  // 268 MB in bf16
  const Shape fp8 = S().b(4).lk(16384).heads(32, 8).fp8();
  const Measurement m8 = worker->measure(fp8, Decision{4, true, 0}, TimingOptions{});
  if (!m8.ok && m8.error.find("no e4m3 kernels") != std::string::npos) GTEST_SKIP() << m8.error;
  ASSERT_TRUE(m8.ok) << m8.error;
  const Measurement m16 = worker->measure(bf16, Decision{4, true, 0}, TimingOptions{});
  ASSERT_TRUE(m16.ok) << m16.error;
  ASSERT_TRUE(m8.rel_error && m16.rel_error);
  EXPECT_GT(*m8.rel_error, *m16.rel_error) << "q and P rounded to e4m3 too";
  EXPECT_LT(m8.median_us, 0.7 * m16.median_us) << "half the bytes";
  EXPECT_EQ(m8.plan["fa3_dtypes"]["q"], "e4m3");
  EXPECT_EQ(worker->restarts(), 0);
}

// The fa3-kvcache policy ports FA3 on its serving path: for each shape, the split FA3's
// scheduler gives when FA3 decides for itself is the policy's, and the two calls time alike.
TEST(GpuFa3, DecidingForItselfFa3RunsTheFa3KvcachePolicysSplit) {
  EVO_REQUIRE_FA3();
  const DeviceInfo& hw = gpu()->device();
  const std::filesystem::path file = test::scratch_path("fa3-port.jsonl");
  {
    std::ofstream out(file);
    for (const Shape& s : {S().b(1).lk(512).heads(64, 8).s, S().b(2).lk(8192).heads(32, 8).s,
                           S().b(16).lk(4096).heads(32, 8).s, S().b(64).lk(2048).heads(8, 1).s,
                           S().b(3).lk(30000).heads(28, 4).s, S().b(128).lk(300).heads(32, 8).s}) {
      json j = to_json(s);
      const Decision d = resolve(fa3_kvcache_reference(s, hw), s);
      j["num_splits"] = d.num_splits;
      j["pack_gqa"] = *d.pack_gqa;
      j["sm_margin"] = d.sm_margin;
      out << j.dump() << "\n";
    }
  }
  const test::CommandResult r = test::run_command("EVODISPATCH_FA3_PATH='" + fa3_path() + "' /usr/bin/env python3 " +
                                                  EVO_SOURCE_DIR "/evaluator/fa3/fa3_worker.py --port-check " +
                                                  file.string() + " --pairs 10");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<json> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(json::parse(line));
  ASSERT_EQ(rows.size(), 7u) << r.out;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i)
    EXPECT_EQ(rows[i]["fa3_splits"], rows[i]["policy_splits"]) << rows[i].dump();
  EXPECT_EQ(rows.back()["same_split"], 6);
  EXPECT_NEAR(rows.back()["geomean_own_over_policy"].get<double>(), 1.0, 0.03) << rows.back().dump();
}

}  // namespace
}  // namespace evodispatch::gputest
