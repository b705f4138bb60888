// sm_margin on the GPU (DESIGN.md §2): the decode grid runs on at most num_sms - sm_margin
// SMs, whatever the variant's occupancy, and the SMs the checked run used are in the row.
#include "gpu_support.hpp"

#include <evodispatch/kernels/plan.hpp>

namespace evodispatch::gputest {
namespace {

TEST(GpuMargin, TheGridRunsOnAtMostTheSmsTheMarginLeaves) {
  EVO_REQUIRE_GPU();
  const int sms = gpu()->device().num_sms;
  // 8 KV heads x 8K keys: enough items for every SM, and variants of 1 to 3 CTAs per SM.
  for (int batch : {9, 20, 40})
    for (int margin : {0, sms / 2, sms - 32, sms - 1}) {
      const Shape s = S().b(batch).lk(8192).heads(64, 8);
      const Measurement m = gpu()->measure(s, Decision{1, true, margin}, check_only());
      ASSERT_TRUE(m.ok) << m.error;
      const auto& g = m.plan.at("gpu");
      const int used = g.at("decode_sms").get<int>(), grid = g.at("decode_grid").get<int>();
      SCOPED_TRACE(describe(s) + " margin " + std::to_string(margin) + ": " + g.dump());
      EXPECT_LE(used, sms - margin);
      EXPECT_LE(grid, std::max(1, sms - margin) * grid_ctas_per_sm(g.at("decode_ctas_per_sm").get<int>(), margin));
      EXPECT_EQ(m.plan.at("grid_ctas"), g.at("decode_grid"));
      // Without a margin the hardware spreads the grid over the SMs before it stacks CTAs.
      if (margin == 0) {
        EXPECT_GE(used, std::min(grid, sms) * 9 / 10);
      }
    }
}

}  // namespace
}  // namespace evodispatch::gputest
