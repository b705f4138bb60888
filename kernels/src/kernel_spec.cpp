#include <evodispatch/kernels/kernel_spec.hpp>

#include <algorithm>
#include <climits>
#include <cctype>
#include <cmath>
#include <optional>

#include <evodispatch/kernels/plan.hpp>

namespace evodispatch {

namespace {

int dtype_id(Dtype d) { return d == Dtype::fp16 ? kDtypeFp16 : kDtypeBf16; }

bool supported_head_dim(int d) { return d == 64 || d == 128 || d == 256; }

// The decode tiling. Measured on an H100 (bf16, D = 128): three stages of 64-row tiles
// (~100 KiB) let two CTAs share an SM, so one streams while the other is in its prologue
// or epilogue: 194 us instead of 239 us for B=17 x 8 KV heads x 8K keys (136 CTAs on 132
// SMs). When every CTA has an SM to itself the per-tile latency dominates instead, and
// 128-row tiles (half the tiles, 1 CTA per SM) win: 7.2 us instead of 8.5 us for B=1,
// Lk=512, 64 query heads unpacked. `latency` picks the latter at D = 128 (D = 64 gets
// 128-row tiles and two CTAs anyway; at D = 256 a warp needs 64-row tiles to have 16 keys).
// The 64-row variants use 256 threads of ~230 registers, one CTA per SM whatever the
// tile, so they always stream 128-row tiles where the split block allows.
KernelSpec decode_spec(int head_dim, Dtype dtype, bool fp8_kv, bool paged, int block_m, bool latency,
                       bool dense = false) {
  KernelSpec s;
  s.kind = KernelKind::decode;
  s.head_dim = head_dim;
  s.dtype = dtype;
  s.fp8_kv = fp8_kv;
  s.paged = paged;
  s.block_m = block_m;
  s.block_n = head_dim == 256 ? 64 : head_dim == 64 || latency || block_m > 16 ? 128 : 64;
  s.warps_m = block_m / 16;
  s.warps_n = block_m == 16 ? 4 : 2;  // the warps of a row tile split each K/V tile's keys
  s.stages = 3;
  if (dense) {
    // Three CTAs per SM: two stages of 64-row tiles (~69 KiB) and at most 168 registers.
    // For grids of 2..3 CTAs per SM, which the two-CTA variant runs as a full wave plus a
    // tail: on an H100, B=34 x 8 KV heads x 8K keys (272 CTAs) at 1 split.
    s.block_n = 64;
    s.stages = 2;
    s.min_ctas_per_sm = 3;
  }
  return s;
}

KernelSpec combine_spec(int head_dim, Dtype dtype) {
  KernelSpec s;
  s.kind = KernelKind::combine;
  s.head_dim = head_dim;
  s.dtype = dtype;
  return s;
}

}  // namespace

int KernelSpec::warps() const { return kind == KernelKind::decode ? warps_m * warps_n : kCombineThreads / 32; }

int KernelSpec::threads() const { return 32 * warps(); }

int KernelSpec::smem_bytes() const {
  if (kind == KernelKind::combine) return 0;
  return decode_smem_layout(head_dim, block_m, block_n, warps_n, stages, paged, fp8_kv ? 1 : 2).total;
}

int KernelSpec::max_registers() const {
  if (kind != KernelKind::decode || min_ctas_per_sm <= 1) return 255;
  // 64K registers per SM, allocated per warp in units of 256 (8 per thread).
  return std::min(255, 65536 / (threads() * min_ctas_per_sm) / 8 * 8);
}

int KernelSpec::rows_per_cta() const {
  if (kind == KernelKind::combine) return kCombineThreads / (head_dim / 8);
  return block_m;
}

std::string KernelSpec::name() const {
  const std::string d = "d" + std::to_string(head_dim) + "_" + std::string(to_string(dtype));
  if (kind == KernelKind::combine) return "combine_" + d;
  return "decode_" + d + (fp8_kv ? "_fp8kv" : "") + (paged ? "_paged" : "_contig") + "_m" +
         std::to_string(block_m) + "n" + std::to_string(block_n) + "_w" + std::to_string(warps_m) + "x" +
         std::to_string(warps_n) + "_s" + std::to_string(stages) +
         (min_ctas_per_sm > 1 ? "_o" + std::to_string(min_ctas_per_sm) : "") + (kv_apart ? "_kva" : "") +
         (cluster_merge ? "_cm" : "");
}

std::string KernelSpec::kernel_expression() const {
  const std::string dt = std::to_string(dtype_id(dtype));
  if (kind == KernelKind::combine)
    return "evodispatch::dev::combine_kernel<" + std::to_string(head_dim) + ", " + dt + ">";
  auto b = [](bool v) { return v ? std::string("true") : std::string("false"); };
  return "evodispatch::dev::decode_kernel<" + std::to_string(head_dim) + ", " + dt + ", " + b(fp8_kv) + ", " +
         b(paged) + ", " +
         std::to_string(block_m) + ", " + std::to_string(block_n) + ", " +
         std::to_string(warps_m) + ", " + std::to_string(warps_n) + ", " + std::to_string(stages) + ", " +
         std::to_string(min_ctas_per_sm) + ", " + b(kv_apart) + ", " + b(cluster_merge) + ">";
}

std::string KernelSpec::source() const {
  return kind == KernelKind::combine ? "#include \"combine.cuh\"\n" : "#include \"decode.cuh\"\n";
}

std::vector<std::string> KernelSpec::nvrtc_options(std::string_view arch) const {
  return {
      "--gpu-architecture=" + std::string(arch),
      "-std=c++17",
      // Registers, spills, stack and shared memory land in the program log (ResourceReport).
      "--ptxas-options=-v",
      // Source lines in the cubin for profilers; no effect on the code generated.
      "-lineinfo",
  };
}

std::string spec_error(const KernelSpec& s) {
  if (!supported_head_dim(s.head_dim)) return "head_dim " + std::to_string(s.head_dim) + " is not 64, 128 or 256";
  if (s.dtype != Dtype::bf16 && s.dtype != Dtype::fp16)
    return "dtype " + std::string(to_string(s.dtype)) + " is not a query dtype (bf16, fp16; fp8 is fp8_kv)";
  if (s.kind == KernelKind::combine) {
    if (s.cluster_merge) return "the combine kernel has no splits to merge in a cluster";
    return s.fp8_kv ? "the combine kernel reads no KV cache" : "";
  }
  if (s.warps_m < 1 || s.warps_n < 1 || s.warps() > 16) return "warps must be 1..16";
  if (s.block_m != 16 * s.warps_m) return "block_m must be 16 * warps_m";
  if (s.block_n < 16 || builtin_block_n(s.head_dim) % s.block_n != 0)
    return "block_n must divide the split granularity " + std::to_string(builtin_block_n(s.head_dim));
  if (s.block_n % (16 * s.warps_n) != 0) return "block_n must be a multiple of 16 * warps_n";
  if (s.stages < 2 || s.stages > 8) return "stages must be 2..8";
  if (s.min_ctas_per_sm < 1 || s.min_ctas_per_sm > 16) return "min_ctas_per_sm must be 1..16";
  if (const SmLimits hopper = sm_limits(90);
      s.min_ctas_per_sm * (s.smem_bytes() + hopper.smem_reserved_per_cta) > hopper.smem_bytes_per_sm)
    return std::to_string(s.min_ctas_per_sm) + " CTAs of " + std::to_string(s.smem_bytes()) +
           " bytes of shared memory do not fit one SM's " + std::to_string(hopper.smem_bytes_per_sm / 1024) + " KiB";
  const int chunks = s.head_dim * (s.fp8_kv ? 1 : 2) / 16;  // 16-byte chunks per stored K/V row
  if (s.threads() % chunks != 0 || s.block_n % (s.threads() / chunks) != 0)
    return "threads must load whole K/V rows";
  if (s.smem_bytes() > 227 * 1024)
    return "needs " + std::to_string(s.smem_bytes()) + " bytes of shared memory, more than 227 KiB";
  return "";
}

namespace {
void check_supported(const Shape& shape) {
  if (!supported_head_dim(shape.head_dim))
    throw InputError("shape.head_dim: no kernel for " + std::to_string(shape.head_dim) + " (64, 128, 256)");
}

KernelSpec decode_spec(const Shape& shape, int block_m, bool latency, bool dense = false) {
  return decode_spec(shape.head_dim, query_dtype(shape), shape.dtype == Dtype::fp8, shape.page_size > 0, block_m,
                     latency, dense);
}

// Split blocks (decode_split_block) per split: split s covers blocks [s * bps, (s + 1) * bps).
int blocks_per_split(const Shape& shape, const Decision& d) {
  return (features(shape).nblk + d.num_splits - 1) / d.num_splits;
}

// Keys of a request's first split, the longest: its blocks, capped by the cache.
int split_keys(const Shape& shape, const Decision& d) {
  return std::min(shape.seqlen_k, blocks_per_split(shape, d) * features(shape).block_n);
}

// The tilings of packed groups of more than 16 rows (D = 64 and 128): 32 rows over 2 x 2
// warps with 64- or 128-row K/V tiles, and, for splits of one block, 64 rows over 4 x 1
// warps (a warp scores the whole tile, so nothing is merged across warps).
KernelSpec packed_rows_spec(int head_dim, Dtype dtype, bool fp8_kv, bool paged, int block_m, int block_n) {
  KernelSpec s = decode_spec(head_dim, dtype, fp8_kv, paged, 16, false);
  s.block_m = block_m;
  s.block_n = block_n;
  s.warps_m = block_m / 16;
  s.warps_n = block_m == 32 ? 2 : 1;
  s.stages = block_m == 32 ? 3 : 2;
  return s;
}

// 16-row tiles of two warps (64 threads) at D = 64, 64-row K/V tiles: three stages (four
// CTAs per SM by shared memory), or two stages with six CTAs per SM.
KernelSpec two_warp_rows_spec(Dtype dtype, int stages, bool fp8_kv = false, bool paged = false) {
  KernelSpec s = decode_spec(64, dtype, fp8_kv, paged, 16, false);
  s.block_n = 64;
  s.warps_n = 2;
  s.stages = stages;
  s.min_ctas_per_sm = stages == 2 ? 6 : 1;
  return s;
}

// A packed group of 65-128 rows (Falcon-7B's 71 query heads over one KV head) in one 128-row
// tile over 8 x 1 warps, 128-key K/V tiles in four stages (150 KiB: one CTA per SM), at D = 64
// over a paged 16-bit cache: the group's KV is read once per split, where 32-row tiles read
// it three times (long_group_spec says when).
KernelSpec wide_group_spec(Dtype dtype) {
  KernelSpec s = packed_rows_spec(64, dtype, false, true, 128, 128);
  s.stages = 4;
  return s;
}

// D = 128: 16-row tiles of two warps over 32-key K/V tiles (64 threads), six CTAs per SM in
// two stages or four in three (many_items_d128_spec and long_group_spec say where).
KernelSpec two_warp_d128_spec(Dtype dtype, bool fp8_kv, bool six, bool paged = false) {
  KernelSpec s = decode_spec(128, dtype, fp8_kv, paged, 16, false);
  s.block_n = 32;
  s.warps_n = 2;
  s.stages = six ? 2 : 3;
  s.min_ctas_per_sm = six ? 6 : 4;
  return s;
}

// A packed group of more than 16 rows whose 16-row items overflow the SMs (spec_for below).
// Measured on an H100 on bench/gpu/packed-groups.json (docs/performance.md, "Long packed
// groups"), against the 64-row tiles this replaced where it departs from them:
//  * splits of one 128-key block (B = 256, Lk = 100): a CTA's fixed cost is all there is;
//    the tile with the fewer padded rows, 64 on a tie (fewer CTAs), with one warp per row
//    tile: Hq = 48 / Hkv = 1 12.8 us instead of 17.4, Hq = 71 / 1 (D = 64) 13.0 instead of 19.8;
//    except at D = 128 with no margin for 33-48 rows (StarCoder's 48 over one KV head), which
//    16-row tiles do not pad: what counts there is how many CTAs an SM runs. On an H200
//    (bench/gpu/short-mqa-ab.json under every tiling, docs/performance.md "On an H200
//    (thirty-fourth session)"), while the 16-row items fit two per SM, the four-warp 16-row
//    tiles: B=78 Lk=74 7.0 us instead of 8.5 (cuDNN 7.5); while the 64-row items fit one per
//    SM, 32-row tiles, two CTAs per request: B=126 Lk=85 8.6 instead of 9.0 (the fours, three
//    per SM: 8.5-9.1); then the two-warp fours while an SM runs at most twice the 64-row
//    tiles' CTAs: B=148 Lk=83 8.8 instead of 10.5 (cuDNN 10.2). An fp8 cache, whose 16-row
//    tiles run one CTA per SM, takes the fours from the start: B=62 Lk=80 7.3 instead of
//    9.2. On 32 fresh shapes (bench/gpu/short-mqa-fresh.json) against the build before:
//    0.893 of the time, none slower by more than 0.2%. Past that, while the 64-row tiles
//    hold the items in one wave (B = 177-264), the two-stage sixes where the split is three
//    32-key tiles (65-96 keys) against the 64-row tiles' two: B=214 Lk=93 10.3 us instead of
//    11.2 (cuDNN 10.9); over one 64-key tile, or four of 32, the 64-row tiles stay.
//    Where both need a second wave (B = 265-352), the fours: B=331 Lk=76 15.9 instead of
//    19.1. On 48 fresh shapes with fp8 and paged twins (bench/gpu/big-mqa-fresh.json): 0.941
//    of the time, the slowest 1.024 (B=266 Lk=111 over pages of 16);
//  * 64-row items that need a second wave (Falcon's 71 rows at B = 77, Lk = 1500: 154 items
//    on 132 SMs) or leave half the SMs idle (one request over 64 splits): 32-row tiles,
//    more CTAs: 19.6 us instead of 35.9, and 35.6 instead of 41.7 (Hq = 64 / 1, Lk = 100 000);
//    128-row K/V tiles while one CTA per SM holds the items (D = 128) or the splits are
//    long (D = 64, where two such CTAs fit an SM), 64-row ones otherwise;
//  * except at D = 128 with no margin for groups whose 64-row tiles pad no more rows than
//    32-row ones (33-64 rows: StarCoder's 48 over one KV head): 64 rows over 4 x 1 warps,
//    64-row K/V tiles in two stages (at most 82 KiB and 221 registers: two CTAs fit an SM,
//    and the grid takes the occupancy the GPU reports). They hold two waves of items where
//    the one-CTA 64-row tiles need a second wave, and read the group's KV once per item
//    where 32-row tiles read it twice for the same padding. On an H200 (bench/gpu/
//    mqa-d128.json under every tiling, docs/performance.md "On an H200 (thirtieth
//    session)"): B=76 Lk=1396 Hq=48 Hkv=1 over 3 splits 24.87 us instead of 29.55 (the best
//    before, 26.65 over 1 split; cuDNN 25.38), B=76 Lk=20000 191.0 instead of 244.2, B=130
//    Lk=1396 over 2 splits 35.4 instead of 43.1; over an fp8 cache 27.1 instead of 31.8 and
//    228.1 instead of 268.3, over pages of 16 28.8 instead of 36.5 and 252.0 instead of
//    335.8. Up to one item per SM the one-CTA 64-row tiles stay faster (B=20 Lk=30000 over
//    6 splits: 82.9 against 96.2);
//  * over an fp8 cache those 32-row tiles take 128-key K/V tiles wherever the splits hold
//    512 keys or more: 16 KiB per K or V tile, the bytes of a 16-bit 64-key one, and D = 64's
//    rule for its 128-byte rows. On an H200 (20-32 rows over one KV head, StarCoder's 24 at
//    two-way tensor parallelism among them, 40 over two, 96 over four; 24 fresh shapes, the
//    oracle's best against the build before, docs/performance.md "On an H200 (thirty-first
//    session)"): 0.964 of the time (0.865-1.010), over pages of 16 0.953;
//    B=147 Lk=5712 Hq=96 Hkv=4 246.4 us instead of 284.1, B=120 Lk=44244 Hq=24 Hkv=1 380.6
//    instead of 428.6 (bench/gpu/fp8-long-groups.json). Over splits of three blocks (384
//    keys) they lost (B=67 Lk=1145 Hq=24 over 4 splits 17.4 us against 16.9). A bf16 cache
//    keeps 64-key tiles (B=114 Lk=6250 Hq=24 Hkv=1 in 32-row tiles: 91.2 us over 64-key
//    tiles, 94.5 over 128);
//  * otherwise the 64-row tiles: one wave over more than half the SMs, long splits
//    (Hq = 48 / 1 at B = 77, Lk = 1500: 28.8 us against 32.4 in 32-row tiles).
// Before all of these, at D = 64 (16-bit, contiguous, no margin; bench/gpu/domain-misses.json,
// Falcon-7B's 71 rows at B = 33..200, Lk = 1000..8000, on an H100): when the 16-row items
// fill three to six small CTAs per SM in one wave, the two-warp 16-row tiles, which read
// the group's KV once per 16 rows but keep every SM's warps busy: B=104 Lk=2684 39.4 us
// instead of 49.1 (cuDNN 40.3), B=104 Lk=1000 18.7 instead of 24.4, B=150 Lk=2684 53.1
// instead of 57.8 (six per SM). Fewer per SM leave the SMs short of warps (B=64 Lk=1000,
// 320 items: 17.9 us against 15.0); more need a second wave of them.
// Over a paged 16-bit cache at D = 64 (an H200: 40 Falcon-7B shapes under every tiling, then
// fresh ones; docs/performance.md "On an H200 (thirty-second session)"):
//  * the two-warp tiles only over splits of one block, and only where the 32-row tiles that
//    such splits take (three CTAs per SM) would need a second wave: 8.6 us at B=136 Lk=122
//    (408 items of 32 rows) against 12.0, 6.7 at B=140 Lk=60 against 10.2, but 8.5 at B=120
//    Lk=100 (360) against 7.5. Over longer splits they lost up to 23% (B=12 Lk=4108: 19.4 us
//    against 15.8);
//  * where the splits are long, a paged group of 71 rows in 32-row tiles read its KV three
//    times where the contiguous cache's L2 caught the rereads (B=44 Lk=35071: 231 us paged,
//    168 contiguous). One 128-row tile (wide_group_spec) reads it once: 198 us, against
//    FA3's 179; B=105 Lk=102156 1371 against 1670. It pays from 512 keys per split while the
//    128-row items cover three quarters of the SMs (B=37 Lk=1872 over 3 splits, 111 items:
//    19.5 us against 19.9; over 48 items or 384-key splits it lost 2-24%). On 30 fresh
//    Falcon shapes over pages (bench/gpu/falcon-paged.json) both rules together take 0.920
//    of the time before (0.709-1.015). Over an fp8 cache the 128-row tile lost on three of
//    five paged shapes (by up to 4%).
KernelSpec long_group_spec(const Shape& shape, const Decision& d, int num_sms, std::int64_t sms) {
  const WorkDecomposition rows16 = decompose_work(shape, d, 16);
  const int rows = rows16.rows_per_group;
  const int block = features(shape).block_n;  // the split block (decode_split_block)
  const int keys = blocks_per_split(shape, d) * block;  // per split
  const bool paged = shape.page_size > 0, fp8 = shape.dtype == Dtype::fp8;
  const std::int64_t items32 = decompose_work(shape, d, 32).items, items64 = decompose_work(shape, d, 64).items;
  if (shape.head_dim == 64 && !fp8 && d.sm_margin == 0) {
    // Paged: only where the 32-row tiles that splits of one block take would need a second
    // wave of their three CTAs per SM.
    if (rows16.items > 3 * sms && rows16.items <= 6 * sms && (!paged || (keys <= block && items32 > 3 * sms)))
      return two_warp_rows_spec(query_dtype(shape), rows16.items <= 4 * sms ? 3 : 2, false, paged);
    if (paged && rows > 64 && rows <= 128 && keys >= 512 && 4 * decompose_work(shape, d, 128).items >= 3 * sms)
      return wide_group_spec(query_dtype(shape));
  }
  auto tiled = [&](int block_m, int block_n) {
    return packed_rows_spec(shape.head_dim, query_dtype(shape), fp8, paged, block_m, block_n);
  };
  auto two_warp = [&](bool six) { return two_warp_d128_spec(query_dtype(shape), fp8, six, paged); };
  auto padded = [rows](int m) { return (rows + m - 1) / m * m; };
  auto per_sm = [sms](std::int64_t items) { return (items + sms - 1) / sms; };  // the most CTAs an SM runs
  if (shape.head_dim == 256) return decode_spec(shape, 64, false);
  if (keys <= block) {
    if (shape.head_dim == 128 && d.sm_margin == 0 && padded(16) < padded(32) && padded(64) <= padded(32)) {
      if (!fp8 && rows16.items <= 2 * sms) return decode_spec(shape, 16, false);
      if (!fp8 && items64 <= sms) return tiled(32, 64);
      if (rows16.items <= 4 * sms && per_sm(rows16.items) <= 2 * per_sm(items64)) return two_warp(false);
      // Three 32-key tiles against two 64-key ones: the sixes, while they hold the items in
      // one wave as the 64-row tiles do (a paged fp8 cache has no sixes: they spill).
      const std::int64_t split_keys = std::min<std::int64_t>(shape.seqlen_k, keys);
      if (items64 <= 2 * sms && rows16.items <= 6 * sms && (split_keys + 31) / 32 == 3 && !(fp8 && paged))
        return two_warp(true);
      // Past two 64-row items per SM both need a second wave: the fours' is shorter.
      if (items64 > 2 * sms && rows16.items <= 8 * sms) return two_warp(false);
    }
    return padded(64) <= padded(32) ? tiled(64, 64) : tiled(32, 64);
  }
  if (items64 > sms && padded(64) <= padded(32) && shape.head_dim == 128 && d.sm_margin == 0) return tiled(64, 64);
  if (items64 > sms || 2 * items64 <= num_sms) {
    const bool wide = shape.head_dim == 64 ? keys >= 512 : items32 <= sms || (fp8 && keys >= 512);
    return tiled(32, wide ? 128 : 64);
  }
  return decode_spec(shape, 64, false);
}

// Head dim 64 with more 16-row items than SMs, no margin (a paged cache up to three per SM
// in three stages, where d64_16bit_spec gives the contiguous one two-warp tiles). The 128-row
// three-stage tiles fit two CTAs per SM; 64-row tiles fit more, and that is what
// such grids need (bench/gpu/d64-shapes.json under every tiling on an H100,
// docs/performance.md "Head dim 64"):
//  * three stages of 64 rows: 275.9 us instead of 286.5 at B=26 Lk=15605 Hq=128 Hkv=8 (208
//    items), 442.5 instead of 454.2 at B=123 Lk=21394 Hq=8 Hkv=2; and where splits are one or
//    two blocks long (the CTA's fixed cost is what counts) 18.9 instead of 25.0 at B=144
//    Lk=104 Hq=128 Hkv=8, where the three-CTA tiles took 21.3;
//  * two items per SM or more over longer splits: two stages, three CTAs per SM (the dense
//    variant of D = 128, here with no upper bound): B=199 Lk=14991 Hq=64 Hkv=4 (796 items)
//    1004.9 us instead of 1076.1, B=237 Lk=6020 Hq=14 Hkv=2 243.2 instead of 249.5, B=48
//    Lk=1024 37.3 instead of 39.6. Under two per SM their single tile in flight starves the
//    SMs that hold one CTA: B=46 Lk=641 Hq=64 Hkv=4 (184 items) 18.35 us against 16.77.
KernelSpec many_items_d64_spec(Dtype dtype, bool three_ctas, bool paged = false) {
  KernelSpec s = decode_spec(64, dtype, false, paged, 16, false);
  s.block_n = 64;
  if (three_ctas) s.stages = 2, s.min_ctas_per_sm = 3;
  return s;
}

// One-warp CTAs over 32-key tiles, as many per SM as an H100 grants them (shared memory,
// and at most 16, what registers allow fp8's two stages at D = 64): over an fp8 cache ten
// in two stages or seven in three at D = 128, sixteen or fourteen at D = 64; over a 16-bit
// one at D = 64 eleven or eight. Each warp streams its own item, so no warp waits on
// another's tiles or merges key slices with it, and an SM holds that many independent
// streams where the two-warp tiles hold four to six. They pay from five or six items per SM while every round
// of them holds about five per SM; fewer, and each SM's few warps run at one warp's pace
// (measured: d64_16bit_spec, fp8_d64_spec, many_items_d128_spec).
KernelSpec one_warp_spec(int head_dim, Dtype dtype, bool fp8_kv, int stages, bool paged = false) {
  KernelSpec s = decode_spec(head_dim, dtype, fp8_kv, paged, 16, false);
  s.block_n = 32;
  s.warps_n = 1;
  s.stages = stages;
  const SmLimits hopper = sm_limits(90);
  const int by_smem = hopper.smem_bytes_per_sm / (s.smem_bytes() + hopper.smem_reserved_per_cta);
  s.min_ctas_per_sm = std::min(16, by_smem);
  return s;
}

// Whether `items` over rounds of k's CTAs per SM leave a last round of at least `least` per SM.
bool rounds_fill(std::int64_t items, std::int64_t sms, const KernelSpec& k, int least = 5) {
  const std::int64_t last = items % (k.min_ctas_per_sm * sms);
  return last == 0 || last >= least * sms;
}

// Head dim 64, a 16-bit cache (contiguous or paged, no margin), more items than SMs: from five items
// per SM one-warp CTAs (one_warp_spec), eleven per SM in two stages while their last round
// holds five per SM, else eight in three past eleven per SM while theirs holds four; otherwise
// many_items_d64_spec. 37 shapes of 200 to 2048 items under each tiling on an H100, best of
// splits 1-4, against many_items_d64_spec: B=99 Lk=149 Hq=40 Hkv=8 (792 items) 14.9 us
// instead of 18.5, B=88 Lk=79 Hq=128 Hkv=8 (704) 11.0 instead of 12.6, B=135 Lk=515 Hq=40
// Hkv=8 53.4 instead of 62.3, B=84 Lk=3013 Hq=32 Hkv=8 (672) 176.8 instead of 180.7; in
// eights B=256 Lk=150 Hq=16 Hkv=8 (2048 items) 33.5 instead of 36.8, B=205 Lk=160 Hq=40
// Hkv=8 (1640: 1056 + 584) 30.0 instead of 34.8, B=210 Lk=1560 Hq=128 Hkv=8 234.1 instead of
// 238.4 (245.5 in elevens, whose last round is 228). Under five per SM they lose: B=250
// Lk=100 Hq=14 Hkv=2 (500) 10.0 us in elevens against 9.6, B=36 Lk=250 Hq=32 Hkv=8 (288) 12.6
// against 10.9. On 32 other shapes of 400 to 2032 items, against many_items_d64_spec in the
// same run: 0.964 of the time (geomean), 0.855 to 1.026.
// Between three and five items per SM, where the three-CTA tiles need a second round and
// the one-warp ones do not pay yet, the two-warp 16-row tiles six per SM hold them in one
// (bench/gpu/d64-mid.json under every tiling, docs/performance.md "D = 64 at three to five
// items per SM"): B=135 Lk=409 Hq=64 Hkv=4 (540 items) 24.9 us instead of 30.3 at its best
// split (cuDNN 28.8), B=160 Lk=800 49.8 instead of 54.4, B=100 Lk=200 (400) 12.3 instead of
// 13.3; at most 1% slower on 480-500 items over 800 keys.
bool two_warp_rows_band(std::int64_t items, std::int64_t sms) { return items > 3 * sms && items < 5 * sms; }
// Up to three items per SM over a contiguous cache, the two-warp tiles in three stages (four
// CTAs per SM by shared memory) too: each warp scores 32 keys of a tile where the four-warp
// ones score 16, and merges one other key slice instead of three. On an H200 (every tiling
// forced on bench/gpu/d64-fresh.json, then an A/B against the four-warp tiles on 28 fresh
// shapes, docs/performance.md "On an H200 (fortieth session)"): bench/gpu/d64-band-fresh.json
// 0.990 of the time (0.919-1.005; B=66 Lk=646 Hq=16 Hkv=4 14.55 us instead of 15.84,
// B=33 Lk=3176 Hq=32 Hkv=8 52.65 instead of 54.94), d64-mid.json's 16-bit half 0.993 (B=70
// Lk=800 Hq=64 Hkv=4 18.70 instead of 20.18); caches of gigabytes within 0.5%. Over pages
// of 16 they were 0.2-2% slower than the four-warp tiles, so a paged cache keeps those, in
// three stages: the three-CTA tiles, which it took from two items per SM over splits of
// more than two blocks, were 1.3-10% slower there (B=66 Lk=646 Hq=16 Hkv=4, 264 items,
// 16.60 us against 15.25; B=33 Lk=3176 Hq=32 Hkv=8 61.52 against 55.02;
// bench/gpu/d64-band-paged.json under every tiling).

KernelSpec d64_16bit_spec(Dtype dtype, std::int64_t items, std::int64_t sms, int blocks_per_split, bool paged) {
  const KernelSpec eleven = one_warp_spec(64, dtype, false, 2, paged), eight = one_warp_spec(64, dtype, false, 3, paged);
  if (items >= 5 * sms && rounds_fill(items, sms, eleven)) return eleven;
  if (items > eleven.min_ctas_per_sm * sms && rounds_fill(items, sms, eight, 4)) return eight;
  if (two_warp_rows_band(items, sms)) return two_warp_rows_spec(dtype, 2, false, paged);
  if (items <= 3 * sms) return paged ? many_items_d64_spec(dtype, false, true) : two_warp_rows_spec(dtype, 3);  // above
  return many_items_d64_spec(dtype, blocks_per_split > 2, paged);  // five or more per SM
}

// An fp8 cache at D = 64, contiguous, no margin: up to 4 four-warp CTAs share an SM whatever
// the stages (registers), so the stages set the bytes in flight, and the rule of spec_for below
// holds with fp8's smaller tiles. bench/gpu/fp8-d64.json under every split count (1-64) on
// an H100, 64-row tiles in four stages against three (time ratio):
//  * up to two items per SM, four: 0.94-0.99 on 64 to 256 items (B=16 Lk=16384 Hq=32 Hkv=8
//    at 1 and 2 splits, B=8 and B=4 with 4x and 8x the keys, B=24 Hkv=4, B=64 Lk=32768 Hq=16
//    Hkv=4: 363.4 us instead of 369.4);
//  * from 288 to 400 items, three: four took 1.04-1.09 (B=40 Lk=8192 Hq=32 Hkv=8 128.2 us
//    instead of 118.2, B=200 Lk=2048 Hq=16 Hkv=2, B=16 Lk=16384 at 3 splits); beyond, within
//    about 1% either way;
//  * up to one item per SM the 128-row tiles (two 64-row stages' bytes in one), four stages:
//    B=16 Lk=16384 Hq=32 Hkv=8 93.2 us instead of 96.4 in three, B=8 Lk=32768 94.7 instead
//    of 96.0; five stages slower than three.
//  * past two items per SM over splits of one or two blocks, where each CTA's wait for its
//    few tiles is what counts, the two-warp 16-row tiles: six CTAs per SM in two stages over
//    one block (B=144 Lk=104 Hq=128 Hkv=8 15.1 us instead of 17.4, B=250 Lk=100 Hq=14 Hkv=2
//    7.5 instead of 8.3), four in three over two (B=256 Lk=150 Hq=16 Hkv=8 25.9 instead of
//    29.0, B=162 Lk=245 Hq=32 Hkv=8 22.8 instead of 24.4; B=36 Lk=250, 288 items, 8.72
//    against 8.61; bench/gpu/fp8-short.json).
//  * from six items per SM, one-warp CTAs (one_warp_spec): fourteen per SM in three stages
//    up to seven items per SM, sixteen in two beyond while every round of them holds five
//    per SM (37 fp8 shapes of 200 to 2048 items under each tiling, best of splits 1-4, against
//    the tiles above): B=200 Lk=200 Hq=32 Hkv=8 (1600 items) 20.9 us instead of 26.6, B=256
//    Lk=150 Hq=16 Hkv=8 19.5 instead of 25.7, B=135 Lk=515 Hq=40 Hkv=8 32.4 instead of
//    37.7, B=210 Lk=1560 Hq=128 Hkv=8 123.6 instead of 135.1, B=223 Lk=263 Hq=32 Hkv=4 (892)
//    17.2 instead of 20.5 in fourteens (17.8 in sixteens), B=128 Lk=4096 Hq=32 Hkv=8 189.9
//    instead of 193.2; under six per SM they lose: B=64 Lk=200 Hq=128 Hkv=8 (512) 12.7 us in
//    sixteens against 10.8, B=250 Lk=100 Hq=14 Hkv=2 (500) 8.7 against 7.5.
//  * between three and six items per SM over longer splits, the two-warp tiles too: six per
//    SM in two stages past four per SM, four in three below (bench/gpu/d64-mid.json in fp8
//    under every tiling): B=135 Lk=409 Hq=64 Hkv=4 (540 items) 16.8 us instead of 21.0,
//    B=90 Lk=800 Hq=128 Hkv=8 (720) 31.7 instead of 38.0, B=135 Lk=1500 43.1 instead of 48.5
//    at their best splits; B=256 Lk=800 Hq=32 Hkv=2 (512) 24.0 instead of 24.5.
KernelSpec fp8_d64_spec(Dtype dtype, std::int64_t items, std::int64_t sms, int blocks_per_split, bool paged = false) {
  // Paged, the one-warp fourteens spill (128 registers); the two-warp sixes stand in there.
  // The sixteens spilled too until the table held row offsets; paged, they now win as they do
  // contiguous (forced tilings on an H200, pages of 1 and 16, docs/performance.md "On an
  // H200 (thirty-first session)"): B=237 Lk=270 Hq=32 Hkv=8 (1896 items) 25.7 us instead of
  // 36.1 over pages of 1, B=200 Lk=800 Hq=128 Hkv=8 56.4 instead of 67.1 over pages of 16,
  // B=250 Lk=3000 Hq=32 Hkv=8 194.6 instead of 226.2; under seven items per SM they lost
  // (B=180 Lk=4000 Hq=14 Hkv=2, 720 items at its best split: 60.3 us against 58.5). On 16
  // fresh paged shapes (bench/gpu/paged-sixteens-dense.json) against the build before: 0.962
  // of the time (0.752-1.005).
  if (!paged && items >= 6 * sms && items < 7 * sms) return one_warp_spec(64, dtype, true, 3);
  const KernelSpec sixteen = one_warp_spec(64, dtype, true, 2, paged);
  if (items >= 7 * sms && rounds_fill(items, sms, sixteen)) return sixteen;
  // Paged splits of two blocks keep the 64-key tiles below: B=71 Lk=232 Hq=16 Hkv=4 (284
  // items) 9.8 us against 10.4 in the two-warp fours, B=163 Lk=248 Hq=14 Hkv=2 9.9 against 10.7.
  if (items > 2 * sms && (blocks_per_split == 1 || (blocks_per_split == 2 && !paged)))
    return two_warp_rows_spec(dtype, blocks_per_split == 1 ? 2 : 3, true, paged);
  if (items > 3 * sms && (items < 6 * sms || paged)) return two_warp_rows_spec(dtype, items > 4 * sms ? 2 : 3, true, paged);
  KernelSpec s = decode_spec(64, dtype, true, paged, 16, false);
  s.block_n = items <= sms ? 128 : 64;
  s.stages = items <= 2 * sms ? 4 : 3;
  return s;
}

// D = 128 (no margin; contiguous, or paged 16-bit) past three items per SM, splits of more than one block
// (any split over an fp8 cache, a paged one or a fast DRAM): 16-row tiles of two warps over 32-key K/V tiles (64
// threads, at most 168 registers), six CTAs per SM in two stages or four in three. More CTAs
// per SM hide each one's wait for its first tile, most of a short split, and two stages keep
// the bytes in flight of six CTAs near the four-warp variant's two (bench/gpu/many-items.json
// on an H100, against the 64-row four-warp tiles this replaced): B=211 Lk=159 Hq=32 Hkv=2
// 18.1 us instead of 21.0, B=150 Lk=200 Hq=24 Hkv=8 48.5 instead of 51.0, B=64 Lk=8192 Hq=64
// Hkv=8 687.6 instead of 698.8; an fp8 cache 13.4 instead of 17.8 and 34.9 instead of 41.3
// (B=107 Lk=325 Hq=16 Hkv=8). On an H100, splits of one block kept the four-warp tiles over
// a contiguous 16-bit cache (B=200 Lk=100 Hq=64 Hkv=8: 43.8 us in fours against 40.2), not
// over an fp8 cache, whose block is half the bytes: the same shape 34.3 us in fours against
// 39.8, B=150 Lk=64 Hq=40 Hkv=8 17.5 in sixes against 26.9 (bench/gpu/fp8-short.json). On an
// H200 (a fast DRAM) the sixes won there over a 16-bit cache too, every tiling forced on
// bench/gpu/d128-many-fresh.json (docs/performance.md "On an H200 (fortieth session)"):
// B=171 Lk=76 Hq=64 Hkv=4 (684 items) 12.73 us instead of 17.51, B=189 Lk=75 Hq=40 Hkv=8
// (1512) 22.16 instead of 30.07, B=253 Lk=128 Hq=10 Hkv=2 12.41 instead of 14.35; fours
// between the two. Six per SM unless the items leave a last wave
// emptier than fours would (more padded slots): B=107 Lk=325 Hq=16 Hkv=8, 856 items, runs
// 792 + 64 in sixes (60.3 us), 528 + 328 in fours (55.7; was 57.6). (An fp8 cache's
// three-stage CTAs fit five per SM by registers; the rule counts four, which is what its
// measurements follow.)
// An fp8 cache from six items per SM takes one-warp CTAs instead (one_warp_spec): ten
// per SM in two stages while every round of them holds five per SM, else seven in three
// while theirs do. Against the sixes or fours, one H100, best of splits 1-4 per shape:
//  * one round, 6.5-9.7 per SM: B=107 Lk=325 Hq=16 Hkv=8 (856 items) 32.4 us instead of
//    34.6, B=128 Lk=128 Hq=32 Hkv=8 18.3 instead of 19.9, B=150 Lk=200 Hq=24 Hkv=8 30.1
//    instead of 32.8, B=158 Lk=468 Hq=16 Hkv=8 59.2 instead of 60.6, B=226 Lk=865 Hq=8
//    Hkv=4 76.1 instead of 76.9;
//  * a second round of five or more per SM: B=202 Lk=694 Hq=64 Hkv=8 (1616 items, 924 +
//    692 in sevens) 111.0 instead of 118.8, B=200 Lk=1000 Hq=64 Hkv=8 153.3 instead of
//    164.6, B=200 Lk=100 Hq=64 Hkv=8 29.2 instead of 33.8, B=250 Lk=500 Hq=32 Hkv=8 in
//    tens 97.8 instead of 99.0;
//  * not where the last round is thin: B=169 Lk=524 Hq=64 Hkv=8 (1352 items: 1320 + 32 in
//    tens) 91.4 against 72.7 in sixes, 78.1 in sevens (924 + 428); nor at 3.2-4.8 per SM
//    (B=80 Lk=600 Hq=40 Hkv=8 43.9 against 41.9, B=120 Lk=1000 Hq=28 Hkv=4 53.1 against 47.9).
// A 16-bit cache keeps the two-warp tiles: on the same 22 shapes one-warp CTAs (six or
// four per SM, its tiles being twice the bytes) were slower on 20, by up to 14%.
KernelSpec many_items_d128_spec(Dtype dtype, bool fp8_kv, std::int64_t items, std::int64_t sms, bool paged = false) {
  auto padded = [items](std::int64_t slots) { return (items + slots - 1) / slots * slots; };
  if (fp8_kv && paged) {
    // The tens and the sixes spill when paged (168 registers); of the sevens and
    // the fours, the one whose rounds pad fewer slots. Every tiling forced on paged fp8 shapes
    // (bench/gpu/fp8-paged.json): B=97 Lk=470 Hq=16 Hkv=8 (776 items) 41.8 us in sevens
    // against 50.1 in fours, B=253 Lk=3172 Hq=20 Hkv=4 (1012: 924 + 88 in sevens) 297.6 in
    // fours against 339.4.
    const KernelSpec seven = one_warp_spec(128, dtype, true, 3, true);
    return padded(seven.min_ctas_per_sm * sms) <= padded(4 * sms) ? seven : two_warp_d128_spec(dtype, true, false, true);
  }
  if (fp8_kv && items >= 6 * sms) {
    const KernelSpec ten = one_warp_spec(128, dtype, true, 2), seven = one_warp_spec(128, dtype, true, 3);
    if (rounds_fill(items, sms, ten)) return ten;
    if (items > ten.min_ctas_per_sm * sms && rounds_fill(items, sms, seven)) return seven;
  }
  // Where the items fit one wave of fours, an fp8 cache keeps the third stage (its tiles
  // carry half the bytes): B=60 Lk=2000 Hq=32 Hkv=8 89.0 us in fours, 94.1 in sixes.
  const std::int64_t one_wave = fp8_kv ? 4 * sms : 6 * sms;
  return two_warp_d128_spec(dtype, fp8_kv, items <= one_wave ? !fp8_kv : padded(6 * sms) <= padded(4 * sms), paged);
}

// An fp8 cache at D = 256 (contiguous, no margin) with more items than SMs: two stages of
// its 64-row tiles instead of three (two CTAs per SM either way, by registers): B=57 Lk=2106
// Hq=16 Hkv=8 (456 items) 174.6 us instead of 184.9, B=32 Lk=9723 Hq=1 Hkv=1 over 8
// splits 62.5 instead of 64.1 (docs/performance.md). Past two items per SM, where those
// would need a second wave, 16-row tiles of two warps over 32-key tiles, four CTAs per SM
// in two stages: B=48 Lk=1687 Hq=16 Hkv=8 (384 items) 124.8 us instead of 129.5, B=40
// Lk=2000 Hq=8 Hkv=4 over 3 splits 66.7 instead of 71.1 (bench/gpu/fp8-d256.json).
KernelSpec many_items_fp8_d256_spec(Dtype dtype, std::int64_t items, std::int64_t sms) {
  KernelSpec s = decode_spec(256, dtype, true, false, 16, false);
  s.stages = 2;
  if (items > 2 * sms) s.block_n = 32, s.warps_n = 2, s.min_ctas_per_sm = 4;
  return s;
}

// A 16-bit cache at D = 256 (contiguous or paged, no margin) with more items than SMs: 16-row tiles
// of two warps over 32-key K/V tiles, two CTAs per SM in three stages up to two items per
// SM, three in two stages beyond. The four-warp 64-key tiles (192 KiB of stages) hold one
// CTA per SM, so a second item per SM waited for the first's end. Past three items per SM
// over splits of more than 768 keys the four-warp tiles stay: there the two-warp ones were
// 0.5-2.4% slower (B=50 Lk=1922 Hq=8 Hkv=8 over 2 splits, 800 items of 1024 keys, 190.6 us
// against 186.1), and 2.4% faster over 600 keys (B=41 Lk=600 Hq=16 Hkv=16). On an H200
// (docs/performance.md "On an H200 (fortieth session)"), every tiling forced on 35 fresh
// Gemma shapes (bench/gpu/d256-fresh.json): B=19 Lk=203 Hq=8 Hkv=8 (152 items) 13.05 us in
// the twos instead of 17.57, B=200 Lk=118 Hq=2 Hkv=1 10.67 instead of 14.01, B=19 Lk=593
// Hq=16 Hkv=16 (304) 47.74 in the threes instead of 54.95, B=136 Lk=72 Hq=8 Hkv=8 (1088)
// 31.01 instead of 45.63; then 30 other fresh ones (bench/gpu/d256-many-fresh.json). Over
// pages of 16 the same (bench/gpu/d256-paged-fresh.json): B=161 Lk=389 Hq=8 Hkv=1 22.66 us
// instead of 30.78, B=41 Lk=600 Hq=16 Hkv=16 (656 items) 100.96 instead of 110.01.
KernelSpec many_items_d256_spec(Dtype dtype, std::int64_t items, std::int64_t sms, int keys_per_split, bool paged) {
  KernelSpec s = decode_spec(256, dtype, false, paged, 16, false);
  if (items > 3 * sms && keys_per_split > 768) return s;
  s.block_n = 32;
  s.warps_n = 2;
  s.stages = items <= 2 * sms ? 3 : 2;
  s.min_ctas_per_sm = items <= 2 * sms ? 2 : 3;
  return s;
}

}  // namespace

KernelSpec spec_for(const Shape& shape, bool pack_gqa) {
  check_supported(shape);
  const int rows = decompose_work(shape, Decision{1, pack_gqa, 0}, 16).rows_per_group;
  return decode_spec(shape, rows <= 16 ? 16 : 64, false);
}

namespace {

// An fp8 cache at D = 128 with up to one item per SM (the 128-row tiles of `few` below) on a
// device whose DRAM is fast: four stages instead of three, 96 KiB in flight per CTA instead
// of 64, which a faster DRAM needs to stay busy (bandwidth x loaded latency). On an H200,
// the 49 D = 128 shapes of three fp8 samples under each tiling (docs/performance.md "On an
// H200 (thirty-first session)"): B=32 Lk=4029 Hq=64 Hkv=4 36.5 us instead of 37.3, B=5
// Lk=110643 Hq=8 Hkv=2 over 12 splits 70.7 instead of 71.9, B=59 Lk=40651 Hq=12 Hkv=1 143.1
// instead of 146.0; five stages no better than four. On 20 fresh shapes (bench/gpu/fp8-few-items.json)
// against the build before: 0.995 of the time, 0.980-0.997 on the ten whose best split holds
// at most one item per SM (B=115 Lk=32508 Hq=6 Hkv=1 219.9 us instead of 224.2); the paged
// twins, whose best splits hold more, 1.000. On an H100 four stages were slower (B=5
// Lk=53011 over 12 splits: 57.0 us against 54.5, twenty-second session), so a device of an
// H100's bandwidth keeps three.
KernelSpec fp8_latency_spec(Dtype dtype, bool paged) {
  KernelSpec s = decode_spec(128, dtype, true, paged, 16, true);
  s.stages = 4;
  return s;
}

// 64-key tiles in four stages (16-bit, contiguous, D = 128; few_items_d128_spec below).
KernelSpec four_stage_d128_spec(Dtype dtype) {
  KernelSpec s = decode_spec(128, dtype, false, false, 16, false);
  s.stages = 4;
  return s;
}

// 16-bit, contiguous, D = 128, no margin, items on at most three quarters of the SMs: one
// CTA per SM, each waiting for its own first tiles.
//  * Splits of up to two blocks fit the first copy of either tiling: 128-key tiles in three
//    stages where the split's last 128 keys are more than half present (ceil(keys / 64)
//    even: as many padded keys as 64-key tiles, half the tiles), otherwise 64-key tiles,
//    in four stages past one block. So do splits of three or four blocks on more than half
//    the SMs; on fewer, the 128-key tiles won whatever the padding.
//  * Longer splits: 128-key tiles on up to half the SMs, and on a fast DRAM, whose bandwidth
//    needs their bytes in flight, up to two thirds (an H100 lost 2-5% with 80-128 such
//    CTAs at 8K keys, the rule of tiling_for below).
// The one-block case came first (thirty-seventh session): 65-128 keys in 128-key tiles took
// 0.937-0.985 of the 64-key tiles' time on all sixteen such shapes of bench/gpu/short-calls.json
// and short-splits-fresh.json (B=68 Lk=93 Hq=8 Hkv=1 5.00 us instead of 5.34); over 120-128
// items they tied or lost by up to 1%, hence three quarters of the SMs. The rest on an H200
// under every tiling, then against the build before on 38 fresh shapes (bench/gpu/
// few-items-fresh.json; docs/performance.md "On an H200 (thirty-eighth session)"): B=42
// Lk=192 Hq=4 Hkv=2 6.23 us in four stages of 64 keys against 6.31 in three and 6.63 in
// 128-key tiles, B=84 Lk=204 Hq=2 Hkv=1 6.63 in 128-key tiles against 6.95, B=20 Lk=285
// Hq=48 Hkv=4 (80 items) 7.71 in 64-key tiles against 8.21, B=4 Lk=394 Hq=128 Hkv=8 (32) 7.84
// in 128-key tiles against 8.12; B=17 Lk=1097 Hq=8 Hkv=4 (68 items) 13.30 against 15.02 (the
// best over splits before), B=12 Lk=3097 Hq=40 Hkv=8 (96) 39.35 in 64-key tiles against 40.84.
KernelSpec few_items_d128_spec(const Shape& shape, const Decision& d, std::int64_t items, int num_sms,
                               bool fast_dram) {
  const int keys = split_keys(shape, d), block = features(shape).block_n, half = block / 2;
  const bool short_split = keys <= 4 * block;
  if (short_split && (keys + half - 1) / half % 2 == 1 && (keys <= 2 * block || 2 * items > num_sms))
    return keys > block ? four_stage_d128_spec(query_dtype(shape)) : decode_spec(shape, 16, false);
  const bool wide = short_split || 2 * items <= num_sms || (fast_dram && 3 * items <= 2 * num_sms);
  return decode_spec(shape, 16, wide);
}

// Groups of 17-32 rows, two 16-row tiles (Hq / Hkv x Lq of 17-32 packed), 16-bit, D = 128,
// no margin, on a fast DRAM, over splits of more than one block: 16-row tiles, the 128-key
// ones of one CTA per SM up to one item per SM, and past that, over splits of up to eight
// blocks, the 64-key ones of two per SM up to two items per SM. A group's two tiles run side
// by side and the second finds most of their KV in L2, so the pair streams like one 16-row
// item with twice the CTAs behind it, where long_group_spec's 32- and 64-row tiles (one CTA
// per item, the 64-row ones half padding) have half the CTAs.
// On an H200 (docs/performance.md "On an H200 (forty-third session)"), every tiling forced on
// 26 shapes of 20-64 rows: B=8 Lk=4096 Hq=64 Hkv=2 14.74 us over 4 splits in 128-key tiles
// against 15.66 over 8 in long_group_spec's 64-row ones, B=5 Lk=5000 Hq=40 Hkv=2 13.07
// against 13.71, B=2 Lk=8192 Hq=64 Hkv=2 over 32 splits (256 items) 11.05 in 64-key tiles
// against 11.94; over three or four 16-row tiles (Hq=40 or 64 over one KV head) the 32- and
// 64-row tiles stayed ahead. Against the build before: on 28 fresh shapes
// (bench/gpu/paired-rows-fresh.json) the 64-key tiles lost 2-4% over splits of 12-26 blocks
// at 192 items (B=12 Lk=12194 Hq=24 Hkv=1 over 8 splits), hence the eight, and with it
// 0.989 of the time (0.953-1.002); over 2-4 new tokens (paired-rows-lq.json) 0.969
// (0.891-1.004: B=6 Lq=2 Lk=616 Hq=128 Hkv=8 9.10 us instead of 10.22); their paged twins
// over pages of 16 and 1 (paired-rows-paged.json) 0.991 (0.876-1.020).
std::optional<KernelSpec> paired_rows_spec(const Shape& shape, const Decision& d, const WorkDecomposition& rows16,
                                           int num_sms, bool fast_dram) {
  if (rows16.m_tiles != 2 || shape.head_dim != 128 || shape.dtype == Dtype::fp8) return {};
  if (d.sm_margin > 0 || !fast_dram) return {};
  const int blocks = blocks_per_split(shape, d);
  if (blocks < 2) return {};
  if (rows16.items <= num_sms) return decode_spec(shape, 16, true);
  if (rows16.items <= 2 * std::int64_t{num_sms} && blocks <= 8) return decode_spec(shape, 16, false);
  return {};
}

// `d` resolved; `rows16` its work in 16-row items.
KernelSpec tiling_for(const Shape& shape, const Decision& d, const WorkDecomposition& rows16, int num_sms,
                      double mem_bw_bytes_per_s) {
  const std::int64_t sms = std::max(1, num_sms - d.sm_margin);
  const bool fast_dram = mem_bw_bytes_per_s >= kFastDramBytesPerS;
  if (auto paired = paired_rows_spec(shape, d, rows16, num_sms, fast_dram)) return *paired;
  // Tiling the rows by 16 re-reads the KV of a group once per tile (through L2): worth it
  // only while it buys parallelism, i.e. while the 16-row items fit one wave.
  if (rows16.rows_per_group > 16 && rows16.items > sms) return long_group_spec(shape, d, num_sms, sms);
  const std::int64_t items = rows16.items;
  // The variant sets the bytes in flight: a CTA keeps stages - 1 K/V tile pairs loading,
  // 128 KiB in the one-CTA-per-SM variant (128-row tiles, 3 stages), 64 KiB in the two-CTA
  // one (64-row tiles, 3 stages), 32 KiB in the three-CTA one (64-row tiles, 2 stages). An
  // H100 keeps its DRAM busy with ~6-8 MiB in flight over the GPU (bandwidth x loaded
  // latency) and loses bandwidth with much more: at 8K keys, 80-128 CTAs of the one-CTA
  // variant (10-16 MiB) ran 2-5% slower than the same CTAs of the two-CTA variant, and
  // 144-264 CTAs of the two-CTA variant (9-17 MiB) 1.5-4% slower than the three-CTA one
  // (README, "Bytes in flight"). So the biggest tiles only while at most half the SMs have a
  // CTA, and the smallest once there are more CTAs than SMs, up to the three per SM the
  // dense variant holds. (At D = 128; a paged cache from two items per SM, below. D = 64 has
  // its own rule below, and D = 256 its own past one item per SM.)
  //
  // With an SM margin the grid holds one CTA per usable SM (grid_ctas_per_sm, plan.hpp), so
  // the bytes in flight are those of min(items, SMs - margin) CTAs: the 128-row tiles while
  // those CTAs fill at most half the GPU's SMs, the 64-row three-stage tiles above, never
  // the three-CTA variant (a third of an SM's share).
  // (Without a margin min(items, sms) <= half the SMs is the same test as items <= half.)
  const bool margin = d.sm_margin > 0;
  // Contiguous KV and no margin: the grid stacks CTAs on SMs, and the variants sized by
  // items per SM below apply.
  const bool stacked = shape.page_size == 0 && !margin;
  // A paged cache (no margin) takes the contiguous cache's tiles for many items: at D = 64
  // those of d64_16bit_spec or fp8_d64_spec, at D = 128 those of many_items_d128_spec from
  // three items per SM, over splits of one block too. Against the four-warp tiles the paged
  // cache had (128- or 64-key tiles), every tiling forced on paged shapes of pages of 1, 16
  // and 64 (docs/performance.md, "Paged caches against cuDNN"): D = 64
  // B=114 Lk=554 Hq=128 Hkv=8 (912 items) 52.3 us in elevens instead of 61.6, B=256 Lk=150
  // Hq=16 Hkv=8 36.4 in eights instead of 53.5, B=73 Lk=645 (584) 41.4 in sixes instead of
  // 53.4, B=45 Lk=900 Hq=32 Hkv=8 (360) 34.7 in 64-key tiles instead of 42.3; D = 128
  // B=150 Lk=64 Hq=40 Hkv=8 23.2 in sixes instead of 32.8, B=150 Lk=400 Hq=32 Hkv=8 93.2
  // instead of 97.0. Checked by A/B on fresh paged shapes (bench/gpu/paged-rule.json,
  // paged-one-block.json).
  const bool paged = shape.page_size > 0 && !margin, fp8 = shape.dtype == Dtype::fp8;
  // Over a paged fp8 cache, from two items per SM (where the tilings were measured on paged
  // shapes): B=230 Lk=77 Hq=32 Hkv=8 (1840 items) 14.6 us in sixteens instead of 29.0,
  // B=160 Lk=682 Hq=64 Hkv=4 28.8 in sixes instead of 36.0; at D = 128, B=215 Lk=101 Hq=32
  // Hkv=8 32.4 in sevens instead of 48.6, B=235 Lk=65 Hq=16 Hkv=2 11.1 in fours instead of 15.0.
  if (shape.head_dim == 64 && fp8 && (stacked || (paged && items > 2 * sms)))
    return fp8_d64_spec(query_dtype(shape), items, sms, blocks_per_split(shape, d), paged);
  // Over a paged 16-bit cache the 128-key tiles stay while most SMs would hold one of their
  // CTAs, which keep more of the gather in flight: B=22 Lk=94 Hq=32 Hkv=8 (176 items) 6.41 us
  // against 6.59, B=70 Lk=1170 Hq=8 Hkv=2 (140) 21.7 against 22.1; from 200 items they were
  // 2-4% slower (B=25 Lk=683 Hq=128 Hkv=8 18.9 us against 18.3).
  if (shape.head_dim == 64 && !fp8 && (stacked ? items > sms : paged && 2 * items > 3 * sms))
    return d64_16bit_spec(query_dtype(shape), items, sms, blocks_per_split(shape, d), paged);
  if (shape.head_dim == 128 && !margin && items > 3 * sms && (blocks_per_split(shape, d) > 1 || fp8 || paged || fast_dram))
    return many_items_d128_spec(query_dtype(shape), fp8, items, sms, paged);
  if (!fp8 && stacked && shape.head_dim == 128 && 4 * items <= 3 * sms)
    return few_items_d128_spec(shape, d, items, num_sms, fast_dram);
  // An fp8 cache stages half the bytes per tile: its 128-row tiles carry what a 16-bit 64-row
  // one does, and win up to one item per SM (B=1 Lk=131072 Hkv=8 over 16 splits: 95.6 us
  // instead of 99.3; B=32 Lk=8192 Hkv=8, 256 items: 188.8 instead of 180.4).
  const bool few = fp8 && !margin ? items <= sms : 2 * std::min(items, sms) <= num_sms;
  if (few && fp8 && !margin && shape.head_dim == 128 && fast_dram)
    return fp8_latency_spec(query_dtype(shape), paged);
  // An fp8 cache takes the three-CTA variant too since its queries run the fp16 MMA (one
  // conversion per pair; 167 registers, no spill), but only where the two-CTA
  // one would need a second wave, past two items per SM: B=17 Lk=4985 Hq=32 Hkv=16 (272
  // items) 118.8 us instead of 135.7, B=76 Lk=4568 Hq=20 Hkv=4 (304) 122.9 instead of 133.8;
  // B=32 Lk=8192 Hq=32 Hkv=8 (256) 178.7 against 174.3 (docs/performance.md).
  // A paged 16-bit cache takes it past two items per SM too (its 168 registers spilled the
  // page ids until the table held row offsets). Forced on an H200 over pages of 1, 16 and 64
  // (docs/performance.md "On an H200 (thirty-first session)"): B=90 Lk=3000 Hq=16 Hkv=4 (360
  // items) 133.1 us instead of 137.4 over pages of 16, B=48 Lk=20000 Hq=28 Hkv=4 over 2 splits
  // (384) 453.7 instead of 459.1, B=40 Lk=6000 Hq=64 Hkv=8 (320) 234.2 instead of 237.9; at
  // two per SM it lost (B=33 Lk=8192 Hq=64 Hkv=8, 264 items: 264.8 us against 255.7 in the
  // two-CTA tiles). On 16 fresh paged shapes (bench/gpu/paged-sixteens-dense.json) against
  // the build before: 0.979 of the time (0.889-1.001).
  const std::int64_t dense_from = fp8 || !stacked ? 2 * sms : sms;
  const bool dense = (stacked || (paged && !fp8)) && shape.head_dim == 128 && items > dense_from && items <= 3 * sms;
  if (shape.head_dim == 256 && shape.dtype == Dtype::fp8 && stacked && items > sms)
    return many_items_fp8_d256_spec(query_dtype(shape), items, sms);
  if (shape.head_dim == 256 && !fp8 && (stacked || paged) && items > sms)
    return many_items_d256_spec(query_dtype(shape), items, sms, split_keys(shape, d), paged);
  return decode_spec(shape, 16, few, dense);
}

// K and V apart (KernelSpec::kv_apart) for the 64-key tiles of four warps (16-bit,
// contiguous, D = 128, no margin) where a CTA's first tiles or a second CTA on its SM are
// what its items wait for: splits of at most two tiles, and one to one and a half items per
// SM (the SMs with two CTAs finish last). Elsewhere the second barrier per tile costs more
// than the overlap gives: lone CTAs streaming longer splits and two or more items per SM
// over long splits ran 1-5% slower. On an H200, against one copy group per tile, the oracle's
// best per shape (docs/performance.md "On an H200 (thirty-ninth session)"): 32 fresh shapes
// of those two classes (bench/gpu/kv-apart-fresh.json) 0.986 (0.942-1.014; B=35 Lk=698 Hq=24
// Hkv=4, 140 items, 16.86 us instead of 17.91), B=150 Lk=216 Hq=12 Hkv=1 9.36 instead of 9.59,
// B=256 Lk=64 Hq=8 Hkv=1 6.21 instead of 6.45.
bool kv_apart_pays(const KernelSpec& s, const Shape& shape, const Decision& d, std::int64_t items, int num_sms) {
  if (s.head_dim != 128 || s.fp8_kv || s.paged || d.sm_margin > 0) return false;
  if (s.block_n != 64 || s.warps_m != 1 || s.warps_n != 4 || s.stages > 3) return false;
  return split_keys(shape, d) <= 2 * s.block_n || (items > num_sms && 2 * items <= 3 * std::int64_t{num_sms});
}

// The CTAs of `s` one Hopper SM holds, by shared memory, threads and the registers its
// launch bound allows.
std::int64_t resident_ctas(const KernelSpec& s) {
  return modelled_ctas_per_sm(s.threads(), s.max_registers(), s.smem_bytes(), sm_limits(90));
}

// The splits of an item merge in their cluster instead of a combine kernel (16-bit cache,
// D = 128, no SM margin) where that measured faster on an H200: two to
// four splits of at most two blocks each, whose combine is much of what splitting costs,
// over a grid of at most 45% of the CTA slots, for groups of one 16-row tile. Each of 2-8
// splits forced on bench/gpu/few-items-fresh and split-calls-fresh, interleaved against
// the combine kernel: the 54 such calls took 0.932 of the time (0.86-1.00; B=2 Lk=68
// Hq=64 Hkv=8 at 3 splits 5.35 us instead of 6.22). Past them the cluster does not pay:
// splits of 512 keys and more 1.004 (0.95-1.08: a cluster's CTAs stream through one GPC),
// grids of 48% of the slots 1.02-1.08 (B=4 Lk=394 Hq=128 Hkv=8 at 4 splits), near-full
// grids up to 1.32 (a cluster that finds no GPC with room waits for a second round). Under
// the oracle, clusters of six or eight (B=3 Lk=678 Hq=128 Hkv=8 at 6 splits) and the four
// 16-row tiles of a 64-row group (B=1 Lk=1024 Hq=64 Hkv=1 at 8 splits, 7.00 us against
// 6.50) lost to the combine (docs/performance.md, "Splits merged in their cluster"). Over
// pages of 16, 24 fresh calls took 0.962-0.972 at 2, 3 and 4 splits (none over 1.005).
bool cluster_merge_pays(const KernelSpec& s, const Shape& shape, const Decision& d, int num_sms, int cc) {
  if (cc < kClusterMinCc || d.sm_margin > 0 || d.num_splits < 2 || d.num_splits > 4) return false;
  if (s.head_dim != 128 || s.fp8_kv || s.block_m != 16) return false;
  if (split_keys(shape, d) > 2 * decode_split_block(s.head_dim)) return false;
  const WorkDecomposition w = decompose_work(shape, d, s.block_m);
  return w.m_tiles == 1 && 20 * w.items <= 9 * resident_ctas(s) * num_sms;
}

KernelSpec device_spec_for(const Shape& shape, const Decision& decision, int num_sms, double mem_bw_bytes_per_s,
                           int cc) {
  check_supported(shape);
  const Decision d = resolve(decision, shape);
  const WorkDecomposition rows16 = decompose_work(shape, d, 16);
  KernelSpec s = tiling_for(shape, d, rows16, num_sms, mem_bw_bytes_per_s);
  s.kv_apart = kv_apart_pays(s, shape, d, rows16.items, num_sms);
  s.cluster_merge = cluster_merge_pays(s, shape, d, num_sms, cc);
  return s;
}

}  // namespace

KernelSpec spec_for(const Shape& shape, const Decision& decision, int num_sms) {
  return device_spec_for(shape, decision, num_sms, 0.0, kClusterMinCc);
}

KernelSpec spec_for(const Shape& shape, const Decision& decision, const DeviceInfo& hw) {
  return device_spec_for(shape, decision, hw.num_sms, hw.mem_bw_bytes_per_s, hw.cc);
}

KernelSpec combine_spec_for(const Shape& shape) {
  check_supported(shape);
  return combine_spec(shape.head_dim, query_dtype(shape));
}

KernelSpec with_tiling(KernelSpec s, std::string_view tiling) {
  const std::string text(tiling);
  std::size_t at = 0;
  auto field = [&](char tag, bool optional) -> std::optional<int> {
    if (at >= text.size() || text[at] != tag) {
      if (optional) return std::nullopt;
      throw InputError("tiling \"" + text + "\": expected '" + std::string(1, tag) + "' at character " +
                       std::to_string(at + 1) + " (m<block_m>n<block_n>w<warps_m>x<warps_n>s<stages>[o<ctas>][a][c])");
    }
    std::size_t end = ++at;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end == at || end - at > 3) throw InputError("tiling \"" + text + "\": no number after '" + tag + "'");
    const int v = std::stoi(text.substr(at, end - at));
    at = end;
    return v;
  };
  s.block_m = *field('m', false);
  s.block_n = *field('n', false);
  s.warps_m = *field('w', false);
  s.warps_n = *field('x', false);
  s.stages = *field('s', false);
  s.min_ctas_per_sm = field('o', true).value_or(1);
  s.kv_apart = at < text.size() && text[at] == 'a';
  at += s.kv_apart ? 1 : 0;
  s.cluster_merge = at < text.size() && text[at] == 'c';
  at += s.cluster_merge ? 1 : 0;
  if (at != text.size()) throw InputError("tiling \"" + text + "\": unexpected \"" + text.substr(at) + "\"");
  if (const std::string why = spec_error(s); !why.empty()) throw InputError("tiling \"" + text + "\": " + why);
  return s;
}

std::vector<KernelSpec> all_kernel_specs() {
  std::vector<KernelSpec> out;
  for (int d : {64, 128, 256})
    for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
      for (bool fp8 : {false, true})
        for (bool paged : {false, true}) {
          for (bool latency : {false, true}) {
            if (latency && d != 128) continue;  // the same tiles as the throughput variant
            out.push_back(decode_spec(d, dt, fp8, paged, 16, latency));
          }
          if (d == 128 && fp8) out.push_back(fp8_latency_spec(dt, paged));  // a fast DRAM's
          // the dense three-CTA tiles: contiguous, and paged 16-bit
          if (d == 128 && (!paged || !fp8)) out.push_back(decode_spec(d, dt, fp8, paged, 16, false, true));
          if (d == 128 && !paged && !fp8)  // kv_apart_pays: the 64-key tiles in two or three stages
            for (bool dense : {false, true}) {
              KernelSpec apart = decode_spec(d, dt, fp8, paged, 16, false, dense);
              apart.kv_apart = true;
              out.push_back(apart);
            }
          if (d == 128 && paged) {  // many_items_d128_spec
            for (bool six : {true, false})
              if (!(fp8 && six)) out.push_back(two_warp_d128_spec(dt, fp8, six, true));
            if (fp8) out.push_back(one_warp_spec(d, dt, true, 3, true));
          }
          if (d == 128 && !paged) {
            for (bool six : {true, false}) out.push_back(two_warp_d128_spec(dt, fp8, six));
            if (!fp8) out.push_back(four_stage_d128_spec(dt));
            if (fp8)
              for (int stages : {2, 3}) out.push_back(one_warp_spec(d, dt, true, stages));
          }
          if (d == 256 && (!paged || !fp8))
            for (std::int64_t items : {2, 3})
              out.push_back(fp8 ? many_items_fp8_d256_spec(dt, items, 1) : many_items_d256_spec(dt, items, 1, 0, paged));
          out.push_back(decode_spec(d, dt, fp8, paged, 64, false));
          if (d == 64 && fp8) {  // fp8_d64_spec: paged caches from three items per SM, no one-warp fourteens
            for (int items : {1, 2, 3})
              if (!paged || items == 3) out.push_back(fp8_d64_spec(dt, items, 1, 3, paged));
            for (int stages : {2, 3}) out.push_back(two_warp_rows_spec(dt, stages, true, paged));
            for (int stages : {2, 3})  // paged: the sixteens only (the fourteens spill)
              if (!paged || stages == 2) out.push_back(one_warp_spec(d, dt, true, stages, paged));
          }
          if (d == 64 && !fp8) {  // d64_16bit_spec, contiguous or paged
            for (KernelSpec k : {many_items_d64_spec(dt, false, paged), many_items_d64_spec(dt, true, paged),
                                 two_warp_rows_spec(dt, 2, false, paged), one_warp_spec(d, dt, false, 2, paged),
                                 one_warp_spec(d, dt, false, 3, paged)})
              out.push_back(k);
            // long packed groups (long_group_spec); contiguous, d64_16bit_spec's up to three items per SM
            out.push_back(paged ? wide_group_spec(dt) : two_warp_rows_spec(dt, 3));
          }
          if (d == 256) continue;
          for (auto [block_m, block_n] : {std::pair{32, 64}, {32, 128}, {64, 64}})
            out.push_back(packed_rows_spec(d, dt, fp8, paged, block_m, block_n));
        }
      out.push_back(combine_spec(d, dt));
    }
  // cluster_merge_pays: the four-warp 16-row tiles of 16-bit caches at D = 128 that a grid
  // of at most 45% of the slots runs (one or two CTAs per SM, or three with K and V apart)
  for (std::size_t i = 0, n = out.size(); i < n; ++i)
    if (out[i].kind == KernelKind::decode && out[i].head_dim == 128 && !out[i].fp8_kv &&
        out[i].block_m == 16 && out[i].warps_n == 4 && out[i].stages == 3 - (out[i].min_ctas_per_sm > 1) &&
        (out[i].min_ctas_per_sm == 1 || out[i].kv_apart)) {
      KernelSpec merged = out[i];
      merged.cluster_merge = true;
      out.push_back(merged);
    }
  return out;
}

DecodeParams decode_params_for(const Shape& shape, const Decision& decision, const KernelSpec& spec, int max_pages) {
  validate(shape, "shape");
  const Decision d = resolve(decision, shape);
  if (spec.kind != KernelKind::decode) throw InputError("decode_params_for: " + spec.name() + " is not a decode kernel");
  if (d.num_splits < 1 || d.num_splits > kMaxSplits)
    throw InputError("decision.num_splits: must be 1.." + std::to_string(kMaxSplits));

  DecodeParams p{};
  const std::int64_t D = shape.head_dim;
  p.batch = shape.batch;
  p.seqlen_q = shape.seqlen_q;
  p.h_q = shape.h_q;
  p.h_kv = shape.h_kv;
  p.qpk = shape.h_q / shape.h_kv;
  p.page_size = shape.page_size;
  // One causal query token sees every key of its request: not causal for the kernels,
  // which then skip each row's visibility limit (an integer division per row).
  p.causal = shape.causal && shape.seqlen_q > 1 ? 1 : 0;
  p.num_splits = d.num_splits;

  p.q_head_stride = D;
  p.q_row_stride = shape.h_q * D;
  p.q_batch_stride = shape.seqlen_q * p.q_row_stride;
  p.out_head_stride = p.q_head_stride;
  p.out_row_stride = p.q_row_stride;
  p.out_batch_stride = p.q_batch_stride;
  p.k_head_stride = D;
  p.k_row_stride = shape.h_kv * D;
  p.k_batch_stride = (shape.page_size > 0 ? shape.page_size : shape.seqlen_k) * p.k_row_stride;
  p.v_head_stride = p.k_head_stride;
  p.v_row_stride = p.k_row_stride;
  p.v_batch_stride = p.k_batch_stride;
  p.lse_head_stride = shape.seqlen_q;
  p.lse_batch_stride = static_cast<std::int64_t>(shape.h_q) * shape.seqlen_q;
  p.page_table_batch_stride = max_pages;
  if (shape.dtype == Dtype::fp8) {
    // FA3's and vLLM's layout of the descales, [B, Hkv]; one value per tensor is the same
    // call with both strides 0.
    p.descale_batch_stride = shape.h_kv;
    p.descale_head_stride = 1;
  }

  const WorkDecomposition w = decompose_work(shape, d, spec.block_m);
  p.heads_per_group = w.heads_per_group;
  p.groups_per_kv_head = w.groups_per_kv_head;
  p.rows_per_group = w.rows_per_group;
  p.m_tiles = w.m_tiles;
  if (w.items > INT_MAX) throw InputError("shape: too many work items for one launch (" + std::to_string(w.items) + ")");
  p.num_work_items = static_cast<int>(w.items);
  p.m_tiles_div = fast_divisor(p.m_tiles);
  p.groups_div = fast_divisor(p.groups_per_kv_head);
  p.h_kv_div = fast_divisor(p.h_kv);
  p.batch_div = fast_divisor(p.batch);
  p.splits_div = fast_divisor(p.num_splits);
  p.heads_div = fast_divisor(p.heads_per_group);
  p.page_div = fast_divisor(p.page_size);
  p.h_q_div = fast_divisor(p.h_q);
  p.seqlen_q_div = fast_divisor(p.seqlen_q);

  p.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)));
  p.scale_log2 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)) * 1.4426950408889634);
  return p;
}

std::int64_t o_partial_floats(const Shape& s, int num_splits) {
  return std::int64_t{num_splits} * s.batch * s.seqlen_q * s.h_q * s.head_dim;
}

std::int64_t lse_partial_floats(const Shape& s, int num_splits) {
  return std::int64_t{num_splits} * s.batch * s.h_q * s.seqlen_q;
}

}  // namespace evodispatch
