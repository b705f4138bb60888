// Every knob value class against the float32 reference on odd sizes (issue 3's list):
// batch 3, 13; seqlen_k 1, 7, 97, 1000, 4099 and mixed per request; page sizes 1, 3, 16,
// 256; qpk 1, 3, 7, 8, 16 and Hq=28/Hkv=4, Hq=71/Hkv=1; num_splits above nblk and many
// splits over few rows; sm_margin 0 and 100; Lq 1, 4, 16; bf16 and fp16; head_dim 64, 128,
// 256; an fp8 KV cache with per-head and per-tensor descales under bf16 and fp16 queries.
// Rows of a contiguous cache past a request's length are NaN (DecodeBuffers).
// Check only (no timing), so the sweep stays well under a minute once the kernels are
// compiled.
#include <cstdlib>
#include <sstream>
#include <tuple>

#include "gpu_support.hpp"

namespace evodispatch::gputest {
namespace {

struct SweepCase {
  std::string name;
  MeasureCase c;
  Decision d;
};
// The test's name says it all: no byte dump of the parameter in listings.
void PrintTo(const SweepCase& c, std::ostream* os) { *os << c.name; }

Decision dec(int splits, std::optional<bool> pack = std::nullopt, int margin = 0) { return Decision{splits, pack, margin}; }

std::vector<SweepCase> sweep_cases() {
  std::vector<SweepCase> v;
  auto add = [&](const std::string& cls, const Shape& s, const Decision& d, std::vector<int> lens = {},
                 bool per_tensor = false, bool spread = false) {
    std::ostringstream n;
    n << cls << "_b" << s.batch << "_lq" << s.seqlen_q << "_lk" << s.seqlen_k << "_h" << s.h_q << "x" << s.h_kv << "_d"
      << s.head_dim << "_" << to_string(s.dtype) << "_p" << s.page_size << "_s" << d.num_splits << "_pk"
      << (d.pack_gqa ? (*d.pack_gqa ? "1" : "0") : "a") << "_m" << d.sm_margin << (s.causal ? "" : "_nc")
      << (s.dtype == Dtype::fp8 ? "_q" + std::string(to_string(s.q_dtype)) : "") << (per_tensor ? "_pt" : "")
      << (spread ? "_spreadq" : "");
    // A case listed under two classes is checked once per process: keep the first.
    for (const auto& o : v)
      if (o.c.shape == s && o.c.seqlens == lens && o.c.per_tensor_descale == per_tensor &&
          o.c.spread_query_rows == spread && resolve(o.d, s) == resolve(d, s))
        return;
    v.push_back({n.str(), MeasureCase{s, std::move(lens), per_tensor, spread}, d});
  };
  for (int b : {3, 13})
    for (int sp : {1, 4}) add("batch", S().b(b).lk(1000), dec(sp));
  for (int lk : {1, 7, 97, 1000, 4099})
    for (int sp : {1, 5}) add("seqlen", S().lk(lk), dec(sp));
  const std::vector<int> mixed = {1, 4099, 7, 97, 1000, 128, 129, 2048, 3, 4000, 64, 500, 2};
  for (int page : {0, 16})
    for (int sp : {1, 7}) add("mixed", S().b(13).lk(4099).page(page), dec(sp), mixed);
  add("mixed_lq4", S().b(13).lq(4).lk(4099).page(3), dec(3), mixed);
  for (int page : {1, 3, 16, 256})
    for (int lk : {97, 1000})
      for (int sp : {1, 3}) add("page", S().lk(lk).page(page), dec(sp));
  for (int qpk : {1, 3, 7, 8, 16})
    for (bool pack : {true, false})
      for (int lq : {1, 4}) add("qpk", S().heads(2 * qpk, 2).lq(lq).lk(300), dec(2, pack));
  for (auto [hq, hkv] : {std::pair{28, 4}, std::pair{71, 1}})
    for (bool pack : {true, false})
      for (int sp : {1, 3}) add("gqa", S().heads(hq, hkv).lk(1000), dec(sp, pack));
  // nblk = 1 at Lk = 97 and 8 at Lk = 1000 (128-row split blocks): empty splits.
  for (int sp : {2, 256}) add("splits", S().lk(97), dec(sp));
  for (int sp : {13, 64}) add("splits", S().lk(1000), dec(sp));
  add("splits", S().lk(1000).page(16), dec(64));
  add("splits", S().lk(1000).d(256), dec(17));
  // Many splits over few rows: the combine's split lanes (combine_split_lanes), each lane
  // merging one to three loads of 8 splits; empty splits and Lq > 1 among them.
  for (int d : {64, 128, 256}) add("lanes", S().b(1).heads(4, 1).d(d).lk(20000), dec(96));
  add("lanes", S().fp16().b(1).heads(4, 1).lk(100000), dec(256));
  add("lanes", S().b(13).lq(4).heads(8, 1).lk(4099), dec(33), mixed);
  add("lanes", S().fp8().b(1).heads(16, 1).d(64).lk(16383).page(16), dec(48));
  for (int margin : {0, 100, 131})
    for (int sp : {1, 8}) add("margin", S().b(13).lk(1000), dec(sp, std::nullopt, margin));
  for (int lq : {1, 4, 16})
    for (int qpk : {1, 8})
      for (int sp : {1, 3}) add("lq", S().lq(lq).heads(2 * qpk, 2).lk(500), dec(sp));
  add("lq", S().lq(16).lk(7), dec(1));  // more new tokens than keys: early rows see nothing
  add("lq", S().lq(16).lk(7), dec(4));
  add("lq", S().lq(4).lk(200).noncausal(), dec(2));
  // Two to three CTAs per SM: the dense variant (272 packed items, or 264 on 128 SMs).
  add("dense", S().b(34).heads(64, 8).lk(1000), dec(1));
  add("dense", S().b(17).heads(64, 8).lk(1000), dec(2));
  {
    std::vector<int> lens;
    for (int i = 0; i < 34; ++i) lens.push_back(1 + (i * 977) % 4099);
    add("dense", S().fp16().b(34).heads(64, 8).lk(4099), dec(1), lens);
  }
  add("dense", S().b(34).heads(8, 8).lk(97), dec(1));
  add("dense", S().b(33).heads(64, 8).lk(1000), dec(1, std::nullopt, 4));
  for (int d : {64, 128, 256})
    for (int page : {0, 16})
      for (int sp : {1, 4}) add("fp16", S().fp16().d(d).lk(1000).page(page), dec(sp));
  for (int d : {64, 256})
    for (int page : {0, 16})
      for (int sp : {1, 4}) add("bf16", S().d(d).lk(1000).page(page), dec(sp));
  // Few items over short splits (few_items_d128_spec): 64-key tiles in four stages where a
  // split's last 128 keys are at most half present; mixed lengths, Lq > 1, fp16.
  add("few", S().b(40).heads(16, 2).lk(150), dec(1));  // 80 items of 150 keys
  {
    std::vector<int> lens;
    for (int i = 0; i < 40; ++i) lens.push_back(1 + (i * 97) % 300);
    add("few", S().b(40).heads(16, 2).lk(300), dec(1), lens);  // 80 items of up to five 64-key tiles
  }
  add("few", S().b(20).lq(4).heads(8, 2).lk(170), dec(1));  // 16 rows of 4 tokens
  add("few", S().fp16().b(20).heads(16, 4).lk(140), dec(1));
  add("few", S().b(10).heads(16, 2).lk(1000), dec(3));  // three blocks a split: 128-key tiles
  // K and V apart (kv_apart_pays, on 132 SMs): splits of at most two 64-key tiles, and one to
  // one and a half items per SM; mixed lengths, Lq > 1, fp16, a strided grid, split calls.
  add("kvapart", S().b(150).heads(12, 1).lk(216), dec(1));  // 150 items: the dense tiles
  add("kvapart", S().b(113).heads(3, 1).lk(128), dec(1));   // one split of two tiles
  {
    std::vector<int> lens;
    for (int i = 0; i < 140; ++i) lens.push_back(1 + (i * 389) % 700);
    add("kvapart", S().b(140).heads(8, 1).lk(700), dec(1), lens);
  }
  add("kvapart", S().b(70).lq(4).heads(8, 2).lk(300), dec(1));  // 16 rows of 4 tokens
  add("kvapart", S().fp16().b(256).heads(8, 1).lk(64), dec(1));
  add("kvapart", S().b(61).heads(32, 8).lk(125), dec(1));  // 488 items: a persistent grid (a fast DRAM: the sixes)
  add("kvapart", S().b(1).heads(24, 8).lk(10608), dec(24));  // 192 items through the splits
  // Requests shorter than a K/V tile, over caches whose rows past the lengths are NaN
  // (DecodeBuffers::poison_past_lengths): one-tile items with K and V apart, 128-key tiles,
  // the two-warp 32-key tiles, fp8, D = 256 and D = 64, with split calls.
  {
    std::vector<int> lens;
    for (int i = 0; i < 9; ++i) lens.push_back(1 + i * 7);  // 1 .. 57 keys
    add("early", S().b(9).heads(64, 8).lk(64), dec(1), lens);
    add("early", S().b(9).heads(64, 8).lk(128), dec(1), lens);
    add("early", S().fp8().b(9).heads(32, 8).lk(100), dec(2), lens);
    add("early", S().fp16().b(9).heads(16, 2).d(256).lk(100), dec(1), lens);
    add("early", S().b(9).lq(2).heads(16, 2).d(64).lk(300), dec(3), lens);
    std::vector<int> many;
    for (int i = 0; i < 60; ++i) many.push_back(1 + (i * 13) % 100);
    add("early", S().b(60).heads(32, 8).lk(100), dec(1), many);  // 480 items
  }
  // Groups of two 16-row tiles on a fast DRAM (paired_rows_spec): the 128-key tiles up to one
  // item per SM, the 64-key ones past it; mixed lengths, fp16, paged, four tokens.
  add("paired", S().b(8).heads(64, 2).lk(4096), dec(4));  // 128 items
  {
    std::vector<int> lens;
    for (int i = 0; i < 8; ++i) lens.push_back(1 + (i * 571) % 2000);
    add("paired", S().fp16().b(8).heads(48, 2).lk(2000), dec(8), lens);  // 256 items of two blocks
    add("paired", S().b(8).heads(64, 2).lk(2000).page(16), dec(4), lens);
    add("paired", S().b(8).lq(4).heads(64, 8).lk(2000).page(1), dec(1), lens);  // 8 x 4 rows
  }
  // Splits merged in their clusters (cluster_merge_pays, Hopper): each of the six tilings,
  // empty splits, mixed lengths, Lq > 1, fp16, unpacked, pages of 1 and 16.
  add("cluster", S().b(4).heads(8, 1).lk(68), dec(4));  // three of four splits empty
  {
    std::vector<int> lens;
    for (int i = 0; i < 6; ++i) lens.push_back(1 + (i * 331) % 1024);
    add("cluster", S().b(6).heads(8, 1).lk(1024), dec(4), lens);
  }
  add("cluster", S().b(6).lq(4).heads(8, 2).lk(300), dec(2));
  add("cluster", S().fp16().b(4).heads(16, 4).lk(500), dec(2));
  add("cluster", S().b(1).heads(12, 4).lk(250), dec(3, false));
  add("cluster", S().b(25).heads(8, 1).lk(214), dec(4));  // 64-key tiles, K and V apart
  {
    std::vector<int> lens;
    for (int i = 0; i < 79; ++i) lens.push_back(1 + (i * 53) % 189);
    add("cluster", S().b(79).heads(5, 1).lk(189), dec(2), lens);  // the three-CTA tiles
  }
  add("cluster", S().b(3).heads(12, 4).lk(500), dec(3, false));  // 64-key tiles, three stages
  add("cluster", S().lq(16).lk(7), dec(4, false));  // more new tokens than keys: early rows see nothing
  {
    std::vector<int> lens;
    for (int i = 0; i < 6; ++i) lens.push_back(1 + (i * 331) % 1024);
    add("cluster", S().b(6).heads(8, 1).lk(1024).page(16), dec(4), lens);  // paged, 128-key tiles
  }
  add("cluster", S().b(4).lq(2).heads(16, 4).lk(300).page(1), dec(2));  // pages of one key
  add("cluster", S().b(25).heads(8, 1).lk(214).page(16), dec(3));       // paged, 64-key tiles
  // Long packed groups (kernel_spec.cpp, long_group_spec): every tiling, each dtype and KV
  // layout, mixed lengths and Lq > 1.
  add("long", S().b(77).heads(71, 1).d(64).lk(1500), dec(1));        // m32n128, D = 64
  add("long", S().b(256).heads(71, 1).d(64).lk(100), dec(1));        // m32n64, D = 64
  add("long", S().b(256).heads(48, 1).lk(100), dec(1));              // m64n64 w4x1
  add("long", S().b(77).heads(64, 2).lk(1500), dec(1));              // m32n64, D = 128
  add("long", S().heads(64, 1).lk(100000), dec(64));                 // m32n128, D = 128
  add("long", S().b(76).heads(48, 1).lk(1396), dec(3));              // m64n64 w4x1, two per SM
  add("long", S().fp16().b(13).heads(40, 1).lk(4099), dec(11), mixed);  // the same, fp16, mixed
  add("long", S().fp8().b(76).heads(48, 1).lk(1396).page(16), dec(3));   // the same, fp8, paged
  add("long", S().fp8(Dtype::fp16).b(70).heads(56, 1).lk(700), dec(2));  // fp8, fp16 queries
  add("long", S().b(13).heads(64, 1).lk(4099).page(1), dec(11), mixed);  // paged, mixed
  add("long", S().b(13).heads(71, 1).d(64).lk(4099), dec(7), mixed);  // m32n128, mixed lengths
  add("long", S().b(40).lq(4).heads(32, 4).lk(97), dec(1));          // 32 rows of 4 tokens
  add("long", S().fp16().b(256).heads(48, 1).lk(100).page(3), dec(1));
  add("long", S().b(104).heads(71, 1).d(64).lk(300), dec(1));       // m16n64w1x2s3
  add("long", S().fp16().b(150).heads(71, 1).d(64).lk(1000), dec(1));  // m16n64w1x2s2, six per SM
  add("long", S().b(13).heads(71, 1).d(64).lk(4099), dec(10), mixed);  // six per SM, mixed lengths
  add("long", S().fp8().b(77).heads(71, 1).d(64).lk(1500).page(16), dec(1));
  // Over a paged 16-bit cache: one 128-row tile (m128n128w8x1s4), and the two-warp tiles
  // over splits of one block.
  add("long", S().b(44).heads(71, 1).d(64).lk(3000).page(16), dec(3));
  add("long", S().fp16().b(13).heads(71, 1).d(64).lk(4099).page(1), dec(8), mixed);
  add("long", S().b(136).heads(71, 1).d(64).lk(122).page(16), dec(1));         // m16n64w1x2s2
  add("long", S().fp16().b(150).heads(71, 1).d(64).lk(120).page(3), dec(1));   // the same, fp16
  add("long", S().fp8(Dtype::fp16).b(77).heads(64, 2).lk(1500), dec(2));
  add("long", S().fp8().b(256).heads(48, 1).lk(100), dec(1), {}, true);
  // Head dim 128 past three items per SM (many_items_d128_spec): two-warp CTAs over 32-key
  // tiles, six per SM in two stages or four in three; mixed lengths, Lq > 1, fp16.
  add("d128many", S().b(60).heads(32, 8).lk(2000), dec(1));              // 480 items: six
  add("d128many", S().b(107).heads(16, 8).lk(325), dec(1));              // 856: four
  {
    std::vector<int> lens;
    for (int i = 0; i < 100; ++i) lens.push_back(1 + (i * 977) % 4099);
    add("d128many", S().fp16().b(100).heads(32, 8).lk(4099), dec(1), lens);  // 800: four
  }
  add("d128many", S().b(52).lq(4).heads(32, 8).lk(500), dec(2));         // 832 through the splits: four
  add("d128many", S().fp16().b(211).heads(32, 2).lk(159), dec(1));       // 422, one block and a bit
  {
    std::vector<int> lens;  // splits of one block: the sixes on a fast DRAM
    for (int i = 0; i < 150; ++i) lens.push_back(2 + (i * 37) % 127);
    add("d128many", S().b(150).lq(2).heads(16, 4).lk(128), dec(1), lens);  // 600 items
  }
  add("d128many", S().fp8(Dtype::fp16).b(80).heads(40, 8).lk(600), dec(1), {}, true);  // fp8, 640: six
  // fp8 from six items per SM: one-warp CTAs, ten per SM in two stages or seven in three
  // (on 132 SMs); mixed lengths, Lq > 1.
  add("d128many", S().fp8().b(107).heads(16, 8).lk(325), dec(1));        // 856: ten
  {
    std::vector<int> lens;
    for (int i = 0; i < 200; ++i) lens.push_back(1 + (i * 389) % 700);
    add("d128many", S().fp8().b(200).heads(64, 8).lk(700), dec(1), lens);  // 1600: seven
  }
  add("d128many", S().fp8(Dtype::fp16).b(100).lq(2).heads(32, 8).lk(500), dec(1), {}, true);  // 800: ten
  // fp8 over one block too (an fp8 block is half the bytes): fours, tens, Lq > 1.
  add("d128many", S().fp8().b(60).heads(64, 8).lk(100), dec(1));                   // 480: four
  add("d128many", S().fp8(Dtype::fp16).b(150).heads(40, 8).lk(64), dec(1), {}, true);  // 1200: ten
  add("d128many", S().fp8().b(50).lq(2).heads(32, 8).lk(97), dec(1));             // 400: four
  // Head dim 64 with more items than SMs (d64_16bit_spec, many_items_d64_spec): two-warp
  // three-stage tiles up to three per SM (contiguous), 64-row three-stage and three-CTA ones
  // (paged), fp8 in four stages; mixed lengths, Lq > 1.
  add("d64many", S().b(40).heads(32, 8).d(64).lk(1000), dec(1));         // 320 items: two-warp
  add("d64many", S().fp16().b(20).heads(32, 8).d(64).lk(1000), dec(1));  // 160: two-warp
  add("d64many", S().b(40).heads(32, 8).d(64).lk(200), dec(1));          // two blocks: two-warp
  add("d64many", S().b(188).heads(32, 8).d(64).lk(300), dec(1));  // 1504: three CTAs (no one-warp round fills)
  add("d64many", S().b(13).lq(4).heads(32, 8).d(64).lk(4099), dec(16), mixed);
  add("d64many", S().fp8().b(40).heads(32, 8).d(64).lk(1000), dec(1));
  {
    std::vector<int> lens;
    for (int i = 0; i < 30; ++i) lens.push_back(2 + (i * 613) % 2000);
    add("d64many", S().fp16().b(30).lq(2).heads(32, 8).d(64).lk(2000), dec(1), lens);  // 240: two-warp, three stages
  }
  add("d64many", S().b(25).heads(32, 8).d(64).lk(1000).page(16), dec(1));  // 200 paged: four warps
  add("d64many", S().fp8(Dtype::fp16).b(13).heads(32, 8).d(64).lk(4099), dec(3), mixed, true);
  // fp8 over one or two blocks past two items per SM: two-warp tiles, six or four per SM.
  add("d64many", S().fp8().b(40).heads(32, 8).d(64).lk(97), dec(1));              // 320, one block
  add("d64many", S().fp8(Dtype::fp16).b(40).lq(4).heads(32, 8).d(64).lk(200), dec(1), {}, true);  // two
  add("d64many", S().fp8().b(9).heads(32, 8).d(64).lk(1000), dec(4));             // 288 through the splits
  // From five items per SM (16-bit) or six (fp8): one-warp CTAs, eleven per SM in two stages
  // or eight in three (16-bit; the mixed case above runs 1664 items in eights), fourteen in
  // three or sixteen in two (fp8).
  add("d64many", S().b(100).heads(32, 8).d(64).lk(300), dec(1));  // 800: eleven
  add("d64many", S().fp8().b(100).heads(32, 8).d(64).lk(300), dec(1));  // 800: fourteen
  {
    std::vector<int> lens;
    for (int i = 0; i < 150; ++i) lens.push_back(1 + (i * 263) % 700);
    add("d64many", S().fp8(Dtype::fp16).b(150).lq(2).heads(32, 8).d(64).lk(700), dec(1), lens, true);  // 1200: sixteen
  }
  // D = 256 over a 16-bit cache past one item per SM (many_items_d256_spec): two-warp 32-key
  // tiles, two per SM in three stages or three in two; mixed lengths, Lq > 1, fp16, a
  // persistent grid.
  add("d256many", S().b(19).heads(8, 8).d(256).lk(203), dec(1));                 // 152 items: twos
  add("d256many", S().fp16().b(40).lq(2).heads(16, 8).d(256).lk(700), dec(1));  // 320: threes
  add("d256many", S().b(13).heads(16, 8).d(256).lk(4099), dec(3), mixed);        // 312 through the splits
  add("d256many", S().b(136).heads(8, 8).d(256).lk(72), dec(1));                 // 1088 over 396 CTAs
  add("d256many", S().b(52).heads(4, 4).d(256).lk(71).page(16), dec(1));         // paged, 208: twos
  add("d256many", S().fp16().b(40).heads(8, 4).d(256).lk(700).page(3), dec(2));  // paged, 320: threes
  // D = 256 fp8 past two items per SM: two-warp tiles, four per SM; mixed lengths.
  add("d256many", S().fp8().b(13).heads(16, 8).d(256).lk(4099), dec(3), mixed, true);
  add("d256many", S().fp8().b(40).lq(2).heads(8, 8).d(256).lk(700), dec(1));
  // fp8 KV: every variant family (D 64/128/256, m16/m64, latency, dense, paged), splits,
  // mixed lengths, Lq > 1, both descale layouts and both query dtypes.
  for (int d : {64, 128, 256})
    for (int page : {0, 16})
      for (int sp : {1, 4}) add("fp8", S().fp8().d(d).lk(1000).page(page), dec(sp));
  add("fp8", S().fp8(Dtype::fp16).d(128).lk(1000), dec(3));
  add("fp8", S().fp8(Dtype::fp16).d(64).lk(1000).page(3), dec(1));
  add("fp8", S().fp8().b(2).heads(64, 1).lk(4099), dec(1), {}, true);  // m64, per tensor
  add("fp8", S().fp8().heads(71, 1).lk(1000), dec(2, false));
  add("fp8", S().fp8().b(34).heads(64, 8).lk(1000), dec(1));  // dense
  add("fp8", S().fp8(Dtype::fp16).b(34).heads(16, 8).d(256).lk(1000), dec(1));  // D = 256, two stages
  add("fp8", S().fp8().b(30).heads(32, 8).d(64).lk(1000), dec(1));  // D = 64, 64-row tiles, four stages
  add("fp8", S().fp8().b(13).lk(4099).page(16), dec(7), mixed, true);
  add("fp8", S().fp8().lq(4).heads(16, 2).lk(500), dec(3));
  add("fp8", S().fp8().b(13).lk(1000), dec(8, std::nullopt, 100));
  // bf16 queries of every magnitude over an fp8 cache (each row into fp16 by its own 2^e):
  // registers at D = 64 and 128, the shared Q tile at D = 256 (four- and two-warp, 64-row,
  // paged), and the 16-bit kernels beside them.
  for (int d : {64, 128, 256}) add("spreadq", S().fp8().heads(16, 2).d(d).lk(1000), dec(2), {}, false, true);
  add("spreadq", S().fp8().b(34).heads(16, 8).d(256).lk(1000), dec(1), {}, false, true);  // two-warp, 4 per SM
  for (int page : {0, 16})  // 64-row tiles (160 items of 16 rows), paged in bf16
    add("spreadq", S().fp8().b(40).heads(64, 1).d(256).lk(300).page(page), dec(1), {}, false, true);
  add("spreadq", S().fp8().b(5).heads(8, 2).d(256).lk(1000).page(16), dec(3), {}, true, true);
  add("spreadq", S().fp8().b(2).lq(4).heads(8, 2).d(256).lk(500), dec(1), {}, false, true);
  add("spreadq", S().heads(16, 2).d(256).lk(1000), dec(2), {}, false, true);
  return v;
}

class GpuSweep : public ::testing::TestWithParam<SweepCase> {};

TEST_P(GpuSweep, MatchesTheReference) {
  EVO_REQUIRE_GPU();
  const SweepCase& sc = GetParam();
  const Measurement m = gpu()->measure(sc.c, sc.d, check_only());
  EXPECT_TRUE(m.ok) << describe(sc.c.shape) << " " << describe(sc.d) << ": " << m.error;
  ASSERT_TRUE(m.rel_error.has_value()) << m.error;
  EXPECT_LT(*m.rel_error, output_tolerance(query_dtype(sc.c.shape)));
  RecordProperty("rel_error", std::to_string(*m.rel_error));
  if (m.plan.contains("gpu")) RecordProperty("kernel", m.plan["gpu"].value("decode_kernel", std::string()));
  ASSERT_FALSE(gpu()->unusable().has_value()) << *gpu()->unusable();
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuSweep, ::testing::ValuesIn(sweep_cases()),
                         [](const ::testing::TestParamInfo<SweepCase>& i) { return i.param.name; });

// The dense cases above run the three-CTA variant, three to an SM.
TEST(GpuRunner, TwoToThreeCtasPerSmRunAsOneWave) {
  EVO_REQUIRE_GPU();
  const Shape shape = S().b(34).heads(64, 8).lk(1000);
  const int sms = gpu()->device().num_sms;
  if (spec_for(shape, dec(1), sms).min_ctas_per_sm != 3) GTEST_SKIP() << "272 items are not 2..3 per SM on " << sms << " SMs";
  const Measurement m = gpu()->measure(MeasureCase{shape, {}}, dec(1), check_only());
  ASSERT_TRUE(m.ok) << m.error;
  const auto& g = m.plan.at("gpu");
  EXPECT_NE(g.at("decode_kernel").get<std::string>().find("_o3"), std::string::npos) << g.dump();
  EXPECT_EQ(g.at("decode_ctas_per_sm").get<int>(), 3) << g.dump();  // what the GPU grants
  EXPECT_EQ(g.at("decode_grid").get<int>(), 272) << g.dump();
}

// Many items: CTAs of one warp, ten on every SM over an fp8 cache at D = 128, sixteen at
// D = 64, eleven over a 16-bit cache at D = 64.
TEST(GpuRunner, OneWarpCtasFillEverySm) {
  EVO_REQUIRE_GPU();
  const int sms = gpu()->device().num_sms;
  int checked = 0;
  for (auto [d, fp8, ctas] : {std::tuple{128, true, 10}, {64, true, 16}, {64, false, 11}}) {
    const Shape shape = fp8 ? S().fp8().b(150).heads(24, 8).d(d).lk(200) : S().b(150).heads(24, 8).d(d).lk(200);  // 1200 items
    const KernelSpec k = spec_for(shape, dec(1), sms);
    if (k.warps() != 1 || k.min_ctas_per_sm != ctas) continue;  // not one round of them on this GPU
    ++checked;
    const Measurement m = gpu()->measure(MeasureCase{shape, {}}, dec(1), check_only());
    ASSERT_TRUE(m.ok) << m.error;
    const auto& g = m.plan.at("gpu");
    EXPECT_EQ(g.at("decode_kernel").get<std::string>(), k.name()) << g.dump();
    EXPECT_EQ(g.at("decode_ctas_per_sm").get<int>(), ctas) << g.dump();  // what the GPU grants
    EXPECT_EQ(g.at("decode_grid").get<int>(), 1200) << g.dump();
  }
  if (checked == 0) GTEST_SKIP() << "1200 items are not one round of one-warp CTAs on " << sms << " SMs";
}

// 16-bit items past one round at one CTA per SM (D = 256, contiguous or paged): a CTA per
// item, which the hardware hands out (hardware_scheduled_grid), checked against the
// reference; an fp8 cache past one round (of its four CTAs per SM) keeps the strided grid.
TEST(GpuRunner, SixteenBitItemsPastOneRoundGetACtaEach) {
  EVO_REQUIRE_GPU();
  const S wide = S().b(34).heads(16, 8).d(256).lk(600);  // 272 items
  int checked = 0;
  for (const Shape& shape : {Shape(wide), Shape(S(wide).page(64)), Shape(S(wide).fp8().b(80))}) {
    SCOPED_TRACE(describe(shape));
    const Measurement m = gpu()->measure(MeasureCase{shape, {}}, dec(1), check_only());
    ASSERT_TRUE(m.ok) << m.error;
    const auto& g = m.plan.at("gpu");
    const auto items = m.plan.at("work_items").get<std::int64_t>(), slots = m.plan.at("slots").get<std::int64_t>();
    if (items <= slots) continue;  // one round on this GPU
    ++checked;
    EXPECT_EQ(g.at("decode_grid").get<std::int64_t>(), shape.dtype == Dtype::fp8 ? slots : items) << g.dump();
  }
  if (checked < 3) GTEST_SKIP() << 3 - checked << " of the shapes fit one round on this GPU";
}

// On Hopper the short splits of few items merge in their clusters: the row says so, no
// combine kernel runs, and the grid is whole clusters.
TEST(GpuRunner, ShortSplitsMergeInTheirClusters) {
  EVO_REQUIRE_GPU();
  if (gpu()->gpu().cc < kClusterMinCc) GTEST_SKIP() << "no thread-block clusters before sm_90";
  const Shape shape = S().b(4).heads(8, 1).lk(300);
  const Measurement m = gpu()->measure(MeasureCase{shape, {}}, dec(3), check_only());
  ASSERT_TRUE(m.ok) << m.error;
  ASSERT_TRUE(m.rel_error.has_value());
  EXPECT_LT(*m.rel_error, output_tolerance(query_dtype(shape)));
  EXPECT_TRUE(m.plan.at("cluster_merge").get<bool>()) << m.plan.dump();
  const auto& g = m.plan.at("gpu");
  EXPECT_EQ(g.at("decode_cluster_ctas").get<int>(), 3) << g.dump();
  EXPECT_FALSE(g.contains("combine_kernel")) << g.dump();
  EXPECT_EQ(g.at("decode_grid").get<int>(), 12) << g.dump();
  EXPECT_NE(g.at("decode_kernel").get<std::string>().find("_cm"), std::string::npos) << g.dump();
}

// Forced (EVODISPATCH_DECODE_TILING), the merge takes up to kMaxClusterSplits splits, where
// every CTA merges a share of a row's chunks from eight; with the persistent grid forced too
// (EVODISPATCH_DECODE_GRID), 160 CTAs of one per SM stride 20 items as 16 clusters or fewer.
TEST(GpuRunner, AForcedClusterMergeRunsEightSplits) {
  EVO_REQUIRE_GPU();
  if (gpu()->gpu().cc < kClusterMinCc) GTEST_SKIP() << "no thread-block clusters before sm_90";
  ::setenv("EVODISPATCH_DECODE_TILING", "m16n128w1x4s3c", 1);
  CudaEvaluator forced(0);
  ::setenv("EVODISPATCH_DECODE_GRID", "strided", 1);
  CudaEvaluator strided(0);
  ::unsetenv("EVODISPATCH_DECODE_GRID");
  ::unsetenv("EVODISPATCH_DECODE_TILING");
  std::vector<int> lens;
  for (int i = 0; i < 5; ++i) lens.push_back(1 + (i * 877) % 3000);  // some requests under eight blocks
  const Shape shape = S().b(5).lq(2).heads(12, 4).lk(3000);
  const Measurement looped = strided.measure(MeasureCase{shape, lens}, dec(8), check_only());
  ASSERT_TRUE(looped.ok) << looped.error;
  EXPECT_LT(*looped.rel_error, output_tolerance(query_dtype(shape)));
  const auto grid = looped.plan.at("gpu").at("decode_grid").get<int>();
  EXPECT_EQ(grid % 8, 0);
  EXPECT_LT(grid, 160) << "a persistent grid of at most the slots";
  for (const Decision& d : {dec(8), dec(kMaxClusterSplits + 1)}) {
    const Measurement m = forced.measure(MeasureCase{shape, lens}, d, check_only());
    if (d.num_splits > kMaxClusterSplits) {
      EXPECT_FALSE(m.ok);
      EXPECT_NE(m.error.find("the cluster merge merges at most"), std::string::npos) << m.error;
      continue;
    }
    ASSERT_TRUE(m.ok) << m.error;
    ASSERT_TRUE(m.rel_error.has_value());
    EXPECT_LT(*m.rel_error, output_tolerance(query_dtype(shape)));
    EXPECT_EQ(m.plan.at("gpu").at("decode_cluster_ctas").get<int>(), 8) << m.plan.dump();
  }
}

// EVODISPATCH_DECODE_GRID forces a grid for a study: a value it does not know is an error
// naming it, a known one is part of the kernel build (its rows never mix with the rule's).
TEST(GpuRunner, AForcedGridIsPartOfTheKernelBuild) {
  EVO_REQUIRE_GPU();
  ::setenv("EVODISPATCH_DECODE_GRID", "persistent", 1);
  try {
    CudaEvaluator bogus(0);
    ADD_FAILURE() << "EVODISPATCH_DECODE_GRID=persistent accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("EVODISPATCH_DECODE_GRID"), std::string::npos) << e.what();
  }
  ::setenv("EVODISPATCH_DECODE_GRID", "strided", 1);
  const std::string forced = CudaEvaluator(0).kernel_build();
  ::unsetenv("EVODISPATCH_DECODE_GRID");
  EXPECT_EQ(forced, gpu()->kernel_build() + "+grid:strided");
}

TEST(GpuRunner, RejectsWhatItCannotRunAsRows) {
  EVO_REQUIRE_GPU();
  Measurement m = gpu()->measure(S().d(96), dec(1), check_only());
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("head_dim 96"), std::string::npos) << m.error;
  m = gpu()->measure(S(), dec(300), check_only());
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("num_splits"), std::string::npos) << m.error;
  m = gpu()->measure(S(), dec(1, std::nullopt, gpu()->device().num_sms), check_only());
  EXPECT_FALSE(m.ok);
  m = gpu()->measure(MeasureCase{S(), {1, 2}}, dec(1), check_only());  // 2 lengths for a batch of 3
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("seqlens"), std::string::npos) << m.error;
  m = gpu()->measure(MeasureCase{S(), {1, 2, 98}}, dec(1), check_only());  // past seqlen_k
  EXPECT_FALSE(m.ok);
  EXPECT_FALSE(gpu()->unusable().has_value());
  // Still measures after all that.
  EXPECT_TRUE(gpu()->measure(S(), dec(2), check_only()).ok);
}

}  // namespace
}  // namespace evodispatch::gputest
