#pragma once
// Split-KV decode attention (DESIGN.md §3), one kernel per specialisation.
//
// Work item = (split s, request b, KV head, head group, m tile). A persistent grid of any
// size >= 1 walks the items with a static stride; the items that read the same KV bytes
// (head groups and m tiles of one (b, KV head, split)) are adjacent, so CTAs running at the
// same time share them through L2. The split is the outermost index so that a CTA's items
// cover different splits: with the split inner, a grid that is a multiple of num_splits
// gives every CTA one split index, and the short or empty last split idles whole CTAs
// (at B = 33, 8 KV heads, 12 splits on 264 CTAs: 9% of an H100's time).
//
// One CTA = WM x WN warps. The CTA's block_m = 16 * WM query rows are split over WM warps
// (16 rows each, one mma row tile); the block_n keys of each K/V tile are split over WN
// warps, so every warp runs its own online softmax over its key slice and nothing is
// exchanged between warps until the end of the item (a FlashDecoding-style split inside
// the CTA: decode has few rows, so splitting the keys keeps all warps busy).
//
// K/V tiles stream through `STAGES` shared-memory stages with 16-byte cp.async; rows past
// the split are zero-filled, never read. Q K^T and P V run on tensor cores (mma.sync
// m16n8k16, fp32 accumulation); scores are in log2 units (scale * log2 e) for exp2.
// Shared tiles are swizzled (16-byte chunk c of row r at c ^ (r % 8)), so ldmatrix and the
// cp.async stores are free of bank conflicts.
//
// fp8 e4m3 KV cache (KV8): the stages hold K/V as stored, one byte per element, so the
// bytes in flight cover twice the keys, and the MMA fragments are widened in registers
// (exactly: every e4m3 value is a bf16 and an fp16 value). ldmatrix reads a stored row's
// bytes as pairs: for K that hands each lane four consecutive columns, a permutation of the
// k16 step that the query's fragments follow; for V (transposed) two columns of two keys,
// so the output tiles hold even and odd columns, put back in order by the epilogue. The
// descales never touch an element: k_descale multiplies the softmax scale, v_descale the
// output's 1 / l. bf16 queries run the fp16 MMA over an fp8 cache (the queries rescaled
// per row into fp16, common.cuh), so e4m3 widens in one conversion per pair instead of
// four. (Measured slower on an H100: widening each landed tile into a 16-bit
// tile in shared memory, 0.62-0.84x of bf16's time on 0.5-1 GB caches instead of
// 0.51-0.58x; docs/performance.md.)
//
// Cluster merge (CLUSTER_): the num_splits CTAs of a thread-block cluster are the splits of
// one item, and instead of fp32 partials for a combine kernel each leaves its normalised
// rows and their LSE in its own shared memory; after a cluster barrier every CTA merges a
// share of the item's rows from all of them (distributed shared memory) and writes the
// output. No partials leave the SMs and no second kernel runs.
#include "common.cuh"

namespace evodispatch {
namespace dev {

// How far (log2 units) a row's scores may pass its running max before an fp8 kernel
// rescales O (the online softmax below).
constexpr float kLazyRescaleLog2 = 8.f;

// Packing the GQA group is not a template argument: the head groups come from DecodeParams
// (heads_per_group, groups_per_kv_head), so one specialisation serves both layouts.
template <int D_, int DT_, bool KV8_, bool PAGED_, int BM_, int BN_, int WM_, int WN_, int STAGES_, bool KV_APART_>
struct DecodeTraits {
  static constexpr int D = D_, DT = DT_, BM = BM_, BN = BN_, WM = WM_, WN = WN_, STAGES = STAGES_;
  static constexpr bool KV8 = KV8_, PAGED = PAGED_;
  static constexpr int kWarps = WM * WN;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kKeysPerWarp = BN / WN;  // keys of a tile one warp scores
  static constexpr int kNTiles = kKeysPerWarp / 8;  // n8 score tiles per warp
  static constexpr int kDTiles = D / 8;         // n8 output tiles per warp
  static constexpr int kChunks = D / 8;         // 16-byte chunks per 16-bit row
  static constexpr int kRowBytes = D * 2;
  static constexpr int kKvBytes = KV8 ? 1 : 2;       // per stored K/V element
  static constexpr int kKvChunks = D * kKvBytes / 16;  // 16-byte chunks per stored K/V row
  static constexpr int kKvRowBytes = D * kKvBytes;
  static constexpr int kKvTileBytes = BN * kKvRowBytes;  // a K or V tile in a stage
  // Q fragments stay in registers up to D = 128 (32 registers); at D = 256 they would
  // push the 128 accumulator registers into spills, so they are re-read from shared memory.
  static constexpr bool kQInRegs = D <= 128;
  // bf16 queries over an fp8 cache take the fp16 MMA, the queries rescaled per row
  // (common.cuh, f16_row_exponent): in registers up to D = 128, in the shared Q tile at
  // D = 256, where Q is re-read every tile. (Not the paged 64-row tiles at D = 256: with a
  // scale per row their registers spill.)
  static constexpr bool kQToF16 = KV8 && DT == kDtypeBf16 && (kQInRegs || !PAGED || BM == 16);
  static constexpr int kMmaDt = kQToF16 ? kDtypeFp16 : DT;  // the MMA's operands, P's packing
  // Rescale O only when a row's max grows by 2^kLazyRescaleLog2: 1-4% faster at D = 256
  // over an fp8 cache, nothing at D <= 128, and up to 3% slower on a 16-bit one (measured
  // on an H100, docs/performance.md).
  static constexpr bool kLazyRescale = KV8;
  // K and V of each tile in copy groups of their own (KernelSpec::kv_apart): Q K^T and the
  // softmax run while V lands, behind a second barrier per tile.
  static constexpr bool kKvApart = KV_APART_;
  static constexpr DecodeSmemLayout kSmem = decode_smem_layout(D, BM, BN, WN, STAGES, PAGED, kKvBytes);
  // Splits are cut in blocks of kSplitBlock rows; the pipeline streams tiles of BN rows.
  static constexpr int kSplitBlock = decode_split_block(D);

  static_assert(D == 64 || D == 128 || D == 256, "head_dim 64, 128 or 256");
  static_assert(BM == 16 * WM, "one 16-row mma tile per warp row");
  static_assert(kKeysPerWarp % 16 == 0, "a warp's key slice is whole k16 steps of P x V");
  static_assert(kChunks % 8 == 0, "the swizzle permutes 8 chunks of a row");
  static_assert(STAGES >= 2, "at least double buffering");
  static_assert(kSplitBlock % BN == 0, "a split is whole tiles");
  static_assert(kThreads >= 32 && kThreads <= 512, "1..16 warps");
  static_assert(kThreads % kKvChunks == 0 && BN % (kThreads / kKvChunks) == 0,
                "every thread loads the same chunk of the same number of rows");
  static_assert(!KV8 || kKvChunks >= 4, "an fp8 row is at least 4 chunks (the swizzle below)");
  static_assert(kSmem.total <= 227 * 1024, "Hopper gives one CTA at most 227 KiB of shared memory");
};

// Byte offset of 16-byte chunk `c` of row `r` in a swizzled tile. Rows of 8 chunks or more
// XOR the chunk with r % 8; rows of 4 (fp8 at D = 64) pair up into 128-byte lines and XOR
// with (r / 2) % 4. Either way 8 consecutive rows at one chunk hit 8 distinct bank groups.
template <int ROW_BYTES>
__device__ __forceinline__ u32 swz(int r, int c) {
  if constexpr (ROW_BYTES == 64) return static_cast<u32>(r * ROW_BYTES + ((c ^ ((r >> 1) & 3)) << 4));
  else return static_cast<u32>(r * ROW_BYTES + ((c ^ (r & 7)) << 4));
}

// MIN_CTAS_: the CTAs per SM the variant is built for (registers capped to fit them).
template <int D_, int DT_, bool KV8_, bool PAGED_, int BM_, int BN_, int WM_, int WN_, int STAGES_, int MIN_CTAS_,
          bool KV_APART_, bool CLUSTER_>
__global__ void __launch_bounds__(32 * WM_ * WN_, MIN_CTAS_)
    decode_kernel(const __grid_constant__ DecodeParams p) {
  using Tr = DecodeTraits<D_, DT_, KV8_, PAGED_, BM_, BN_, WM_, WN_, STAGES_, KV_APART_>;
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, WN = Tr::WN, STAGES = Tr::STAGES;
  constexpr int kThreads = Tr::kThreads, kChunks = Tr::kChunks, kRowBytes = Tr::kRowBytes;
  constexpr int KPW = Tr::kKeysPerWarp, NT = Tr::kNTiles, DTL = Tr::kDTiles;
  constexpr int kOStride = decode_reduce_row_floats(D);
  constexpr int kKvChunks = Tr::kKvChunks, kKvRowBytes = Tr::kKvRowBytes, KVB = Tr::kKvBytes;
  constexpr int kRowsPerPass = kThreads / kKvChunks, kLoadIters = BN / kRowsPerPass;
  using E = Elem<DT_>;             // q and out
  using M = Elem<Tr::kMmaDt>;      // the MMA's operands

  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* const q_smem = smem + Tr::kSmem.q;
  i64* const table = reinterpret_cast<i64*>(smem + Tr::kSmem.table);
  float* const stat_m = reinterpret_cast<float*>(smem + Tr::kSmem.stats);  // [WN][BM]
  float* const stat_l = stat_m + WN * BM;                                   // [WN][BM]
  float* const row_inv_l = stat_l + WN * BM;                                // [BM]
  float* const row_lse = row_inv_l + BM;                                    // [BM]
  unsigned char* const tiles = smem + Tr::kSmem.tiles;
  float* const o_red = reinterpret_cast<float*>(smem + Tr::kSmem.reduce);  // [WN][BM][kOStride]
  const u32 q_base = smem_u32(q_smem);
  const u32 tiles_base = smem_u32(tiles);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / WN, warp_n = warp % WN;
  const int g = lane >> 2, t4 = lane & 3;
  const int rows = p.rows_per_group;
  const int HG = p.heads_per_group;

  // Every CTA of this persistent grid is resident already (grid <= slots), so the combine
  // kernel may be scheduled now: it waits for this grid's end (common.cuh).
  launch_dependent_grids();
  if (p.cta_sms != nullptr && tid == 0) p.cta_sms[blockIdx.x] = sm_id();

  // A cluster walks the items without their split index: its CTA of rank s is split s.
  const int cluster = CLUSTER_ ? fast_div(blockIdx.x, p.splits_div) : blockIdx.x;
  const int cluster_rank = blockIdx.x - cluster * (CLUSTER_ ? p.num_splits : 1);
  const int items = CLUSTER_ ? fast_div(p.num_work_items, p.splits_div) : p.num_work_items;
  const int item_stride = CLUSTER_ ? fast_div(gridDim.x, p.splits_div) : gridDim.x;
  for (int item = cluster; item < items; item += item_stride) {
    // ---- Which work: the innermost indices share the KV bytes (see the file comment).
    int rest = item;
    const int mt = take_mod(rest, p.m_tiles_div);
    const int hg = take_mod(rest, p.groups_div);
    const int kvh = take_mod(rest, p.h_kv_div);
    const int b = take_mod(rest, p.batch_div);
    const int split = CLUSTER_ ? cluster_rank : rest;
    const int head0 = kvh * p.qpk + hg * HG;  // first query head of the group
    const int row0 = mt * BM;                 // first group row of this tile
    const int len = p.cache_seqlens[b];

    // The tile's query rows into shared memory (they join tile 0's copy group). Split 0's
    // are issued while the length is still on its way: no split 0 is empty but that of an
    // empty request.
    auto load_q_tile = [&]() {
      const char* const qg = static_cast<const char*>(p.q);
      auto copy = [&](int x) {
        const int r = x / kChunks, ch = x % kChunks;
        const int gr = row0 + r;
        const bool valid = gr < rows;
        const int i = valid ? fast_div(gr, p.heads_div) : 0, head = valid ? head0 + gr - i * HG : 0;
        const i64 off = b * p.q_batch_stride + i * p.q_row_stride + head * p.q_head_stride + ch * 8;
        cp_async_16(q_base + swz<kRowBytes>(r, ch), valid ? qg + 2 * off : qg, valid);
      };
      // A one-warp CTA copies eight chunks per thread: unrolled, while the length is still
      // on its way, they spilled the ten-CTA fp8 tiles' registers.
      for_strided<BM * kChunks, kThreads, kThreads == 32 ? 1 : 4>(tid, copy);
    };
    if (split == 0) load_q_tile();
    // A paged cache's split 0 reads the page ids of its first STAGES tiles (keys 0 ..
    // STAGES * BN - 1) now too: any entry of the request's row of the table may be read, and
    // those past its pages are dropped once the length is known.
    const int* const pt = PAGED_ ? p.page_table + b * p.page_table_batch_stride : nullptr;
    constexpr int kTableIters = (STAGES * BN + kThreads - 1) / kThreads;
    int early_page[PAGED_ ? kTableIters : 1];
    if constexpr (PAGED_) {
      if (split == 0) {
#pragma unroll
        for (int k = 0; k < kTableIters; ++k) {
          const int page = fast_div(tid + k * kThreads, p.page_div);
          early_page[k] = tid + k * kThreads < STAGES * BN && page < p.page_table_batch_stride ? pt[page] : 0;
        }
      }
    }
    float k_descale = 1.f, v_descale = 1.f;
    if constexpr (Tr::KV8) {
      const i64 at = b * p.descale_batch_stride + kvh * p.descale_head_stride;
      if (p.k_descale) k_descale = p.k_descale[at];
      if (p.v_descale) v_descale = p.v_descale[at];
    }
    // Scores are raw Q K^T of the stored K; this makes them scale * K^T q in log2 units.
    // Per row (g and g + 8 of the warp's 16): a query rescaled into fp16 takes its 2^e back.
    const float c = p.scale_log2 * k_descale;
    float c_lo = c, c_hi = c;

    // Split s covers KV blocks [s * bps, (s + 1) * bps) of this request, bps = ceil(nblk / S).
    constexpr int SB = Tr::kSplitBlock;
    const int nblk = (len + SB - 1) / SB;
    const int bps = fast_div(nblk + p.num_splits - 1, p.splits_div);
    const int k_begin = min(len, split * bps * SB);
    const int k_end = min(len, (split + 1) * bps * SB);
    const int n_tiles = (k_end - k_begin + BN - 1) / BN;

    // The cluster's merge (CLUSTER_): every split's normalised rows (slice 0 of o_red) and
    // LSE (row_lse) are in its CTA's shared memory; CTA s merges rows x = s * kThreads +
    // tid, + num_splits * kThreads, ... of the item's BM x kChunks 16-byte output chunks.
    auto merge_cluster = [&]() {
      cluster_sync();
      const int S = p.num_splits;
      const u32 lse_at = smem_u32(row_lse), o_at = smem_u32(o_red);
      for (int x = split * kThreads + tid; x < BM * kChunks; x += S * kThreads) {
        const int r = x / kChunks, ch = x % kChunks;
        const int gr = row0 + r;
        if (gr >= rows) continue;
        float lse_s[kMaxClusterSplits];
        float mx = neg_inf();
#pragma unroll
        for (int s = 0; s < kMaxClusterSplits; ++s) {
          lse_s[s] = s < S ? ld_cluster_f32(cluster_map(lse_at + 4 * r, s)) : neg_inf();
          mx = fmaxf(mx, lse_s[s]);
        }
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        float sum = 0.f;
#pragma unroll
        for (int s = 0; s < kMaxClusterSplits; ++s) {
          if (lse_s[s] == neg_inf()) continue;  // an empty split (or s >= S): its rows are not written
          const float w = fast_exp2((lse_s[s] - mx) * 1.4426950408889634f);
          const u32 at = cluster_map(o_at + 4 * (r * kOStride + ch * 8), s);
          const float4 u = ld_cluster_f32x4(at), v = ld_cluster_f32x4(at + 16);
          acc[0] += w * u.x, acc[1] += w * u.y, acc[2] += w * u.z, acc[3] += w * u.w;
          acc[4] += w * v.x, acc[5] += w * v.y, acc[6] += w * v.z, acc[7] += w * v.w;
          sum += w;
        }
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        const int i = fast_div(gr, p.heads_div), head = head0 + gr - i * HG;
        const i64 off = b * p.out_batch_stride + i * p.out_row_stride + head * p.out_head_stride + ch * 8;
        store_16(static_cast<char*>(p.out) + 2 * off, E::pack(acc[0] * inv, acc[1] * inv), E::pack(acc[2] * inv, acc[3] * inv),
                 E::pack(acc[4] * inv, acc[5] * inv), E::pack(acc[6] * inv, acc[7] * inv));
        if (ch == 0 && p.lse)
          p.lse[b * p.lse_batch_stride + head * p.lse_head_stride + i] = sum > 0.f ? mx + __logf(sum) : neg_inf();
      }
      cluster_sync();  // no CTA reuses or leaves its shared memory while another reads it
    };

    if (n_tiles == 0 && p.num_splits > 1) {
      // Empty split: LSE = -inf tells the combine to skip this split's O, which is
      // therefore not written (at 256 splits that saves megabytes of zero stores). The
      // query rows of an empty request's split 0 land before the next item's replace them.
      if (split == 0) cp_async_wait<0>();
      if constexpr (CLUSTER_) {
        for_strided<BM, kThreads>(tid, [&](int r) { row_lse[r] = neg_inf(); });
        merge_cluster();
        continue;
      }
      for_strided<BM, kThreads>(tid, [&](int r) {
        const int gr = row0 + r;
        if (gr >= rows) return;
        const int i = fast_div(gr, p.heads_div), head = head0 + gr - i * HG;
        p.lse_partial[((static_cast<i64>(split) * p.batch + b) * p.h_q + head) * p.seqlen_q + i] = neg_inf();
      });
      continue;
    }

    // ---- Per-thread rows: g and g + 8 of the warp's 16, with their last visible key.
    // Key j is visible to token i iff j < k_end and (not causal or j <= len - Lq + i).
    auto key_limit = [&](int r) {
      const int gr = row0 + r;
      if (gr >= rows) return 0;  // padding row: sees nothing
      const int i = gr / HG;  // not fast_div: with it the D = 256 paged fp8 64-row tiles spill
      return p.causal ? min(k_end, len - p.seqlen_q + i + 1) : k_end;
    };
    const int r_lo = warp_m * 16 + g, r_hi = r_lo + 8;
    const int lim_lo = key_limit(r_lo), lim_hi = key_limit(r_hi);
    // Tiles ending at or before this key need no mask for any row of the CTA.
    const int mask_from = p.causal ? min(k_end, len - p.seqlen_q + 1) : k_end;
    // A warp whose 16 rows are all padding skips the math (it still loads and syncs).
    const bool warp_active = row0 + warp_m * 16 < rows;

    const char* const kg = static_cast<const char*>(p.k);
    const char* const vg = static_cast<const char*>(p.v);

    // Page id and row in page of key j. A key past the split, whose copy zero-fills, takes
    // row 0 of page 0: an address in the cache, so that the copy needs neither a second
    // source nor a 64-bit select. Where one warp runs per scheduler every instruction
    // costs time: ncu on an H200 counted 40.6 M instructions in a paged D = 256 call and
    // 28.0 M in its contiguous twin before (200 against 166 us), 28.6 M after (154 us).
    auto lookup = [&](int j) -> int2 {
      if (j >= k_end) return make_int2(0, 0);
      const int page = fast_div(j, p.page_div);
      return make_int2(pt[page], j - page * p.page_div.d);
    };
    // The byte offset of a key's K and V rows from the head's first row, as the table holds
    // it: worked out once per key by the thread that stores it, not in the copy loop by
    // every thread that copies a 16-byte chunk of the row. (A paged cache's V has K's page
    // and row strides: decode_params_for.)
    auto row_offset = [&](int2 e) -> i64 { return KVB * (e.x * p.k_batch_stride + e.y * p.k_row_stride); };

    auto stage_at = [&](int r, int ch) -> u32 { return swz<kKvRowBytes>(r, ch); };
    // Issue the cp.async copies of tile `tile`'s K (parts 1), V (2) or both (3) into its
    // stage; past n_tiles, nothing (the caller still commits an empty group so the group
    // count stays uniform). Thread `tid` copies chunk tid % kKvChunks of rows tid / kKvChunks
    // + it * kRowsPerPass.
    auto load_tile = [&](int tile, int parts) {
      if (tile >= n_tiles) return;
      const int stage = tile % STAGES;
      const u32 k_dst = tiles_base + stage * 2 * Tr::kKvTileBytes;
      const u32 v_dst = k_dst + Tr::kKvTileBytes;
      const int kt0 = k_begin + tile * BN;
      const int r0 = tid / kKvChunks, ch = tid % kKvChunks;
      if constexpr (!PAGED_) {
        // One 64-bit pointer per tensor, bumped by a fixed step: few registers.
        const char* kp = kg + KVB * (b * p.k_batch_stride + static_cast<i64>(kt0 + r0) * p.k_row_stride +
                                     kvh * p.k_head_stride) + ch * 16;
        const char* vp = vg + KVB * (b * p.v_batch_stride + static_cast<i64>(kt0 + r0) * p.v_row_stride +
                                     kvh * p.v_head_stride) + ch * 16;
        const i64 k_step = KVB * kRowsPerPass * p.k_row_stride, v_step = KVB * kRowsPerPass * p.v_row_stride;
#pragma unroll
        for (int it = 0; it < kLoadIters; ++it) {
          const int r = r0 + it * kRowsPerPass;
          const bool valid = kt0 + r < k_end;
          if (parts & 1) cp_async_16(k_dst + stage_at(r, ch), valid ? kp : kg, valid);
          if (parts & 2) cp_async_16(v_dst + stage_at(r, ch), valid ? vp : vg, valid);
          kp += k_step;
          vp += v_step;
        }
      } else {
        const char* const kh = kg + KVB * kvh * p.k_head_stride + ch * 16;
        const char* const vh = vg + KVB * kvh * p.v_head_stride + ch * 16;
        const int live = k_end - kt0;  // rows of the tile in the split
#pragma unroll
        for (int it = 0; it < kLoadIters; ++it) {
          const int r = r0 + it * kRowsPerPass;
          const i64 at = table[stage * BN + r];
          const bool valid = r < live;
          if (parts & 1) cp_async_16(k_dst + stage_at(r, ch), kh + at, valid);
          if (parts & 2) cp_async_16(v_dst + stage_at(r, ch), vh + at, valid);
        }
      }
    };

    auto load_and_commit = [&](int tile) {
      if constexpr (Tr::kKvApart) {
        load_tile(tile, 1);
        cp_async_commit();
        load_tile(tile, 2);
      } else {
        load_tile(tile, 3);
      }
      cp_async_commit();
    };
    // Copy groups still in flight behind tile t's K once the top of its iteration may go on
    // (STAGES - 2 tiles, and with K and V apart, its V), and behind its V after that
    // iteration issued tile t + STAGES - 1.
    constexpr int kGroupsAfterK = Tr::kKvApart ? 2 * STAGES - 3 : STAGES - 2, kGroupsAfterV = 2 * STAGES - 2;

    // ---- Prologue: Q of the splits after 0, the row offsets of the first STAGES tiles,
    // then tiles 0 .. STAGES-2 in flight.
    if (split != 0) load_q_tile();
    if constexpr (PAGED_) {
#pragma unroll
      for (int k = 0; k < kTableIters; ++k) {
        const int x = tid + k * kThreads, j = k_begin + x;
        if (x >= STAGES * BN) break;
        int2 e = make_int2(0, 0);
        if (split != 0) e = lookup(j);
        else if (j < k_end) e = make_int2(early_page[k], j - fast_div(j, p.page_div) * p.page_div.d);
        table[x] = row_offset(e);
      }
      __syncthreads();
    }
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) load_and_commit(s);

    // ---- Accumulators: this warp's 16 rows over its key slice.
    float o[DTL][4];
#pragma unroll
    for (int d = 0; d < DTL; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
    float m_lo = neg_inf(), m_hi = neg_inf();  // running max of raw scores
    float l_lo = 0.f, l_hi = 0.f;              // this lane's part of the running sum
    u32 qf[Tr::kQInRegs ? D / 16 : 1][4];

    // ldmatrix lane addressing (see common.cuh for the fragment layouts):
    //   A (Q) and trans-B (V): row (l % 8) + 8 * ((l / 8) % 2), chunk c0 + l / 16;
    //   B (K):                 row (l % 8) + 8 * (l / 16),      chunk c0 + (l / 8) % 2.
    // Every row base is a multiple of 8, so the swizzle only sees l % 8, and with c0 even
    // the swizzled chunk is (c0 & ~7) + ((c0 & 7 | lane part) ^ (l % 8)): four per-lane
    // offsets (c0 & 7 = 0, 2, 4, 6) plus a compile-time immediate cover every fragment.
    u32 a_off[4], b_off[4];
    {
      const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_ch = lane >> 4;
      const int k_row = (lane & 7) + (lane >> 4) * 8, k_ch = (lane >> 3) & 1;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        a_off[q] = swz<kRowBytes>(a_row, 2 * q + a_ch);
        b_off[q] = swz<kRowBytes>(k_row, 2 * q + k_ch);
      }
    }
    // Fragment address: rows [row, row + 16), chunks [ch, ch + 2) (row % 8 == 0, ch even).
    auto frag_a = [&](u32 base, int row, int ch) { return base + row * kRowBytes + (ch & ~7) * 16 + a_off[(ch & 7) >> 1]; };
    auto frag_b = [&](u32 base, int row, int ch) { return base + row * kRowBytes + (ch & ~7) * 16 + b_off[(ch & 7) >> 1]; };
    // fp8 stage: matrix j of an x4 is rows [row + 8 (j % 2), + 8), chunk ch + j / 2, the four
    // 8 x 8 pair tiles of two n8 (or k16) tiles by two chunks.
    auto fp8_frag = [&](u32 base, int row, int ch) {
      return base + swz<kKvRowBytes>(row + ((lane >> 3) & 1) * 8 + (lane & 7), ch + (lane >> 4));
    };
    // The query's A fragment of k16 step kk in the fp8 column order: a0/a1 hold columns
    // 4t, 4t + 1 of the 16, a2/a3 columns 4t + 2, 4t + 3.
    auto q_frag_fp8 = [&](int kk, u32 (&a)[4]) {
      const int r = warp_m * 16 + g;
      const u32 at = q_base + swz<kRowBytes>(r, 2 * kk + (t4 >> 1)) + 8 * (t4 & 1);
      const u32 at_hi = q_base + swz<kRowBytes>(r + 8, 2 * kk + (t4 >> 1)) + 8 * (t4 & 1);
      a[0] = lds_4(at), a[2] = lds_4(at + 4);
      a[1] = lds_4(at_hi), a[3] = lds_4(at_hi + 4);
    };

    // The query's fragments, once per item (D <= 128). bf16 queries over an fp8 cache go into
    // fp16 here, each row times 2^e (common.cuh, f16_row_exponent), and the row's softmax
    // scale takes 2^e back.
    auto load_q = [&]() {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        if constexpr (Tr::KV8) {
          q_frag_fp8(kk, qf[kk]);
        } else {
          ldsm_x4(frag_a(q_base, warp_m * 16, 2 * kk), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
        }
      }
      if constexpr (Tr::kQToF16 && Tr::kQInRegs) {
        // a0 and a2 hold row g's columns, a1 and a3 row g + 8's; the quad holds a row.
        float max_lo = 0.f, max_hi = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          max_lo = fmaxf(max_lo, fmaxf(bf16x2_max_abs(qf[kk][0]), bf16x2_max_abs(qf[kk][2])));
          max_hi = fmaxf(max_hi, fmaxf(bf16x2_max_abs(qf[kk][1]), bf16x2_max_abs(qf[kk][3])));
        }
        const int e_lo = f16_row_exponent(quad_max(max_lo)), e_hi = f16_row_exponent(quad_max(max_hi));
        const float up_lo = pow2(e_lo), up_hi = pow2(e_hi);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          qf[kk][0] = bf16x2_to_f16x2(qf[kk][0], up_lo), qf[kk][2] = bf16x2_to_f16x2(qf[kk][2], up_lo);
          qf[kk][1] = bf16x2_to_f16x2(qf[kk][1], up_hi), qf[kk][3] = bf16x2_to_f16x2(qf[kk][3], up_hi);
        }
        c_lo = c * pow2(-e_lo);
        c_hi = c * pow2(-e_hi);
      }
    };
    // D = 256: the shared Q tile rewritten in fp16, four threads a row, each row times 2^e.
    // Its 2^-e goes through row_lse, which is free until the epilogue.
    auto q_tile_to_f16 = [&]() {
      constexpr int kParts = 4, kPartChunks = kChunks / kParts;
      static_assert(Tr::kQInRegs || BM * kParts <= kThreads, "four threads per row of the Q tile");
      const int r = tid / kParts, c0 = (tid % kParts) * kPartChunks;  // lanes 4r .. 4r + 3
      const bool mine = r < BM;
      float mx = 0.f;
      if (mine) {
#pragma unroll
        for (int ch = c0; ch < c0 + kPartChunks; ++ch) {
          const uint4 w = *reinterpret_cast<const uint4*>(q_smem + swz<kRowBytes>(r, ch));
          mx = fmaxf(mx, fmaxf(fmaxf(bf16x2_max_abs(w.x), bf16x2_max_abs(w.y)),
                               fmaxf(bf16x2_max_abs(w.z), bf16x2_max_abs(w.w))));
        }
      }
      const int e = f16_row_exponent(quad_max(mx));
      if (mine) {
        const float up = pow2(e);
#pragma unroll
        for (int ch = c0; ch < c0 + kPartChunks; ++ch) {
          uint4* const at = reinterpret_cast<uint4*>(q_smem + swz<kRowBytes>(r, ch));
          const uint4 w = *at;
          *at = make_uint4(bf16x2_to_f16x2(w.x, up), bf16x2_to_f16x2(w.y, up), bf16x2_to_f16x2(w.z, up),
                           bf16x2_to_f16x2(w.w, up));
        }
        if (c0 == 0) row_lse[r] = pow2(-e);
      }
      __syncthreads();
      c_lo = c * row_lse[r_lo];
      c_hi = c * row_lse[r_hi];
    };
    if constexpr (Tr::kQToF16) {
      // Before the loop, so that the rescaling's registers stay out of it (the three-CTA
      // tiles spilled with it inside). Q came with tile 0's (K's) group.
      cp_async_wait<kGroupsAfterK>();
      __syncthreads();
      if constexpr (Tr::kQInRegs) {
        if (warp_active) load_q();
      } else {
        q_tile_to_f16();
      }
    }

    for (int tile = 0; tile < n_tiles; ++tile) {
      // Page ids of the tile STAGES ahead: loaded now, stored after the math, so the
      // page-table latency hides behind this tile's work.
      int2 pend[PAGED_ ? (BN + kThreads - 1) / kThreads : 1];
      if constexpr (PAGED_) {
#pragma unroll
        for (int k = 0; k < (BN + kThreads - 1) / kThreads; ++k) {
          const int r = tid + k * kThreads;
          pend[k] = r < BN ? lookup(k_begin + (tile + STAGES) * BN + r) : make_int2(0, 0);
        }
      }

      cp_async_wait<kGroupsAfterK>();
      __syncthreads();  // tile `tile` (its K) visible to all; everyone is done with tile - 1's stage
      load_and_commit(tile + STAGES - 1);

      const u32 k_tile = tiles_base + (tile % STAGES) * 2 * Tr::kKvTileBytes;
      const u32 v_tile = k_tile + Tr::kKvTileBytes;
      const int key0 = warp_n * KPW;  // this warp's first key in the tile
      float s[NT][4];                 // the warp's scores, then P
      if (warp_active) {
        if constexpr (Tr::kQInRegs && !Tr::kQToF16) {
          if (tile == 0) load_q();
        }

        // S = Q K^T over the warp's KPW keys.
#pragma unroll
        for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
        if constexpr (Tr::KV8) {
          // fp8 K straight from its stage: ldmatrix reads 8 keys x 16 bytes as 8 x 8 pairs,
          // so lane (g, t) gets columns 4t .. 4t + 3 of key g, the B fragment of columns
          // (4t, 4t + 1) and (4t + 2, 4t + 3): a permutation of the 16 the query follows.
#pragma unroll
          for (int kk = 0; kk < D / 16; kk += 2) {
            u32 a0[4], a1[4];
            if constexpr (Tr::kQInRegs) {
#pragma unroll
              for (int q = 0; q < 4; ++q) a0[q] = qf[kk][q], a1[q] = qf[kk + 1][q];
            } else {
              q_frag_fp8(kk, a0);
              q_frag_fp8(kk + 1, a1);
            }
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
              u32 r[4], b[8];
              ldsm_x4(fp8_frag(k_tile, key0 + n * 8, kk), r[0], r[1], r[2], r[3]);
#pragma unroll
              for (int q = 0; q < 4; ++q) widen_e4m3x4<Tr::kMmaDt>(r[q], b[2 * q], b[2 * q + 1]);
              M::mma(s[n], a0, b[0], b[1]);
              M::mma(s[n + 1], a0, b[2], b[3]);
              M::mma(s[n], a1, b[4], b[5]);
              M::mma(s[n + 1], a1, b[6], b[7]);
            }
          }
        } else {
  #pragma unroll
          for (int kk = 0; kk < D / 16; ++kk) {
            u32 a[4];
            if constexpr (Tr::kQInRegs) {
              a[0] = qf[kk][0], a[1] = qf[kk][1], a[2] = qf[kk][2], a[3] = qf[kk][3];
            } else {
              ldsm_x4(frag_a(q_base, warp_m * 16, 2 * kk), a[0], a[1], a[2], a[3]);
            }
  #pragma unroll
            for (int n = 0; n < NT; n += 2) {
              u32 b0, b1, b2, b3;
              ldsm_x4(frag_b(k_tile, key0 + n * 8, 2 * kk), b0, b1, b2, b3);
              M::mma(s[n], a, b0, b1);
              M::mma(s[n + 1], a, b2, b3);
            }
          }
        }

        // Mask keys a row may not see (only tiles that reach the split end or the causal edge).
        const int kt0 = k_begin + tile * BN;
        if (kt0 + BN > mask_from) {
#pragma unroll
          for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int j = kt0 + key0 + n * 8 + 2 * t4 + e;
              if (j >= lim_lo) s[n][e] = neg_inf();
              if (j >= lim_hi) s[n][2 + e] = neg_inf();
            }
        }

        // Online softmax in log2 units. Lazily (kLazyRescale) the running max, and with it
        // l and O, moves only when some row of the warp passes it by more than
        // kLazyRescaleLog2, so that most tiles skip O's D / 2 multiplies per lane; until then
        // P is taken against the stale max and stays under 2^kLazyRescaleLog2, which fp16
        // and bf16 hold. A row with nothing visible yet keeps max -inf and base 0, so that
        // exp2(-inf - base) = 0 instead of NaN.
        float mx_lo = m_lo, mx_hi = m_hi;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
          mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
        }
        mx_lo = quad_max(mx_lo);
        mx_hi = quad_max(mx_hi);
        const bool grows = mx_lo * c_lo - kLazyRescaleLog2 > m_lo * c_lo || mx_hi * c_hi - kLazyRescaleLog2 > m_hi * c_hi;
        auto exp2_base = [](float m, float c_row) { return m == neg_inf() ? 0.f : m * c_row; };
        if (!Tr::kLazyRescale || __any_sync(0xffffffffu, grows)) {
          const float alpha_lo = fast_exp2(m_lo * c_lo - exp2_base(mx_lo, c_lo));
          const float alpha_hi = fast_exp2(m_hi * c_hi - exp2_base(mx_hi, c_hi));
          m_lo = mx_lo, m_hi = mx_hi;
          l_lo *= alpha_lo, l_hi *= alpha_hi;
#pragma unroll
          for (int d = 0; d < DTL; ++d) {
            o[d][0] *= alpha_lo, o[d][1] *= alpha_lo;
            o[d][2] *= alpha_hi, o[d][3] *= alpha_hi;
          }
        }
        const float base_lo = exp2_base(m_lo, c_lo), base_hi = exp2_base(m_hi, c_hi);
        float sum_lo = 0.f, sum_hi = 0.f;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          s[n][0] = fast_exp2(fmaf(s[n][0], c_lo, -base_lo));
          s[n][1] = fast_exp2(fmaf(s[n][1], c_lo, -base_lo));
          s[n][2] = fast_exp2(fmaf(s[n][2], c_hi, -base_hi));
          s[n][3] = fast_exp2(fmaf(s[n][3], c_hi, -base_hi));
          sum_lo += s[n][0] + s[n][1];
          sum_hi += s[n][2] + s[n][3];
        }
        l_lo += sum_lo;
        l_hi += sum_hi;
      }

      if constexpr (Tr::kKvApart) {
        cp_async_wait<kGroupsAfterV>();
        __syncthreads();  // tile `tile`'s V visible to all
      }
      if (warp_active) {
        // O += P V: two adjacent n8 score tiles form one k16 A fragment of P.
#pragma unroll
        for (int kk = 0; kk < KPW / 16; ++kk) {
          u32 a[4];
          a[0] = M::pack(s[2 * kk][0], s[2 * kk][1]);
          a[1] = M::pack(s[2 * kk][2], s[2 * kk][3]);
          a[2] = M::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
          a[3] = M::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
          if constexpr (Tr::KV8) {
            // fp8 V straight from its stage, transposed as pairs: lane (g, t) gets columns
            // 2g and 2g + 1 of keys 2t and 2t + 1. Bytes 0 and 2 are column 2g's B fragment,
            // 1 and 3 column 2g + 1's: output tile 2c holds the even columns of chunk c, tile
            // 2c + 1 the odd ones (the epilogue puts them back in order).
#pragma unroll
            for (int ch = 0; ch < D / 16; ch += 2) {
              u32 r[4], e[4], od[4];
              ldsm_x4_trans(fp8_frag(v_tile, key0 + kk * 16, ch), r[0], r[1], r[2], r[3]);
#pragma unroll
              for (int q = 0; q < 4; ++q) widen_e4m3x4<Tr::kMmaDt>(__byte_perm(r[q], 0u, 0x3120), e[q], od[q]);
              M::mma(o[2 * ch], a, e[0], e[1]);
              M::mma(o[2 * ch + 1], a, od[0], od[1]);
              M::mma(o[2 * ch + 2], a, e[2], e[3]);
              M::mma(o[2 * ch + 3], a, od[2], od[3]);
            }
            continue;
          }
#pragma unroll
          for (int d = 0; d < DTL; d += 2) {
            u32 b0, b1, b2, b3;
            ldsm_x4_trans(frag_a(v_tile, key0 + kk * 16, d), b0, b1, b2, b3);
            M::mma(o[d], a, b0, b1);
            M::mma(o[d + 1], a, b2, b3);
          }
        }
      }

      if constexpr (PAGED_) {
        // Slot tile % STAGES held this tile's row offsets, consumed when it was issued.
#pragma unroll
        for (int k = 0; k < (BN + kThreads - 1) / kThreads; ++k) {
          const int r = tid + k * kThreads;
          if (r < BN) table[(tile % STAGES) * BN + r] = row_offset(pend[k]);
        }
      }
    }

    // ---- Epilogue: merge the WN key slices of each row, normalise, write.
    cp_async_wait<0>();
    l_lo = quad_sum(l_lo);
    l_hi = quad_sum(l_hi);
    if (t4 == 0) {
      stat_m[warp_n * BM + r_lo] = m_lo, stat_l[warp_n * BM + r_lo] = l_lo;
      stat_m[warp_n * BM + r_hi] = m_hi, stat_l[warp_n * BM + r_hi] = l_hi;
    }
    __syncthreads();  // statistics visible; every warp is past its last tile (stages free)

    auto merge_row = [&](int r, float m_own, float c_row, float& scale_own) {
      float mx = neg_inf();
#pragma unroll
      for (int w = 0; w < WN; ++w) mx = fmaxf(mx, stat_m[w * BM + r]);
      float l = 0.f;
      if (mx != neg_inf()) {
#pragma unroll
        for (int w = 0; w < WN; ++w) l += stat_l[w * BM + r] * fast_exp2((stat_m[w * BM + r] - mx) * c_row);
      }
      scale_own = mx == neg_inf() ? 0.f : fast_exp2((m_own - mx) * c_row);
      if (warp_n == 0 && t4 == 0) {
        row_inv_l[r] = l > 0.f ? 1.f / l : 0.f;
        // Natural-log LSE of the raw scaled scores: (max * scale * log2 e + log2 l) * ln 2.
        row_lse[r] = l > 0.f ? (mx * c_row + fast_log2(l)) * 0.69314718055994531f : neg_inf();
      }
    };
    float sc_lo, sc_hi;
    merge_row(r_lo, m_lo, c_lo, sc_lo);
    merge_row(r_hi, m_hi, c_hi, sc_hi);
    {
      // Only the rows the output reads: a packed group of 2-12 rows would store most of the
      // 16-row tile's partial O for nothing (0.981 of the time on bench/gpu/fp8-short.json
      // and 0.997 on short-calls.json on an H200, docs/performance.md).
      float* const lo = o_red + (warp_n * BM + r_lo) * kOStride;
      float* const hi = o_red + (warp_n * BM + r_hi) * kOStride;
      const bool lo_live = row0 + r_lo < rows, hi_live = row0 + r_hi < rows;
      if constexpr (Tr::KV8) {
        // Tiles 2c and 2c + 1 hold the even and odd columns of chunk c: columns 16c + 4t .. + 3.
#pragma unroll
        for (int ch = 0; ch < D / 16; ++ch) {
          const float* const e = o[2 * ch];
          const float* const od = o[2 * ch + 1];
          if (lo_live)
            *reinterpret_cast<float4*>(lo + ch * 16 + 4 * t4) =
                make_float4(e[0] * sc_lo, od[0] * sc_lo, e[1] * sc_lo, od[1] * sc_lo);
          if (hi_live)
            *reinterpret_cast<float4*>(hi + ch * 16 + 4 * t4) =
                make_float4(e[2] * sc_hi, od[2] * sc_hi, e[3] * sc_hi, od[3] * sc_hi);
        }
      } else {
#pragma unroll
        for (int d = 0; d < DTL; ++d) {
          if (lo_live) *reinterpret_cast<float2*>(lo + d * 8 + 2 * t4) = make_float2(o[d][0] * sc_lo, o[d][1] * sc_lo);
          if (hi_live) *reinterpret_cast<float2*>(hi + d * 8 + 2 * t4) = make_float2(o[d][2] * sc_hi, o[d][3] * sc_hi);
        }
      }
    }
    __syncthreads();

    // Each thread writes 8 consecutive elements of one row: 16-byte stores of the output
    // (two of the fp32 partial), rows of one head contiguous across threads.
    for_strided<BM * kChunks, kThreads>(tid, [&](int x) {
      const int r = x / kChunks, ch = x % kChunks;
      const int gr = row0 + r;
      if (gr >= rows) return;
      const int i = fast_div(gr, p.heads_div), head = head0 + gr - i * HG;
      float acc[8];
      {
        const float4 u = *reinterpret_cast<const float4*>(o_red + r * kOStride + ch * 8);
        const float4 v = *reinterpret_cast<const float4*>(o_red + r * kOStride + ch * 8 + 4);
        acc[0] = u.x, acc[1] = u.y, acc[2] = u.z, acc[3] = u.w, acc[4] = v.x, acc[5] = v.y, acc[6] = v.z, acc[7] = v.w;
      }
#pragma unroll
      for (int w = 1; w < WN; ++w) {
        const float* src = o_red + (w * BM + r) * kOStride + ch * 8;
        const float4 u = *reinterpret_cast<const float4*>(src);
        const float4 v = *reinterpret_cast<const float4*>(src + 4);
        acc[0] += u.x, acc[1] += u.y, acc[2] += u.z, acc[3] += u.w;
        acc[4] += v.x, acc[5] += v.y, acc[6] += v.z, acc[7] += v.w;
      }
      const float inv = row_inv_l[r] * v_descale;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] *= inv;
      if constexpr (CLUSTER_) {
        // In place of slice 0, which only this thread reads: for merge_cluster.
        float* const dst = o_red + r * kOStride + ch * 8;
        *reinterpret_cast<float4*>(dst) = make_float4(acc[0], acc[1], acc[2], acc[3]);
        *reinterpret_cast<float4*>(dst + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
      } else if (p.num_splits == 1) {
        const i64 off = b * p.out_batch_stride + i * p.out_row_stride + head * p.out_head_stride + ch * 8;
        store_16(static_cast<char*>(p.out) + 2 * off, E::pack(acc[0], acc[1]), E::pack(acc[2], acc[3]),
                 E::pack(acc[4], acc[5]), E::pack(acc[6], acc[7]));
      } else {
        float* dst = p.o_partial + (((static_cast<i64>(split) * p.batch + b) * p.seqlen_q + i) * p.h_q + head) * D + ch * 8;
        *reinterpret_cast<float4*>(dst) = make_float4(acc[0], acc[1], acc[2], acc[3]);
        *reinterpret_cast<float4*>(dst + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
      }
    });
    if constexpr (CLUSTER_) {
      merge_cluster();
      continue;
    }
    for_strided<BM, kThreads>(tid, [&](int r) {
      const int gr = row0 + r;
      if (gr >= rows) return;
      const int i = fast_div(gr, p.heads_div), head = head0 + gr - i * HG;
      if (p.num_splits == 1) {
        if (p.lse) p.lse[b * p.lse_batch_stride + head * p.lse_head_stride + i] = row_lse[r];
      } else {
        p.lse_partial[((static_cast<i64>(split) * p.batch + b) * p.h_q + head) * p.seqlen_q + i] = row_lse[r];
      }
    });
    __syncthreads();  // the next item reuses Q, the table and the stages
  }
}

}  // namespace dev
}  // namespace evodispatch
