// A domain workload end to end: `bench` on the shipped models-decode sample, on the simulator.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../support/run_command.hpp"

namespace evodispatch {
namespace {

TEST(DomainCli, BenchRunsOnModelsDecode) {
  const auto db = test::scratch_path("domain.db");
  const auto r = test::run_evodispatch("bench --policy fa3 --workload models-decode --device sim:h100-sxm --json --db " +
                                       db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 240u);
  for (const auto& row : j["rows"]) EXPECT_GT(row["median_us"].get<double>(), 0) << row.dump();
}

TEST(DomainCli, AnUnknownWorkloadNamesTheDomains) {
  const auto r = test::run_evodispatch("bench --policy fa3 --workload models-prefill --device sim:h100-sxm");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("domains: models-decode, models-paged, models-spec"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace evodispatch
