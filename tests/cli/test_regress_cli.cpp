// `evodispatch regress` option values: a value it cannot run with is bad usage (exit 2),
// refused before any heuristic is read or any run is opened.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../support/run_command.hpp"

namespace fs = std::filesystem;
using namespace evodispatch;

TEST(RegressCli, BadOptionValuesAreUsageErrors) {
  const fs::path db = test::scratch_path("usage.db");
  const std::string base = "regress --heuristic missing/heuristic.json --device sim:h100-sxm --db " + db.string();
  for (const char* bad : {"--l2 warm", "--floor 0", "--floor -1", "--pairs 0"}) {
    const auto r = test::run_evodispatch(base + " " + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find(std::string(bad).substr(0, std::string(bad).find(' ')) + ":"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(db));
  // A heuristic that cannot be read is an input error, not bad usage.
  const auto r = test::run_evodispatch(base);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("missing/heuristic.json: cannot read"), std::string::npos) << r.err;
}
