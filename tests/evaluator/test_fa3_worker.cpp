// The FlashAttention-3 backend without a GPU: the real worker (evaluator/fa3/fa3_worker.py,
// as the binary embeds it) in a child process, over a fake FA3 (fake_fa3_backend.py) that
// fails the ways FA3 fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/worker.hpp>

#include "../support/devices.hpp"
#include "../support/run_command.hpp"

using namespace evodispatch;
using nlohmann::json;

namespace {

DeviceInfo h100() { return test::h100_sxm(); }

const std::string kFingerprint = "NVIDIA H100 80GB HBM3/132sm/cc90/81079MiB/driver13.0";

bool have_python() { return std::system("/usr/bin/env python3 -c pass >/dev/null 2>&1") == 0; }

class Fa3Worker : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_python()) GTEST_SKIP() << "python3 is not installed";
    ::setenv("EVODISPATCH_FA3_BACKEND", EVO_SOURCE_DIR "/tests/evaluator/fake_fa3_backend.py", 1);
    remote = std::make_unique<RemoteEvaluator>("fa3:cuda:0", fa3_worker_command("fa3:cuda:0", 0, h100(), kFingerprint));
  }
  void TearDown() override { ::unsetenv("EVODISPATCH_FA3_BACKEND"); }
  std::unique_ptr<RemoteEvaluator> remote;
};

Shape gqa(int batch, int seqlen_k, int head_dim = 128) { return Shape{batch, 1, seqlen_k, 32, 8, head_dim, Dtype::bf16, 0, true}; }

}  // namespace

TEST_F(Fa3Worker, ItsRowsKeyOnTheSameGpuAndOnFa3sOwnBuild) {
  EXPECT_EQ(remote->spec(), "fa3:cuda:0");
  EXPECT_EQ(remote->device(), h100());
  EXPECT_EQ(remote->fingerprint(), kFingerprint);  // the built-in kernels' device row
  // FA3's build, never evodispatch's kernel hash: its rows cannot mix with theirs.
  EXPECT_EQ(remote->kernel_build(), "fa3:fake-fa3-0123abcd");
  EXPECT_EQ(remote->measuring_protocol(), 1);
  const Measurement m = remote->measure(gqa(4, 8192), Decision{4, std::nullopt, 0}, TimingOptions{});
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_EQ(m.key.kernel_build, "fa3:fake-fa3-0123abcd");
  EXPECT_EQ(m.key.decision, (Decision{4, true, 0}));  // resolved: packed when qpk > 1
  EXPECT_EQ(to_json(m.key), to_json(remote->key(gqa(4, 8192), Decision{4, std::nullopt, 0}, TimingOptions{})));
}

TEST_F(Fa3Worker, DecisionsReachFa3sKnobsAndTheRowFollowsTheMeasuringProtocol) {
  const Shape s = gqa(1, 32768);  // 8 CTAs at one split: splitting fills the SMs
  const Measurement one = remote->measure(s, Decision{1, true, 0}, TimingOptions{});
  const Measurement eight = remote->measure(s, Decision{8, false, 4}, TimingOptions{});
  ASSERT_TRUE(one.ok && eight.ok) << one.error << eight.error;
  EXPECT_EQ(eight.plan["fa3"], (json{{"num_splits", 8}, {"pack_gqa", false}, {"sm_margin", 4}}));
  EXPECT_EQ(eight.plan["fa3_splits"], json::array({8}));
  EXPECT_LT(eight.median_us, one.median_us / 2);
  EXPECT_EQ(one.samples, 30);
  EXPECT_LE(one.p10_us, one.median_us);
  EXPECT_LE(one.median_us, one.p90_us);
  ASSERT_TRUE(one.rel_error.has_value());
  EXPECT_LT(*one.rel_error, 1e-2);
  EXPECT_EQ(one.plan["poisoned"], true);
  // Cold L2: enough input sets to exceed twice the L2, and a graph that visits each.
  const json& gpu = one.plan["gpu"];
  EXPECT_GT(gpu["buffer_sets"].get<double>() * gpu["set_bytes"].get<double>(), 2.0 * h100().l2_bytes);
  EXPECT_GE(gpu["calls_per_replay"].get<int>(), gpu["buffer_sets"].get<int>());
  EXPECT_EQ(gpu["cold_l2_met"], true);
  // FA3 reads num_splits as a bound: past what its scheduler gives, the run is the same.
  const Measurement bound = remote->measure(gqa(4, 2048), Decision{64, true, 0}, TimingOptions{});
  const Measurement four = remote->measure(gqa(4, 2048), Decision{4, true, 0}, TimingOptions{});
  ASSERT_TRUE(bound.ok && four.ok) << bound.error << four.error;
  EXPECT_EQ(bound.plan["fa3_splits"], json::array({4}));
  EXPECT_NEAR(bound.median_us, four.median_us, 0.02 * four.median_us);
}

TEST_F(Fa3Worker, ComparisonsAreInterleavedPairs) {
  const Comparison c = remote->compare(gqa(1, 32768), Decision{8, true, 0}, Decision{1, true, 0}, TimingOptions{}, 12);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.pairs, 12);
  EXPECT_EQ(c.a.samples, 12);
  EXPECT_LT(c.ratio, 0.5);
  EXPECT_LE(c.ratio_lo, c.ratio);
  EXPECT_LE(c.ratio, c.ratio_hi);
  EXPECT_NEAR(c.ratio, c.a.median_us / c.b.median_us, 0.02 * c.ratio);
}

TEST_F(Fa3Worker, FailuresAreRowsAndAStickyErrorRestartsTheWorker) {
  // A head dim FA3's build lacks: FA3's own message, in a failed row.
  const Measurement d96 = remote->measure(gqa(2, 1024, 96), Decision{1, true, 0}, TimingOptions{});
  EXPECT_FALSE(d96.ok);
  EXPECT_NE(d96.error.find("does not support headdim 96"), std::string::npos) << d96.error;
  // NaN outputs: the numeric check fails the row.
  const Measurement nan = remote->measure(gqa(2, 1024), Decision{13, true, 0}, TimingOptions{});
  EXPECT_FALSE(nan.ok);
  EXPECT_NE(nan.error.find("numeric check failed: 5 NaN"), std::string::npos) << nan.error;
  const Comparison cmp = remote->compare(gqa(2, 1024), Decision{1, true, 0}, Decision{13, true, 0}, TimingOptions{});
  EXPECT_FALSE(cmp.ok);
  EXPECT_EQ(cmp.error.rfind("b: numeric check failed", 0), 0u) << cmp.error;
  // An illegal address poisons the context: that row fails, the worker exits, and the
  // next request runs in a new one.
  const pid_t first = remote->worker_pid();
  const Measurement crash = remote->measure(gqa(2, 1024), Decision{99, true, 0}, TimingOptions{});
  EXPECT_FALSE(crash.ok);
  EXPECT_NE(crash.error.find("illegal memory access"), std::string::npos) << crash.error;
  const Measurement after = remote->measure(gqa(2, 1024), Decision{2, true, 0}, TimingOptions{});
  EXPECT_TRUE(after.ok) << after.error;
  EXPECT_EQ(remote->restarts(), 1);
  EXPECT_NE(remote->worker_pid(), first);
}

TEST_F(Fa3Worker, BadRequestsGetAnErrorReplyAndTheWorkerGoesOn) {
  const json unknown = remote->request({{"op", "launch"}});
  EXPECT_FALSE(unknown.value("ok", true));
  EXPECT_NE(unknown.value("error", "").find("unknown op"), std::string::npos);
  const json bad_shape = remote->request({{"op", "measure"}, {"shape", {{"seqlen_k", 0}, {"h_q", 8}}}, {"decision", {{"num_splits", 1}}}});
  EXPECT_FALSE(bad_shape.value("ok", true));
  EXPECT_NE(bad_shape.value("error", "").find("seqlen_k"), std::string::npos);
  const json bad_q = remote->request(
      {{"op", "measure"}, {"shape", {{"seqlen_k", 64}, {"h_q", 8}, {"dtype", "bf16"}, {"q_dtype", "fp16"}}}, {"decision", {{"num_splits", 1}}}});
  EXPECT_NE(bad_q.value("error", "").find("shape.q_dtype: only an fp8 cache takes one"), std::string::npos) << bad_q;
  EXPECT_TRUE(remote->measure(gqa(1, 512), Decision{1, true, 0}, TimingOptions{}).ok);
  EXPECT_EQ(remote->restarts(), 0);
}

// scripts/gpu-fa3.sh's patch step: a patched FA3 build against stock, both deciding for
// themselves, timed in one worker process (fake builds: the patched one picks 1 split at
// Lk = 2048, where that is slower, and at Lk = 256, where it is faster).
class Fa3Regress : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_python()) GTEST_SKIP() << "python3 is not installed";
    dir = test::scratch_path("fa3-regress");
    std::filesystem::create_directories(dir / "stock" / "hopper");
    std::filesystem::create_directories(dir / "patched" / "hopper");
    write("patched/NAMESPACE", "flash_attn_3_evo\n");
    write("patched/hopper/fake.json", R"({"build": "fake-patched", "own_splits": {"2048": 1, "256": 1}})");
    ::setenv("EVODISPATCH_FA3_BACKEND", EVO_SOURCE_DIR "/tests/evaluator/fake_fa3_backend.py", 1);
  }
  void TearDown() override {
    ::unsetenv("EVODISPATCH_FA3_BACKEND");
    std::filesystem::remove_all(dir);
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; }
  // decide --json lines: the program's decision per shape.
  void decisions(const std::string& name, const std::vector<std::pair<Shape, int>>& rows) {
    std::string text;
    for (const auto& [shape, splits] : rows) {
      json j = to_json(shape);
      j["num_splits"] = splits;
      j["pack_gqa"] = true;
      j["sm_margin"] = 0;
      text += j.dump() + "\n";
    }
    write(name, text);
  }
  // The worker's --regress run: its JSON lines; its exit status and stderr in `run`.
  std::vector<json> regress(const std::string& extra) {
    run = test::run_command("/usr/bin/env python3 " EVO_SOURCE_DIR "/evaluator/fa3/fa3_worker.py --regress " +
                            (dir / "program.jsonl").string() + " --stock " + (dir / "stock/hopper").string() +
                            " --patched " + (dir / "patched/hopper").string() + " --pairs 6 --device-json '" +
                            json{{"name", "H100"}, {"num_sms", 132}, {"l2_bytes", 50 << 20}, {"cc", 90}}.dump() +
                            "' " + extra);
    std::vector<json> out;
    std::istringstream lines(run.out);
    for (std::string line; std::getline(lines, line);) out.push_back(json::parse(line));
    return out;
  }
  std::filesystem::path dir;
  test::CommandResult run;
};

TEST_F(Fa3Regress, TimesBothBuildsInOneProcessAndConfirmsWhatFallsUnderTheFloor) {
  const Shape slower = gqa(4, 2048), faster = gqa(8, 256), same = gqa(1, 8192), unbuilt = gqa(1, 8192, 96);
  decisions("program.jsonl", {{slower, 1}, {faster, 1}, {same, 16}, {unbuilt, 16}});
  decisions("seq-aware.jsonl", {{slower, 2}, {faster, 2}, {same, 2}, {unbuilt, 2}});
  const auto out = regress("--beside seq-aware=" + (dir / "seq-aware.jsonl").string());
  ASSERT_EQ(out.size(), 5u) << run.err;
  EXPECT_EQ(run.code, 1) << "a shape is confirmed under the floor";
  // Lk = 2048: patched FA3 runs the program's 1 split where stock runs 4, and is slower.
  EXPECT_EQ(out[0]["patched_splits"], json::array({1}));
  EXPECT_EQ(out[0]["stock_splits"], json::array({4}));
  EXPECT_TRUE(out[0]["patched_runs_decision"].get<bool>());
  EXPECT_LT(out[0]["speedup"].get<double>(), 0.7);
  EXPECT_LT(out[0]["confirmed_speedup"].get<double>(), 0.99);
  EXPECT_NEAR(out[0]["stock_us"].get<double>() / out[0]["patched_us"].get<double>(), out[0]["speedup"].get<double>(), 0.02);
  // Lk = 256: one split instead of two saves the combine.
  EXPECT_GT(out[1]["speedup"].get<double>(), 1.2);
  EXPECT_FALSE(out[1].contains("confirmed_speedup"));
  // Same splits in both builds: nothing to confirm, speedup 1.
  EXPECT_NEAR(out[2]["speedup"].get<double>(), 1.0, 0.02);
  // seq-aware's 2 splits, run on stock FA3, beside them.
  EXPECT_EQ(out[2]["beside"]["seq-aware"]["splits"], json::array({2}));
  EXPECT_LT(out[2]["beside"]["seq-aware"]["speedup"].get<double>(), 0.5);
  // A head dim the build lacks is this shape's failure, and the run goes on.
  EXPECT_NE(out[3].value("error", "").find("does not support headdim 96"), std::string::npos) << out[3].dump();
  const json& sum = out[4];
  EXPECT_EQ(sum["shapes"], 4);
  EXPECT_EQ(sum["failed"], 1);
  EXPECT_EQ(sum["stock_build"], "fa3:fake-fa3-0123abcd");
  EXPECT_EQ(sum["patched_build"], "fa3:fake-patched");
  EXPECT_EQ(sum["patched_runs_decision"], 3);
  EXPECT_EQ(sum["patched_differs_from_stock"], 2);
  EXPECT_EQ(sum["under_floor_confirmed"], 1);
  EXPECT_NEAR(sum["geomean_speedup"].get<double>(),
              std::cbrt(out[0]["speedup"].get<double>() * out[1]["speedup"].get<double>() * out[2]["speedup"].get<double>()),
              1e-9);
  EXPECT_EQ(sum["beside"]["seq-aware"]["under_floor"], 2);
  // And for a reader, on stderr: the changed shapes, slowest first, and the failure.
  const auto slow = run.err.find("B=4 Lq=1 Lk=2048 Hq=32 Hkv=8 D=128 bf16"), fast = run.err.find("B=8 Lq=1 Lk=256");
  ASSERT_NE(slow, std::string::npos) << run.err;
  EXPECT_LT(slow, fast) << run.err;
  EXPECT_NE(run.err.find("splits 4 -> 1"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(", REGRESSION)"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("failed: RuntimeError: This flash attention build does not support headdim 96"),
            std::string::npos) << run.err;
  EXPECT_NE(run.err.find("1 confirmed under 0.99"), std::string::npos) << run.err;
}

TEST_F(Fa3Regress, RefusesTwoBuildsOfOneNamespaceAndDecisionsOfOtherShapes) {
  decisions("program.jsonl", {{gqa(4, 2048), 1}});
  std::filesystem::remove(dir / "patched/NAMESPACE");
  EXPECT_TRUE(regress("").empty());
  EXPECT_NE(run.code, 0);
  EXPECT_NE(run.err.find("--namespace"), std::string::npos) << run.err;
  write("patched/NAMESPACE", "flash_attn_3_evo\n");
  decisions("seq-aware.jsonl", {{gqa(4, 4096), 1}});
  EXPECT_TRUE(regress("--beside seq-aware=" + (dir / "seq-aware.jsonl").string()).empty());
  EXPECT_NE(run.code, 0);
  EXPECT_NE(run.err.find("seq-aware.jsonl: its shapes are not those of"), std::string::npos) << run.err;
  write("program.jsonl", "{\"batch\": 4, \"seqlen_k\": 2048}\n");
  EXPECT_TRUE(regress("").empty());
  EXPECT_NE(run.code, 0);
  EXPECT_NE(run.err.find("program.jsonl:1:"), std::string::npos) << run.err;
}

// An fp8 cache runs FA3's e4m3 kernels: the row keys on the shape as sent (its query dtype
// included), the check takes e4m3's tolerance and still fails what is off by more, and the
// plan says what FA3 ran.
TEST_F(Fa3Worker, AnFp8CacheIsMeasuredAndCheckedWithE4m3sTolerance) {
  Shape fp8 = gqa(2, 8192);
  fp8.dtype = Dtype::fp8;
  fp8.q_dtype = Dtype::fp16;
  const Measurement m = remote->measure(fp8, Decision{2, true, 0}, TimingOptions{});
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_EQ(to_json(m.key), to_json(remote->key(fp8, Decision{2, true, 0}, TimingOptions{})));
  EXPECT_EQ(m.key.shape.q_dtype, Dtype::fp16);
  ASSERT_TRUE(m.rel_error.has_value());
  EXPECT_NEAR(*m.rel_error, 0.04, 1e-9);  // above the 16-bit tolerance, within e4m3's
  EXPECT_EQ(m.plan["fa3_dtypes"], (json{{"q", "e4m3"}, {"kv", "e4m3"}, {"out", "bf16"}}));
  Shape bf16 = fp8;
  bf16.dtype = Dtype::bf16;
  bf16.q_dtype = Dtype::bf16;
  const Measurement twin = remote->measure(bf16, Decision{2, true, 0}, TimingOptions{});
  ASSERT_TRUE(twin.ok) << twin.error;
  EXPECT_FALSE(twin.plan.contains("fa3_dtypes"));
  EXPECT_LT(m.median_us, 0.8 * twin.median_us);
  const Measurement off = remote->measure(fp8, Decision{7, true, 0}, TimingOptions{});
  EXPECT_FALSE(off.ok);
  EXPECT_NE(off.error.find("rel_error 0.3 >= 0.125"), std::string::npos) << off.error;
}

// What the build lacks is refused before FA3 is called: FA3 finds no kernel for a head dim
// above every built one and crashes the process (a head-dim-128 build at D = 256 on an H100).
TEST_F(Fa3Worker, WhatTheBuildLacksIsRefusedBeforeFa3IsCalled) {
  ::setenv("EVODISPATCH_FAKE_FA3_FLAGS",
           R"({"FLASHATTENTION_DISABLE_HDIM64": true, "FLASHATTENTION_DISABLE_HDIM96": true,
               "FLASHATTENTION_DISABLE_HDIM192": true, "FLASHATTENTION_DISABLE_HDIM256": true,
               "FLASHATTENTION_DISABLE_FP8": true, "FLASHATTENTION_DISABLE_FP16": true})",
           1);
  const auto built128 = std::make_unique<RemoteEvaluator>("fa3:cuda:0", fa3_worker_command("fa3:cuda:0", 0, h100(), kFingerprint));
  ::unsetenv("EVODISPATCH_FAKE_FA3_FLAGS");
  const Measurement d256 = built128->measure(gqa(2, 1024, 256), Decision{1, true, 0}, TimingOptions{});
  EXPECT_FALSE(d256.ok);
  EXPECT_NE(d256.error.find("unsupported shape: this FA3 build has no kernels for head dim 256 (built: 128;"),
            std::string::npos)
      << d256.error;
  EXPECT_TRUE(built128->measure(gqa(2, 1024, 64), Decision{1, true, 0}, TimingOptions{}).ok)
      << "D = 64 runs on the head-dim-128 kernels";
  Shape fp8 = gqa(2, 1024);
  fp8.dtype = Dtype::fp8;
  const Measurement no_fp8 = built128->measure(fp8, Decision{1, true, 0}, TimingOptions{});
  EXPECT_NE(no_fp8.error.find("no e4m3 kernels for an fp8 cache (scripts/fa3-build.sh --fp8)"), std::string::npos)
      << no_fp8.error;
  Shape fp16 = gqa(2, 1024);
  fp16.dtype = Dtype::fp16;
  EXPECT_NE(built128->measure(fp16, Decision{1, true, 0}, TimingOptions{}).error.find("this FA3 build has no fp16 kernels"),
            std::string::npos);
  EXPECT_EQ(built128->restarts(), 0);
}
