// End-to-end: `evodispatch results` over a small simulator search, a bench and a sweep.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include <evodispatch/results/results.hpp>

#include "../support/run_command.hpp"

namespace fs = std::filesystem;
using namespace evodispatch;

namespace {

using Result = test::CommandResult;
Result run(const std::string& args) { return test::run_evodispatch(args); }
using test::scratch_path;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// One database for the suite: a search (run 1), a bench (run 2), a split sweep (run 3).
class ResultsCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = new fs::path(scratch_path("results.db"));
    const fs::path config = scratch_path("search.json");
    std::ofstream(config) << R"({"name":"results-cli","workload":"paper-safety-160","baseline":"fa3",
      "islands":{"count":2,"batch":8,"migration_interval":5},"stop":{"max_evaluations":300}})";
    const std::string on = " --device sim:h100-sxm --db " + db_->string();
    ASSERT_EQ(run("search --config " + config.string() + on).code, 0);
    ASSERT_EQ(run("bench --policy seq-aware --baseline fa3 --workload paper-table1" + on).code, 0);
    ASSERT_EQ(run("sweep splits --shape batch=1,seqlen_k=512,h_q=64,h_kv=1 --splits 1..16" + on).code, 0);
  }
  static void TearDownTestSuite() { delete db_; }
  static std::string db() { return " --db " + db_->string(); }
  static nlohmann::json json_of(const std::string& args) {
    const Result r = run(args + db() + " --json");
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    return nlohmann::json::parse(r.out);
  }
  static fs::path* db_;
};
fs::path* ResultsCli::db_ = nullptr;

TEST_F(ResultsCli, RunsListsEveryRunNewestFirst) {
  const auto runs = json_of("results runs");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0]["kind"], "sweep-splits");
  EXPECT_EQ(runs[2]["kind"], "search");
  EXPECT_EQ(runs[2]["workload"], "paper-safety-160");
  EXPECT_EQ(runs[2]["kernel_build"], "wave-model-v1");
  EXPECT_EQ(runs[2]["shapes"], 160);
  EXPECT_GE(runs[2]["geomean_speedup"].get<double>(), 1.0);
  EXPECT_EQ(json_of("results runs --kind bench").size(), 1u);
}

TEST_F(ResultsCli, RunShowsEveryShapeWithItsSplit) {
  const auto search = json_of("results run 1");
  EXPECT_EQ(search["kind"], "search");
  ASSERT_EQ(search["shapes"].size(), 160u);
  int train = 0, validation = 0;
  for (const auto& s : search["shapes"]) {
    train += s["split"] == "train";
    validation += s["split"] == "validation";
    EXPECT_GE(s["oracle_speedup"].get<double>(), 1.0) << s.dump();
  }
  EXPECT_EQ(train, search["summary"]["shapes"]["train"].get<int>());
  EXPECT_EQ(validation, search["summary"]["shapes"]["validation"].get<int>());
  EXPECT_NE(search["rules"].get<std::string>().find("function dispatch"), std::string::npos);
  const Result human = run("results run 2" + db());
  EXPECT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("18 shapes"), std::string::npos) << human.out;
}

TEST_F(ResultsCli, ProgramsAreRankedWithTheirRulesAsText) {
  const auto programs = json_of("results programs --run 1 --top 3");
  ASSERT_EQ(programs.size(), 3u);
  for (std::size_t i = 0; i + 1 < programs.size(); ++i)
    EXPECT_GE(programs[i]["train_fitness"].get<double>(), programs[i + 1]["train_fitness"].get<double>());
  // The best program is a rule list in front of fa3 or of the fitted latency model, the
  // model's parameters perhaps evolved ("model~").
  const std::string rules = programs[0]["rules_text"].get<std::string>();
  EXPECT_TRUE(rules.find("base policy \"fa3\"") != std::string::npos ||
              rules.find("base policy \"model") != std::string::npos)
      << rules;
  const Result not_a_search = run("results programs --run 2" + db());
  EXPECT_EQ(not_a_search.code, 1);
}

TEST_F(ResultsCli, MeasurementsFilterOnAnyColumnAndNameTheColumnsOfABadFilter) {
  const auto rows = json_of("results measurements --where batch=1,seqlen_k=512,h_kv=1 --order median_us --limit 5");
  ASSERT_EQ(rows.size(), 5u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["seqlen_k"], 512);
    if (i) {
      EXPECT_LE(rows[i - 1]["median_us"].get<double>(), rows[i]["median_us"].get<double>());
    }
  }
  const Result bad = run("results measurements --where splits=3" + db());
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("num_splits"), std::string::npos) << bad.err;
}

TEST_F(ResultsCli, CompareARunWithAPolicyGivesTheBenchsRatioBack) {
  const auto bench = json_of("results run 2");
  const auto cmp = json_of("results compare 2 fa3");
  EXPECT_EQ(cmp["rows"].size(), 18u);
  EXPECT_EQ(cmp["missing"], 0);
  // A's time over B's is the inverse of the bench's speedup of seq-aware over fa3.
  EXPECT_NEAR(cmp["geomean_ratio"].get<double>(), 1.0 / bench["summary"]["geomean_speedup"].get<double>(), 1e-9);
  const auto policies = json_of("results compare seq-aware fa3 --workload paper-table1");
  EXPECT_NEAR(policies["geomean_ratio"].get<double>(), cmp["geomean_ratio"].get<double>(), 1e-9);
}

TEST_F(ResultsCli, ExportWritesEveryViewAndReportEveryPanel) {
  const fs::path dir = scratch_path("export");
  ASSERT_EQ(run("results export --format csv --out " + dir.string() + db()).code, 0);
  for (const char* v : {"runs", "measurements", "oracle", "progress", "programs", "shapes"})
    EXPECT_TRUE(fs::exists(dir / (std::string(v) + ".csv"))) << v;
  const std::string runs = slurp(dir / "runs.csv");
  EXPECT_EQ(runs.rfind("id,kind,status,", 0), 0u) << runs.substr(0, 80);
  EXPECT_EQ(lines(runs), 4);  // the header and three runs
  const fs::path one = scratch_path("shapes.json");
  ASSERT_EQ(run("results export --format json --view shapes --run 2 --out " + one.string() + db()).code, 0);
  EXPECT_EQ(nlohmann::json::parse(slurp(one)).size(), 18u);

  for (int id : {1, 2, 3}) {
    const fs::path html = scratch_path("report" + std::to_string(id) + ".html");
    const Result r = run("results report --run " + std::to_string(id) + " --out " + html.string() + db());
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string page = slurp(html);
    for (const char* panel : {"panel-provenance", "panel-progress", "panel-speedup", "panel-curves", "panel-bandwidth",
                              "panel-noise", "panel-rules"})
      EXPECT_NE(page.find(std::string("id=\"") + panel + "\""), std::string::npos) << panel << " in run " << id;
    EXPECT_EQ(page.find("<script src"), std::string::npos);
    // The sweep's U-curve marks the split FA3 itself would take there.
    if (id == 3) {
      EXPECT_NE(page.find("fa3: 1 split<"), std::string::npos);
    }
  }
}

TEST_F(ResultsCli, BrowsingNeverWritesTheDatabase) {
  const std::string before = slurp(*db_);
  for (const char* args : {"results runs", "results run 1", "results programs --run 1", "results measurements",
                           "results compare 1 fa3"})
    EXPECT_EQ(run(std::string(args) + db()).code, 0) << args;
  EXPECT_EQ(slurp(*db_), before);
}

TEST(ResultsCliErrors, OneLineErrorsForMissingEmptyAndNewerDatabases) {
  const fs::path missing = scratch_path("missing.db");
  const Result m = run("results runs --db " + missing.string());
  EXPECT_EQ(m.code, 1);
  EXPECT_FALSE(fs::exists(missing)) << "a reader must not create the file";

  const fs::path empty = scratch_path("no-runs.db");
  results::Database::open(empty.string());
  const Result e = run("results runs --db " + empty.string());
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find("has no runs"), std::string::npos) << e.err;
  EXPECT_EQ(lines(e.err), 1) << e.err;

  const fs::path newer = scratch_path("newer.db");
  results::Database::open(newer.string()).execute("PRAGMA user_version = 99");
  const Result n = run("results runs --db " + newer.string());
  EXPECT_EQ(n.code, 1);
  EXPECT_NE(n.err.find("schema version 99"), std::string::npos) << n.err;
  EXPECT_EQ(lines(n.err), 1) << n.err;

  const fs::path old = scratch_path("v3.db");
  results::OpenOptions v3;
  v3.schema_version = 3;
  results::Database::open(old.string(), v3);
  EXPECT_EQ(run("results runs --db " + old.string()).code, 1);
  const Result migrated = run("results migrate --db " + old.string());
  EXPECT_EQ(migrated.code, 0) << migrated.err;
  EXPECT_NE(migrated.out.find("schema version " + std::to_string(results::Database::latest_schema_version())),
            std::string::npos) << migrated.out;
}

}  // namespace
