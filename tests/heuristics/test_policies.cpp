// The built-in policies: the Lua fa3 against its C++ twin on a dense grid, every built-in
// valid everywhere, values derived by hand from the FlashAttention / FlashInfer sources,
// and make_policy's names, fixed:N and script paths.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/heuristics/policy.hpp>

using namespace evodispatch;
using ::testing::HasSubstr;

namespace {

DeviceInfo device(int num_sms, int cc = 90) {
  DeviceInfo hw;
  hw.name = "test-" + std::to_string(num_sms) + "sm";
  hw.num_sms = num_sms;
  hw.l2_bytes = 50 << 20;
  hw.mem_bw_bytes_per_s = 3.35e12;
  hw.cc = cc;
  return hw;
}

const DeviceInfo kH100 = device(132);

Shape shape(int batch, int seqlen_k, int h_q, int h_kv, int head_dim = 128, Dtype dtype = Dtype::bf16,
            int page_size = 0, int seqlen_q = 1, bool causal = true) {
  Shape s;
  s.batch = batch;
  s.seqlen_q = seqlen_q;
  s.seqlen_k = seqlen_k;
  s.h_q = h_q;
  s.h_kv = h_kv;
  s.head_dim = head_dim;
  s.dtype = dtype;
  s.page_size = page_size;
  s.causal = causal;
  return s;
}

// One loaded instance per policy for the whole test binary: loading is not what is tested.
// The sandbox also stops a call on a wall-clock backstop (tens of ms); a loaded CI machine
// can deschedule one of the ~10^6 calls here for that long, so the grid runs with a
// generous budget. Fitting the default budget is tested on its own (worst cases below).
Policy& cached(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Policy>> policies;
  auto& p = policies[name];
  if (!p) {
    SandboxLimits generous;
    generous.max_instructions = 100'000'000;
    p = make_policy(name, generous);
  }
  return *p;
}

Decision decide(const std::string& policy, const Shape& s, const DeviceInfo& hw = kH100) {
  const DispatchOutcome out = cached(policy).decide(s, hw);
  EXPECT_TRUE(out.ok()) << policy << " on " << describe(s) << ": " << out.error;
  return out.decision;
}

int splits(const std::string& policy, const Shape& s, const DeviceInfo& hw = kH100) {
  return decide(policy, s, hw).num_splits;
}

std::string error_of(const std::string& spec) {
  try {
    make_policy(spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// ---- the dense grid -------------------------------------------------------------------

const std::vector<int> kBatches = [] {
  std::vector<int> b;
  for (int i = 1; i <= 64; ++i) b.push_back(i);
  for (int i : {65, 100, 128, 256, 512, 992, 993, 1024, 4096}) b.push_back(i);
  return b;
}();
// Multiples and non-multiples of every kBlockN in play (64, 80, 112, 128, 144, 160, 176,
// 192, 224, 256), the nblk = 4 bucket edges, and long contexts.
const std::vector<int> kSeqlensK = {1,    2,    7,    64,   100,   127,   128,   129,   176,   177,   255,
                                    256,  300,  352,  353,  384,   500,   511,   512,   513,   528,   529,
                                    640,  704,  705,  896,  1000,  1024,  1500,  2048,  3000,  3500,  4096,
                                    5000, 8192, 9999, 16384, 32768, 50000, 65536, 100000, 131072};
const std::vector<std::pair<int, int>> kHeads = [] {  // (h_q, h_kv)
  std::vector<std::pair<int, int>> h;
  for (int kv : {1, 2, 4, 8, 16, 32, 64}) {
    std::set<int> qpks = {1, 2, 5, 8, std::max(1, 64 / kv)};
    for (int qpk : qpks) h.push_back({kv * qpk, kv});
  }
  return h;
}();
const std::vector<int> kHeadDims = {64, 128, 256};
const std::vector<Dtype> kDtypes = {Dtype::bf16, Dtype::fp16, Dtype::fp8};
const std::vector<int> kPageSizes = {0, 1, 16, 256};
const std::vector<int> kSeqlensQ = {1, 2, 4, 16};
const std::vector<int> kSms = {132, 114, 108, 16};

struct Case {
  Shape shape;
  DeviceInfo hw;
};

// Every combination of the small axes (head dim, dtype, page size, seqlen_q, SMs), each
// with `per_combo` (batch, seqlen_k, heads) triples drawn by coprime strides so that every
// value of every axis recurs across combinations; plus the whole low-occupancy corner
// (batch 1..64 x every seqlen_k x every head pair) at bf16, D = 128, Lq = 1, 132 SMs.
std::vector<Case> dense_grid(int per_combo, bool with_corner = true) {
  std::vector<Case> cases;
  int combo = 0;
  for (int d : kHeadDims)
    for (Dtype dt : kDtypes)
      for (int page : kPageSizes)
        for (int lq : kSeqlensQ)
          for (int sms : kSms) {
            const DeviceInfo hw = device(sms);
            for (int k = 0; k < per_combo; ++k) {
              const int b = kBatches[(k * 7 + combo) % kBatches.size()];
              const int lk = kSeqlensK[(k * 11 + combo * 3) % kSeqlensK.size()];
              const auto [hq, hkv] = kHeads[(k * 13 + combo * 5) % kHeads.size()];
              // Lq > 1 is causal among the new tokens; sometimes not, to reach FA3's L2 rule.
              cases.push_back({shape(b, lk, hq, hkv, d, dt, page, lq, (k + combo) % 5 != 0), hw});
            }
            ++combo;
          }
  if (!with_corner) return cases;
  for (int b = 1; b <= 64; ++b)
    for (int lk : kSeqlensK)
      for (const auto& [hq, hkv] : kHeads) cases.push_back({shape(b, lk, hq, hkv), kH100});
  return cases;
}

// ---- fa3.lua against its C++ twin ----------------------------------------------------

TEST(Fa3Reference, AgreesWithTheLuaPolicyOnADenseGrid) {
  Policy* fa3 = &cached("fa3");
  int mismatches = 0, checked = 0;
  std::string first;
  for (const auto& c : dense_grid(240)) {
    validate(c.shape);
    const DispatchOutcome lua = fa3->decide(c.shape, c.hw);
    ASSERT_TRUE(lua.ok()) << describe(c.shape) << ": " << lua.error;
    const Decision cpp = fa3_reference(c.shape, c.hw);
    ++checked;
    if (lua.decision.num_splits != cpp.num_splits || lua.decision.pack_gqa != cpp.pack_gqa ||
        lua.decision.sm_margin != cpp.sm_margin) {
      if (mismatches++ < 5)
        first += "\n  " + describe(c.shape) + " on " + std::to_string(c.hw.num_sms) + " SMs: lua " +
                 describe(lua.decision) + ", C++ " + describe(cpp);
    }
  }
  EXPECT_EQ(mismatches, 0) << mismatches << " of " << checked << " shapes differ:" << first;
  EXPECT_GT(checked, 150'000);
}

// fa3-kvcache's twin, which distill exports as the fallback of programs over fa3-kvcache.
TEST(Fa3Reference, TheKvcacheTwinAgreesWithTheLuaPolicyOnADenseGrid) {
  Policy* kv = &cached("fa3-kvcache");
  int mismatches = 0, checked = 0, dynamic_lowered = 0;
  std::string first;
  for (const auto& c : dense_grid(240)) {
    const DispatchOutcome lua = kv->decide(c.shape, c.hw);
    ASSERT_TRUE(lua.ok()) << describe(c.shape) << ": " << lua.error;
    const Decision cpp = fa3_kvcache_reference(c.shape, c.hw);
    ++checked;
    dynamic_lowered += cpp.num_splits < fa3_reference(c.shape, c.hw).num_splits;
    if (lua.decision != cpp && mismatches++ < 5)
      first += "\n  " + describe(c.shape) + " on " + std::to_string(c.hw.num_sms) + " SMs: lua " +
               describe(lua.decision) + ", C++ " + describe(cpp);
  }
  EXPECT_EQ(mismatches, 0) << mismatches << " of " << checked << " shapes differ:" << first;
  EXPECT_GT(dynamic_lowered, 1000);  // the dynamic stage is exercised, not only the bound
}

// The grid must reach every branch of FA3's heuristic, or agreement proves little.
TEST(Fa3Reference, GridReachesEveryBranch) {
  std::set<int> seen_splits;
  bool packed = false, unpacked = false;
  for (const auto& c : dense_grid(240)) {
    const Decision d = fa3_reference(c.shape, c.hw);
    seen_splits.insert(d.num_splits);
    (*d.pack_gqa ? packed : unpacked) = true;
  }
  EXPECT_TRUE(packed && unpacked);
  EXPECT_TRUE(seen_splits.count(1) && seen_splits.count(2) && seen_splits.count(3));
  EXPECT_GE(*seen_splits.rbegin(), 64);
}

// ---- every built-in, everywhere -----------------------------------------------------

TEST(Policies, EveryBuiltinReturnsAValidDecisionOnTheGrid) {
  const auto grid = dense_grid(60);
  for (const auto& name : builtin_policy_names()) {
    Policy* policy = &cached(name);
    EXPECT_EQ(policy->name(), name);
    int bad = 0;
    for (const auto& c : grid) {
      const DispatchOutcome out = policy->decide(c.shape, c.hw);
      std::optional<std::string> why = out.ok() ? decision_error(out.decision, c.hw) : out.error;
      if (!why && !out.decision.pack_gqa) why = "pack_gqa left unresolved";
      if (why && bad++ < 3) ADD_FAILURE() << name << " on " << describe(c.shape) << ": " << *why;
    }
    EXPECT_EQ(bad, 0) << name;
  }
}

// The longest paths (128-step efficiency loops, the L2 rule, 256 chunks) fit the default
// sandbox budget with room to spare.
TEST(Policies, BuiltinsFitTheDefaultBudget) {
  const std::vector<Case> worst = {
      {shape(1, 131072, 1, 1), kH100},   {shape(1, 131072, 64, 1, 256, Dtype::fp8, 16, 16), kH100},
      {shape(1, 131072, 8, 8, 64), kH100}, {shape(1, 131072, 256, 1, 128, Dtype::bf16, 0, 16, false), device(16)},
      {shape(3, 100000, 8, 1), device(108)}};
  for (const auto& name : builtin_policy_names()) {
    SandboxLimits tight;
    tight.max_instructions = 100'000;  // a tenth of the default
    auto policy = make_policy(name, tight);
    for (const auto& c : worst) {
      const DispatchOutcome out = policy->decide(c.shape, c.hw);
      EXPECT_TRUE(out.ok()) << name << " on " << describe(c.shape) << ": " << out.error;
    }
  }
}

TEST(Policies, BuiltinsAreDeterministic) {
  const Shape s = shape(3, 5000, 32, 4);
  for (const auto& name : builtin_policy_names()) {
    const Decision first = decide(name, s);
    auto again = make_policy(name);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(again->decide(s, kH100).decision, first) << name;
  }
}

TEST(Policies, SourcesNameTheirOrigin) {
  for (const auto& name : builtin_policy_names()) {
    const auto src = builtin_policy_source(name);
    ASSERT_TRUE(src) << name;
    EXPECT_EQ(src->rfind("-- " + name + ":", 0), 0u) << name << " must open with a header naming it";
    EXPECT_THAT(*src, ::testing::AnyOf(HasSubstr("github.com/"), HasSubstr("arXiv:"))) << name;
    EXPECT_THAT(*src, HasSubstr("function dispatch(s, hw)")) << name;
  }
  EXPECT_EQ(builtin_policy_names(),
            (std::vector<std::string>{"fa3", "fa3-kvcache", "fa2", "seq-aware", "flashinfer"}));
  EXPECT_FALSE(builtin_policy_source("fa4"));
}

// ---- known values, derived from the sources ------------------------------------------

// paper-table1's headline shape: B=1, Hq=64, Hkv=1, Lk=512, D=128, bf16, Lq=1, H100.
// FA3: Lq = 1 drops causal (contiguous cache), so kBlockN = 176 and nblk = ceil(512/176)
// = 3; one M block (64 packed rows <= kBlockM 128) is 1 CTA, far below 0.8 * 132, and the
// nblk <= 4 guard answers 1 split. Packing: 64/128 rows used against 1/128 -> pack.
TEST(Policies, PaperTable1HeadlineShape) {
  const Shape s = shape(1, 512, 64, 1);
  EXPECT_EQ(decide("fa3", s), (Decision{1, true, 0}));
  EXPECT_EQ(fa3_reference(s, kH100), (Decision{1, true, 0}));
  // seq-aware: Lk = 512 is the paper's 4-tile bucket (128-key tiles): 3 splits.
  EXPECT_EQ(decide("seq-aware", s), (Decision{3, true, 0}));
  EXPECT_EQ(decide("fa3-kvcache", s), (Decision{1, true, 0}));
  // FA2: 64 query heads become 64 rows of one CTA; 1 CTA vs 2 * 132 slots; block_n 128
  // gives 4 blocks; 3 splits is ineligible (2 blocks each, like 2 splits); 4 is best.
  EXPECT_EQ(decide("fa2", s), (Decision{4, true, 0}));
  // FlashInfer: group 64 has no CUDA-core decode kernel -> tensor-core path, 2 CTAs/SM;
  // the 128-token minimum chunk caps 512 tokens at 4 chunks.
  EXPECT_EQ(decide("flashinfer", s), (Decision{4, true, 0}));
}

// The bucket is ceil(Lk / 128) = 4 whatever FA3's own tile: contiguous (kBlockN 176) and
// paged with 16-token pages (kBlockN 128) alike; FA3's guard gives 1, the override 3.
TEST(Policies, SeqAwareOverridesTheNblk4BucketOnly) {
  const Shape paged = shape(1, 512, 64, 1, 128, Dtype::bf16, 16);
  EXPECT_EQ(decide("fa3", paged), (Decision{1, true, 0}));
  EXPECT_EQ(decide("seq-aware", paged), (Decision{3, true, 0}));
  EXPECT_EQ(splits("fa3", shape(1, 385, 64, 1)), 1);
  EXPECT_EQ(splits("seq-aware", shape(1, 385, 64, 1)), 3);
  EXPECT_EQ(splits("seq-aware", shape(1, 384, 64, 1)), 1);  // 3 tiles of 128
  EXPECT_EQ(splits("seq-aware", shape(1, 513, 64, 1)), splits("fa3", shape(1, 513, 64, 1)));  // 5 tiles
  // Saturated (B * Hkv >= 0.8 * 132): unchanged.
  EXPECT_EQ(splits("seq-aware", shape(14, 500, 64, 8)), 1);
  // Elsewhere seq-aware is fa3.
  for (const auto& c : dense_grid(20, false)) {
    const Decision fa3 = decide("fa3", c.shape, c.hw);
    const Decision seq = decide("seq-aware", c.shape, c.hw);
    if (seq.num_splits != 3 || fa3.num_splits != 1) {
      EXPECT_EQ(seq, fa3) << describe(c.shape);
    }
  }
}

// cliff-8k's family at B=1: Hq=64, Hkv=8, Lk=4096.
// FA3: 8 CTAs; nblk = ceil(4096/176) = 24; efficiency 8s/132 peaks at s = 16 (0.970), the
// first s within 85% of it is 14 (0.848). With cache_seqlens the dynamic stage spreads
// 24 tiles * 8 heads * 1.1 over 132 SMs: 2 tiles per SM, ceil(24/2) = 12 splits.
// FA2: block_n 128 -> 32 blocks; 28 would be first within 85% but is ineligible (2 blocks
// per split, as with 16); the only eligible count that qualifies is 32.
// FlashInfer: group 8, D = 128: 8 CTAs/SM, 1056 slots / 8 heads = 132 chunks allowed;
// the 128-token minimum gives 32 chunks.
TEST(Policies, Hkv8Lk4096) {
  const Shape s = shape(1, 4096, 64, 8);
  EXPECT_EQ(decide("fa3", s), (Decision{14, true, 0}));
  EXPECT_EQ(decide("seq-aware", s), (Decision{14, true, 0}));
  EXPECT_EQ(decide("fa3-kvcache", s), (Decision{12, true, 0}));
  EXPECT_EQ(decide("fa2", s), (Decision{32, true, 0}));
  EXPECT_EQ(decide("flashinfer", s), (Decision{32, true, 0}));
}

// FA3 compares float32 efficiencies; a tie at exactly 0.85 * best resolves as float32
// rounds it. One CTA, nblk = ceil(3500/176) = 20, 132 SMs: best is 20/132; 17/132 equals
// 0.85 * 20/132 exactly, and in float32 falls just short, so FA3 takes 18, not 17.
TEST(Fa3Reference, Float32TieAtTheThreshold) {
  const Shape s = shape(1, 3500, 8, 1);
  EXPECT_EQ(fa3_reference(s, kH100).num_splits, 18);
  EXPECT_EQ(splits("fa3", s), 18);
}

// Saturated, but one KV head (Lk * 2D * 2 bytes = 64 MiB) overflows FA3's assumed 50 MiB
// L2 and enough rows (32 M blocks >= 2 * 16 SMs) read it: 2 splits, never when causal.
TEST(Fa3Reference, L2RuleSplitsLongNonCausalKv) {
  const DeviceInfo small = device(16);
  const Shape noncausal = shape(1, 131072, 256, 1, 128, Dtype::bf16, 0, 16, false);
  const Shape causal = shape(1, 131072, 256, 1, 128, Dtype::bf16, 0, 16, true);
  EXPECT_EQ(fa3_reference(noncausal, small).num_splits, 2);
  EXPECT_EQ(splits("fa3", noncausal, small), 2);
  EXPECT_EQ(fa3_reference(causal, small).num_splits, 1);
  EXPECT_EQ(splits("fa3", causal, small), 1);
  // 50 MiB exactly is not over: Lk = 102400 -> 1 split.
  EXPECT_EQ(splits("fa3", shape(1, 102400, 256, 1, 128, Dtype::bf16, 0, 16, false), small), 1);
}

// Tiles: fp8 D=128 uses kBlockN 224 (nblk of 1120 keys = 5 -> may split), bf16 176 (7).
TEST(Fa3Reference, TileSizesFollowDtypeAndPaging) {
  // Both unsaturated single CTAs: nblk decides between the guard and the loop.
  EXPECT_EQ(splits("fa3", shape(1, 896, 8, 1, 128, Dtype::fp8)), 1);   // ceil(896/224) = 4
  EXPECT_GT(splits("fa3", shape(1, 897, 8, 1, 128, Dtype::fp8)), 1);   // 5
  EXPECT_EQ(splits("fa3", shape(1, 704, 8, 1)), 1);                    // ceil(704/176) = 4
  EXPECT_GT(splits("fa3", shape(1, 705, 8, 1)), 1);                    // 5
  // Paged with 256-token pages and few packed rows: still not TMA, kBlockN 128.
  EXPECT_EQ(splits("fa3", shape(1, 512, 8, 1, 128, Dtype::bf16, 256)), 1);  // 4
  EXPECT_GT(splits("fa3", shape(1, 513, 8, 1, 128, Dtype::bf16, 256)), 1);  // 768 capacity: 6
  // MHA, unsplit, contiguous: FA3 does not pack.
  EXPECT_EQ(decide("fa3", shape(64, 512, 32, 32)), (Decision{1, false, 0}));
}

// fa3-kvcache's second stage: one split beyond 992 requests (no dynamic stage; the static
// count then uses the real batch), and the dynamic count never exceeds the static one.
TEST(Policies, Fa3KvcacheDynamicStage) {
  // B = 992: stage 1 pretends B = 1 (8 CTAs -> 14 splits), stage 2: 992 * 24 tiles * 8
  // heads * 1.1 / 132 = 1588 tiles per SM -> 1 split.
  EXPECT_EQ(splits("fa3-kvcache", shape(992, 4096, 64, 8)), 1);
  EXPECT_EQ(splits("fa3-kvcache", shape(993, 4096, 64, 8)), splits("fa3", shape(993, 4096, 64, 8)));
  // B = 4: static 14 (batch pretended 1); dynamic: 4*24*8*1.1/132 = 6.4 -> 7 per SM,
  // ceil(24/7) = 4.
  EXPECT_EQ(splits("fa3-kvcache", shape(4, 4096, 64, 8)), 4);
  EXPECT_EQ(splits("fa3", shape(4, 4096, 64, 8)), 4);  // 32 CTAs: 4 splits fill 128 of 132
  for (const auto& c : dense_grid(20, false)) {
    const int kv = splits("fa3-kvcache", c.shape, c.hw);
    Shape one = c.shape;
    one.batch = 1;
    if (c.shape.batch <= 992) {
      EXPECT_LE(kv, splits("fa3", one, c.hw)) << describe(c.shape);
    }
  }
}

// FA2 skips split counts that give the same KV blocks per split as the count before.
TEST(Policies, Fa2OnlyChoosesEligibleSplitCounts) {
  Policy* fa2 = &cached("fa2");
  auto block_n = [](int d) { return d <= 64 ? 256 : d <= 128 ? 128 : 64; };
  int split_cases = 0;
  for (const auto& c : dense_grid(60)) {
    const int s = fa2->decide(c.shape, c.hw).decision.num_splits;
    if (s == 1) continue;
    ++split_cases;
    const int page = c.shape.page_size;
    const int seqlen_k = page > 0 ? (c.shape.seqlen_k + page - 1) / page * page : c.shape.seqlen_k;
    const int nblk = (seqlen_k + block_n(c.shape.head_dim) - 1) / block_n(c.shape.head_dim);
    EXPECT_NE((nblk + s - 1) / s, (nblk + s - 2) / (s - 1)) << describe(c.shape) << ": " << s << " splits";
    EXPECT_LE(s, std::min({128, 2 * c.hw.num_sms, nblk}));
  }
  EXPECT_GT(split_cases, 1000);
  // No nblk guard: 2 blocks of 256 rows (D = 64, Lk = 512) still split.
  EXPECT_EQ(splits("fa2", shape(1, 512, 8, 1, 64)), 2);
  // Without GQA in one token (MHA, or Lq > 1) FA2 does not pack.
  EXPECT_EQ(decide("fa2", shape(1, 4096, 8, 8)).pack_gqa, false);
  EXPECT_EQ(decide("fa2", shape(1, 4096, 64, 8, 128, Dtype::bf16, 0, 2)).pack_gqa, false);
}

// FlashInfer: chunks * batch * Hkv never exceed occupancy * SMs, chunks are at least
// 128 tokens' worth of pages, and the occupancy bound binds where it should.
TEST(Policies, FlashinferRespectsItsOccupancyBound) {
  Policy* fi = &cached("flashinfer");
  for (const auto& c : dense_grid(60)) {
    const Decision d = fi->decide(c.shape, c.hw).decision;
    EXPECT_TRUE(*d.pack_gqa);
    if (d.num_splits == 1) continue;
    // At most 8 CTAs per SM for the decode kernel (2 for tensor cores), so at most
    // 8 * SMs CTAs in all.
    EXPECT_LE(std::int64_t(d.num_splits) * c.shape.batch * c.shape.h_kv, 8LL * c.hw.num_sms) << describe(c.shape);
    const int page = c.shape.page_size > 0 ? c.shape.page_size : 1;
    const int pages = (c.shape.seqlen_k + page - 1) / page;
    EXPECT_LE(d.num_splits, std::max(1, (pages + std::max(128 / page, 1) - 1) / std::max(128 / page, 1)))
        << describe(c.shape);
  }
  // Group 8, D = 128: 8 CTAs/SM (registers), 1056 slots, 1056 / 8 heads / 16 requests
  // = 8 chunks of 1024 tokens.
  EXPECT_EQ(splits("flashinfer", shape(16, 8192, 64, 8)), 8);
  // MHA, D = 128: 36 KiB of shared memory per CTA -> 6 CTAs/SM, 792 slots, 6 chunks.
  EXPECT_EQ(splits("flashinfer", shape(16, 8192, 8, 8)), 6);
  // Saturated: 132 requests * 8 heads >= 1056 slots -> no split.
  EXPECT_EQ(splits("flashinfer", shape(132, 8192, 64, 8)), 1);
  // Never more than 256 chunks: the chunk grows instead.
  EXPECT_EQ(splits("flashinfer", shape(1, 131072, 1, 1)), 256);
}

// ---- make_policy --------------------------------------------------------------------

TEST(PolicyFactory, FixedN) {
  EXPECT_EQ(decide("fixed:3", shape(1, 512, 64, 1)), (Decision{3, true, 0}));  // pack defaults to qpk > 1
  EXPECT_EQ(decide("fixed:256", shape(1, 512, 8, 8)), (Decision{256, false, 0}));
  EXPECT_EQ(decide("fixed:1", shape(1, 512, 8, 8)).num_splits, 1);
  EXPECT_EQ(make_policy("fixed:7")->name(), "fixed:7");
  EXPECT_THAT(*builtin_policy_source("fixed:7"), HasSubstr("num_splits = 7"));
  for (const std::string bad : {"fixed:0", "fixed:257", "fixed:", "fixed:abc", "fixed:-1", "fixed: 3", "fixed:3.5",
                                "fixed:+3", "fixed:99999999999999999999", "fixed:3x"}) {
    const std::string e = error_of(bad);
    EXPECT_THAT(e, HasSubstr("'" + bad + "'")) << bad;
    EXPECT_THAT(e, HasSubstr("must be an integer in [1, 256]")) << bad;
    EXPECT_FALSE(builtin_policy_source(bad)) << bad;
  }
}

TEST(PolicyFactory, UnknownNameListsTheBuiltins) {
  EXPECT_EQ(error_of("fa4"),
            "unknown policy 'fa4' (built-ins: fa3, fa3-kvcache, fa2, seq-aware, flashinfer, fixed:N; "
            "or a path to a .lua script)");
  EXPECT_THAT(error_of(""), HasSubstr("unknown policy ''"));
  EXPECT_THAT(error_of("FA3"), HasSubstr("unknown policy 'FA3'"));
}

class PolicyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("evo_policy_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(PolicyFiles, LoadsAScriptFromAPath) {
  const std::string path = write("mine.lua",
                                 "function dispatch(s, hw)\n"
                                 "  if s.nblk <= 4 then return {num_splits = 3, pack_gqa = false} end\n"
                                 "  return {num_splits = 1}\n"
                                 "end\n");
  auto p = make_policy(path);
  EXPECT_EQ(p->name(), path);
  EXPECT_EQ(p->decide(shape(1, 512, 64, 1), kH100).decision, (Decision{3, false, 0}));
  EXPECT_EQ(p->decide(shape(1, 4096, 64, 1), kH100).decision, (Decision{1, true, 0}));
}

TEST_F(PolicyFiles, BuiltinSourceSavedToAFileBehavesTheSame) {
  const std::string path = write("copy.lua", *builtin_policy_source("fa3"));
  SandboxLimits generous;
  generous.max_instructions = 100'000'000;
  auto copy = make_policy(path, generous);
  for (const auto& c : dense_grid(4, false))
    EXPECT_EQ(copy->decide(c.shape, c.hw).decision, cached("fa3").decide(c.shape, c.hw).decision);
}

TEST_F(PolicyFiles, ErrorsNameThePath) {
  const std::string missing = (dir_ / "nope.lua").string();
  EXPECT_THAT(error_of(missing), HasSubstr("'" + missing + "'"));
  EXPECT_THAT(error_of(missing), HasSubstr("no such file"));
  EXPECT_THAT(error_of(dir_.string()), HasSubstr("not a regular file"));
  const std::string broken = write("broken.lua", "function dispatch(s, hw)\n  return {num_splits = \nend\n");
  EXPECT_THAT(error_of(broken), HasSubstr(broken));
  const std::string empty = write("empty.lua", "");
  EXPECT_THAT(error_of(empty), HasSubstr(empty));
  // A name without a slash or .lua that exists as a file is still read as a script.
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  write("plain", "function dispatch(s, hw) return {num_splits = 2} end\n");
  EXPECT_EQ(decide("plain", shape(1, 512, 8, 8)).num_splits, 2);
  std::filesystem::current_path(cwd);
}

}  // namespace
