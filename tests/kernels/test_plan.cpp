// The launch plan's arithmetic, checked by hand on small cases.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <evodispatch/kernels/kernel_spec.hpp>
#include <evodispatch/heuristics/latency_model.hpp>
#include <evodispatch/kernels/decode_params.hpp>
#include <evodispatch/kernels/plan.hpp>

namespace evodispatch {
namespace {

DeviceInfo hopper() { return {"test-h100", 132, 50 << 20, 3.35e12, 90}; }
DeviceInfo ampere() { return {"test-a100", 108, 40 << 20, 2.0e12, 80}; }

Shape mqa(int batch, int seqlen_k) { return Shape{batch, 1, seqlen_k, 64, 1, 128, Dtype::bf16, 0, true}; }
Shape gqa8(int batch, int seqlen_k) { return Shape{batch, 1, seqlen_k, 64, 8, 128, Dtype::bf16, 0, true}; }

Decision splits(int n, std::optional<bool> pack = std::nullopt, int margin = 0) { return Decision{n, pack, margin}; }

// The hand-checked arithmetic below is that of the generic kernel (fixed resources).
Plan generic_plan(const Shape& s, const Decision& d, const DeviceInfo& hw) {
  return plan(s, d, hw, builtin_kernel_resources());
}

std::string error_of(const Shape& s, const Decision& d, const DeviceInfo& hw) {
  try {
    generic_plan(s, d, hw);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Plan, PaperTable1ShapeWithThreeSplits) {
  // B=1 Lk=512 Hq=64 Hkv=1: 4 tiles of 128 rows; 3 splits of ceil(4/3) = 2 tiles leave
  // the third split empty.
  const Plan p = generic_plan(mqa(1, 512), splits(3), hopper());
  EXPECT_EQ(p.qpk, 64);
  EXPECT_EQ(p.block_n, 128);
  EXPECT_EQ(p.nblk, 4);
  EXPECT_EQ(p.blocks_per_split, 2);
  EXPECT_EQ(p.non_empty_splits, 2);
  EXPECT_EQ(p.last_split_blocks, 2);
  EXPECT_TRUE(p.pack_gqa);  // resolved: qpk > 1
  ASSERT_TRUE(p.decision.pack_gqa.has_value());
  EXPECT_TRUE(*p.decision.pack_gqa);
  EXPECT_EQ(p.rows_per_cta, 64);
  EXPECT_EQ(p.m_tiles, 1);
  EXPECT_EQ(p.heads_per_cta, 64);
  EXPECT_EQ(p.work_items, 3);
  EXPECT_EQ(p.threads_per_cta, 128);
  // 2 stages x (K + V) x 128 rows x 128 dims x 2 bytes + a 64 x 128 Q tile.
  EXPECT_EQ(p.smem_bytes_per_cta, 2 * 2 * 128 * 128 * 2 + 64 * 128 * 2);
  EXPECT_EQ(p.ctas_per_sm, 1);  // 144 KiB of 228 KiB
  EXPECT_EQ(p.sms_used, 132);
  EXPECT_EQ(p.slots, 132);
  EXPECT_EQ(p.grid_ctas, 3);
  EXPECT_EQ(p.waves, 1);
  EXPECT_TRUE(p.combine);
  EXPECT_EQ(p.combine_ctas, 64 / 8);
  EXPECT_EQ(p.workspace_bytes, 3 * 64 * (128 + 1) * 4);
  EXPECT_EQ(p.kv_footprint_bytes, 2 * 512 * 1 * 128 * 2);
  EXPECT_EQ(p.kv_bytes_read, p.kv_footprint_bytes);
  EXPECT_EQ(p.q_bytes, 64 * 128 * 2);
  EXPECT_EQ(p.o_bytes, p.q_bytes);
}

TEST(Plan, SplitsPastTheTileCountAreEmpty) {
  const Plan p8 = generic_plan(mqa(1, 512), splits(8), hopper());
  EXPECT_EQ(p8.blocks_per_split, 1);
  EXPECT_EQ(p8.non_empty_splits, 4);
  EXPECT_EQ(p8.work_items, 8);  // the empty splits are still CTAs of the grid

  const Plan p256 = generic_plan(mqa(1, 512), splits(256), hopper());
  EXPECT_EQ(p256.non_empty_splits, 4);
  EXPECT_EQ(p256.work_items, 256);
  EXPECT_EQ(p256.waves, 2);  // 256 CTAs over 132 slots

  // 5 tiles in 3 splits: 2 + 2 + 1.
  const Plan p5 = generic_plan(mqa(1, 640), splits(3), hopper());
  EXPECT_EQ(p5.nblk, 5);
  EXPECT_EQ(p5.blocks_per_split, 2);
  EXPECT_EQ(p5.non_empty_splits, 3);
  EXPECT_EQ(p5.last_split_blocks, 1);

  // One KV row: one tile, every split but the first empty.
  const Plan p1 = generic_plan(mqa(1, 1), splits(16), hopper());
  EXPECT_EQ(p1.nblk, 1);
  EXPECT_EQ(p1.non_empty_splits, 1);
  EXPECT_EQ(p1.last_split_blocks, 1);
}

TEST(Plan, OneSplitHasNoCombineAndNoWorkspace) {
  const Plan p = generic_plan(mqa(4, 4096), splits(1), hopper());
  EXPECT_FALSE(p.combine);
  EXPECT_EQ(p.combine_ctas, 0);
  EXPECT_EQ(p.workspace_bytes, 0);
  EXPECT_EQ(p.blocks_per_split, 32);
  EXPECT_EQ(p.non_empty_splits, 1);
  EXPECT_EQ(p.work_items, 4);
}

TEST(Plan, PersistentGridLeavesTheMarginFree) {
  // cliff-8k at B=64: 64 requests x 8 KV heads = 512 CTAs. One CTA per SM and no margin:
  // the hardware hands out the items (hardware_scheduled_grid).
  const Plan full = generic_plan(gqa8(64, 8192), splits(1), hopper());
  EXPECT_EQ(full.work_items, 512);
  EXPECT_EQ(full.sms_used, 132);
  EXPECT_EQ(full.slots, 132);
  EXPECT_EQ(full.grid_ctas, 512);
  EXPECT_EQ(full.waves, 4);  // ceil(512 / 132)

  const Plan margin = generic_plan(gqa8(64, 8192), splits(1, std::nullopt, 32), hopper());
  EXPECT_EQ(margin.sms_used, 100);
  EXPECT_EQ(margin.slots, 100);
  EXPECT_EQ(margin.grid_ctas, 100);
  EXPECT_EQ(margin.waves, 6);  // ceil(512 / 100)

  // A variant that fits several CTAs per SM still gets one per usable SM: the hardware
  // spreads a grid over the free SMs before it stacks, so more CTAs would take more SMs.
  const Plan built_in = plan(gqa8(32, 8192), splits(1, std::nullopt, 100), hopper());
  EXPECT_EQ(built_in.sms_used, 32);
  EXPECT_EQ(built_in.slots, 32);
  EXPECT_EQ(built_in.grid_ctas, 32);
  EXPECT_EQ(built_in.waves, 8);  // 256 items
  const Plan no_margin = plan(gqa8(32, 8192), splits(1), hopper());
  EXPECT_GE(no_margin.ctas_per_sm, 2);  // the three-CTA variant: 256 items on 132 SMs
  EXPECT_EQ(no_margin.grid_ctas, 256);
  EXPECT_EQ(grid_ctas_per_sm(3, 0), 3);
  EXPECT_EQ(grid_ctas_per_sm(3, 1), 1);
  EXPECT_EQ(grid_ctas_per_sm(1, 0), 1);

  // Past three items per SM, the two-warp variants (spec_for, many_items_d128_spec): six
  // CTAs per SM by registers and shared memory, or four by shared memory.
  const Plan six = plan(gqa8(50, 8192), splits(1), hopper());
  EXPECT_EQ(six.ctas_per_sm, 6);
  EXPECT_EQ(six.slots, 6 * 132);
  EXPECT_EQ(six.grid_ctas, 400);
  const Plan four = plan(gqa8(107, 325), splits(1), hopper());
  EXPECT_EQ(four.ctas_per_sm, 4);
  EXPECT_EQ(four.slots, 4 * 132);
  EXPECT_EQ(four.waves, 2);  // 856 items

  // Fewer work items than slots: the grid is the work.
  const Plan small = generic_plan(gqa8(2, 8192), splits(1, std::nullopt, 32), hopper());
  EXPECT_EQ(small.grid_ctas, 16);
  EXPECT_EQ(small.waves, 1);
}

TEST(Plan, TheHardwareHandsOutTheItemsOfSixteenBitCachesAtOneOrTwoCtasPerSmOrAThinLastRound) {
  // cliff-8k at B=64 under the variants' own resources: 512 items.
  const Plan two = plan(gqa8(64, 8192), splits(1), hopper(), builtin_kernel_resources());
  ASSERT_LE(two.ctas_per_sm, 2);
  EXPECT_EQ(two.grid_ctas, two.work_items);
  EXPECT_TRUE(hardware_scheduled_grid(gqa8(64, 8192), splits(1), 512, 264, 2));
  EXPECT_TRUE(hardware_scheduled_grid(gqa8(64, 8192), splits(1), 512, 132, 1));

  // Each condition alone keeps the strided grid of `slots` CTAs.
  Shape fp8 = gqa8(64, 8192);
  fp8.dtype = Dtype::fp8;
  EXPECT_FALSE(hardware_scheduled_grid(fp8, splits(1), 512, 264, 2));
  Shape d64 = gqa8(64, 8192);
  d64.head_dim = 64;
  EXPECT_FALSE(hardware_scheduled_grid(d64, splits(1), 512, 264, 2));
  EXPECT_FALSE(hardware_scheduled_grid(gqa8(64, 8192), splits(1), 856, 528, 4));  // four per SM, 328 left
  EXPECT_FALSE(hardware_scheduled_grid(gqa8(64, 8192), splits(1, std::nullopt, 32), 512, 100, 1));
  EXPECT_FALSE(hardware_scheduled_grid(gqa8(64, 8192), splits(1), 264, 264, 2));  // one round

  // More CTAs per SM: only a last round of at most a fifth of the slots.
  EXPECT_TRUE(hardware_scheduled_grid(gqa8(64, 8192), splits(1), 3 * 528 + 105, 528, 4));
  EXPECT_FALSE(hardware_scheduled_grid(gqa8(64, 8192), splits(1), 3 * 528 + 106, 528, 4));
  EXPECT_FALSE(hardware_scheduled_grid(gqa8(64, 8192), splits(1), 3 * 528, 528, 4));  // no last round
  EXPECT_FALSE(hardware_scheduled_grid(fp8, splits(1), 3 * 528 + 16, 528, 4));

  // The plan applies it: B=107 Lk=325 runs the two-warp fours (856 items on 528 slots),
  // B=206 Lk=150 too, with 64 items in its fourth round.
  const Plan thin = plan(gqa8(206, 150), splits(1), hopper());
  ASSERT_EQ(thin.ctas_per_sm, 4);
  EXPECT_EQ(thin.work_items, 1648);
  EXPECT_EQ(thin.grid_ctas, 1648);
  const Plan four = plan(gqa8(107, 325), splits(1), hopper());
  EXPECT_EQ(four.ctas_per_sm, 4);
  EXPECT_EQ(four.grid_ctas, four.slots);
  const Plan fp8_plan = plan(fp8, splits(1), hopper());
  EXPECT_EQ(fp8_plan.grid_ctas, std::min(fp8_plan.work_items, fp8_plan.slots));
  Shape d256 = gqa8(64, 4096);  // one CTA per SM, 512 items
  d256.head_dim = 256;
  const Plan wide = plan(d256, splits(1), hopper());
  ASSERT_EQ(wide.ctas_per_sm, 1);
  EXPECT_EQ(wide.grid_ctas, 512);
}

TEST(Plan, PackingSharesTheKvStreamAmongTheGroup) {
  const Plan packed = generic_plan(gqa8(2, 1024), splits(2, true), hopper());
  const Plan unpacked = generic_plan(gqa8(2, 1024), splits(2, false), hopper());
  EXPECT_EQ(packed.work_items, 2 * 8 * 2);     // batch x h_kv x splits
  EXPECT_EQ(unpacked.work_items, 2 * 64 * 2);  // batch x h_q x splits
  EXPECT_EQ(packed.rows_per_cta, 8);
  EXPECT_EQ(unpacked.rows_per_cta, 1);
  EXPECT_EQ(packed.heads_per_cta, 8);
  EXPECT_EQ(unpacked.heads_per_cta, 1);
  EXPECT_EQ(packed.kv_footprint_bytes, unpacked.kv_footprint_bytes);
  EXPECT_EQ(packed.kv_bytes_read, packed.kv_footprint_bytes);
  EXPECT_EQ(unpacked.kv_bytes_read, 8 * unpacked.kv_footprint_bytes);  // once per query head
  // The workspace depends on the query rows, not on the packing.
  EXPECT_EQ(packed.workspace_bytes, unpacked.workspace_bytes);
  EXPECT_EQ(packed.workspace_bytes, 2LL * 2 * 64 * 129 * 4);
}

TEST(Plan, MhaDefaultsToNoPacking) {
  const Plan p = generic_plan(Shape{3, 1, 1000, 32, 32, 128, Dtype::fp16, 0, true}, splits(1), hopper());
  EXPECT_FALSE(p.pack_gqa);
  EXPECT_EQ(p.work_items, 3 * 32);
  EXPECT_EQ(p.kv_bytes_read, p.kv_footprint_bytes);  // qpk = 1: nothing is re-read
}

TEST(Plan, LargePackedGroupsAreTiledByBlockM) {
  // 128 query heads per KV head and 2 new tokens: 256 rows in 4 tiles of 64.
  const Plan p = generic_plan(Shape{2, 2, 512, 128, 1, 128, Dtype::bf16, 0, true}, splits(2, true), hopper());
  EXPECT_EQ(p.m_tiles, 4);
  EXPECT_EQ(p.rows_per_cta, 64);
  EXPECT_EQ(p.heads_per_cta, 32);
  EXPECT_EQ(p.work_items, 2 * 1 * 4 * 2);
  EXPECT_EQ(p.kv_bytes_read, 4 * p.kv_footprint_bytes);  // each row tile streams the KV again
  EXPECT_EQ(p.combine_ctas, 2 * 2 * 128 / 8);
}

TEST(Plan, ManySplitsGiveEachCombineRowMoreThreads) {
  // 64 rows, 32 splits at D = 128: 4 lanes of 16 threads per row, 2 rows per CTA.
  const Plan p = generic_plan(mqa(1, 100000), splits(32), hopper());
  EXPECT_EQ(p.combine_rows_per_cta, 2);
  EXPECT_EQ(p.combine_ctas, 32);
  EXPECT_EQ(p.combine_threads_per_cta, 128);
  // 8 splits: one lane, 8 rows per CTA.
  EXPECT_EQ(generic_plan(mqa(1, 100000), splits(8), hopper()).combine_ctas, 8);
}

// The latency model of the model-based family (heuristics/) cannot see this plan: it keeps
// its own copy of the combine's rows per CTA, held to the plan's here.
TEST(Plan, TheLatencyModelMergesAsManyCombineRowsPerCtaAsThePlan) {
  for (int d : {64, 128, 256})
    for (int k = 2; k <= kMaxSplitsPerCall; ++k) {
      Shape s = mqa(64, 100000);
      s.head_dim = d;
      const Plan p = plan(s, splits(k), hopper(), kernel_resources(s, splits(k), hopper()));
      EXPECT_EQ(p.combine_rows_per_cta, model_combine_rows_per_cta(k, d))
          << "D " << d << " splits " << k;
    }
  EXPECT_EQ(kModelCombineSplitsPerLoad, kCombineSplitsPerLoad);
}

TEST(Plan, OccupancyFollowsSharedMemoryAndTheCap) {
  // head_dim 64: 64 KiB of K/V stages + 8 KiB of Q: three fit in 228 KiB.
  Shape s = mqa(1, 512);
  s.head_dim = 64;
  const Plan p = generic_plan(s, splits(1), hopper());
  EXPECT_EQ(p.smem_bytes_per_cta, 2 * 2 * 128 * 64 * 2 + 64 * 64 * 2);
  EXPECT_EQ(p.ctas_per_sm, 3);
  EXPECT_EQ(p.slots, 3 * 132);

  KernelResources capped = builtin_kernel_resources();
  capped.max_ctas_per_sm = 1;
  EXPECT_EQ(plan(s, splits(1), hopper(), capped).ctas_per_sm, 1);

  // Registers bound it too: 256 threads x 255 registers leave room for one CTA.
  KernelResources heavy = builtin_kernel_resources();
  heavy.threads_per_cta = 256;
  heavy.registers_per_thread = 255;
  EXPECT_EQ(plan(s, splits(1), hopper(), heavy).ctas_per_sm, 1);

  // head_dim 256 uses 64-row tiles; A100 has 164 KiB per SM.
  Shape big = mqa(1, 512);
  big.head_dim = 256;
  const Plan a = generic_plan(big, splits(1), ampere());
  EXPECT_EQ(a.block_n, 64);
  EXPECT_EQ(a.nblk, 8);
  EXPECT_EQ(a.smem_bytes_per_cta, 2 * 2 * 64 * 256 * 2 + 64 * 256 * 2);
  EXPECT_EQ(a.ctas_per_sm, 1);

  // fp8 halves the K/V tiles but not the Q tile.
  Shape f8 = mqa(1, 512);
  f8.dtype = Dtype::fp8;
  const Plan p8 = generic_plan(f8, splits(1), hopper());
  EXPECT_EQ(p8.smem_bytes_per_cta, 2 * 2 * 128 * 128 * 1 + 64 * 128 * 2);
  EXPECT_EQ(p8.kv_footprint_bytes, 2 * 512 * 128);
  EXPECT_EQ(p8.q_bytes, 64 * 128 * 2);
}

TEST(Plan, RefusesBadInputsNamingTheField) {
  Shape bad = mqa(1, 512);
  bad.h_kv = 3;
  EXPECT_NE(error_of(bad, splits(1), hopper()).find("shape.h_q"), std::string::npos);
  bad = mqa(1, 0);
  EXPECT_NE(error_of(bad, splits(1), hopper()).find("shape.seqlen_k"), std::string::npos);
  EXPECT_NE(error_of(mqa(1, 512), splits(0), hopper()).find("decision.num_splits"), std::string::npos);
  EXPECT_NE(error_of(mqa(1, 512), splits(257), hopper()).find("decision.num_splits"), std::string::npos);
  EXPECT_NE(error_of(mqa(1, 512), splits(1, std::nullopt, 132), hopper()).find("decision.sm_margin"), std::string::npos);
  EXPECT_NE(error_of(mqa(1, 512), splits(1, std::nullopt, -1), hopper()).find("decision.sm_margin"), std::string::npos);
  DeviceInfo none = hopper();
  none.num_sms = 0;
  EXPECT_NE(error_of(mqa(1, 512), splits(1), none).find("device.num_sms"), std::string::npos);
  // head_dim 512 needs 288 KiB of shared memory: no SM has it.
  Shape huge = mqa(1, 512);
  huge.head_dim = 512;
  EXPECT_NE(error_of(huge, splits(1), hopper()).find("shape.head_dim"), std::string::npos);
  KernelResources zero = builtin_kernel_resources();
  zero.block_m = 0;
  EXPECT_THROW(plan(mqa(1, 512), splits(1), hopper(), zero), InputError);
}

TEST(Plan, LargestMarginLeavesOneSm) {
  const Plan p = generic_plan(gqa8(4, 1024), splits(4, std::nullopt, 131), hopper());
  EXPECT_EQ(p.sms_used, 1);
  EXPECT_EQ(p.slots, 1);
  EXPECT_EQ(p.grid_ctas, 1);
  EXPECT_EQ(p.waves, 4 * 8 * 4);
}

TEST(Plan, JsonCarriesTheResolvedDecisionAndTheGrid) {
  const Plan p = generic_plan(gqa8(16, 8192), splits(1), hopper());
  const nlohmann::json j = to_json(p);
  EXPECT_EQ(j.at("decision").at("pack_gqa"), true);
  EXPECT_EQ(j.at("shape").at("batch"), 16);
  EXPECT_EQ(j.at("work_items"), 128);
  EXPECT_EQ(j.at("grid_ctas"), 128);
  EXPECT_EQ(j.at("waves"), 1);
  EXPECT_EQ(j.at("combine"), false);
  EXPECT_EQ(j.at("smem_bytes_per_cta"), p.smem_bytes_per_cta);
  EXPECT_EQ(j.at("kv_bytes_read"), p.kv_bytes_read);
}

TEST(Plan, RealVariantResourcesComeFromTheKernelSpec) {
  // paper-table1 with 3 splits: 64 packed rows in 16-row tiles are 12 items, one wave:
  // the runner tiles by 16 rows to get parallelism (kernel_spec.cpp).
  const Shape s = mqa(1, 512);
  const KernelResources r = kernel_resources(s, splits(3), hopper());
  const KernelSpec spec = spec_for(s, splits(3), 132);
  EXPECT_EQ(r.block_m, spec.block_m);
  EXPECT_EQ(r.block_m, 16);
  EXPECT_EQ(r.threads_per_cta, spec.threads());
  EXPECT_EQ(r.smem_bytes_per_cta, spec.smem_bytes());
  const Plan p = plan(s, splits(3), hopper());
  EXPECT_EQ(p.m_tiles, 4);
  EXPECT_EQ(p.work_items, 12);
  EXPECT_EQ(p.smem_bytes_per_cta, spec.smem_bytes());
  EXPECT_EQ(p.kv_bytes_read, 4 * p.kv_footprint_bytes);  // each row tile streams the KV

  // A large batch tiles by 32 rows: the 16-row items would not fit one wave, the 64-row
  // ones would leave half the SMs idle.
  EXPECT_EQ(kernel_resources(mqa(64, 8192), splits(1), hopper()).block_m, 32);
  // An fp8 cache has its own variant, staging half the bytes; head_dim 96 has none (the
  // generic kernel).
  Shape f8 = s;
  f8.dtype = Dtype::fp8;
  EXPECT_EQ(kernel_resources(f8, splits(1), hopper()).smem_bytes_per_cta, spec_for(f8, splits(1), 132).smem_bytes());
  EXPECT_TRUE(spec_for(f8, splits(1), 132).fp8_kv);
  Shape d96 = s;
  d96.head_dim = 96;
  EXPECT_EQ(kernel_resources(d96, splits(1), hopper()).smem_bytes_per_cta, 0);
}

TEST(Plan, TheRuntimesOccupancyIsTakenAsItIs) {
  // 256 threads x 255 registers: the model fits one CTA per SM.
  KernelResources heavy = builtin_kernel_resources();
  heavy.threads_per_cta = 256;
  heavy.registers_per_thread = 255;
  EXPECT_EQ(plan(gqa8(64, 8192), splits(1), hopper(), heavy).ctas_per_sm, 1);
  heavy.ctas_per_sm = 2;  // what the runtime reports for the loaded kernel
  Shape fp8 = gqa8(64, 8192);  // a strided grid: its size is the slots
  fp8.dtype = Dtype::fp8;
  const Plan p = plan(fp8, splits(1), hopper(), heavy);
  EXPECT_EQ(p.ctas_per_sm, 2);
  EXPECT_EQ(p.slots, 264);
  EXPECT_EQ(p.grid_ctas, 264);
  heavy.max_ctas_per_sm = 1;  // a cap bounds it either way
  EXPECT_EQ(plan(fp8, splits(1), hopper(), heavy).grid_ctas, 132);

  // A tile the model says no SM of this cc holds: refused while modelled, planned once
  // the GPU has loaded the kernel (it knows its SM better than the table).
  DeviceInfo consumer = hopper();
  consumer.cc = 86;  // 99 KiB per CTA
  KernelResources big = builtin_kernel_resources();
  big.smem_bytes_per_cta = 150 * 1024;
  EXPECT_THROW(plan(mqa(1, 512), splits(1), consumer, big), InputError);
  big.ctas_per_sm = 1;
  EXPECT_EQ(plan(mqa(1, 512), splits(1), consumer, big).smem_bytes_per_cta, 150 * 1024);

  KernelResources negative = builtin_kernel_resources();
  negative.ctas_per_sm = -1;
  EXPECT_THROW(plan(mqa(1, 512), splits(1), hopper(), negative), InputError);
}

TEST(Plan, TheCombineGridIsPersistentOnTheDecodeGridsSms) {
  // B=8 x 64 query heads = 512 rows, 8 per combine CTA: 64 combine CTAs.
  KernelResources r = builtin_kernel_resources();
  r.combine_ctas_per_sm = 4;
  const Plan p = plan(gqa8(8, 4096), splits(4), hopper(), r);
  EXPECT_EQ(p.combine_ctas, 64);
  EXPECT_EQ(p.combine_ctas_per_sm, 4);
  EXPECT_EQ(p.combine_slots, 4 * 132);
  EXPECT_EQ(p.combine_grid, 64);
  // With a margin: one CTA per usable SM, like the decode grid.
  const Plan m = plan(gqa8(8, 4096), splits(4, std::nullopt, 100), hopper(), r);
  EXPECT_EQ(m.combine_slots, 32);
  EXPECT_EQ(m.combine_grid, 32);
  // Not reported: modelled from its threads (2048 / 128 = 16, at most 32 CTAs per SM).
  EXPECT_EQ(generic_plan(gqa8(8, 4096), splits(4), hopper()).combine_ctas_per_sm, 16);
  // No split, no combine.
  const Plan one = plan(gqa8(8, 4096), splits(1), hopper(), r);
  EXPECT_FALSE(one.combine);
  EXPECT_EQ(one.combine_grid, 0);
  EXPECT_EQ(one.combine_slots, 0);
  const nlohmann::json j = to_json(p);
  EXPECT_EQ(j.at("combine_grid"), 64);
  EXPECT_EQ(j.at("combine_slots"), 4 * 132);
  EXPECT_EQ(j.at("combine_ctas_per_sm"), 4);
}

TEST(Plan, WorkItemsAreTheKernelsDecomposition) {
  // The plan, the kernel's parameters and the variant choice count work items in one place.
  for (const Shape& s : {mqa(1, 512), gqa8(33, 8192), Shape{2, 16, 700, 128, 1, 256, Dtype::fp16, 16, true},
                         Shape{3, 4, 1000, 28, 4, 64, Dtype::bf16, 0, true}})
    for (const Decision& d : {splits(1), splits(3, true), splits(5, false), splits(2, true, 100)}) {
      const KernelSpec spec = spec_for(s, d, 132);
      const Plan p = plan(s, d, hopper());
      const DecodeParams params = decode_params_for(s, d, spec);
      const WorkDecomposition w = decompose_work(s, d, spec.block_m);
      SCOPED_TRACE(describe(s) + " " + describe(d));
      EXPECT_EQ(p.work_items, w.items);
      EXPECT_EQ(params.num_work_items, w.items);
      EXPECT_EQ(params.m_tiles, p.m_tiles);
      EXPECT_EQ(params.heads_per_group * params.groups_per_kv_head, s.h_q / s.h_kv);
      EXPECT_EQ(params.rows_per_group, w.rows_per_group);
    }
  // 28 heads over 4 KV heads, 4 new tokens: 28 packed rows in 16-row tiles, or 4 unpacked.
  const Shape s{3, 4, 1000, 28, 4, 64, Dtype::bf16, 0, true};
  const WorkDecomposition packed = decompose_work(s, splits(5, true), 16);
  EXPECT_EQ(packed.rows_per_group, 28);
  EXPECT_EQ(packed.m_tiles, 2);
  EXPECT_EQ(packed.items, 3 * 4 * 2 * 5);
  const WorkDecomposition unpacked = decompose_work(s, splits(5, false), 16);
  EXPECT_EQ(unpacked.groups_per_kv_head, 7);
  EXPECT_EQ(unpacked.items, 3 * 4 * 7 * 5);
  EXPECT_TRUE(combine_runs(2, false));
  EXPECT_FALSE(combine_runs(1, false));
  EXPECT_FALSE(combine_runs(2, true));
}

TEST(Plan, IsPlainDeterministicData) {
  EXPECT_EQ(generic_plan(gqa8(5, 3000), splits(7, false, 3), hopper()), generic_plan(gqa8(5, 3000), splits(7, false, 3), hopper()));
}

}  // namespace
}  // namespace evodispatch
