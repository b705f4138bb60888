// Timing sanity on the GPU: the statistics are ordered, a hot L2 is no slower than a cold
// one, a decision compared with itself is even, and the rows carry what was launched.
// Also prints (and records as test properties) a few reference timings of issue 3.
#include <cmath>
#include <cstdio>
#include <vector>

#include "gpu_support.hpp"

namespace evodispatch::gputest {
namespace {

Shape table1(int lk = 512, int hkv = 1) { return S().b(1).lk(lk).heads(std::max(64, hkv), hkv); }

TEST(GpuTiming, StatisticsAreOrderedAndTheRowSaysWhatRan) {
  EVO_REQUIRE_GPU();
  TimingOptions t;
  const Measurement m = gpu()->measure(table1(), Decision{3, std::nullopt, 0}, t);
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_EQ(m.samples, t.replays);
  EXPECT_GT(m.median_us, 0.5);
  EXPECT_LE(m.p10_us, m.median_us);
  EXPECT_LE(m.median_us, m.p90_us);
  ASSERT_TRUE(m.rel_error.has_value());
  const auto& g = m.plan.at("gpu");
  EXPECT_GE(g.at("calls_per_replay").get<int>() * m.median_us, 0.9 * t.min_replay_us) << g;
  EXPECT_GE(g.at("calls_per_replay").get<int>(), g.at("buffer_sets").get<int>());
  EXPECT_TRUE(g.at("cold_l2_met").get<bool>()) << g;
  EXPECT_GT(g.at("buffer_sets").get<int>() * g.at("set_bytes").get<double>(), 2.0 * gpu()->gpu().l2_bytes);
  EXPECT_GE(g.at("decode_grid").get<int>(), 1);
  EXPECT_LE(g.at("decode_grid").get<int>(), gpu()->device().num_sms * g.at("decode_ctas_per_sm").get<int>());
  // Three splits merge in a combine kernel or, on Hopper, in clusters of three CTAs.
  EXPECT_NE(g.contains("combine_grid"), g.value("decode_cluster_ctas", 0) == 3) << g;
  // The plan stored with the row is the kernel that ran.
  EXPECT_EQ(m.plan.at("ctas_per_sm"), g.at("decode_ctas_per_sm"));
  EXPECT_EQ(m.plan.at("grid_ctas"), g.at("decode_grid"));
  EXPECT_EQ(m.plan.at("smem_bytes_per_cta"), g.at("decode_smem_bytes"));
  EXPECT_EQ(m.key.kernel_build, gpu()->kernel_build());
  EXPECT_EQ(m.key.device, gpu()->fingerprint());
  std::printf("[timing] %s splits=3: %.2f us (p10 %.2f, p90 %.2f), %d calls x %d sets\n", describe(table1()).c_str(),
              m.median_us, m.p10_us, m.p90_us, g.at("calls_per_replay").get<int>(), g.at("buffer_sets").get<int>());
}

TEST(GpuTiming, EveryCaseLiesInOneArenaWhateverWasMeasuredBefore) {
  EVO_REQUIRE_GPU();
  TimingOptions t;
  const Shape small = table1(), large = table1(16384, 8);
  std::vector<Measurement> rows;
  for (const Shape& s : {small, large, small}) {
    rows.push_back(gpu()->measure(s, Decision{2, std::nullopt, 0}, t));
    ASSERT_TRUE(rows.back().ok) << rows.back().error;
  }
  const auto arena = [](const Measurement& m) { return m.plan.at("gpu").at("arena_bytes").get<double>(); };
  for (const Measurement& m : rows) {
    const auto& g = m.plan.at("gpu");
    EXPECT_GE(arena(m), g.at("buffer_sets").get<double>() * g.at("set_bytes").get<double>()) << g;
    // Sized at first use to what the sets may take: no case in between moves the arena.
    EXPECT_EQ(arena(m), arena(rows.front())) << g;
  }
}

TEST(GpuTiming, HotL2IsNoSlowerThanCold) {
  EVO_REQUIRE_GPU();
  TimingOptions cold, hot;
  hot.l2 = L2Mode::hot;
  const Shape s = table1(2048, 8);  // 8 MB of KV: fits the 50 MB L2 when hot
  const Measurement c = gpu()->measure(s, Decision{4, std::nullopt, 0}, cold);
  const Measurement h = gpu()->measure(s, Decision{4, std::nullopt, 0}, hot);
  ASSERT_TRUE(c.ok && h.ok) << c.error << h.error;
  EXPECT_EQ(h.plan.at("gpu").at("buffer_sets"), 1);
  EXPECT_LE(h.median_us, c.median_us * 1.02) << "hot " << h.median_us << " us, cold " << c.median_us << " us";
  std::printf("[timing] %s splits=4: cold %.2f us, hot %.2f us\n", describe(s).c_str(), c.median_us, h.median_us);
}

TEST(GpuTiming, ADecisionComparedWithItselfIsEven) {
  EVO_REQUIRE_GPU();
  const Decision d{2, std::nullopt, 0};
  const Comparison c = gpu()->compare(table1(), d, d, TimingOptions{}, 30);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.pairs, 30);
  EXPECT_NEAR(c.ratio, 1.0, 0.03);
  EXPECT_LE(c.ratio_lo, c.ratio);
  EXPECT_GE(c.ratio_hi, c.ratio);
  std::printf("[timing] self-compare ratio %.4f [%.4f, %.4f]\n", c.ratio, c.ratio_lo, c.ratio_hi);
}

TEST(GpuTiming, PagedSplitCallsAndMixedLengthsTime) {
  EVO_REQUIRE_GPU();
  const MeasureCase c{S().b(13).lk(4099).page(16).heads(32, 8), {1, 4099, 7, 97, 1000, 128, 129, 2048, 3, 4000, 64, 500, 2}};
  const Measurement m = gpu()->measure(c, Decision{5, std::nullopt, 0}, TimingOptions{});
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_EQ(m.plan.at("seqlens").size(), 13u);
  EXPECT_GT(m.median_us, 0);
}

// Issue 3's reference shapes, for the record (no assertion on speed).
TEST(GpuTiming, ReferenceShapes) {
  EVO_REQUIRE_GPU();
  struct Row {
    Shape s;
    Decision d;
  };
  const Row rows[] = {
      {table1(512, 1), {1, std::nullopt, 0}},
      {table1(512, 1), {3, std::nullopt, 0}},
      {table1(4096, 8), {1, std::nullopt, 0}},
      {table1(4096, 8), {4, std::nullopt, 0}},
      {S().b(32).lk(8192).heads(32, 8), {1, std::nullopt, 0}},
      {S().b(32).lk(8192).heads(32, 8), {2, std::nullopt, 0}},
  };
  for (const Row& r : rows) {
    const Measurement m = gpu()->measure(r.s, r.d, TimingOptions{});
    EXPECT_TRUE(m.ok) << describe(r.s) << ": " << m.error;
    if (!m.ok) continue;
    const double kv = m.plan.value("kv_footprint_bytes", 0.0);
    const double tbps = kv / (m.median_us * 1e-6) / 1e12;
    std::printf("[timing] %-40s %-28s %9.2f us  p10 %9.2f  p90 %9.2f  %.2f TB/s KV  grid %d\n", describe(r.s).c_str(),
                describe(m.key.decision).c_str(), m.median_us, m.p10_us, m.p90_us, tbps,
                m.plan["gpu"].value("decode_grid", 0));
    RecordProperty(describe(r.s) + " " + describe(m.key.decision), std::to_string(m.median_us));
  }
}

}  // namespace
}  // namespace evodispatch::gputest
