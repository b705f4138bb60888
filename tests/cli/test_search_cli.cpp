// `evodispatch search` as a job script sees it: what the main job prints, and a restart
// after the search has finished.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "../search/search_fixtures.hpp"
#include "../support/run_command.hpp"

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace evodispatch;

namespace {

struct FinishedSearch {
  search::testing::ScratchDir dir;
  std::string db = dir.file("job.db");
  std::string config;
  test::CommandResult first;

  FinishedSearch() {
    const std::string wl = dir.write("mini.json", search::testing::mini_workload_json());
    config = dir.write("mini-config.json", search::testing::mini_config_json(wl, 150).dump());
    first = test::run_evodispatch("search --config " + config + " --db " + db + " --device sim:h100-sxm --seed 3");
  }
};

std::string read(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), {}};
}

}  // namespace

TEST(SearchCli, PrintsTheRulesAndWritesTheFullProgramBesideTheDatabase) {
  FinishedSearch s;
  ASSERT_EQ(s.first.code, 0) << s.first.err;
  const fs::path program = s.dir.file("job-run1-winner.lua");
  ASSERT_TRUE(fs::exists(program)) << s.first.out;
  EXPECT_THAT(s.first.out, HasSubstr("full program (rules and base): " + program.string()));
  const std::string full = read(program);
  EXPECT_THAT(full, HasSubstr("base_dispatch = dispatch"));  // the base is in the file ...
  EXPECT_THAT(s.first.out, HasSubstr("function dispatch(s, hw)"));  // ... the rules on stdout ...
  EXPECT_THAT(s.first.out, Not(HasSubstr("base_dispatch = dispatch")));  // ... and the base not
  EXPECT_THAT(s.first.out, HasSubstr("setup "));
}

TEST(SearchCli, ResumingAFinishedSearchReportsItAndExitsZero) {
  FinishedSearch s;
  ASSERT_EQ(s.first.code, 0) << s.first.err;
  for (const std::string resume : {"--resume", "--resume 1"}) {
    const auto again = test::run_evodispatch("search " + resume + " --db " + s.db + " --json");
    EXPECT_EQ(again.code, 0) << resume << ": " << again.err;
    EXPECT_THAT(again.err, HasSubstr("search run 1 has finished; nothing to resume")) << resume;
    const auto summary = nlohmann::json::parse(again.out);
    EXPECT_EQ(summary["run_id"], 1) << resume;
    EXPECT_FALSE(summary["winner"].is_null()) << resume;
  }
}

TEST(SearchCli, ResumeWithoutAnyRunFailsAndBadResumeUsageExitsTwo) {
  search::testing::ScratchDir dir;
  const auto none = test::run_evodispatch("search --resume --db " + dir.file("empty.db"));
  EXPECT_EQ(none.code, 1);
  EXPECT_THAT(none.err, HasSubstr("no search run to resume"));
  EXPECT_EQ(test::run_evodispatch("search --resume abc --db " + dir.file("empty.db")).code, 2);
  EXPECT_EQ(test::run_evodispatch("search --resume --seed 3 --db " + dir.file("empty.db")).code, 2);
}

// An overnight run's database searched again on another machine: `--device replay:DB`
// answers from its rows, so a bench of what it measured gives its numbers back and a
// search runs to the end over them.
TEST(SearchCli, ReplayingADatabaseGivesItsMeasurementsBackToBenchAndSearch) {
  FinishedSearch s;
  ASSERT_EQ(s.first.code, 0) << s.first.err;
  const std::string wl = s.dir.file("mini.json");
  const std::string bench = "bench --policy fa3 --workload " + wl + " --json --db ";
  const auto measured = test::run_evodispatch(bench + s.db + " --device sim:h100-sxm");
  const auto replayed = test::run_evodispatch(bench + s.dir.file("replay.db") + " --device replay:" + s.db);
  ASSERT_EQ(measured.code, 0) << measured.err;
  ASSERT_EQ(replayed.code, 0) << replayed.err;
  const auto a = nlohmann::json::parse(measured.out)["rows"], b = nlohmann::json::parse(replayed.out)["rows"];
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]["median_us"], b[i]["median_us"]) << i;

  const auto search = test::run_evodispatch("search --config " + s.config + " --db " + s.dir.file("replay.db") +
                                            " --device replay:" + s.db + " --seed 3");
  EXPECT_EQ(search.code, 0) << search.err;
  EXPECT_THAT(search.out, HasSubstr("on replay:" + s.db));
  EXPECT_THAT(search.out, HasSubstr("best program #"));
}
