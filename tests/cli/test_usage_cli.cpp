// Exit codes of DESIGN.md §7 for a command line that asks for something impossible: 2,
// with a message naming the option; errors in what the options point at stay 1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../support/run_command.hpp"

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace evodispatch;

namespace {

test::CommandResult run(const std::string& args) { return test::run_evodispatch(args); }

std::string scratch_db(const std::string& name) { return test::scratch_path(name + ".db").string(); }

void expect_usage(const std::string& args, const std::string& names) {
  const test::CommandResult r = run(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr(names)) << args;
}

}  // namespace

TEST(UsageCli, BadOptionValuesExitTwo) {
  const std::string db = scratch_db("usage-values");
  expect_usage("bench --policy fa3 --l2 warm --device sim:h100-sxm --db " + db, "--l2");
  expect_usage("bench --policy oracle --oracle-pack sometimes --workload paper-table1 --device sim:h100-sxm --db " + db,
               "--oracle-pack");
  expect_usage("bench --policy oracle --oracle-splits 1..x --workload paper-table1 --device sim:h100-sxm --db " + db,
               "--oracle-splits");
  expect_usage("sweep splits --shape batch=1,seqlen_k=512,h_q=64 --pack sideways --device sim:h100-sxm --db " + db,
               "--pack");
  expect_usage("sweep splits --shape batch:1 --device sim:h100-sxm --db " + db, "--shape");
  expect_usage("calibrate --holdout 1.5 --out x.json --db " + db, "--holdout");
  expect_usage("distill --policy fa3 --grid huge --out " + test::scratch_path("usage-distill").string(), "--grid");
  // Each was refused before a run was opened: no database was made.
  EXPECT_FALSE(fs::exists(db));
}

TEST(UsageCli, OptionsThatExcludeOrNeedEachOtherExitTwo) {
  const std::string db = scratch_db("usage-choices");
  expect_usage("sweep splits --shape batch=1,seqlen_k=512,h_q=64 --workload paper-table1 --device sim:h100-sxm --db " + db,
               "--shape");
  expect_usage("sweep batch --device sim:h100-sxm --db " + db, "--workload");
  expect_usage("calibrate --db " + db, "--out");
  expect_usage("distill --run 1 --policy fa3 --out " + test::scratch_path("usage-two").string(), "exactly one");
  EXPECT_FALSE(fs::exists(db));
}

TEST(UsageCli, WhatTheOptionsPointAtStaysExitOne) {
  const test::CommandResult missing = run("calibrate --no-fit --db " + scratch_db("no-such"));
  EXPECT_EQ(missing.code, 1) << missing.err;
  EXPECT_THAT(missing.err, HasSubstr("no such database"));
  const test::CommandResult script = run("distill --policy " + test::scratch_path("absent.lua").string() + " --out " +
                                         test::scratch_path("usage-absent").string());
  EXPECT_EQ(script.code, 1) << script.err;
  EXPECT_THAT(script.err, HasSubstr("cannot read"));
}

TEST(UsageCli, SearchPrintsTheConfigReference) {
  const test::CommandResult r = run("search --config-reference");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("| `islands.count` | `4` | integer in [1, 64] |"));
  EXPECT_THAT(run("search --help").out, HasSubstr("--config-reference"));
}
