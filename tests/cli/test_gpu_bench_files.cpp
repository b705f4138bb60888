// bench/gpu without a GPU: every workload there loads, fp8_edge.py's fit (the `fp8-edge`
// step of scripts/gpu-kernels.sh) recovers the fixed cost and streaming rate that a bench
// output was made of, fp8_twins.py pairs each fp8 cache with its 16-bit twin,
// fp8_sample.py draws fresh fp8 caches with their twins, band_sample.py fresh shapes in bands
// of work items, ab_times.py compares two builds, and sass_stalls.py sums Nsight Compute's
// per-instruction warp samples.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/run_command.hpp"

namespace {

namespace fs = std::filesystem;

using evodispatch::test::CommandResult;
using evodispatch::test::run_command;
using evodispatch::test::run_evodispatch;

const fs::path kBenchGpu = fs::path(EVO_SOURCE_DIR) / "bench" / "gpu";

TEST(GpuBenchFiles, EveryWorkloadLoads) {
  int workloads = 0;
  for (const auto& e : fs::directory_iterator(kBenchGpu)) {
    if (e.path().extension() != ".json") continue;
    ++workloads;
    const CommandResult r = run_evodispatch("decide --policy fa3 --json --workload '" + e.path().string() + "'");
    EXPECT_EQ(r.code, 0) << e.path() << ": " << r.err;
    EXPECT_NE(r.out.find("\"num_splits\""), std::string::npos) << e.path();
  }
  EXPECT_GE(workloads, 10);
}

class Fp8EdgeScript : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not installed";
    dir_ = evodispatch::test::scratch_path("fp8-edge");
    fs::create_directories(dir_);
  }
  CommandResult fit(const nlohmann::json& bench) {
    std::ofstream(dir_ / "bench.json") << bench.dump();
    return run_command("python3 '" + (kBenchGpu / "fp8_edge.py").string() + "' '" + (dir_ / "bench.json").string() +
                       "' --out '" + (dir_ / "fit.json").string() + "'");
  }
  fs::path dir_;
};

nlohmann::json shape(int seqlen_k, const std::string& dtype) {
  return {{"batch", 4}, {"seqlen_q", 1}, {"seqlen_k", seqlen_k}, {"h_q", 8},          {"h_kv", 1},
          {"head_dim", 128}, {"dtype", dtype}, {"page_size", 0}, {"causal", true}};
}

TEST_F(Fp8EdgeScript, RecoversEachDtypesFixedCostAndRate) {
  // time = fixed + MB / (TB/s), a MB being 1e6 bytes and a TB/s one MB per us.
  nlohmann::json rows = nlohmann::json::array();
  for (int lk : {2048, 8192, 16384, 32768}) {
    const double mb16 = 2.0 * 4 * lk * 128 * 2 / 1e6;
    rows.push_back({{"shape", shape(lk, "bf16")}, {"median_us", 8.0 + mb16 / 3.1}});
    rows.push_back({{"shape", shape(lk, "fp8")}, {"median_us", 10.0 + mb16 / 2 / 3.0}});
  }
  // A row that failed counts nowhere (it has no time).
  rows.push_back({{"shape", shape(65536, "fp8")}, {"ok", false}, {"error", "out of memory"}});
  const CommandResult r = fit({{"policy", "fixed:12"}, {"rows", rows}});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("| B=4 Hq=8 Hkv=1 D=128 | 16-bit | 8.00 us | 3.100 TB/s |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| B=4 Hq=8 Hkv=1 D=128 | fp8 | 10.00 us | 3.000 TB/s |"), std::string::npos) << r.out;

  const auto report = nlohmann::json::parse(std::ifstream(dir_ / "fit.json"));
  const auto& ratios = report["families"][0]["ratios"];
  ASSERT_EQ(ratios.size(), 4u);  // the failed fp8 row has no 16-bit twin either
  // The ratio falls with the cache, toward rate16 / (2 rate8) = 0.517 as the fixed costs fade.
  const double mb = 2.0 * 4 * 32768 * 128 * 2 / 1e6;
  EXPECT_NEAR(ratios[3]["ratio"].get<double>(), (10.0 + mb / 6.0) / (8.0 + mb / 3.1), 1e-9);
  for (std::size_t i = 1; i < ratios.size(); ++i)
    EXPECT_LT(ratios[i]["ratio"].get<double>(), ratios[i - 1]["ratio"].get<double>());
}

TEST_F(Fp8EdgeScript, SaysWhichFileHadNothingMeasured) {
  const CommandResult r = fit({{"rows", {{{"shape", shape(4096, "fp8")}, {"ok", false}}}}});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("no family with measured rows in"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bench.json"), std::string::npos) << r.err;
}

class Fp8TwinsScript : public Fp8EdgeScript {
 protected:
  CommandResult twins(const nlohmann::json& bench, const std::string& file = "bench.json") {
    std::ofstream(dir_ / file) << bench.dump();
    return run_command("python3 '" + (kBenchGpu / "fp8_twins.py").string() + "' '" + (dir_ / file).string() +
                       "' --label FA3 --out '" + (dir_ / "twins.json").string() + "'");
  }
};

TEST_F(Fp8TwinsScript, PairsEachFp8CacheWithItsQueryDtypesTwinAndChecksTheTarget) {
  nlohmann::json q16 = shape(131072, "fp8");
  q16["q_dtype"] = "fp16";
  nlohmann::json fp16 = shape(131072, "fp16");
  const nlohmann::json rows = {
      // 268 MB in 16-bit: one pair meets 0.55, the fp16-query one (against the fp16 twin) does not.
      {{"shape", shape(131072, "bf16")}, {"median_us", 100.0}},
      {{"shape", shape(131072, "fp8")}, {"median_us", 54.0}},
      {{"shape", fp16}, {"median_us", 90.0}},
      {{"shape", q16}, {"median_us", 51.3}},
      // 1074 MB: counted over 256 MB and over 1 GB.
      {{"shape", shape(524288, "bf16")}, {"median_us", 400.0}},
      {{"shape", shape(524288, "fp8")}, {"median_us", 208.0}},
      // 67 MB: a ratio, no target.
      {{"shape", shape(32768, "bf16")}, {"median_us", 30.0}},
      {{"shape", shape(32768, "fp8")}, {"median_us", 18.0}},
      // A failed twin: its fp8 row has no pair, and the failure is listed.
      {{"shape", shape(8192, "bf16")}, {"ok", false}, {"error", "does not support headdim"}},
      {{"shape", shape(8192, "fp8")}, {"median_us", 9.0}}};
  const CommandResult r = twins({{"rows", rows}});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("| B=4 Lk=131072 Hq=8 Hkv=1 D=128 | 268 MB | 100.00 us | 54.00 us | 0.540 |"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| B=4 Lk=131072 Hq=8 Hkv=1 D=128 q=fp16 | 268 MB | 90.00 us | 51.30 us | 0.570 |"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("failed: does not support headdim"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FA3: 2 of 3 caches over 256 MB at most 0.55, geomean 0.543, worst 0.570"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("FA3: 1 of 1 caches over 1 GB at most 0.55"), std::string::npos) << r.out;
  const auto report = nlohmann::json::parse(std::ifstream(dir_ / "twins.json"));
  EXPECT_EQ(report["pairs"].size(), 4u);
  ASSERT_EQ(report["targets"].size(), 3u);
  EXPECT_EQ(report["targets"][0]["met"], true);
  EXPECT_EQ(report["targets"][1]["met"], false);
  EXPECT_EQ(report["targets"][2]["met"], true);
  EXPECT_EQ(report["over_1gb"]["met"], 1);
  EXPECT_EQ(report["over_1gb"]["count"], 1);
}

TEST_F(Fp8TwinsScript, NamesTheFileThatIsNotABenchOutput) {
  const CommandResult r = twins({{"workload", "fp8-models"}}, "not-bench.json");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("not-bench.json: not an `evodispatch bench --json` output"), std::string::npos) << r.err;
}

// A bench/gpu script over a file of `evodispatch decide --json` lines, and arguments.
class DecisionsScript : public Fp8EdgeScript {
 protected:
  CommandResult run_on(const std::string& script, const std::string& jsonl, const std::string& args) {
    std::ofstream(dir_ / "decisions.jsonl") << jsonl;
    return run_command("python3 '" + (kBenchGpu / script).string() + "' '" + (dir_ / "decisions.jsonl").string() +
                       "' " + args);
  }
};

class Fp8SampleScript : public DecisionsScript {
 protected:
  CommandResult sample(const std::string& jsonl, const std::string& args) { return run_on("fp8_sample.py", jsonl, args); }
};

TEST_F(Fp8SampleScript, DrawsFp8CachesInTheSizeRangeEachFollowedByItsTwin) {
  // 16-bit caches of 4 x Lk x 128 x 2 x 2 bytes: 2048 keys 4 MB ... 1M keys 2.1 GB.
  std::string jsonl;
  for (int lk : {2048, 131072, 262144, 524288, 1048576}) {
    nlohmann::json d = shape(lk, "fp8");
    d["num_splits"] = 4;  // a decision's fields besides the shape's are dropped
    jsonl += d.dump() + "\n";
  }
  jsonl += shape(262144, "bf16").dump() + "\n";  // not an fp8 cache: never drawn
  nlohmann::json q16 = shape(393216, "fp8");
  q16["q_dtype"] = "fp16";
  jsonl += q16.dump() + "\n\n";
  const CommandResult r = sample(jsonl, "--count 3 --seed 7 --min-mb 256 --max-mb 1500");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto w = nlohmann::json::parse(r.out);
  const auto& shapes = w["shapes"];
  ASSERT_EQ(shapes.size(), 6u) << r.out;
  double last_mb = 0;
  for (std::size_t i = 0; i < shapes.size(); i += 2) {
    const auto &f = shapes[i], &t = shapes[i + 1];
    EXPECT_EQ(f["dtype"], "fp8");
    EXPECT_EQ(f.count("num_splits"), 0u);
    EXPECT_EQ(t["dtype"], f.value("q_dtype", "bf16")) << t;  // the twin: the query dtype as the cache's
    EXPECT_EQ(t["seqlen_k"], f["seqlen_k"]);
    const double mb = 4.0 * f["seqlen_k"].get<int>() * 128 * 2 * 2 / 1e6;
    EXPECT_GT(mb, 256) << f;  // 2048 keys (4 MB) and 1M keys (2.1 GB) are out of range
    EXPECT_LE(mb, 1500) << f;
    EXPECT_GT(mb, last_mb);  // smallest cache first
    last_mb = mb;
  }
  EXPECT_NE(w["description"].get<std::string>().find("seed 7"), std::string::npos);
  EXPECT_EQ(sample(jsonl, "--count 3 --seed 7 --min-mb 256 --max-mb 1500").out, r.out);  // seeded
}

TEST_F(Fp8SampleScript, NamesTheLineThatIsNotAShapeAndTheFileWithNoneInRange) {
  CommandResult r = sample(shape(131072, "fp8").dump() + "\n{\"batch\": 4}\n", "");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("decisions.jsonl:2: not a shape"), std::string::npos) << r.err;
  r = sample(shape(2048, "fp8").dump() + "\n", "");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("decisions.jsonl: none of its 1 fp8 shapes"), std::string::npos) << r.err;
}

class BandSampleScript : public DecisionsScript {
 protected:
  CommandResult sample(const std::string& jsonl, const std::string& args) { return run_on("band_sample.py", jsonl, args); }
};

nlohmann::json model_shape(int batch, int seqlen_k, int h_q, int h_kv, int head_dim) {
  return {{"batch", batch}, {"seqlen_q", 1}, {"seqlen_k", seqlen_k}, {"h_q", h_q}, {"h_kv", h_kv},
          {"head_dim", head_dim}, {"dtype", "bf16"}, {"page_size", 0}, {"causal", true}, {"num_splits", 2}};
}

TEST_F(BandSampleScript, DrawsEachBandWithinTheFiltersReproducibly) {
  // 16-row items at one split: batch x h_kv x ceil(rows / 16).
  std::string jsonl;
  for (int b = 10; b <= 60; b += 5) jsonl += model_shape(b, 1000, 32, 4, 128).dump() + "\n";  // 40-240 items
  jsonl += model_shape(10, 1000, 32, 4, 128).dump() + "\n";    // a repeat: drawn once at most
  jsonl += model_shape(20, 1000, 32, 4, 64).dump() + "\n";     // another head dim
  jsonl += model_shape(20, 1000, 71, 1, 128).dump() + "\n";    // 71 rows, over --max-rows 16
  jsonl += model_shape(50, 900000, 32, 4, 128).dump() + "\n";  // over --max-keys
  jsonl += model_shape(45, 1000, 64, 4, 128).dump() + "\n";    // excluded below
  const fs::path excluded = dir_ / "seen.json";
  std::ofstream(excluded) << nlohmann::json{{"shapes", {model_shape(45, 1000, 64, 4, 128)}}}.dump();
  const std::string args = "--head-dim 128 --bands 40-100,150-250 --per-band 2 --seed 5 --max-keys 100000 --page-size 16 "
                           "--exclude '" + excluded.string() + "'";
  const CommandResult r = sample(jsonl, args);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto shapes = nlohmann::json::parse(r.out)["shapes"];
  ASSERT_EQ(shapes.size(), 4u) << r.out;
  int low = 0, high = 0, last = 0;
  for (const auto& s : shapes) {
    EXPECT_EQ(s["head_dim"], 128) << s;
    EXPECT_EQ(s["h_q"], 32) << s;  // neither the 71-row group nor the excluded 64-head shape
    EXPECT_EQ(s["seqlen_k"], 1000) << s;
    EXPECT_EQ(s["page_size"], 16) << s;
    EXPECT_EQ(s.count("num_splits"), 0u) << s;
    const int items = s["batch"].get<int>() * 4;
    EXPECT_GE(items, last) << "fewest items first";
    last = items;
    low += items >= 40 && items <= 100;
    high += items >= 150 && items <= 250;
  }
  EXPECT_EQ(low, 2);
  EXPECT_EQ(high, 2);
  EXPECT_EQ(sample(jsonl, args).out, r.out);  // seeded
  EXPECT_NE(sample(jsonl, "--head-dim 128 --bands 40-100,150-250 --per-band 2 --seed 6").out, r.out);
}

TEST_F(BandSampleScript, KeepsCachesBetweenMinAndMaxGb) {
  // B x 1000 keys x 4 KV heads x 128 x 2 (K and V) x 2 bytes: B x 2.048 MB, 20-123 MB.
  std::string jsonl;
  for (int b = 10; b <= 60; b += 5) jsonl += model_shape(b, 1000, 32, 4, 128).dump() + "\n";
  const CommandResult r = sample(jsonl, "--head-dim 128 --bands 1-1000 --per-band 100 --min-gb 0.05 --max-gb 0.1");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto drawn = nlohmann::json::parse(r.out);
  std::vector<int> batches;
  for (const auto& s : drawn["shapes"]) batches.push_back(s["batch"].get<int>());
  EXPECT_EQ(batches, (std::vector<int>{25, 30, 35, 40, 45})) << r.out;
}

TEST_F(BandSampleScript, NamesTheBandThatDoesNotParseAndTheOneNothingFills) {
  const std::string jsonl = model_shape(10, 1000, 32, 4, 128).dump() + "\n";
  CommandResult r = sample(jsonl, "--head-dim 128 --bands 40-x");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--bands: \"40-x\" is not LOW-HIGH"), std::string::npos) << r.err;
  r = sample(jsonl, "--head-dim 128 --bands 40-100,500-600");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("no shape of D = 128 in the band of 500-600 items"), std::string::npos) << r.err;
  r = sample(jsonl + "{\"batch\": 4}\n", "--head-dim 128 --bands 40-100");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("decisions.jsonl:2: not a shape"), std::string::npos) << r.err;
}

}  // namespace

class SassStallsScript : public DecisionsScript {
 protected:
  // ncu's source page as `--page source --csv --print-source sass` writes it: a note, the
  // kernel's name, then one row per SASS instruction.
  CommandResult summarize(const std::string& rows, const std::string& args = "") {
    const std::string page =
        "==WARNING== a note of ncu's\n\"Kernel Name\",\"void decode_kernel<128>(DecodeParams)\",\n"
        "\"Address\",\"Source\",\"Warp Stall Sampling (All Samples)\",\"stall_imc\",\"stall_long_sb\","
        "\"stall_imc (Not Issued)\"\n" + rows;
    std::ofstream(dir_ / "source.csv") << page;
    return run_command("python3 '" + (kBenchGpu / "sass_stalls.py").string() + "' '" + (dir_ / "source.csv").string() +
                       "' --json '" + (dir_ / "stalls.json").string() + "' " + args);
  }
};

TEST_F(SassStallsScript, CountsEachReasonAndTheConstantLinesInTheOrderFirstRead) {
  const CommandResult r = summarize(
      "\"0x0\",\"ULDC.64 UR4, c[0x0][0x238]\",\"90\",\"88\",\"0\",\"88\"\n"
      "\"0x10\",\"ULDC UR5, c[0x0][0x35c]\",\"70\",\"70\",\"0\",\"70\"\n"
      "\"0x20\",\"ULDC UR6, c[0x0][0x210]\",\"1\",\"0\",\"0\",\"0\"\n"  // 0x200's line again
      "\"0x30\",\"ISETP.GT.AND P2, PT, R158, R113, PT\",\"1,039\",\"0\",\"1,039\",\"0\"\n",
      "--top 2");
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(dir_ / "stalls.json");
  const auto s = nlohmann::json::parse(in).at(0);
  EXPECT_EQ(s["instructions"], 4);
  EXPECT_EQ(s["samples"], 1200);
  EXPECT_EQ(s["by_reason"]["long_sb"], 1039);
  EXPECT_EQ(s["by_reason"]["imc"], 158);  // "Not Issued" columns are not counted twice
  ASSERT_EQ(s["constant_lines"].size(), 2u) << s;
  EXPECT_EQ(s["constant_lines"][0]["line"], "0x200");
  EXPECT_EQ(s["constant_lines"][0]["imc_samples"], 88);
  EXPECT_EQ(s["constant_lines"][1]["line"], "0x340");
  EXPECT_EQ(s["constant_lines"][1]["instruction"], 1);
  ASSERT_EQ(s["hot"].size(), 2u);  // --top 2: the two with most samples, in program order
  EXPECT_EQ(s["hot"][0]["instruction"], 0);
  EXPECT_EQ(s["hot"][1]["reason"], "long_sb");
  EXPECT_NE(r.out.find("| long_sb | 1039 | 86.6% |"), std::string::npos) << r.out;
}

TEST_F(SassStallsScript, NamesAFileWithoutTheSourceTable) {
  std::ofstream(dir_ / "details.csv") << "\"ID\",\"Kernel Name\",\"Metric Name\"\n\"0\",\"k\",\"Duration\"\n";
  const CommandResult r =
      run_command("python3 '" + (kBenchGpu / "sass_stalls.py").string() + "' '" + (dir_ / "details.csv").string() + "'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("details.csv: no source table"), std::string::npos) << r.err;
}

class AbTimesScript : public Fp8EdgeScript {
 protected:
  CommandResult compare(const nlohmann::json& fresh, const nlohmann::json& base, const std::string& flags) {
    std::ofstream(dir_ / "new.json") << fresh.dump();
    std::ofstream(dir_ / "base.json") << base.dump();
    return run_command("python3 '" + (kBenchGpu / "ab_times.py").string() + "' " + flags + " --new '" +
                       (dir_ / "new.json").string() + "' --base '" + (dir_ / "base.json").string() + "'");
  }
};

nlohmann::json row(const nlohmann::json& shape, int splits, double us) {
  return {{"shape", shape}, {"decision", {{"num_splits", splits}, {"pack_gqa", true}, {"sm_margin", 0}}},
          {"median_us", us}};
}

TEST_F(AbTimesScript, ComparesEachShapesBestTimeWhenTheArmsPickedDifferentDecisions) {
  // Two builds' oracles: the new one's best is at 2 splits, the old one's at 4 (and a slower 2).
  nlohmann::json paged = shape(8192, "bf16");
  paged["page_size"] = 16;
  const nlohmann::json fresh = {{"rows", {row(shape(8192, "bf16"), 2, 80.0), row(paged, 1, 45.0)}}};
  const nlohmann::json base = {{"rows", {row(shape(8192, "bf16"), 4, 100.0), row(shape(8192, "bf16"), 2, 120.0),
                                         row(paged, 1, 50.0), {{"shape", paged}, {"ok", false}, {"error", "x"}}}}};
  const CommandResult r = compare(fresh, base, "--per-shape");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| bf16 D=128 | 1 | 0.800 | 0.800 | 0.800 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| bf16 D=128 paged | 1 | 0.900 | 0.900 | 0.900 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| all | 2 | 0.849 | | |"), std::string::npos) << r.out;
  // Per (shape, decision), the contiguous shape compares at the one split count both measured.
  const CommandResult by_decision = compare(fresh, base, "");
  ASSERT_EQ(by_decision.code, 0) << by_decision.err;
  EXPECT_NE(by_decision.out.find("| bf16 D=128 | 1 | 0.667 | 0.667 | 0.667 |"), std::string::npos) << by_decision.out;
  EXPECT_NE(by_decision.out.find("| all | 2 | 0.775 | | |"), std::string::npos) << by_decision.out;
}

TEST_F(AbTimesScript, NamesTheArmsAndListsEveryShapeOverTheLine) {
  // Ours against FA3: one shape 5% slower, one 1% slower, eight faster; --show 1 keeps the
  // table's ends, --over 0.02 adds every shape past 1.02 (here the slowest, shown anyway) and
  // counts them.
  nlohmann::json ours = {{"rows", nlohmann::json::array()}}, fa3 = ours;
  for (int i = 0; i < 10; ++i) {
    const double ratio = i == 0 ? 1.05 : i == 1 ? 1.01 : 0.5 + 0.01 * i;
    ours["rows"].push_back(row(shape(1024 * (i + 1), "bf16"), 1, 100.0 * ratio));
    fa3["rows"].push_back(row(shape(1024 * (i + 1), "bf16"), 2, 100.0));
  }
  const CommandResult r = compare(ours, fa3, "--per-shape --show 1 --names ours,FA3 --over 0.02");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| group | shapes | ours / FA3, geomean | min | max |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| ours / FA3 over 1.02 | 1 of 10 | | |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| shape | ours / FA3 | ours µs | FA3 µs |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 1.050 | 105.00 | 100.00 |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("| 1.010 |"), std::string::npos) << "under the line, not an end: " << r.out;
  // --over 0: the 1% shape is over the line too, and listed.
  const CommandResult all_over = compare(ours, fa3, "--per-shape --show 1 --names ours,FA3 --over 0");
  ASSERT_EQ(all_over.code, 0) << all_over.err;
  EXPECT_NE(all_over.out.find("| ours / FA3 over 1 | 2 of 10 | | |"), std::string::npos) << all_over.out;
  EXPECT_NE(all_over.out.find("| 1.010 |"), std::string::npos) << all_over.out;
  const CommandResult bad = compare(ours, fa3, "--per-shape --names ours");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--names 'ours': expected two names, NEW,BASE"), std::string::npos) << bad.err;
}

TEST_F(AbTimesScript, NamesTheRunThatLeftNoBenchOutput) {
  std::ofstream(dir_ / "empty.json") << "";
  const CommandResult r =
      run_command("python3 '" + (kBenchGpu / "ab_times.py").string() + "' --per-shape --new '" +
                  (dir_ / "empty.json").string() + "' --base '" + (dir_ / "empty.json").string() + "'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("empty.json: not the JSON of `evodispatch bench --json`"), std::string::npos) << r.err;
}
