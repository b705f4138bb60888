// Every kernel specialisation compiles through NVRTC for sm_90a (no GPU needed), within
// its resources; and the cubin cache behaves: hits skip NVRTC, a changed option misses,
// concurrent compiles of one key compile once, a corrupt entry is recompiled, a broken
// source is ok = false with the log.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include <evodispatch/kernels/compiler.hpp>
#include <evodispatch/kernels/kernel_spec.hpp>
#include <evodispatch/kernels/plan.hpp>

#include "../support/scratch.hpp"

using namespace evodispatch;
namespace fs = std::filesystem;

namespace {

constexpr const char* kArch = "sm_90a";

// A fresh cache directory, removed at the end of the test.
using TempDir = evodispatch::test::ScratchDir;

// A unit that compiles in a fraction of a second, for the cache tests.
CompileUnit tiny_unit(std::string extra_option = "") {
  CompileUnit u;
  u.name = "tiny.cu";
  u.source =
      "#include \"tiny.cuh\"\n"
      "template <int N> __global__ void scale(float* p) { p[threadIdx.x] *= N * kFactor; }\n";
  u.headers = {{"tiny.cuh", "constexpr float kFactor = 2.f;\n"}};
  u.name_expressions = {"scale<3>"};
  u.options = {std::string("--gpu-architecture=") + kArch, "--ptxas-options=-v"};
  if (!extra_option.empty()) u.options.push_back(extra_option);
  return u;
}

int max_registers(int threads) { return std::min(255, 65536 / threads); }

// The machine code of each kernel of a cubin (ELF64, little-endian): the bytes of its
// ".text.<mangled name>" section, by mangled name. Two instantiations whose template
// arguments make no difference to the code have equal sections.
std::map<std::string, std::string> kernel_code(const std::vector<char>& cubin) {
  auto read = [&](std::uint64_t at, int bytes) {
    if (at + bytes > cubin.size()) throw std::runtime_error("cubin: truncated ELF");
    std::uint64_t v = 0;
    std::memcpy(&v, cubin.data() + at, static_cast<std::size_t>(bytes));
    return v;
  };
  if (cubin.size() < 64 || std::memcmp(cubin.data(), "\x7f" "ELF\x02", 5) != 0)
    throw std::runtime_error("cubin: not an ELF64 file");
  const std::uint64_t sections = read(0x28, 8), entry = read(0x3A, 2), count = read(0x3C, 2);
  const std::uint64_t names = read(sections + read(0x3E, 2) * entry + 0x18, 8);
  std::map<std::string, std::string> code;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t header = sections + i * entry;
    const std::uint64_t name_at = names + read(header, 4);
    read(name_at, 1);
    const std::string name(cubin.data() + name_at, strnlen(cubin.data() + name_at, cubin.size() - name_at));
    if (!name.starts_with(".text.")) continue;
    const std::uint64_t at = read(header + 0x18, 8), size = read(header + 0x20, 8);
    if (size > 0) read(at + size - 1, 1);
    code[name.substr(6)] = std::string(cubin.data() + at, size);
  }
  return code;
}

// The paged twin of a contiguous cache's variant.
KernelSpec as_paged(KernelSpec k) {
  k.paged = true;
  return k;
}

}  // namespace

TEST(KernelSpecs, NamesAreUniqueAndEverySpecIsValid) {
  std::set<std::string> names, expressions, units;
  for (const auto& s : all_kernel_specs()) {
    EXPECT_EQ(spec_error(s), "") << s.name();
    EXPECT_TRUE(names.insert(s.name()).second) << s.name();
    EXPECT_TRUE(expressions.insert(s.kernel_expression()).second) << s.kernel_expression();
    // No two specs are one NVRTC unit (source, headers, options and instantiation).
    EXPECT_TRUE(units.insert(cache_key(compile_unit(s, kArch))).second) << s.name();
    EXPECT_LE(s.smem_bytes(), 227 * 1024) << s.name();
  }
  // 102 per query dtype: per KV type (16-bit, fp8) and layout, m16 and m64 at every D, the
  // 128-row-tile m16 at D = 128 and the three long-group tilings at D = 64 and 128; the
  // contiguous three-CTA variant at D = 128 and its two-warp four- and six-CTA ones; D = 64's
  // contiguous tilings by items per SM (two 16-bit, three fp8) and two-warp 16-row tilings
  // (two 16-bit, two fp8); D = 256's two tilings past one item per SM (fp8 contiguous,
  // 16-bit in either layout); fp8's one-warp tilings at D = 64 and 128 and 16-bit's at D = 64 (two each); the paged many-items
  // tilings (16-bit: two at D = 128, five at D = 64; fp8: two at D = 128, three at D = 64);
  // a combine per D; fp8's four-stage 128-row tiles at D = 128 for a fast DRAM (contiguous
  // and paged), the paged fp8 one-warp sixteens at D = 64, the paged 16-bit three-CTA
  // tiles at D = 128, the paged 16-bit 128-row tiles of long groups at D = 64 and the
  // contiguous 16-bit four-stage 64-row tiles at D = 128, and the contiguous 16-bit 64-row
  // tiles of four warps at D = 128 (three stages, and the three-CTA two) with K and V apart;
  // and six of the 16-bit D = 128 tilings again with the cluster merge (128- and 64-row
  // tiles in three stages, contiguous or paged, and with K and V apart in three or two).
  EXPECT_EQ(all_kernel_specs().size(), 216u);
  const std::vector<KernelSpec> specs = all_kernel_specs();
  const auto merged = std::count_if(specs.begin(), specs.end(), [](const KernelSpec& k) { return k.cluster_merge; });
  EXPECT_EQ(merged, 12);
  // The kernels cut splits in the contract's blocks (decode_params.hpp mirrors it).
  for (int d : {64, 128, 256}) EXPECT_EQ(decode_split_block(d), builtin_block_n(d));
  // The kernels take every split count the contract allows.
  EXPECT_EQ(kMaxSplitsPerCall, kMaxSplits);
}

TEST(KernelSpecs, ManySplitsAreMergedByLanesOfOneRow) {
  // Up to 8 splits, one lane: a single round trip already.
  for (int d : {64, 128, 256}) EXPECT_EQ(combine_split_lanes(8, d), 1);
  // Then lanes until one round trip covers every split...
  EXPECT_EQ(combine_split_lanes(9, 128), 2);
  EXPECT_EQ(combine_split_lanes(32, 128), 4);
  EXPECT_EQ(combine_split_lanes(33, 128), 8);
  // ... or the row fills the CTA (D / 8 threads per lane).
  EXPECT_EQ(combine_split_lanes(128, 128), kCombineThreads / 16);
  EXPECT_EQ(combine_split_lanes(128, 64), 16);
  EXPECT_EQ(combine_split_lanes(256, 256), kCombineThreads / 32);
  for (int d : {64, 128, 256})
    for (int s = 1; s <= kMaxSplitsPerCall; ++s) {
      const int lanes = combine_split_lanes(s, d);
      EXPECT_EQ(kCombineThreads % (lanes * d / 8), 0) << "splits " << s << " D " << d;
      // The combine kernel takes a thread's lane and row by a mask and a shift.
      EXPECT_EQ(lanes & (lanes - 1), 0) << "splits " << s << " D " << d << ": " << lanes << " lanes";
    }
}

TEST(KernelSpecs, SpecForPicksTheRowTile) {
  Shape s;
  s.seqlen_k = 4096;
  s.h_q = 32;
  s.h_kv = 8;  // qpk 4
  KernelSpec k = spec_for(s, true);
  EXPECT_EQ(k.block_m, 16);
  EXPECT_FALSE(k.paged);
  EXPECT_EQ(builtin_block_n(128) % k.block_n, 0);
  s.h_q = 64;
  s.h_kv = 1;  // qpk 64: 64 packed rows
  EXPECT_EQ(spec_for(s, true).block_m, 64);
  EXPECT_EQ(spec_for(s, false).block_m, 16);  // unpacked: Lq rows
  s.head_dim = 256;
  s.page_size = 16;
  k = spec_for(s, false);
  EXPECT_EQ(builtin_block_n(256) % k.block_n, 0);
  EXPECT_TRUE(k.paged);
  // Every spec_for answer is among the compiled variants.
  const auto all = all_kernel_specs();
  for (int d : {64, 128, 256})
    for (int qpk : {1, 3, 8, 16, 71})
      for (int lq : {1, 4, 16})
        for (bool pack : {false, true}) {
          Shape t;
          t.seqlen_k = 100;
          t.head_dim = d;
          t.h_kv = 1;
          t.h_q = qpk;
          t.seqlen_q = lq;
          EXPECT_NE(std::find(all.begin(), all.end(), spec_for(t, pack)), all.end());
          for (int splits : {1, 4, 256})
            for (int batch : {1, 64}) {
              t.batch = batch;
              const KernelSpec k = spec_for(t, Decision{splits, pack, 0}, 132);
              EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
            }
        }
  // An fp8 cache: the fp8-KV variant of the query dtype, among the compiled ones.
  s.dtype = Dtype::fp8;
  for (Dtype q : {Dtype::bf16, Dtype::fp16}) {
    s.q_dtype = q;
    for (int batch : {1, 34, 200}) {
      s.batch = batch;
      const KernelSpec k = spec_for(s, Decision{1, true, 0}, 132);
      EXPECT_TRUE(k.fp8_kv);
      EXPECT_EQ(k.dtype, q);
      EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
      EXPECT_EQ(combine_spec_for(s).dtype, q);
    }
  }
}

TEST(KernelSpecs, Fp8VariantsStageHalfTheBytes) {
  const auto all = all_kernel_specs();
  for (const KernelSpec& k : all) {
    if (!k.fp8_kv) continue;
    KernelSpec wide = k;
    wide.fp8_kv = false;
    const DecodeSmemLayout l8 = decode_smem_layout(k.head_dim, k.block_m, k.block_n, k.warps_n, k.stages, k.paged, 1);
    const DecodeSmemLayout l16 =
        decode_smem_layout(k.head_dim, k.block_m, k.block_n, k.warps_n, k.stages, k.paged, 2);
    // The stages hold one byte per element (the reduction buffer may be larger).
    const int stage_bytes = k.stages * 2 * k.block_n * k.head_dim;
    EXPECT_GE(l8.total - l8.tiles, stage_bytes) << k.name();
    EXPECT_LT(l8.total - l8.tiles, 2 * stage_bytes) << k.name();
    EXPECT_EQ(k.smem_bytes(), l8.total) << k.name();
    EXPECT_LT(k.smem_bytes(), l16.total) << k.name();
    EXPECT_NE(k.name(), wide.name());
    // Every fp8 tiling but the four-stage ones (D = 64, and D = 128 on a fast DRAM), D = 256's
    // two-stage one, the one-warp ones and the paged two-warp fours of D = 64 (a paged 16-bit
    // cache takes sixes there) is also a 16-bit one.
    if (k.stages == 4 || (k.head_dim == 256 && k.stages == 2) || k.warps() == 1 ||
        (k.head_dim == 64 && k.paged && k.warps() == 2 && k.stages == 3))
      continue;
    EXPECT_NE(std::find(all.begin(), all.end(), wide), all.end()) << k.name() << " has no 16-bit twin";
  }
  Shape s;
  s.dtype = Dtype::fp8;
  s.h_q = 8;
  s.h_kv = 2;
  s.batch = 3;
  s.seqlen_k = 1000;
  const DecodeParams p = decode_params_for(s, Decision{1, true, 0}, spec_for(s, true));
  EXPECT_EQ(p.descale_batch_stride, 2);  // FA3's [B, Hkv]
  EXPECT_EQ(p.descale_head_stride, 1);
  s.dtype = Dtype::bf16;
  EXPECT_EQ(decode_params_for(s, Decision{1, true, 0}, spec_for(s, true)).descale_batch_stride, 0);
}

TEST(KernelSpecs, WithTilingParsesTheVariantNamesTilingOrNamesWhatIsWrong) {
  Shape s;
  s.head_dim = 64;
  s.h_q = 71;
  s.h_kv = 1;
  const KernelSpec base = spec_for(s, true);
  const KernelSpec t = with_tiling(base, "m128n128w8x2s3");
  EXPECT_EQ(t.block_m, 128);
  EXPECT_EQ(t.warps_m, 8);
  EXPECT_EQ(t.warps_n, 2);
  EXPECT_EQ(t.min_ctas_per_sm, 1);
  EXPECT_EQ(t.head_dim, 64);
  EXPECT_NE(t.name().find("_m128n128_w8x2_s3"), std::string::npos) << t.name();
  EXPECT_EQ(with_tiling(base, "m16n64w1x4s2o3").min_ctas_per_sm, 3);
  EXPECT_FALSE(with_tiling(base, "m16n64w1x4s2o3").kv_apart);
  const KernelSpec apart = with_tiling(base, "m16n64w1x4s2o3a");
  EXPECT_TRUE(apart.kv_apart);
  EXPECT_EQ(apart.min_ctas_per_sm, 3);
  EXPECT_TRUE(with_tiling(base, "m16n64w1x4s3a").kv_apart);
  EXPECT_NE(apart.name().find("_m16n64_w1x4_s2_o3_kva"), std::string::npos) << apart.name();
  EXPECT_NE(apart.kernel_expression().find(", 3, true, false>"), std::string::npos) << apart.kernel_expression();
  EXPECT_FALSE(apart.cluster_merge);
  const KernelSpec merged = with_tiling(base, "m16n64w1x4s2o3ac");
  EXPECT_TRUE(merged.cluster_merge && merged.kv_apart);
  EXPECT_NE(merged.name().find("_o3_kva_cm"), std::string::npos) << merged.name();
  EXPECT_NE(merged.kernel_expression().find(", 3, true, true>"), std::string::npos) << merged.kernel_expression();
  EXPECT_TRUE(with_tiling(base, "m16n128w1x4s3c").cluster_merge);
  auto error = [&](const char* tiling) {
    try {
      with_tiling(base, tiling);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("m128w8x2s3").find("expected 'n' at character 5"), std::string::npos) << error("m128w8x2s3");
  EXPECT_NE(error("m128n128w8x2s3z").find("unexpected \"z\""), std::string::npos);
  EXPECT_NE(error("m16n64w1x4s3ao2").find("unexpected \"o2\""), std::string::npos) << error("m16n64w1x4s3ao2");
  EXPECT_NE(error("m16n64w1x4s3ca").find("unexpected \"a\""), std::string::npos) << error("m16n64w1x4s3ca");
  EXPECT_NE(error("m48n128w3x2s3").find("threads must load whole"), std::string::npos) << error("m48n128w3x2s3");
  EXPECT_NE(error("m32n128w1x4s3").find("block_m must be 16 * warps_m"), std::string::npos);
}

TEST(KernelSpecs, FewItemsTakeTheTilesThatAskForTheirSplitInTheFirstCopy) {
  Shape s;  // 8 packed rows per KV head: one item per request and split
  s.h_q = 8;
  s.h_kv = 1;
  auto at = [&](int batch, int keys, int splits = 1, double bandwidth = 0.0) {
    s.batch = batch;
    s.seqlen_k = keys;
    DeviceInfo hw;
    hw.num_sms = 132;
    hw.mem_bw_bytes_per_s = bandwidth;
    return spec_for(s, Decision{splits, true, 0}, hw);
  };
  auto tiling = [](const KernelSpec& k) { return std::pair{k.block_n, k.stages}; };
  using T = std::pair<int, int>;
  // The split's last 128 keys more than half present: 128-key tiles, three stages.
  EXPECT_EQ(tiling(at(80, 100)), (T{128, 3}));
  EXPECT_EQ(tiling(at(80, 200)), (T{128, 3}));
  EXPECT_EQ(tiling(at(80, 450)), (T{128, 3}));
  EXPECT_EQ(tiling(at(20, 1000, 4)), (T{128, 3}));  // 80 items of 256 keys through the splits
  // At most half present: 64-key tiles, in four stages past one block.
  EXPECT_EQ(tiling(at(80, 64)), (T{64, 3}));
  EXPECT_EQ(tiling(at(80, 150)), (T{64, 4}));
  EXPECT_EQ(tiling(at(80, 300)), (T{64, 4}));
  EXPECT_EQ(tiling(at(40, 150)), (T{64, 4}));
  EXPECT_EQ(tiling(at(40, 300)), (T{128, 3}));  // three blocks on up to half the SMs
  EXPECT_EQ(at(80, 150).min_ctas_per_sm, 1);
  // Past three quarters of 132 SMs, the two-CTA 64-key tiles.
  EXPECT_EQ(tiling(at(99, 100)), (T{128, 3}));
  EXPECT_EQ(tiling(at(100, 100)), (T{64, 3}));
  EXPECT_EQ(tiling(at(100, 150)), (T{64, 3}));
  // Longer splits: 128-key tiles on up to half the SMs, two thirds on a fast DRAM.
  EXPECT_EQ(tiling(at(66, 3000)), (T{128, 3}));
  EXPECT_EQ(tiling(at(80, 3000)), (T{64, 3}));
  EXPECT_EQ(tiling(at(80, 3000, 1, 4.8e12)), (T{128, 3}));
  EXPECT_EQ(tiling(at(88, 3001, 1, 4.8e12)), (T{128, 3}));
  EXPECT_EQ(tiling(at(89, 3000, 1, 4.8e12)), (T{64, 3}));
  // Only a contiguous 16-bit cache at D = 128 with no margin.
  s.page_size = 16;
  EXPECT_EQ(tiling(at(80, 150)), (T{64, 3}));
  s.page_size = 0;
  s.dtype = Dtype::fp8;
  EXPECT_NE(tiling(at(80, 150)), (T{64, 4}));
  s.dtype = Dtype::bf16;
  s.batch = 80;
  s.seqlen_k = 150;
  EXPECT_EQ(spec_for(s, Decision{1, true, 4}, 132).stages, 3);
  // The four-stage tiles are among the variants compiled ahead.
  const std::vector<KernelSpec> all = all_kernel_specs();
  EXPECT_NE(std::find(all.begin(), all.end(), at(80, 150)), all.end());
}

TEST(KernelSpecs, KAndVApartWhereFirstTilesOrASecondCtaPerSmAreWhatItemsWaitFor) {
  Shape s;  // bf16, contiguous, D = 128, 132 SMs
  s.h_q = 12;
  s.h_kv = 1;
  auto at = [&](int batch, int seqlen_k, int splits = 1, int margin = 0) {
    s.batch = batch;
    s.seqlen_k = seqlen_k;
    return spec_for(s, Decision{splits, true, margin}, 132);
  };
  auto apart = [&](int batch, int seqlen_k, int splits = 1, int margin = 0) {
    const KernelSpec k = at(batch, seqlen_k, splits, margin);
    EXPECT_EQ(k.kv_apart, k.name().find("_kva") != std::string::npos) << k.name();
    return k.kv_apart;
  };
  // One to one and a half items per SM, whatever the split's length (the dense tiles).
  EXPECT_TRUE(apart(150, 216));
  EXPECT_EQ(at(150, 216).min_ctas_per_sm, 3);
  EXPECT_TRUE(apart(140, 3852));
  EXPECT_TRUE(apart(198, 3852));
  EXPECT_FALSE(apart(199, 3852));  // past one and a half per SM over long splits
  EXPECT_FALSE(apart(256, 3677));
  EXPECT_TRUE(apart(6, 10608, 24));  // through the splits: 144 items of 512 keys
  // Splits of at most two 64-key tiles, on any number of items.
  EXPECT_TRUE(apart(113, 128));
  EXPECT_TRUE(apart(256, 64));
  EXPECT_TRUE(apart(1024, 128));
  EXPECT_FALSE(apart(1024, 129));  // two blocks: the two-warp tiles of many items
  EXPECT_FALSE(apart(113, 222));   // a lone CTA streaming four tiles
  EXPECT_FALSE(apart(96, 4200));
  EXPECT_FALSE(apart(150, 216, 1, 8));  // an SM margin: not measured
  // Other tiles keep one copy group per tile: 128-key tiles of few items, fp8, paged, D = 64.
  EXPECT_FALSE(apart(40, 100));
  EXPECT_EQ(at(40, 100).block_n, 128);
  s.dtype = Dtype::fp8;
  EXPECT_FALSE(apart(150, 216));
  s.dtype = Dtype::bf16;
  s.page_size = 16;
  EXPECT_FALSE(apart(150, 216));
  s.page_size = 0;
  s.head_dim = 64;
  EXPECT_FALSE(apart(150, 100));
}

TEST(KernelSpecs, ShortSplitsOfFewItemsMergeInTheirClusterOnHopper) {
  Shape s;  // bf16, contiguous, D = 128, 8 packed rows per KV head: one item per request and split
  s.h_q = 8;
  s.h_kv = 1;
  DeviceInfo hw;
  hw.num_sms = 132;
  hw.mem_bw_bytes_per_s = 4.8e12;
  hw.cc = 90;
  auto at = [&](int batch, int seqlen_k, int splits, int margin = 0) {
    s.batch = batch;
    s.seqlen_k = seqlen_k;
    return spec_for(s, Decision{splits, true, margin}, hw);
  };
  auto merged = [&](int batch, int seqlen_k, int splits, int margin = 0) {
    const KernelSpec k = at(batch, seqlen_k, splits, margin);
    EXPECT_EQ(k.cluster_merge, k.name().find("_cm") != std::string::npos) << k.name();
    return k.cluster_merge;
  };
  // Two to four splits of at most two blocks over at most 45% of the CTA slots.
  EXPECT_TRUE(merged(4, 68, 4));     // 16 CTAs in 128-key tiles, one per SM
  EXPECT_TRUE(merged(4, 1024, 4));   // splits of 256 keys
  EXPECT_FALSE(merged(4, 1025, 4));  // of 384
  EXPECT_FALSE(merged(4, 1024, 5));  // clusters of five or more
  EXPECT_TRUE(merged(29, 500, 2));   // 58 CTAs of one slot per SM: 44%
  EXPECT_FALSE(merged(30, 500, 2));  // 60: 45.5%
  EXPECT_EQ(at(29, 500, 2).block_n, 128);
  EXPECT_TRUE(merged(1, 300, 2));
  EXPECT_FALSE(merged(1, 300, 1));  // nothing to merge
  EXPECT_FALSE(merged(4, 68, 4, 4));  // an SM margin holds the CTAs to its SMs
  s.page_size = 16;  // a paged cache too
  EXPECT_TRUE(merged(4, 68, 4));
  EXPECT_TRUE(at(4, 68, 4).paged);
  s.page_size = 0;
  s.dtype = Dtype::fp8;
  EXPECT_FALSE(merged(4, 68, 4));
  s.dtype = Dtype::bf16;
  s.head_dim = 64;
  EXPECT_FALSE(merged(4, 68, 4));
  s.head_dim = 128;
  s.h_q = 32;  // 32 packed rows: two 16-row tiles per request and split
  EXPECT_FALSE(merged(1, 68, 4));
  s.h_q = 8;
  hw.cc = 80;  // no clusters before Hopper
  EXPECT_FALSE(merged(4, 68, 4));
  hw.cc = 90;

  // The plan: no combine kernel, a grid of whole clusters (one per item), no workspace.
  const Decision d{4, true, 0};
  s.batch = 4;
  s.seqlen_k = 68;
  const Plan p = plan(s, d, hw);
  EXPECT_TRUE(p.cluster_merge);
  EXPECT_FALSE(p.combine);
  EXPECT_EQ(p.workspace_bytes, 0);
  EXPECT_EQ(p.work_items, 16);
  EXPECT_EQ(p.grid_ctas, 16);
  EXPECT_EQ(to_json(p).at("cluster_merge"), true);
  // A persistent grid of whole clusters where the slots are fewer than the items.
  KernelResources one_slot = kernel_resources(s, d, hw);
  one_slot.ctas_per_sm = 1;
  hw.num_sms = 6;
  const Plan few = plan(s, d, hw, one_slot);
  EXPECT_EQ(few.slots, 4);
  EXPECT_EQ(decode_grid_ctas(few, false), 4);
  // Forced where the merge cannot run, the plan says why.
  auto refused = [&](const Decision& dd) {
    try {
      plan(s, dd, hw, one_slot);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused(Decision{4, true, 1}).find("decision.sm_margin"), std::string::npos) << refused(Decision{4, true, 1});
  EXPECT_NE(refused(Decision{9, true, 0}).find("decision.num_splits: the cluster merge merges at most 8"),
            std::string::npos)
      << refused(Decision{9, true, 0});
  EXPECT_FALSE(combine_runs(4, true));
}

TEST(KernelSpecs, SpecForADecisionSizesTheBytesInFlightToTheGrid) {
  Shape s;  // cliff-8k: Hq=64, Hkv=8 packed (8 rows), 8K keys: 8 items per request and split
  s.seqlen_k = 8192;
  s.h_q = 64;
  s.h_kv = 8;
  auto at = [&](int batch, int splits, int sm_margin = 0) {
    s.batch = batch;
    return spec_for(s, Decision{splits, true, sm_margin}, 132);
  };
  // At most half the SMs busy: 128-row tiles, one CTA per SM (128 KiB in flight each).
  EXPECT_EQ(at(8, 1).block_n, 128);  // 64 items
  EXPECT_EQ(at(1, 8).block_n, 128);  // 64 items through the splits
  EXPECT_EQ(at(8, 1, 4).block_n, 128);  // 64 items on 128 SMs
  // Up to one item per SM: 64-row tiles, three stages (64 KiB each).
  for (const KernelSpec& k : {at(9, 1), at(16, 1), at(3, 5)}) {
    EXPECT_EQ(k.block_n, 64) << k.name();
    EXPECT_EQ(k.stages, 3) << k.name();
    EXPECT_EQ(k.min_ctas_per_sm, 1) << k.name();
  }
  // More items than SMs, up to three per SM: two stages, three CTAs per SM (32 KiB each).
  const KernelSpec dense = at(33, 1);  // 264 items
  EXPECT_EQ(dense.min_ctas_per_sm, 3);
  EXPECT_EQ(dense.stages, 2);
  EXPECT_EQ(dense.block_n, 64);
  EXPECT_LE(dense.max_registers(), 168);
  EXPECT_LE(3 * (dense.smem_bytes() + 1024), 228 * 1024);
  EXPECT_EQ(at(49, 1), dense);  // 392 <= 396
  EXPECT_EQ(at(17, 2), dense);  // 272 through the splits
  KernelSpec apart = dense;  // up to one and a half items per SM: K and V apart
  apart.kv_apart = true;
  EXPECT_EQ(at(17, 1), apart);  // 136
  s.dtype = Dtype::fp8;  // an fp8 cache past two items per SM, in its own (one-byte) tiles
  const KernelSpec dense8 = at(34, 1);  // 272 items
  EXPECT_TRUE(dense8.fp8_kv);
  EXPECT_EQ(dense8.min_ctas_per_sm, 3);
  EXPECT_EQ(dense8.stages, 2);
  EXPECT_EQ(at(49, 1), dense8);
  EXPECT_EQ(at(33, 1).min_ctas_per_sm, 1);  // 264: one wave of the two-CTA variant
  EXPECT_EQ(at(33, 1).block_n, 64);
  EXPECT_EQ(at(8, 1).block_n, 128);  // up to one item per SM: fp8's 128-row tiles
  EXPECT_EQ(at(16, 1).block_n, 128);
  s.head_dim = 256;  // D = 256 fp8: two stages past one item per SM
  EXPECT_EQ(at(16, 1).stages, 3);
  EXPECT_EQ(at(17, 1).stages, 2);
  EXPECT_EQ(at(17, 1).min_ctas_per_sm, 1);
  const KernelSpec d256 = at(17, 1);
  // Past two items per SM (a second wave of those): two-warp CTAs over 32-key tiles, four
  // per SM in two stages.
  EXPECT_EQ(at(33, 1), d256);  // 264 items
  const KernelSpec d256_four = at(34, 1);  // 272
  EXPECT_EQ(d256_four.warps(), 2);
  EXPECT_EQ(d256_four.block_n, 32);
  EXPECT_EQ(d256_four.stages, 2);
  EXPECT_EQ(d256_four.min_ctas_per_sm, 4);
  EXPECT_LE(4 * (d256_four.smem_bytes() + 1024), 228 * 1024);
  EXPECT_EQ(at(17, 4), d256_four);  // 544 through the splits
  s.page_size = 16;  // paged: as before
  EXPECT_EQ(at(34, 1).warps(), 4);
  s.page_size = 0;
  EXPECT_EQ(at(34, 1, 4).warps(), 4);  // a margin: as before
  s.head_dim = 128;
  s.dtype = Dtype::bf16;
  // Beyond three per SM: two-warp CTAs over 32-key tiles, six per SM in two stages...
  const KernelSpec six = at(50, 1);  // 400 items
  EXPECT_EQ(six.warps(), 2);
  EXPECT_EQ(six.block_m, 16);
  EXPECT_EQ(six.block_n, 32);
  EXPECT_EQ(six.stages, 2);
  EXPECT_EQ(six.min_ctas_per_sm, 6);
  EXPECT_LE(6 * (six.smem_bytes() + 1024), 228 * 1024);
  EXPECT_EQ(at(99, 1), six);  // 792: one wave of six per SM
  EXPECT_EQ(at(90, 2), six);  // 1440 through the splits: 2 x 792 slots, as many as 3 x 528
  // ...or four in three, where those leave the emptier last wave: 856 items run as
  // 792 + 64 in sixes, 528 + 328 in fours.
  const KernelSpec four = at(107, 1);
  EXPECT_EQ(four.block_n, 32);
  EXPECT_EQ(four.stages, 3);
  EXPECT_EQ(four.min_ctas_per_sm, 4);
  EXPECT_LE(4 * (four.smem_bytes() + 1024), 228 * 1024);
  EXPECT_EQ(at(100, 1), four);  // 800
  EXPECT_EQ(at(50, 4), four);   // 1600: 3 x 792 slots against 4 x 528
  EXPECT_EQ(at(150, 1), six);   // 1200: both pad to 1584
  s.page_size = 16;  // paged 16-bit: the same choice, in paged variants
  const auto specs = all_kernel_specs();
  for (const auto& [paged, contiguous] : {std::pair{at(50, 1), six}, {at(107, 1), four}, {at(150, 1), six}}) {
    EXPECT_EQ(paged, as_paged(contiguous)) << paged.name();
    EXPECT_NE(std::find(specs.begin(), specs.end(), paged), specs.end()) << paged.name();
  }
  s.seqlen_k = 128;  // paged splits of one block: the two-warp tiles too, unlike contiguous ones
  EXPECT_EQ(at(50, 1), as_paged(six));
  EXPECT_EQ(at(33, 1).warps(), 4);  // 264 items: under three per SM
  s.seqlen_k = 8192;
  s.page_size = 0;
  EXPECT_EQ(at(50, 1, 4).block_n, 64);  // a margin: one CTA per SM
  s.seqlen_k = 128;                     // splits of one block: the four-warp tiles
  EXPECT_EQ(at(50, 1).block_n, 64);
  EXPECT_EQ(at(50, 1).min_ctas_per_sm, 1);
  s.seqlen_k = 129;
  EXPECT_EQ(at(50, 1), six);
  s.seqlen_k = 8192;
  s.dtype = Dtype::fp8;  // an fp8 cache: fours while they hold the items in one wave
  EXPECT_EQ(at(60, 1).block_n, 32);  // 480 items
  EXPECT_EQ(at(60, 1).stages, 3);
  EXPECT_EQ(at(80, 1).min_ctas_per_sm, 6);  // 640
  EXPECT_EQ(at(98, 1).min_ctas_per_sm, 6);  // 784: under six per SM
  const KernelSpec six8 = at(80, 1), four8 = at(60, 1);
  // From six items per SM, one-warp CTAs, ten per SM in two stages, while every round of
  // them holds at least five per SM...
  const KernelSpec ten8 = at(99, 1);  // 792 items
  EXPECT_EQ(ten8.warps(), 1);
  EXPECT_EQ(ten8.block_n, 32);
  EXPECT_EQ(ten8.stages, 2);
  EXPECT_EQ(ten8.min_ctas_per_sm, 10);
  EXPECT_LE(10 * (ten8.smem_bytes() + 1024), 228 * 1024);
  EXPECT_EQ(at(165, 1), ten8);  // 1320: one round of ten per SM
  EXPECT_EQ(at(250, 1), ten8);  // 2000: 1320 + 680
  // ...or seven in three stages where the tens' last round is thin and the sevens' is not.
  const KernelSpec seven8 = at(200, 1);  // 1600: 1320 + 280 in tens, 924 + 676 in sevens
  EXPECT_EQ(seven8.warps(), 1);
  EXPECT_EQ(seven8.stages, 3);
  EXPECT_EQ(seven8.min_ctas_per_sm, 7);
  EXPECT_LE(7 * (seven8.smem_bytes() + 1024), 228 * 1024);
  EXPECT_EQ(at(25, 8), seven8);  // the same 1600 through the splits
  // Neither: the two-warp tiles as before (1352: 1320 + 32 in tens, 924 + 428 in sevens).
  EXPECT_EQ(at(169, 1).warps(), 2);
  EXPECT_EQ(at(169, 1).min_ctas_per_sm, 6);
  s.page_size = 16;  // paged: no tens or sixes (they spill the page ids); sevens or fours, the fewer padded slots
  EXPECT_EQ(at(99, 1), as_paged(seven8));  // 792: 924 slots against 1056
  EXPECT_EQ(at(80, 1), as_paged(seven8));  // 640: 924 against 1056
  EXPECT_EQ(at(60, 1), as_paged(four8));   // 480: 924 against 528
  EXPECT_EQ(at(130, 1), as_paged(four8));  // 1040: 1848 against 1056
  s.page_size = 0;
  EXPECT_EQ(at(99, 1, 4).warps(), 4);  // a margin: as before
  s.dtype = Dtype::bf16;  // 16-bit: the two-warp tiles
  EXPECT_EQ(at(99, 1).warps(), 2);
  EXPECT_EQ(at(200, 1).warps(), 2);
  s.dtype = Dtype::fp8;
  s.seqlen_k = 128;  // an fp8 block is half a 16-bit one's bytes: one-block splits too
  EXPECT_EQ(at(60, 1), four8);
  EXPECT_EQ(at(80, 1), six8);
  EXPECT_EQ(at(150, 1), ten8);  // 1200 items
  EXPECT_EQ(at(49, 1), dense8);  // 392: up to three per SM, as before
  s.seqlen_k = 8192;
  s.dtype = Dtype::bf16;
  const auto all = all_kernel_specs();
  for (const KernelSpec& k : {at(8, 1), at(9, 1), dense, six, four, six8, four8, ten8, seven8, dense8, d256, d256_four})
    EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
  // With an SM margin the grid is one CTA per usable SM (plan.hpp, grid_ctas_per_sm): the
  // CTAs that run at once set the tiles, and the three-CTA variant never runs.
  EXPECT_EQ(at(8, 1, 8).block_n, 128);   // 64 CTAs on 124 SMs
  EXPECT_EQ(at(9, 1, 70).block_n, 128);  // 62 CTAs: half the GPU's SMs or fewer
  EXPECT_EQ(at(9, 1, 70).min_ctas_per_sm, 1);
  for (const KernelSpec& k : {at(9, 1, 1), at(17, 1, 1), at(33, 1, 30), at(64, 2, 16)}) {
    EXPECT_EQ(k.block_n, 64) << k.name();
    EXPECT_EQ(k.stages, 3) << k.name();
    EXPECT_EQ(k.min_ctas_per_sm, 1) << k.name();
  }
  s.page_size = 16;  // paged KV: the dense variant from two items per SM, not from one
  EXPECT_EQ(at(33, 1).min_ctas_per_sm, 1);  // 264
  EXPECT_EQ(at(33, 1).stages, 3);
  EXPECT_EQ(at(34, 1), as_paged(dense));  // 272
  EXPECT_EQ(at(49, 1), as_paged(dense));  // 392
  EXPECT_NE(std::find(all.begin(), all.end(), as_paged(dense)), all.end());
  s.dtype = Dtype::fp8;  // not over an fp8 cache
  EXPECT_EQ(at(34, 1).min_ctas_per_sm, 1);
  s.dtype = Dtype::bf16;
  EXPECT_EQ(at(8, 1).block_n, 128);
  EXPECT_EQ(at(9, 1).block_n, 64);
}

TEST(KernelSpecs, AFastDramKeepsMoreFp8BytesInFlightUpToOneItemPerSm) {
  Shape s{32, 1, 16018, 8, 1, 128};  // 32 items per split
  s.dtype = Dtype::fp8;
  DeviceInfo h100, h200;
  h100.num_sms = h200.num_sms = 132;
  h100.mem_bw_bytes_per_s = 3.35e12;
  h200.mem_bw_bytes_per_s = 4.8e12;
  const auto all = all_kernel_specs();
  for (int page_size : {0, 16}) {
    s.page_size = page_size;
    // Up to one item per SM: the 128-row tiles, four stages on the fast DRAM, three on an
    // H100's and on a device that gives no bandwidth.
    const KernelSpec fast = spec_for(s, Decision{4, true, 0}, h200);
    EXPECT_EQ(fast.block_n, 128);
    EXPECT_EQ(fast.stages, 4);
    EXPECT_NE(std::find(all.begin(), all.end(), fast), all.end()) << fast.name();
    KernelSpec three = fast;
    three.stages = 3;
    EXPECT_EQ(spec_for(s, Decision{4, true, 0}, h100), three);
    EXPECT_EQ(spec_for(s, Decision{4, true, 0}, 132), three);
    // Past one item per SM, with a margin, a 16-bit cache, D = 64 or 256: the rules as on an H100.
    EXPECT_EQ(spec_for(s, Decision{8, true, 0}, h200), spec_for(s, Decision{8, true, 0}, h100));
    EXPECT_EQ(spec_for(s, Decision{4, true, 8}, h200), spec_for(s, Decision{4, true, 8}, h100));
    for (const Shape& other : {Shape{32, 1, 16018, 8, 1, 128, Dtype::bf16, page_size},
                               Shape{32, 1, 16018, 8, 1, 64, Dtype::fp8, page_size},
                               Shape{32, 1, 16018, 8, 1, 256, Dtype::fp8, page_size}})
      EXPECT_EQ(spec_for(other, Decision{4, true, 0}, h200), spec_for(other, Decision{4, true, 0}, h100));
    // The plan sizes its resources by the same variant.
    EXPECT_EQ(kernel_resources(s, Decision{4, true, 0}, h200).stages, 4);
    EXPECT_EQ(plan(s, Decision{4, true, 0}, h200).smem_bytes_per_cta, fast.smem_bytes());
    EXPECT_EQ(plan(s, Decision{4, true, 0}, h100).smem_bytes_per_cta, three.smem_bytes());
  }
}

TEST(KernelSpecs, AFastDramRunsGroupsOfTwoSixteenRowTilesInSixteenRowTiles) {
  DeviceInfo h100, h200;
  h100.num_sms = h200.num_sms = 132;
  h100.mem_bw_bytes_per_s = 3.35e12;
  h200.mem_bw_bytes_per_s = 4.8e12;
  const Shape s{8, 1, 4096, 64, 2, 128};  // 32 rows: 32 16-row items per split
  // Up to one item per SM (4 splits: 128 items), the 128-key tiles of one CTA per SM.
  const KernelSpec one = spec_for(s, Decision{4, true, 0}, h200);
  EXPECT_EQ(one.block_m, 16);
  EXPECT_EQ(one.block_n, 128);
  // Up to two (8 splits of 4 blocks: 256 items), the 64-key tiles of two.
  const KernelSpec two = spec_for(s, Decision{8, true, 0}, h200);
  EXPECT_EQ(two.block_m, 16);
  EXPECT_EQ(two.block_n, 64);
  EXPECT_EQ(two.stages, 3);
  // Splits of more than eight blocks past one item per SM, more than two items per SM,
  // splits of one block: long_group_spec's tiles, as on an H100.
  const Shape longer{8, 1, 20000, 64, 2, 128};  // 8 splits of 20 blocks
  EXPECT_EQ(spec_for(longer, Decision{8, true, 0}, h200), spec_for(longer, Decision{8, true, 0}, h100));
  EXPECT_GT(spec_for(longer, Decision{8, true, 0}, h200).block_m, 16);
  EXPECT_GT(spec_for(s, Decision{12, true, 0}, h200).block_m, 16);
  EXPECT_EQ(spec_for(s, Decision{32, true, 0}, h200), spec_for(s, Decision{32, true, 0}, h100));
  // Pages, and groups of two tiles by their tokens (8 x 4 rows): the same tiles.
  const Shape paged{8, 1, 4096, 64, 2, 128, Dtype::bf16, 16};
  EXPECT_EQ(spec_for(paged, Decision{4, true, 0}, h200).block_n, 128);
  EXPECT_TRUE(spec_for(paged, Decision{4, true, 0}, h200).paged);
  EXPECT_EQ(spec_for(Shape{8, 4, 4096, 64, 8, 128}, Decision{1, true, 0}, h200), one);
  // An H100's DRAM, a margin, fp8, three 16-row tiles (48 rows), D = 64: as before.
  EXPECT_EQ(spec_for(s, Decision{8, true, 0}, h100).block_m, 64);
  EXPECT_EQ(spec_for(s, Decision{8, true, 4}, h200), spec_for(s, Decision{8, true, 4}, h100));
  for (const Shape& other : {Shape{8, 1, 4096, 64, 2, 128, Dtype::fp8}, Shape{8, 1, 4096, 96, 2, 128},
                             Shape{8, 1, 4096, 64, 2, 64}})
    EXPECT_EQ(spec_for(other, Decision{8, true, 0}, h200), spec_for(other, Decision{8, true, 0}, h100));
  // Every variant it picks is among the compiled ones.
  const auto all = all_kernel_specs();
  for (const KernelSpec& k : {one, two}) EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
}

TEST(KernelSpecs, AFastDramRunsSplitsOfOneBlockPastThreeItemsPerSmInTwoWarpTiles) {
  DeviceInfo h100, h200;
  h100.num_sms = h200.num_sms = 132;
  h100.mem_bw_bytes_per_s = 3.35e12;
  h200.mem_bw_bytes_per_s = 4.8e12;
  auto at = [](int batch, int seqlen_k, const DeviceInfo& hw, int splits = 1) {
    return spec_for(Shape{batch, 1, seqlen_k, 64, 4, 128}, Decision{splits, true, 0}, hw);
  };
  // B=171 Lk=76 Hq=64 Hkv=4: 684 items of one block. On an H200 the sixes; on an H100 (and a
  // device that gives no bandwidth) the four-warp 64-key tiles stay.
  const KernelSpec six = at(171, 76, h200);
  EXPECT_EQ(six.warps(), 2);
  EXPECT_EQ(six.block_n, 32);
  EXPECT_EQ(six.min_ctas_per_sm, 6);
  EXPECT_EQ(at(171, 76, h100).warps(), 4);
  EXPECT_EQ(spec_for(Shape{171, 1, 76, 64, 4, 128}, Decision{1, true, 0}, 132), at(171, 76, h100));
  // Splits of two blocks take the sixes on both; at most three items per SM neither does.
  EXPECT_EQ(at(171, 200, h100), at(171, 200, h200));
  EXPECT_EQ(at(171, 200, h200).warps(), 2);
  EXPECT_EQ(at(99, 76, h200), at(99, 76, h100));  // 396 items
  EXPECT_EQ(at(99, 76, h200).warps(), 4);
  // Past six per SM, the sixes or the fours by the slots their last round pads.
  EXPECT_EQ(at(378, 76, h200).min_ctas_per_sm, 6);  // 1512 items: 1584 slots either way
}

TEST(KernelSpecs, HeadDim256RunsManyItemsInTwoWarpTiles) {
  // Gemma-2 9B at D = 256: Hq=16, Hkv=8, one item per request and KV head.
  auto at = [](int batch, int seqlen_k, int splits, Dtype dtype = Dtype::bf16, int page = 0, int margin = 0) {
    Shape s{batch, 1, seqlen_k, 16, 8, 256, dtype, page, true};
    return spec_for(s, Decision{splits, true, margin}, 132);
  };
  auto tiling = [](const KernelSpec& k) {
    return "n" + std::to_string(k.block_n) + "w" + std::to_string(k.warps_n) + "s" + std::to_string(k.stages) + "o" +
           std::to_string(k.min_ctas_per_sm);
  };
  // Up to one item per SM: the four-warp 64-key tiles, one CTA per SM.
  EXPECT_EQ(tiling(at(16, 4096, 1)), "n64w4s3o1");  // 128 items
  EXPECT_EQ(tiling(at(4, 4096, 4)), "n64w4s3o1");
  // Then two-warp 32-key tiles: two per SM in three stages up to two items per SM, three in
  // two stages beyond, through splits too.
  EXPECT_EQ(tiling(at(17, 4096, 1)), "n32w2s3o2");  // 136 items
  EXPECT_EQ(tiling(at(33, 200, 1)), "n32w2s3o2");   // 264
  EXPECT_EQ(tiling(at(34, 200, 1)), "n32w2s2o3");   // 272
  EXPECT_EQ(tiling(at(12, 4096, 3)), "n32w2s2o3");  // 288 through the splits
  EXPECT_EQ(tiling(at(49, 4096, 1)), "n32w2s2o3");  // 392, long splits: up to three per SM
  // Past three per SM over splits of at most 768 keys only.
  EXPECT_EQ(tiling(at(136, 72, 1)), "n32w2s2o3");  // 1088 items
  EXPECT_EQ(tiling(at(50, 768, 1)), "n32w2s2o3");
  EXPECT_EQ(tiling(at(50, 769, 1)), "n64w4s3o1");
  EXPECT_EQ(tiling(at(50, 1922, 2)), "n64w4s3o1");  // 800 items of 1024 keys
  // A paged cache the same; a margin and fp8 keep their own tiles.
  EXPECT_EQ(tiling(at(34, 200, 1, Dtype::bf16, 16)), "n32w2s2o3");
  EXPECT_EQ(tiling(at(17, 4096, 1, Dtype::bf16, 1)), "n32w2s3o2");
  EXPECT_EQ(tiling(at(34, 200, 1, Dtype::bf16, 0, 4)), "n64w4s3o1");
  EXPECT_EQ(at(34, 200, 1, Dtype::fp8).fp8_kv, true);
  EXPECT_EQ(tiling(at(34, 200, 1, Dtype::fp8)), "n32w2s2o4");
  // Every one of them is a precompiled variant, in both query dtypes.
  const auto specs = all_kernel_specs();
  for (Dtype dt : {Dtype::bf16, Dtype::fp16})
    for (const KernelSpec& k : {at(17, 4096, 1, dt), at(34, 200, 1, dt), at(17, 4096, 1, dt, 16), at(34, 200, 1, dt, 16)})
      EXPECT_NE(std::find(specs.begin(), specs.end(), k), specs.end()) << k.name();
}

TEST(KernelSpecs, HeadDim64RunsManyItemsInSmallerTiles) {
  // Hq=32, Hkv=8 at D = 64: 8 items per request and split.
  auto at = [](int batch, int seqlen_k, int splits, Dtype dtype = Dtype::bf16, int page = 0, int margin = 0) {
    Shape s{batch, 1, seqlen_k, 32, 8, 64, dtype, page, true};
    return spec_for(s, Decision{splits, true, margin}, 132);
  };
  auto tiling = [](const KernelSpec& k) {
    return "n" + std::to_string(k.block_n) + "s" + std::to_string(k.stages) + "o" + std::to_string(k.min_ctas_per_sm);
  };
  // Up to one item per SM: the 128-row three-stage tiles, two CTAs per SM; four stages fp8.
  EXPECT_EQ(tiling(at(16, 16384, 1)), "n128s3o1");  // 128 items
  EXPECT_EQ(tiling(at(16, 16384, 1, Dtype::fp8)), "n128s4o1");
  EXPECT_EQ(tiling(at(16, 16384, 1, Dtype::fp8, 16)), "n128s3o1");  // paged: as before
  // More, up to three items per SM: the two-warp 16-row tiles in three stages (64-row K/V
  // tiles, four CTAs per SM by shared memory), whatever the split.
  for (const KernelSpec& k : {at(17, 16384, 1), at(33, 16384, 1), at(49, 300, 1), at(49, 256, 1), at(13, 409, 2)}) {
    EXPECT_EQ(tiling(k), "n64s3o1") << k.name();  // 136 to 392 items
    EXPECT_EQ(k.warps(), 2) << k.name();
  }
  // Past three items per SM, up to five: the two-warp tiles, six per SM in two stages, one
  // round where the three-CTA tiles would need two.
  for (const KernelSpec& k : {at(50, 16384, 1), at(82, 16384, 1), at(82, 300, 1), at(82, 256, 1), at(41, 409, 2)}) {
    EXPECT_EQ(tiling(k), "n64s2o6") << k.name();  // 400 to 656 items
    EXPECT_EQ(k.warps(), 2) << k.name();
  }
  // From five items per SM, one-warp CTAs over 32-key tiles: eleven per SM in two stages
  // while their last round holds five per SM, else eight in three while theirs holds four.
  EXPECT_EQ(tiling(at(83, 16384, 1)), "n32s2o11");  // 664 items
  EXPECT_EQ(at(83, 16384, 1).warps(), 1);
  EXPECT_EQ(tiling(at(160, 256, 1)), "n32s2o11");  // 1280
  EXPECT_EQ(tiling(at(200, 200, 1)), "n32s3o8");   // 1600: 1452 + 148 in elevens, 1056 + 544 in eights
  EXPECT_EQ(tiling(at(16, 4096, 16)), "n32s3o8");  // 2048: 1452 + 596, 1056 + 992
  EXPECT_EQ(tiling(at(188, 4096, 1)), "n64s2o3");  // 1504: 1452 + 52, 1056 + 448
  // Paged 16-bit caches: the same tiles in paged variants, from one and a half items per SM
  // (while most SMs would hold one CTA, the 128-row tiles).
  const auto specs = all_kernel_specs();
  for (const auto& [paged, contiguous] :
       {std::pair{at(83, 16384, 1, Dtype::bf16, 16), at(83, 16384, 1)}, {at(200, 200, 1, Dtype::bf16, 1), at(200, 200, 1)},
        {at(50, 16384, 1, Dtype::bf16, 16), at(50, 16384, 1)}, {at(82, 300, 1, Dtype::bf16, 64), at(82, 300, 1)}}) {
    EXPECT_EQ(paged, as_paged(contiguous)) << paged.name();
    EXPECT_NE(std::find(specs.begin(), specs.end(), paged), specs.end()) << paged.name();
  }
  // Up to three items per SM a paged cache keeps the four-warp tiles in three stages, long
  // splits from two items per SM too.
  for (const KernelSpec& k : {at(25, 16384, 1, Dtype::bf16, 16), at(49, 16384, 1, Dtype::bf16, 16), at(49, 256, 1, Dtype::bf16, 16)}) {
    EXPECT_EQ(tiling(k), "n64s3o1") << k.name();
    EXPECT_EQ(k.warps(), 4) << k.name();
    EXPECT_TRUE(k.paged) << k.name();
  }
  EXPECT_EQ(tiling(at(24, 16384, 1, Dtype::bf16, 16)), "n128s3o1");  // 192 items
  EXPECT_EQ(tiling(at(24, 16384, 1)), "n64s3o1");
  // Paged fp8: the contiguous tiles from two items per SM, save the one-warp CTAs (they spill
  // the page ids) and the two-warp fours over splits of two blocks.
  EXPECT_EQ(at(50, 16384, 1, Dtype::fp8, 16), as_paged(at(50, 16384, 1, Dtype::fp8)));  // 400 items
  EXPECT_EQ(tiling(at(33, 16384, 1, Dtype::fp8, 16)), "n128s3o1");                  // 264: as before
  EXPECT_EQ(at(83, 16384, 1, Dtype::bf16, 0, 4).warps(), 4);  // a margin: as before
  EXPECT_LE(11 * (at(83, 16384, 1).smem_bytes() + 1024), 228 * 1024);
  EXPECT_LE(8 * (at(200, 200, 1).smem_bytes() + 1024), 228 * 1024);
  // fp8: 64-row tiles in four stages up to two items per SM, then three.
  EXPECT_EQ(tiling(at(16, 16384, 2, Dtype::fp8)), "n64s4o1");  // 256 items
  EXPECT_EQ(tiling(at(33, 16384, 1, Dtype::fp8)), "n64s4o1");  // 264
  EXPECT_EQ(tiling(at(34, 16384, 1, Dtype::fp8)), "n64s3o1");  // 272
  // fp8 past two items per SM over one or two blocks: two-warp tiles, six per SM in two
  // stages over one block, three stages over two.
  EXPECT_EQ(tiling(at(34, 128, 1, Dtype::fp8)), "n64s2o6");
  EXPECT_EQ(at(34, 128, 1, Dtype::fp8).warps(), 2);
  EXPECT_EQ(tiling(at(34, 256, 1, Dtype::fp8)), "n64s3o1");
  EXPECT_EQ(at(34, 256, 1, Dtype::fp8).warps(), 2);
  EXPECT_EQ(at(34, 257, 1, Dtype::fp8).warps(), 4);  // three blocks: as before
  EXPECT_EQ(at(33, 128, 1, Dtype::fp8).warps(), 4);  // 264 items: as before
  EXPECT_EQ(at(34, 128, 1, Dtype::fp8, 16), as_paged(at(34, 128, 1, Dtype::fp8)));
  EXPECT_EQ(tiling(at(34, 256, 1, Dtype::fp8, 16)), "n64s3o1");  // paged over two blocks: four warps
  EXPECT_EQ(at(34, 256, 1, Dtype::fp8, 16).warps(), 4);
  // fp8 between three and six items per SM over longer splits: two-warp tiles, four per SM
  // in three stages up to four items per SM, six in two beyond.
  EXPECT_EQ(at(49, 1000, 1, Dtype::fp8).warps(), 4);  // 392 items: as before
  EXPECT_EQ(tiling(at(50, 1000, 1, Dtype::fp8)), "n64s3o1");  // 400
  EXPECT_EQ(at(50, 1000, 1, Dtype::fp8).warps(), 2);
  EXPECT_EQ(tiling(at(66, 1000, 1, Dtype::fp8)), "n64s3o1");  // 528: four per SM
  EXPECT_EQ(tiling(at(67, 1000, 1, Dtype::fp8)), "n64s2o6");  // 536
  EXPECT_EQ(tiling(at(98, 1000, 1, Dtype::fp8)), "n64s2o6");  // 784: under six per SM
  EXPECT_EQ(at(98, 1000, 1, Dtype::fp8).warps(), 2);
  EXPECT_EQ(at(67, 1000, 1, Dtype::fp8, 16), as_paged(at(67, 1000, 1, Dtype::fp8)));
  // fp8 from six items per SM: one-warp CTAs over 32-key tiles, fourteen per SM in three
  // stages up to seven per SM, sixteen in two beyond while each round holds five per SM.
  EXPECT_EQ(tiling(at(99, 1000, 1, Dtype::fp8)), "n32s3o14");  // 792
  EXPECT_EQ(at(99, 1000, 1, Dtype::fp8).warps(), 1);
  EXPECT_EQ(tiling(at(115, 100, 1, Dtype::fp8)), "n32s3o14");  // 920, one block
  EXPECT_EQ(tiling(at(116, 1000, 1, Dtype::fp8)), "n32s2o16");  // 928
  EXPECT_EQ(tiling(at(264, 1000, 1, Dtype::fp8)), "n32s2o16");  // 2112: one round of sixteen
  EXPECT_EQ(tiling(at(29, 1000, 16, Dtype::fp8)), "n32s2o16");  // 3712: 2112 + 1600
  EXPECT_EQ(at(270, 1000, 1, Dtype::fp8).warps(), 4);  // 2160: 2112 + 48, as before
  EXPECT_EQ(at(116, 1000, 1, Dtype::fp8, 16), as_paged(at(116, 1000, 1, Dtype::fp8)));  // paged: the sixteens too
  EXPECT_EQ(at(99, 1000, 1, Dtype::fp8, 16), as_paged(at(67, 1000, 1, Dtype::fp8)));  // no fourteens: the sixes
  EXPECT_EQ(at(116, 1000, 1, Dtype::fp8, 0, 4).warps(), 4);  // a margin: as before
  EXPECT_LE(16 * (at(116, 1000, 1, Dtype::fp8).smem_bytes() + 1024), 228 * 1024);
  EXPECT_LE(14 * (at(99, 1000, 1, Dtype::fp8).smem_bytes() + 1024), 228 * 1024);
  // Paged, or with a margin: as before.
  EXPECT_EQ(tiling(at(17, 16384, 1, Dtype::bf16, 16)), "n128s3o1");
  EXPECT_EQ(tiling(at(17, 16384, 1, Dtype::bf16, 0, 4)), "n128s3o1");
  const auto all = all_kernel_specs();
  for (const KernelSpec& k :
       {at(33, 16384, 1), at(82, 256, 1), at(160, 256, 1), at(200, 200, 1), at(16, 16384, 2, Dtype::fp8),
        at(16, 16384, 1, Dtype::fp8), at(34, 16384, 1, Dtype::fp8), at(34, 128, 1, Dtype::fp8),
        at(34, 256, 1, Dtype::fp8), at(99, 1000, 1, Dtype::fp8), at(116, 1000, 1, Dtype::fp8), at(82, 256, 1),
        at(50, 1000, 1, Dtype::fp8), at(67, 1000, 1, Dtype::fp8), at(50, 16384, 1, Dtype::bf16, 16)})
    EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
}

// Whatever spec_for picks for a decision is among the variants CI compiles: every head dim,
// dtype and layout, one or several query tokens, over items per SM from a fraction to dozens,
// split lengths of one block to many, with and without an SM margin, on an H100's DRAM and
// on a fast one (an H200's, whose rules differ).
TEST(KernelSpecs, EveryDecisionsVariantIsAmongTheCompiledOnes) {
  const auto all = all_kernel_specs();
  int checked = 0;
  DeviceInfo h100, h200;
  h100.num_sms = h200.num_sms = 132;
  h100.mem_bw_bytes_per_s = 3.35e12;
  h200.mem_bw_bytes_per_s = 4.8e12;
  h100.cc = h200.cc = 90;  // with the cluster merge
  for (const DeviceInfo& hw : {h100, h200})
  for (int d : {64, 128, 256})
    for (Dtype dtype : {Dtype::bf16, Dtype::fp16, Dtype::fp8})
      for (Dtype q : {Dtype::bf16, Dtype::fp16}) {
        if (dtype != Dtype::fp8 && q == Dtype::fp16) continue;
        for (int page : {0, 1, 16, 64})
          for (auto [hq, hkv] : {std::pair{8, 8}, {32, 8}, {64, 4}, {71, 1}})
            for (int batch : {1, 7, 40, 99, 130, 211, 256})
              for (int seqlen_q : {1, 4})
                for (int seqlen_k : {64, 129, 250, 1000, 8192})
                  for (int splits : {1, 2, 3, 8, 32})
                    for (int margin : {0, 4}) {
                      const Shape s{batch, seqlen_q, seqlen_k, hq, hkv, d, dtype, page, true, q};
                      const KernelSpec k = spec_for(s, Decision{splits, true, margin}, hw);
                      ++checked;
                      ASSERT_NE(std::find(all.begin(), all.end(), k), all.end())
                          << k.name() << " for B=" << batch << " Lq=" << seqlen_q << " Lk=" << seqlen_k << " Hq=" << hq
                          << " Hkv=" << hkv << " D=" << d << " page " << page << " splits " << splits << " margin "
                          << margin << " at " << hw.mem_bw_bytes_per_s / 1e12 << " TB/s";
                    }
      }
  EXPECT_EQ(checked, 2 * 134400);
}

TEST(KernelSpecs, SpecForADecisionWeighsTheGrid) {
  Shape s;  // paper-table1: B=1, Lk=512, Hq=64, Hkv=1
  s.seqlen_k = 512;
  s.h_q = 64;
  s.h_kv = 1;
  // 64 packed rows: tiled by 16 while the 4 x splits items fit one wave of SMs...
  KernelSpec k = spec_for(s, Decision{4, true, 0}, 132);
  EXPECT_EQ(k.block_m, 16);
  EXPECT_EQ(k.block_n, 128);  // ...each CTA alone on its SM: 128-row tiles
  // ...by 64 when they would not.
  s.batch = 64;
  k = spec_for(s, Decision{4, true, 0}, 132);
  EXPECT_EQ(k.block_m, 64);
  // Unpacked, many CTAs of one block each: 64-row tiles, two CTAs per SM.
  k = spec_for(s, Decision{4, false, 0}, 132);
  EXPECT_EQ(k.block_m, 16);
  EXPECT_EQ(k.block_n, 64);
  // sm_margin shrinks the wave.
  s.batch = 1;
  EXPECT_EQ(spec_for(s, Decision{8, true, 0}, 132).block_m, 16);   // 32 items
  EXPECT_EQ(spec_for(s, Decision{8, true, 120}, 132).block_m, 64);  // 32 items > 12 SMs
}

TEST(KernelSpecs, LongPackedGroupsAreTiledAfterPaddingWavesAndSplitLength) {
  auto spec = [](int batch, int seqlen_k, int h_q, int h_kv, int head_dim, int splits) {
    return spec_for(Shape{batch, 1, seqlen_k, h_q, h_kv, head_dim}, Decision{splits, true, 0}, 132);
  };
  auto tiling = [](const KernelSpec& k) {
    return "m" + std::to_string(k.block_m) + "n" + std::to_string(k.block_n) + "w" + std::to_string(k.warps_m) + "x" +
           std::to_string(k.warps_n) + "s" + std::to_string(k.stages);
  };
  const auto all = all_kernel_specs();
  // Splits of one block: the fewer padded rows (71 -> 96 in 32s, 128 in 64s; 48 -> 64 either
  // way, 64 on a tie), one warp per row tile in 64s.
  EXPECT_EQ(tiling(spec(256, 100, 71, 1, 64, 1)), "m32n64w2x2s3");
  EXPECT_EQ(tiling(spec(256, 100, 48, 1, 128, 1)), "m64n64w4x1s2");
  EXPECT_EQ(tiling(spec(64, 512, 64, 1, 128, 4)), "m64n64w4x1s2");
  // 64-row items that need a second wave: 32-row tiles, 128-row K/V tiles for long splits
  // at D = 64, 64-row ones when the 32-row items overflow one CTA per SM at D = 128.
  EXPECT_EQ(tiling(spec(77, 1500, 71, 1, 64, 1)), "m32n128w2x2s3");   // 154 items of 64
  EXPECT_EQ(tiling(spec(200, 300, 71, 1, 64, 1)), "m32n64w2x2s3");    // 300 keys
  EXPECT_EQ(tiling(spec(77, 1500, 64, 2, 128, 1)), "m32n64w2x2s3");   // 154 items of 32
  // At D = 128, 33-64 rows (64-row tiles pad no more than 32-row ones): 64-row tiles over
  // 64-row K/V tiles in two stages instead, small enough for two CTAs per SM, over any cache.
  EXPECT_EQ(tiling(spec(76, 1396, 48, 1, 128, 3)), "m64n64w4x1s2");  // 228 items of 64
  EXPECT_EQ(tiling(spec(130, 1396, 40, 1, 128, 2)), "m64n64w4x1s2");  // 40 rows, 260 items
  EXPECT_EQ(tiling(spec(13, 4099, 40, 1, 128, 11)), "m64n64w4x1s2");  // 143 items
  EXPECT_EQ(tiling(spec(76, 1396, 24, 1, 128, 3)), "m32n64w2x2s3");   // 24 rows: 32 pad fewer
  EXPECT_EQ(tiling(spec(76, 1396, 48, 1, 128, 1)), "m64n128w4x2s3");  // 76 items: one wave
  Shape fp8{76, 1, 1396, 48, 1, 128};
  fp8.dtype = Dtype::fp8;
  Shape paged{76, 1, 1396, 48, 1, 128};
  paged.page_size = 16;
  const SmLimits hopper = sm_limits(90);
  for (const Shape& s : {Shape{76, 1, 1396, 48, 1, 128}, fp8, paged}) {
    const KernelSpec k = spec_for(s, Decision{3, true, 0}, 132);
    EXPECT_EQ(tiling(k), "m64n64w4x1s2") << k.name();
    EXPECT_LE(2 * (k.smem_bytes() + hopper.smem_reserved_per_cta), hopper.smem_bytes_per_sm) << k.name();
    EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
  }
  EXPECT_EQ(tiling(spec_for(Shape{76, 1, 1396, 48, 1, 128}, Decision{3, true, 8}, 132)), "m32n64w2x2s3");  // margin
  // 17-32 rows over an fp8 cache, contiguous or paged: 128-key tiles (a 16-bit 64-key tile's
  // bytes) once the splits hold 512 keys, though the 32-row items overflow one CTA per SM.
  for (int page_size : {0, 16}) {
    Shape mqa{114, 1, 6250, 24, 1, 128};  // 228 items of 32 rows over 2 splits
    mqa.dtype = Dtype::fp8;
    mqa.page_size = page_size;
    const KernelSpec k = spec_for(mqa, Decision{2, true, 0}, 132);
    EXPECT_EQ(tiling(k), "m32n128w2x2s3") << k.name();
    EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
    mqa.seqlen_k = 1145;  // 4 splits of 384 keys
    EXPECT_EQ(tiling(spec_for(mqa, Decision{4, true, 0}, 132)), "m32n64w2x2s3");
  }
  EXPECT_EQ(tiling(spec(114, 6250, 24, 1, 128, 2)), "m32n64w2x2s3");  // the same over a bf16 cache
  // Or that leave half the SMs idle: one request over 64 splits.
  EXPECT_EQ(tiling(spec(1, 100000, 64, 1, 128, 64)), "m32n128w2x2s3");  // 128 items of 32
  // D = 64, 16-row items filling three to four (four to six) two-warp CTAs per SM.
  EXPECT_EQ(tiling(spec(104, 2684, 71, 1, 64, 1)), "m16n64w1x2s3");  // 520 items of 16
  EXPECT_EQ(tiling(spec(33, 2684, 71, 1, 64, 3)), "m16n64w1x2s3");   // 495 through the splits
  EXPECT_EQ(tiling(spec(150, 2684, 71, 1, 64, 1)), "m16n64w1x2s2");  // 750
  EXPECT_EQ(spec(150, 2684, 71, 1, 64, 1).min_ctas_per_sm, 6);
  EXPECT_EQ(tiling(spec(200, 2684, 71, 1, 64, 1)), "m32n128w2x2s3");  // 1000: past six per SM
  EXPECT_EQ(tiling(spec(64, 1000, 71, 1, 64, 1)), "m64n128w4x2s3");   // 320: under three
  // Over a paged 16-bit cache the two-warp tiles take only splits of one block whose 32-row
  // tiles would need a second wave (three CTAs per SM); longer splits of 65-128 rows (512
  // keys or more, 128-row items on three quarters of the SMs) read the group's KV once, in
  // one 128-row tile.
  auto falcon_paged = [](int batch, int seqlen_k, int splits, Dtype dtype = Dtype::bf16) {
    Shape s{batch, 1, seqlen_k, 71, 1, 64};
    s.page_size = 16;
    s.dtype = dtype;
    return spec_for(s, Decision{splits, true, 0}, 132);
  };
  EXPECT_EQ(tiling(falcon_paged(136, 122, 1)), "m16n64w1x2s2");  // 680 items of one block, 408 of 32 rows
  EXPECT_EQ(tiling(falcon_paged(125, 110, 1)), "m32n64w2x2s3");  // 625, 375 of 32 rows: one wave
  EXPECT_EQ(tiling(falcon_paged(14, 780, 8)), "m32n64w2x2s3");   // 560 through the splits, 336
  EXPECT_EQ(tiling(falcon_paged(44, 35071, 3)), "m128n128w8x1s4");  // 132 items of 11 690 keys
  EXPECT_EQ(tiling(falcon_paged(149, 11447, 6)), "m128n128w8x1s4");  // 894 of 1908
  EXPECT_EQ(tiling(falcon_paged(33, 2684, 3)), "m128n128w8x1s4");  // 99 of 896: three quarters of the SMs
  EXPECT_EQ(tiling(falcon_paged(44, 35071, 3, Dtype::fp16)), "m128n128w8x1s4");
  EXPECT_EQ(tiling(falcon_paged(1, 41223, 48)), "m64n128w4x2s3");  // 48 items
  EXPECT_EQ(tiling(falcon_paged(12, 4108, 12)), "m32n64w2x2s3");  // 384-key splits
  EXPECT_EQ(tiling(falcon_paged(32, 2684, 3)), "m32n128w2x2s3");   // 96 items
  EXPECT_EQ(tiling(falcon_paged(44, 35071, 3, Dtype::fp8)), "m32n128w2x2s3");
  EXPECT_EQ(tiling(spec(44, 35071, 71, 1, 64, 3)), "m16n64w1x2s2");  // contiguous: as before
  EXPECT_EQ(tiling(spec(149, 11447, 71, 1, 64, 6)), "m32n128w2x2s3");
  for (const KernelSpec& k : {falcon_paged(136, 122, 1), falcon_paged(149, 11447, 6),
                              falcon_paged(44, 35071, 3, Dtype::fp16)}) {
    EXPECT_TRUE(k.paged) << k.name();
    EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
  }
  // One wave over more than half the SMs, long splits: the 64-row tiles.
  EXPECT_EQ(tiling(spec(77, 1500, 48, 1, 128, 1)), "m64n128w4x2s3");
  EXPECT_EQ(spec(128, 4096, 32, 1, 256, 1).block_m, 64);  // D = 256 keeps them
  for (const KernelSpec& k : {spec(256, 100, 71, 1, 64, 1), spec(256, 100, 48, 1, 128, 1), spec(77, 1500, 71, 1, 64, 1),
                              spec(77, 1500, 64, 2, 128, 1), spec(1, 100000, 64, 1, 128, 64)})
    EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
}

// StarCoder's 48 rows over one KV head, splits of one block: the tiling by how many CTAs an
// SM runs (long_group_spec), over a 16-bit cache contiguous or paged, and over an fp8 one.
TEST(KernelSpecs, GroupsOf33To48RowsOverOneBlockFollowTheCtasPerSm) {
  auto spec = [](int batch, int seqlen_k, int h_q, Dtype dtype, int page_size, int splits = 1, int margin = 0) {
    Shape s{batch, 1, seqlen_k, h_q, 1, 128};
    s.dtype = dtype;
    s.page_size = page_size;
    return spec_for(s, Decision{splits, true, margin}, 132);
  };
  auto tiling = [](const KernelSpec& k) {
    return "m" + std::to_string(k.block_m) + "n" + std::to_string(k.block_n) + "w" + std::to_string(k.warps_m) + "x" +
           std::to_string(k.warps_n) + "s" + std::to_string(k.stages) + "o" + std::to_string(k.min_ctas_per_sm);
  };
  const auto all = all_kernel_specs();
  for (int page_size : {0, 1, 16}) {
    const Dtype bf16 = Dtype::bf16;
    // Up to two 16-row items per SM: the four-warp 16-row tiles.
    EXPECT_EQ(tiling(spec(78, 74, 48, bf16, page_size)), "m16n64w1x4s3o1");   // 234 items of 16
    EXPECT_EQ(tiling(spec(88, 128, 48, bf16, page_size)), "m16n64w1x4s3o1");  // 264
    // Then, while the 64-row items fit one per SM: 32-row tiles, two CTAs per request.
    EXPECT_EQ(tiling(spec(89, 100, 48, bf16, page_size)), "m32n64w2x2s3o1");
    EXPECT_EQ(tiling(spec(132, 100, 48, bf16, page_size)), "m32n64w2x2s3o1");
    EXPECT_EQ(tiling(spec(30, 500, 48, bf16, page_size, 4)), "m32n64w2x2s3o1");  // 120 items of 64 through the splits
    // Then the two-warp fours while an SM runs at most twice the 64-row tiles' CTAs.
    EXPECT_EQ(tiling(spec(133, 100, 48, bf16, page_size)), "m16n32w1x2s3o4");
    EXPECT_EQ(tiling(spec(176, 100, 40, bf16, page_size)), "m16n32w1x2s3o4");  // 40 rows: three 16-row tiles too
    // Past four per SM, while the 64-row tiles hold the items in one wave: the sixes over
    // three 32-key tiles (65-96 keys), the 64-row tiles over one 64-key tile or four of 32.
    EXPECT_EQ(tiling(spec(177, 100, 48, bf16, page_size)), "m64n64w4x1s2o1");
    EXPECT_EQ(tiling(spec(177, 96, 48, bf16, page_size)), "m16n32w1x2s2o6");
    EXPECT_EQ(tiling(spec(264, 65, 48, bf16, page_size)), "m16n32w1x2s2o6");
    EXPECT_EQ(tiling(spec(210, 64, 48, bf16, page_size)), "m64n64w4x1s2o1");
    EXPECT_EQ(tiling(spec(210, 300, 48, bf16, page_size, 3)), "m64n64w4x1s2o1");  // 128-key splits
    // Past two 64-row items per SM: the fours while they need two waves, then 64-row tiles.
    EXPECT_EQ(tiling(spec(265, 120, 48, bf16, page_size)), "m16n32w1x2s3o4");
    EXPECT_EQ(tiling(spec(352, 40, 48, bf16, page_size)), "m16n32w1x2s3o4");
    EXPECT_EQ(tiling(spec(353, 80, 48, bf16, page_size)), "m64n64w4x1s2o1");
    for (const KernelSpec& k : {spec(78, 74, 48, bf16, page_size), spec(100, 100, 48, bf16, page_size),
                                spec(150, 100, 48, bf16, page_size), spec(200, 80, 48, bf16, page_size),
                                spec(300, 80, 48, bf16, page_size)}) {
      EXPECT_EQ(k.paged, page_size > 0) << k.name();
      EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
    }
  }
  // An fp8 cache, whose 16-row tiles hold one CTA per SM, takes the fours from the start.
  for (int page_size : {0, 16}) {
    EXPECT_EQ(tiling(spec(62, 80, 48, Dtype::fp8, page_size)), "m16n32w1x2s3o4");
    EXPECT_EQ(tiling(spec(100, 108, 48, Dtype::fp8, page_size)), "m64n64w4x1s2o1");  // three per SM against one
    EXPECT_EQ(tiling(spec(164, 112, 48, Dtype::fp8, page_size)), "m16n32w1x2s3o4");
    // The sixes over a contiguous cache only: a paged fp8 cache's spill.
    EXPECT_EQ(tiling(spec(200, 80, 48, Dtype::fp8, page_size)), page_size ? "m64n64w4x1s2o1" : "m16n32w1x2s2o6");
    EXPECT_EQ(tiling(spec(300, 80, 48, Dtype::fp8, page_size)), "m16n32w1x2s3o4");
    for (const KernelSpec& k : {spec(62, 80, 48, Dtype::fp8, page_size), spec(200, 80, 48, Dtype::fp8, page_size),
                                spec(300, 80, 48, Dtype::fp8, page_size)})
      EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k.name();
  }
  // Untouched: 24 rows (16-row tiles pad as many as 32-row ones), 64 rows, longer splits, a margin.
  EXPECT_EQ(tiling(spec(136, 104, 24, Dtype::bf16, 0)), "m32n64w2x2s3o1");
  EXPECT_EQ(tiling(spec(78, 100, 64, Dtype::bf16, 0)), "m64n64w4x1s2o1");
  EXPECT_EQ(tiling(spec(78, 310, 48, Dtype::bf16, 0)), "m64n128w4x2s3o1");
  EXPECT_EQ(tiling(spec(78, 74, 48, Dtype::bf16, 0, 1, 8)), "m64n64w4x1s2o1");
}

TEST(KernelSpecs, FastDivisorsDivideExactlyBelow2To31) {
  const int last = std::numeric_limits<int>::max();
  std::mt19937 rng(18);
  for (int d = 1; d <= 4100; ++d) {
    const FastDivisor f = fast_divisor(d);
    ASSERT_EQ(f.d, d);
    // Every n up to a few multiples past d, the ends of the range, and random n below 2^31;
    // the quotient's edges (k * d - 1, k * d) are where a multiplier off by one shows.
    for (int n = 0; n < 3 * d + 2; ++n) ASSERT_EQ(fast_div(n, f), n / d) << n << " / " << d;
    for (int n : {last, last - 1, last - d, last / d * d, last / d * d - 1}) ASSERT_EQ(fast_div(n, f), n / d) << n << " / " << d;
    for (int k = 0; k < 200; ++k) {
      const int n = static_cast<int>(rng() & 0x7fffffffu);
      ASSERT_EQ(fast_div(n, f), n / d) << n << " / " << d;
      const int edge = n / d * d;
      if (edge > 0) {
        ASSERT_EQ(fast_div(edge - 1, f), (edge - 1) / d) << edge - 1 << " / " << d;
      }
    }
  }
  for (int d : {65537, 1 << 20, (1 << 20) + 1, 1000003, last}) {
    const FastDivisor f = fast_divisor(d);
    for (int n : {0, d - 1, d, last, last - 1, last / d * d - 1}) ASSERT_EQ(fast_div(n, f), n / d) << n << " / " << d;
  }
}

TEST(KernelSpecs, DecodeParamsCoverTheWork) {
  Shape s;
  s.batch = 3;
  s.seqlen_q = 4;
  s.seqlen_k = 1000;
  s.h_q = 28;
  s.h_kv = 4;  // qpk 7: 28 packed rows, one m tile of 64
  Decision d;
  d.num_splits = 5;
  const KernelSpec k = spec_for(s, true);
  const DecodeParams p = decode_params_for(s, d, k);
  EXPECT_EQ(p.rows_per_group, 28);
  EXPECT_EQ(p.m_tiles, 1);
  EXPECT_EQ(p.num_work_items, 3 * 4 * 5);
  EXPECT_EQ(p.k_row_stride, 4 * 128);
  EXPECT_EQ(p.k_batch_stride, 1000 * 4 * 128);
  EXPECT_EQ(p.q_batch_stride, 4 * 28 * 128);
  // The kernel's divisors are the fields they stand for.
  EXPECT_EQ(p.m_tiles_div.d, p.m_tiles);
  EXPECT_EQ(p.groups_div.d, p.groups_per_kv_head);
  EXPECT_EQ(p.h_kv_div.d, 4);
  EXPECT_EQ(p.batch_div.d, 3);
  EXPECT_EQ(p.splits_div.d, 5);
  EXPECT_EQ(p.heads_div.d, 7);  // qpk: a group's rows are its 4 tokens x 7 heads
  EXPECT_EQ(p.page_div.d, 0);  // contiguous: never divided by
  EXPECT_EQ(p.h_q_div.d, 28);
  EXPECT_EQ(p.seqlen_q_div.d, 4);
  const DecodeParams u = decode_params_for(s, Decision{5, false, 0}, spec_for(s, false));
  EXPECT_EQ(u.rows_per_group, 4);
  EXPECT_EQ(u.groups_per_kv_head, 7);
  EXPECT_EQ(u.num_work_items, 3 * 4 * 5 * 7);
  EXPECT_EQ(u.groups_div.d, 7);
  EXPECT_EQ(u.heads_div.d, 1);
  s.page_size = 16;
  EXPECT_EQ(decode_params_for(s, d, spec_for(s, true), 63).page_div.d, 16);
}

TEST(KernelSpecs, OneCausalQueryTokenIsNotCausalForTheKernels) {
  // Token 0 of one sees keys [0, len - 1]: every key of its request, no per-row limit.
  Shape s;
  s.batch = 2;
  s.seqlen_k = 300;
  s.h_q = 8;
  s.h_kv = 2;
  s.causal = true;
  const Decision d{1, true, 0};
  EXPECT_EQ(decode_params_for(s, d, spec_for(s, true)).causal, 0);
  s.seqlen_q = 2;
  EXPECT_EQ(decode_params_for(s, d, spec_for(s, true)).causal, 1);
  s.causal = false;
  EXPECT_EQ(decode_params_for(s, d, spec_for(s, true)).causal, 0);
}

TEST(KernelSpecs, DecodeParamsAreLaidOutInTheOrderACtaReadsThem) {
  // The parameters start at byte 0x210 of their constant bank: 64-byte lines, each a stall
  // on its first read, in 256-byte blocks. [from, to): the bank's bytes a field must lie in.
  auto in = [](std::size_t offset, std::size_t bytes, std::size_t from, std::size_t to) {
    return 0x210 + offset >= from && 0x210 + offset + bytes <= to;
  };
#define EVO_FIELD(f) offsetof(DecodeParams, f), sizeof(DecodeParams::f)
  // The loop bound, the SM record and the item's first three indices: the driver's line.
  for (auto [at, bytes] : {std::pair{EVO_FIELD(num_work_items)}, {EVO_FIELD(cta_sms)}, {EVO_FIELD(m_tiles_div)},
                           {EVO_FIELD(groups_div)}, {EVO_FIELD(h_kv_div)}})
    EXPECT_TRUE(in(at, bytes, 0x200, 0x240)) << at;
  // The rest of the item, its length's address and its rows: the next line.
  for (auto [at, bytes] : {std::pair{EVO_FIELD(batch_div)}, {EVO_FIELD(splits_div)}, {EVO_FIELD(cache_seqlens)},
                           {EVO_FIELD(num_splits)}, {EVO_FIELD(qpk)}, {EVO_FIELD(heads_per_group)},
                           {EVO_FIELD(rows_per_group)}, {EVO_FIELD(heads_div)}, {EVO_FIELD(seqlen_q)}})
    EXPECT_TRUE(in(at, bytes, 0x240, 0x280)) << at;
  // Q's and the K/V copies' addresses (paged too), and the causal limit: the rest of the first block.
  for (auto [at, bytes] : {std::pair{EVO_FIELD(q)}, {EVO_FIELD(q_batch_stride)}, {EVO_FIELD(q_head_stride)},
                           {EVO_FIELD(k)}, {EVO_FIELD(v)}, {EVO_FIELD(k_batch_stride)}, {EVO_FIELD(k_head_stride)},
                           {EVO_FIELD(v_batch_stride)}, {EVO_FIELD(v_head_stride)}, {EVO_FIELD(page_table)},
                           {EVO_FIELD(page_table_batch_stride)}, {EVO_FIELD(page_div)}, {EVO_FIELD(causal)}})
    EXPECT_TRUE(in(at, bytes, 0x280, 0x300)) << at;
  // The softmax's scale and a one-split epilogue's outputs: one line, read once the copies fly.
  for (auto [at, bytes] : {std::pair{EVO_FIELD(scale_log2)}, {EVO_FIELD(out)}, {EVO_FIELD(lse)},
                           {EVO_FIELD(out_batch_stride)}, {EVO_FIELD(out_head_stride)}, {EVO_FIELD(lse_batch_stride)},
                           {EVO_FIELD(lse_head_stride)}})
    EXPECT_TRUE(in(at, bytes, 0x300, 0x340)) << at;
#undef EVO_FIELD
}

TEST(KernelSpecs, OneVariantServesBothPackings) {
  // The packing is the parameters' work decomposition, not a template argument.
  Shape s;
  s.seqlen_q = 2;
  s.seqlen_k = 1000;
  s.h_q = 32;
  s.h_kv = 8;  // qpk 4: 8 packed rows, 2 unpacked; both fit a 16-row tile
  const KernelSpec k = spec_for(s, true);
  EXPECT_EQ(spec_for(s, false), k);
  const DecodeParams packed = decode_params_for(s, Decision{1, true, 0}, k);
  const DecodeParams unpacked = decode_params_for(s, Decision{1, false, 0}, k);
  EXPECT_EQ(packed.heads_per_group, 4);
  EXPECT_EQ(packed.groups_per_kv_head, 1);
  EXPECT_EQ(unpacked.heads_per_group, 1);
  EXPECT_EQ(unpacked.groups_per_kv_head, 4);
  EXPECT_EQ(unpacked.num_work_items, 4 * packed.num_work_items);
}

// The CI-facing check: all variants, each exactly as the runner would build it.
TEST(KernelCompile, EveryVariantCompilesForSm90aWithinItsResources) {
  TempDir dir;
  const KernelCompiler compiler(kArch, dir.path());
  const auto specs = all_kernel_specs();
  std::vector<CompiledKernel> results(specs.size());
  const unsigned workers = std::max(2u, std::thread::hardware_concurrency());
  std::atomic<std::size_t> next{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next++) < specs.size();) results[i] = compiler.compile(specs[i]);
    });
  for (auto& t : pool) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  double nvrtc_seconds = 0;
  std::printf("%-52s %5s %6s %6s %8s %6s\n", "variant", "regs", "spill", "stack", "smem", "sec");
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const KernelSpec& s = specs[i];
    const CompiledKernel& k = results[i];
    nvrtc_seconds += k.compile_seconds;
    ASSERT_TRUE(k.ok) << s.name() << "\n" << k.log;
    std::printf("%-52s %5d %6d %6d %8d %6.2f\n", s.name().c_str(), k.resources.registers,
                k.resources.spill_store_bytes + k.resources.spill_load_bytes, k.resources.stack_bytes,
                s.smem_bytes() + k.resources.static_smem_bytes, k.compile_seconds);
    EXPECT_FALSE(k.cubin.empty()) << s.name();
    ASSERT_EQ(k.lowered_names.size(), 1u) << s.name();
    EXPECT_EQ(k.lowered_names[0], k.resources.kernel) << s.name() << ": no ptxas report for the kernel";
    EXPECT_GT(k.resources.registers, 0) << s.name();
    EXPECT_LE(k.resources.registers, std::min(max_registers(s.threads()), s.max_registers())) << s.name();
    EXPECT_EQ(k.resources.spill_store_bytes, 0) << s.name() << " spills\n" << k.log;
    EXPECT_EQ(k.resources.spill_load_bytes, 0) << s.name() << " spills\n" << k.log;
    EXPECT_LE(s.smem_bytes() + k.resources.static_smem_bytes, 227 * 1024) << s.name();
  }
  std::printf("%zu variants: %.1f s wall on %u threads, %.1f s of NVRTC time\n", specs.size(), wall, workers,
              nvrtc_seconds);

  // No two variants are the same machine code: NVRTC never compiles one kernel twice.
  std::map<std::string, std::string> variant_of_code;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto code = kernel_code(results[i].cubin);
    const auto it = code.find(results[i].lowered_names[0]);
    ASSERT_NE(it, code.end()) << specs[i].name() << ": no code section for its kernel";
    const auto [same, fresh] = variant_of_code.emplace(it->second, specs[i].name());
    EXPECT_TRUE(fresh) << specs[i].name() << " compiles to the same code as " << same->second;
  }
}

TEST(KernelCompile, KernelCodeSeesATemplateArgumentThatChangesNothing) {
  CompileUnit u = tiny_unit();
  u.source += "template <int N, bool UNUSED> __global__ void twice(float* p) { p[threadIdx.x] *= N; }\n";
  u.name_expressions = {"twice<3, false>", "twice<3, true>", "twice<4, false>"};
  const CompiledKernel k = KernelCompiler(kArch, "").compile(u);
  ASSERT_TRUE(k.ok) << k.log;
  const auto code = kernel_code(k.cubin);
  const std::string& a = code.at(k.lowered_name("twice<3, false>"));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(code.at(k.lowered_name("twice<3, true>")), a);  // what PACK_ was: one kernel, compiled twice
  EXPECT_NE(code.at(k.lowered_name("twice<4, false>")), a);
}

TEST(KernelCompile, SecondCompileIsACacheHitWithoutNvrtc) {
  TempDir dir;
  const KernelCompiler compiler(kArch, dir.path());
  const KernelSpec spec = all_kernel_specs().back();  // a combine kernel: quick to build
  const auto before = nvrtc_compile_count();
  const CompiledKernel first = compiler.compile(spec);
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cache_hit);
  EXPECT_EQ(nvrtc_compile_count(), before + 1);
  EXPECT_EQ(first.cache_key.size(), 64u);

  const CompiledKernel second = compiler.compile(spec);
  ASSERT_TRUE(second.ok) << second.log;
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(nvrtc_compile_count(), before + 1);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.lowered_names, first.lowered_names);
  EXPECT_EQ(second.resources, first.resources);
  EXPECT_EQ(second.cache_key, first.cache_key);
  EXPECT_EQ(second.lowered_name(spec.kernel_expression()), first.lowered_names[0]);

  // Another compiler object (a new process, in effect) finds it too.
  EXPECT_TRUE(KernelCompiler(kArch, dir.path()).compile(spec).cache_hit);
}

TEST(KernelCompile, ChangedOptionOrArchIsAMiss) {
  TempDir dir;
  const KernelCompiler compiler(kArch, dir.path());
  const auto before = nvrtc_compile_count();
  const CompiledKernel a = compiler.compile(tiny_unit());
  const CompiledKernel b = compiler.compile(tiny_unit("-DEVO_SOMETHING=1"));
  ASSERT_TRUE(a.ok && b.ok) << a.log << b.log;
  EXPECT_NE(a.cache_key, b.cache_key);
  EXPECT_FALSE(b.cache_hit);
  EXPECT_EQ(nvrtc_compile_count(), before + 2);
  CompileUnit other_arch = tiny_unit();
  other_arch.options[0] = "--gpu-architecture=sm_80";
  EXPECT_NE(cache_key(other_arch), a.cache_key);
  CompileUnit other_header = tiny_unit();
  other_header.headers[0].second = "constexpr float kFactor = 3.f;\n";
  EXPECT_NE(cache_key(other_header), a.cache_key);
}

TEST(KernelCompile, ConcurrentThreadsCompileOneKeyOnce) {
  TempDir dir;
  const KernelCompiler compiler(kArch, dir.path());
  const auto before = nvrtc_compile_count();
  std::vector<CompiledKernel> out(4);
  std::vector<std::thread> threads;
  for (auto& o : out) threads.emplace_back([&] { o = compiler.compile(tiny_unit()); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(nvrtc_compile_count(), before + 1);
  int misses = 0;
  for (const auto& o : out) {
    ASSERT_TRUE(o.ok) << o.log;
    EXPECT_EQ(o.cubin, out[0].cubin);
    misses += !o.cache_hit;
  }
  EXPECT_EQ(misses, 1);
}

TEST(KernelCompile, ConcurrentProcessesCompileOneKeyOnce) {
  TempDir dir;
  // Each child exits 10 if it compiled, 11 on a cache hit, 1 on failure.
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const auto before = nvrtc_compile_count();
      const CompiledKernel k = KernelCompiler(kArch, dir.path()).compile(tiny_unit());
      const bool compiled = nvrtc_compile_count() != before;
      ::_exit(!k.ok ? 1 : compiled == !k.cache_hit ? (compiled ? 10 : 11) : 2);
    }
    children.push_back(pid);
  }
  int compiled = 0, hits = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    ASSERT_TRUE(code == 10 || code == 11) << "child exit " << code;
    compiled += code == 10;
    hits += code == 11;
  }
  EXPECT_EQ(compiled, 1);
  EXPECT_EQ(hits, 2);
}

TEST(KernelCompile, CorruptOrTornEntryIsRecompiled) {
  TempDir dir;
  const KernelCompiler compiler(kArch, dir.path());
  const CompiledKernel good = compiler.compile(tiny_unit());
  ASSERT_TRUE(good.ok) << good.log;
  fs::path entry;
  for (const auto& f : fs::directory_iterator(dir.path()))
    if (f.path().extension() == ".cubin") entry = f.path();
  ASSERT_FALSE(entry.empty());
  const auto size = fs::file_size(entry);

  auto recompiles = [&](const char* what) {
    const auto before = nvrtc_compile_count();
    const CompiledKernel k = compiler.compile(tiny_unit());
    EXPECT_TRUE(k.ok) << what << k.log;
    EXPECT_FALSE(k.cache_hit) << what;
    EXPECT_EQ(nvrtc_compile_count(), before + 1) << what;
    EXPECT_EQ(k.cubin, good.cubin) << what;
    EXPECT_TRUE(compiler.compile(tiny_unit()).cache_hit) << what << ": the entry was not repaired";
  };
  fs::resize_file(entry, size - 7);  // torn write
  recompiles("truncated");
  {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size) - 100);
    f.write("garbage!", 8);  // flipped bytes inside the cubin
  }
  recompiles("flipped bytes");
  {
    std::ofstream f(entry, std::ios::binary | std::ios::trunc);
    f << "not a cache entry";
  }
  recompiles("foreign file");
}

TEST(KernelCompile, BrokenSourceIsAFailedResultWithTheLog) {
  TempDir dir;
  const KernelCompiler compiler(kArch, dir.path());
  CompileUnit u = tiny_unit();
  u.source += "__global__ void broken() { this_is_not_declared = 1; }\n";
  const CompiledKernel k = compiler.compile(u);
  EXPECT_FALSE(k.ok);
  EXPECT_TRUE(k.cubin.empty());
  EXPECT_NE(k.log.find("this_is_not_declared"), std::string::npos) << k.log;
  // Failures are not cached: the same unit fails again (through NVRTC, with its log).
  const auto before = nvrtc_compile_count();
  EXPECT_FALSE(compiler.compile(u).ok);
  EXPECT_EQ(nvrtc_compile_count(), before + 1);
  // A bad option and an unknown arch are failures too, not exceptions.
  CompileUnit bad_arch = tiny_unit();
  bad_arch.options[0] = "--gpu-architecture=sm_1";
  EXPECT_FALSE(compiler.compile(bad_arch).ok);
  // An invalid spec never reaches NVRTC.
  KernelSpec spec = all_kernel_specs().front();
  spec.head_dim = 96;
  const CompiledKernel s = compiler.compile(spec);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.log.find("head_dim"), std::string::npos) << s.log;
}

TEST(KernelCompile, UnwritableCacheDirStillCompiles) {
  const KernelCompiler compiler(kArch, "/proc/evodispatch-no-such-dir");
  const CompiledKernel k = compiler.compile(tiny_unit());
  EXPECT_TRUE(k.ok) << k.log;
  const KernelCompiler uncached(kArch, "");
  EXPECT_TRUE(uncached.compile(tiny_unit()).ok);
}

TEST(KernelCompile, PtxasReportIsParsed) {
  const auto r = parse_ptxas_report(
      "ptxas info    : 91 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z1kv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1kv\n"
      "ptxas         .     16 bytes stack frame, 24 bytes spill stores, 20 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 16 bytes smem, 16 bytes cumulative stack size\n"
      "ptxas info    : Compiling entry function '_Z2k2v' for 'sm_90a'\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers\n");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].kernel, "_Z1kv");
  EXPECT_EQ(r[0].registers, 255);
  EXPECT_EQ(r[0].stack_bytes, 16);
  EXPECT_EQ(r[0].spill_store_bytes, 24);
  EXPECT_EQ(r[0].spill_load_bytes, 20);
  EXPECT_EQ(r[0].static_smem_bytes, 16);
  EXPECT_EQ(r[0].barriers, 1);
  EXPECT_EQ(r[1].registers, 40);
  EXPECT_EQ(r[1].spill_store_bytes, 0);
}

TEST(KernelCompile, BuildHashAndCacheDir) {
  const std::string h = kernel_build_hash();
  EXPECT_EQ(h.size(), 16u);
  EXPECT_EQ(h, kernel_build_hash());
  EXPECT_EQ(variant_choice_digest().size(), 64u);
  EXPECT_EQ(variant_choice_digest(), variant_choice_digest());
  EXPECT_EQ(arch_for_cc(90), "sm_90a");
  EXPECT_EQ(arch_for_cc(80), "sm_80");
  ::setenv("EVODISPATCH_CACHE_DIR", "/tmp/evo-x", 1);
  EXPECT_EQ(default_cache_dir(), fs::path("/tmp/evo-x"));
  ::unsetenv("EVODISPATCH_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(default_cache_dir(), fs::path("/tmp/xdg/evodispatch/cubin"));
  ::unsetenv("XDG_CACHE_HOME");
}
