// End-to-end: `evodispatch distill` and `evodispatch regress` on the simulator.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/results/results.hpp>
#include <evodispatch/search/program.hpp>

#include "../support/run_command.hpp"

namespace fs = std::filesystem;
using namespace evodispatch;

namespace {

using Result = test::CommandResult;
Result run(const std::string& args) { return test::run_evodispatch(args); }
using test::scratch_path;

}  // namespace

TEST(DistillCli, DistillFa3ThenRegressPassesAndFailsOnTheFloor) {
  const fs::path dir = scratch_path("fa3");
  const fs::path db = scratch_path("fa3.db");
  Result d = run("distill --policy fa3 --grid small --random 3000 --out " + dir.string());
  ASSERT_EQ(d.code, 0) << d.out << d.err;
  EXPECT_NE(d.out.find("0 differ"), std::string::npos) << d.out;
  for (const char* f : {"heuristic.json", "heuristic.hpp", "heuristic.py", "libheuristic.so",
                        "fa3_num_splits_heuristic.inc"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  const auto j = nlohmann::json::parse(std::ifstream(dir / "heuristic.json"));
  EXPECT_EQ(j["schema"], 1);
  EXPECT_EQ(j["provenance"]["device"]["num_sms"], 132);

  // The compiled function equals fa3 on the simulator: every ratio is 1.
  const fs::path report = scratch_path("report.json");
  Result ok = run("regress --heuristic " + (dir / "heuristic.json").string() +
                  " --baseline fa3 --workload paper-safety-160 --floor 0.99 --device sim:h100-sxm --db " + db.string() +
                  " --out " + report.string());
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("0 confirmed"), std::string::npos) << ok.out;
  const auto rep = nlohmann::json::parse(std::ifstream(report));
  EXPECT_EQ(rep["rows"].size(), 160u);
  EXPECT_EQ(rep["passed"], true);

  // One split everywhere, against fa3 with a floor of 1.01: where fa3 splits, confirmed
  // regressions; where fa3 also takes one split, the same kernels: noise, never confirmed.
  const fs::path one = scratch_path("fixed1");
  ASSERT_EQ(run("distill --policy fixed:1 --grid small --random 3000 --out " + one.string()).code, 0);
  const fs::path bad_report = scratch_path("bad.json");
  Result bad = run("regress --heuristic " + (one / "heuristic.json").string() +
                   " --baseline fa3 --workload paper-safety-160 --floor 1.01 --device sim:h100-sxm --db " + db.string() +
                   " --out " + bad_report.string());
  EXPECT_EQ(bad.code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("REGRESSION (confirmed"), std::string::npos);
  EXPECT_NE(bad.out.find("the baseline's own decision (noise)"), std::string::npos);
  const auto bad_rep = nlohmann::json::parse(std::ifstream(bad_report));
  const std::size_t confirmed = bad_rep["confirmed_regressions"].get<std::size_t>();
  EXPECT_GT(confirmed, 0u);

  // Stored: two regress runs, 160 comparisons for the first; for the second, 160 and a
  // second look at each shape under the floor where the decisions differ.
  auto database = results::Database::open(db.string());
  results::RunFilter f;
  f.kind = "regress";
  const auto runs = results::Runs(database).list(f);
  ASSERT_EQ(runs.size(), 2u);
  std::size_t total = 0;
  for (const auto& r : runs) total += results::Comparisons(database).list_by_run(r.id).size();
  EXPECT_EQ(total, 160u + 160u + bad_rep["below_floor_first"].get<std::size_t>());
}

TEST(DistillCli, DistillFitsAScriptAndRefusesTheFa3Body) {
  const fs::path dir = scratch_path("tree");
  const fs::path lua = scratch_path("policy.lua");
  std::ofstream(lua) << "function dispatch(s, hw)\n"
                        "  if s.batch * s.h_kv >= 64 or s.seqlen_k < 1024 then return { num_splits = 1 } end\n"
                        "  return { num_splits = 4 }\nend\n";
  Result d = run("distill --policy " + lua.string() + " --grid small --random 3000 --out " + dir.string());
  ASSERT_EQ(d.code, 0) << d.out << d.err;
  EXPECT_NE(d.out.find("(tree,"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("FA3 body: refused"), std::string::npos) << d.out;
  EXPECT_TRUE(fs::exists(dir / "fa3_refused.txt"));

  // A decision computed arithmetically between grid values cannot be fitted exactly: the
  // check fails and names the first shapes.
  const fs::path dir2 = scratch_path("tree2");
  const fs::path lua2 = scratch_path("policy2.lua");
  std::ofstream(lua2) << "function dispatch(s, hw)\n"
                         "  return { num_splits = math.min(8, s.seqlen_k // 1000 + 1) }\nend\n";
  Result f = run("distill --policy " + lua2.string() + " --grid small --random 3000 --out " + dir2.string());
  EXPECT_EQ(f.code, 1) << f.out << f.err;
  EXPECT_NE(f.out.find("differs: "), std::string::npos) << f.out;
}

// The database keeps a search program's base apart from its rules (program_bases); the
// distilled folder holds the two joined, a script the other verbs run as it is.
TEST(DistillCli, TheDistilledFolderHoldsTheWholeProgram) {
  const fs::path db_path = scratch_path("split-program.db");
  const fs::path dir = scratch_path("split-program");
  const std::string base = "function dispatch(s, hw) return { num_splits = 2 } end\n";
  const std::string rules =
      "local base_dispatch\ndo\nbase_dispatch = dispatch\nend\n\n"
      "function dispatch(s, hw)\n  if s.seqlen_k >= 4096 then return { num_splits = 8 } end\n"
      "  return base_dispatch(s, hw)\nend\n";
  {
    auto db = results::Database::open(db_path.string());
    results::RunRecord r;
    r.kind = "search";
    const std::int64_t run_id = results::Runs(db).create(r);
    results::ProgramRecord prog;
    prog.run_id = run_id;
    prog.hash = "split";
    prog.source = rules;
    prog.base = base;
    prog.rules = nullptr;
    const std::int64_t id = results::Programs(db).insert(prog).id;
    results::Runs(db).finish(run_id, results::RunStatus::finished, {{"winner", {{"program_id", id}}}});
  }
  Result d = run("distill --db " + db_path.string() + " --run 1 --grid small --random 1000 --out " + dir.string());
  ASSERT_EQ(d.code, 0) << d.out << d.err;
  std::ifstream in(dir / "program.lua");
  const std::string lua{std::istreambuf_iterator<char>(in), {}};
  EXPECT_EQ(lua, search::stored_source(rules, base));

  const fs::path workload = scratch_path("split-program.json");
  std::ofstream(workload) << R"({"name": "two", "shapes": [{"batch": 1, "seqlen_k": 1024, "h_q": 8, "h_kv": 8},
                                                            {"batch": 1, "seqlen_k": 8192, "h_q": 8, "h_kv": 8}]})";
  Result decided = run("decide --policy " + (dir / "program.lua").string() + " --workload " + workload.string() +
                       " --device sim:h100-sxm --json");
  ASSERT_EQ(decided.code, 0) << decided.out << decided.err;
  std::istringstream lines(decided.out);
  std::vector<int> splits;
  for (std::string line; std::getline(lines, line);) splits.push_back(nlohmann::json::parse(line)["num_splits"]);
  EXPECT_EQ(splits, (std::vector<int>{2, 8})) << decided.out;
}

TEST(DistillCli, DistillNeedsOneSource) {
  Result r = run("distill --out " + scratch_path("none").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
}

// A run on a GPU whose database also holds simulator estimates (the search's cascade):
// the provenance names the GPU's kernel build and the driver of its fingerprint.
TEST(DistillCli, ProvenanceNamesTheRunsGpuKernelBuildAndDriver) {
  const fs::path db_path = scratch_path("gpu-run.db");
  const fs::path dir = scratch_path("gpu-run");
  const std::string gpu = "NVIDIA H100 80GB HBM3/132sm/cc90/81079MiB/driver13.0";
  {
    auto db = results::Database::open(db_path.string());
    results::DeviceRecord dev;
    dev.fingerprint = gpu;
    dev.info.name = "NVIDIA H100 80GB HBM3";
    dev.info.num_sms = 132;
    dev.info.cc = 90;
    results::Devices(db).upsert(dev);
    results::RunRecord run;
    run.kind = "search";
    run.device = gpu;
    const std::int64_t run_id = results::Runs(db).create(run);
    results::ProgramRecord prog;
    prog.run_id = run_id;
    prog.hash = "one-split";
    prog.source = "function dispatch(s, hw) return { num_splits = 1 } end\n";
    prog.rules = nullptr;
    const std::int64_t program_id = results::Programs(db).insert(prog).id;
    Shape s;
    s.seqlen_k = 512;
    s.h_q = 8;
    s.h_kv = 8;
    Measurement estimate;  // taken first: the row a naive lookup would find
    estimate.key = {"sim:h100-sxm#0", "wave-model-v1", s, resolve(Decision{1, true, 0}, s), L2Mode::cold};
    estimate.ok = true;
    estimate.median_us = estimate.p10_us = estimate.p90_us = 5;
    results::Measurements(db).put(estimate, false, run_id);
    Measurement measured = estimate;
    measured.key.device = gpu;
    measured.key.kernel_build = "0123456789abcdef@sm_90a";
    results::Measurements(db).put(measured, false, run_id);
    results::Runs(db).finish(run_id, results::RunStatus::finished, {{"winner", {{"program_id", program_id}}}});

    // A second run that found every measurement stored: only its confirmations ran.
    const std::int64_t again = results::Runs(db).create(run);
    prog.run_id = again;
    const std::int64_t again_program = results::Programs(db).insert(prog).id;
    results::ComparisonRecord c;
    c.run_id = again;
    c.program_id = again_program;
    c.shape = s;
    c.device = gpu;
    c.kernel_build = "fedcba9876543210@sm_90a";
    c.candidate = c.baseline = estimate.key.decision;
    c.ok = true;
    c.candidate_us = c.baseline_us = 5;
    c.speedup = c.speedup_lo = c.speedup_hi = 1;
    c.pairs = 30;
    results::Comparisons(db).insert(c);
    results::Runs(db).finish(again, results::RunStatus::finished, {{"winner", {{"program_id", again_program}}}});
  }
  Result d = run("distill --db " + db_path.string() + " --run 1 --grid small --random 1000 --out " + dir.string());
  ASSERT_EQ(d.code, 0) << d.out << d.err;
  const auto prov = nlohmann::json::parse(std::ifstream(dir / "heuristic.json"))["provenance"];
  EXPECT_EQ(prov["kernel_build"], "0123456789abcdef@sm_90a");
  EXPECT_EQ(prov["driver"], "13.0");
  EXPECT_EQ(prov["device_fingerprint"], gpu);

  const fs::path dir2 = scratch_path("gpu-run-2");
  Result d2 = run("distill --db " + db_path.string() + " --run 2 --grid small --random 1000 --out " + dir2.string());
  ASSERT_EQ(d2.code, 0) << d2.out << d2.err;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir2 / "heuristic.json"))["provenance"]["kernel_build"],
            "fedcba9876543210@sm_90a");
}
