// The GPU float32 reference against the CPU float64 reference (kernels/reference.hpp),
// on the very inputs a measurement draws.
#include <cmath>
#include <limits>

#include <evodispatch/kernels/reference.hpp>

#include "gpu_support.hpp"

namespace evodispatch::gputest {
namespace {

struct RefCase {
  const char* name;
  MeasureCase c;
};

void expect_references_agree(const MeasureCase& c) {
  const ReferenceRun g = gpu()->run_reference(c);
  ReferenceInputs in;
  in.shape = c.shape;
  in.q = g.q;
  in.k = g.k;
  in.v = g.v;
  in.cache_seqlens = g.seqlens;
  in.page_table = g.page_table;
  in.max_pages = g.max_pages;
  const ReferenceOutputs cpu = reference_attention(in);
  ASSERT_EQ(cpu.out.size(), g.out.size());
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < g.out.size(); ++i) {
    ASSERT_TRUE(std::isfinite(g.out[i])) << "element " << i;
    diff2 += (g.out[i] - cpu.out[i]) * (g.out[i] - cpu.out[i]);
    ref2 += cpu.out[i] * cpu.out[i];
  }
  // fp32 against fp64 on identical inputs: rounding only.
  EXPECT_LT(std::sqrt(diff2 / std::max(ref2, 1e-30)), 1e-5) << describe(c.shape);
  ASSERT_EQ(cpu.lse.size(), g.lse.size());
  int no_keys = 0;
  for (std::size_t i = 0; i < g.lse.size(); ++i) {
    if (std::isinf(cpu.lse[i])) {
      EXPECT_TRUE(std::isinf(g.lse[i]) && g.lse[i] < 0) << "lse " << i;
      ++no_keys;
      continue;
    }
    EXPECT_NEAR(g.lse[i], cpu.lse[i], 1e-5 * std::max(1.0, std::abs(cpu.lse[i]))) << "lse " << i;
  }
  // Inputs are N(0, 1), never zeros: the reference output is far from trivial.
  EXPECT_GT(ref2, 0.0);
  (void)no_keys;
}

TEST(GpuReference, MatchesTheCpuFloat64Reference) {
  EVO_REQUIRE_GPU();
  const RefCase cases[] = {
      {"contiguous gqa", {S().b(3).lk(97).heads(8, 2), {}}},
      {"lq4 d64", {S().b(2).lq(4).lk(300).heads(6, 3).d(64), {}}},
      {"paged 3 mixed", {S().b(4).lk(200).page(3).heads(4, 1), {200, 1, 57, 130}}},
      {"fp16 d256 paged 16", {S().b(2).lk(129).page(16).heads(4, 4).d(256).fp16(), {}}},
      {"lq16 fewer keys than tokens", {S().b(2).lq(16).lk(7).heads(2, 1), {}}},
      {"noncausal lq4", {S().b(1).lq(4).lk(64).heads(3, 1).noncausal(), {}}},
      {"mqa long", {S().b(1).lk(4099).heads(16, 1), {}}},
      {"fp8 per head", {S().b(3).lk(300).heads(8, 2).fp8(), {}}},
      {"fp8 paged per tensor fp16 q", {S().b(4).lk(200).page(3).heads(4, 2).fp8(Dtype::fp16), {200, 1, 57, 130}, true}},
      {"fp8 d64 paged 16", {S().b(2).lk(129).page(16).heads(6, 3).d(64).fp8(), {}}},
  };
  for (const auto& rc : cases) {
    SCOPED_TRACE(rc.name);
    expect_references_agree(rc.c);
  }
}

TEST(GpuReference, InputsAreSeededNormalsAndPagesAreShuffled) {
  EVO_REQUIRE_GPU();
  const MeasureCase c{S().b(3).lk(100).page(4), {}};
  const ReferenceRun a = gpu()->run_reference(c);
  const ReferenceRun b = gpu()->run_reference(c);
  EXPECT_EQ(a.q, b.q);  // same case, same numbers
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.page_table, b.page_table);
  double sum = 0, sum2 = 0;
  int zeros = 0;
  for (float x : a.k) {
    sum += x;
    sum2 += double(x) * x;
    zeros += x == 0.f;
  }
  const double n = static_cast<double>(a.k.size());
  EXPECT_NEAR(sum / n, 0.0, 0.05);
  EXPECT_NEAR(sum2 / n, 1.0, 0.05);
  EXPECT_LT(zeros, n / 100);
  int in_order = 0;
  for (std::size_t i = 1; i < a.page_table.size(); ++i) in_order += a.page_table[i] == a.page_table[i - 1] + 1;
  EXPECT_LT(in_order, static_cast<int>(a.page_table.size()) / 4);
  const ReferenceRun other = gpu()->run_reference(MeasureCase{S().b(3).lk(101).page(4), {}});
  EXPECT_NE(other.q, a.q);  // another shape, other numbers
}

}  // namespace
}  // namespace evodispatch::gputest
