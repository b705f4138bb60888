// End-to-end: `evodispatch distill --fa3-source DIR` writes fa3.patch beside the other
// exports (against our own FA3 stand-in, tests/heuristics/fa3_fixture; no FA3 code).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../support/run_command.hpp"

namespace fs = std::filesystem;
using namespace evodispatch;

namespace {

const std::string kFixture = std::string(EVO_SOURCE_DIR) + "/tests/heuristics/fa3_fixture";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST(DistillFa3Cli, WritesTheFa3PatchAgainstTheGivenSource) {
  const fs::path dir = test::scratch_path("fa3patch");
  const auto r = test::run_evodispatch("distill --policy fa3 --grid small --random 500 --out " + dir.string() +
                                       " --fa3-source " + kFixture + " --fa3-commit 0251105a2fb1");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("FA3 patch: "), std::string::npos) << r.out;
  const std::string patch = slurp(dir / "fa3.patch");
  EXPECT_NE(patch.find("commit 0251105a2fb1"), std::string::npos);
  for (const char* f : {"hopper/evodispatch_heuristic.h", "hopper/flash_api.cpp", "hopper/flash_api_stable.cpp"})
    EXPECT_NE(patch.find(std::string("+++ b/") + f), std::string::npos) << f;
  EXPECT_TRUE(fs::exists(dir / "heuristic.hpp"));
}

TEST(DistillFa3Cli, ASourceThatIsNoCheckoutNeedsTheCommitOption) {
  const fs::path dir = test::scratch_path("fa3nocommit");
  const auto r = test::run_evodispatch("distill --policy fa3 --grid small --random 500 --out " + dir.string() +
                                       " --fa3-source " + kFixture);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--fa3-commit"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "fa3.patch"));
  const auto missing = test::run_evodispatch("distill --policy fa3 --grid small --out " + dir.string() +
                                             " --fa3-source " + dir.string() + "/absent --fa3-commit 0251105a");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("absent/hopper/flash_api.cpp"), std::string::npos) << missing.err;
}
