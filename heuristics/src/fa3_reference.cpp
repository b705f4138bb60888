// FlashAttention-3's Hopper dispatch (non-varlen path) in C++: the twin that the Lua policy
// heuristics/policies/fa3.lua is held to by tests/heuristics/test_policies.cpp.
//
// Written from the FA3 sources, not from the Lua file, and shaped like them so each piece
// can be read side by side with its original (github.com/Dao-AILab/flash-attention):
//   tile_size_fwd_sm90    hopper/tile_size.h   @ 8a8021500fe57d8b4c8eab44f5e5971de88ff924
//   should_pack_gqa,
//   num_splits_heuristic  hopper/heuristics.h  @ 6d21ae21bbd9587e1b6f99f7e50eb83f14e1ec4f
//   get_pagedkv_tma, get_pack_gqa, get_num_splits and mha_fwd's decode rule for causal
//                         hopper/flash_api.cpp @ 0e79d71175346c7151f49ab6287084a052bc9613
// Like FA3 it computes efficiencies in float; the Lua file must reproduce that rounding.
// The choices where this contract differs from FA3 are the ones fa3.lua lists: sm90 rules
// for every device, head dims above 256 as 256, a paged cache as a tight page table
// (seqlen_k = its capacity), sm_margin 0, and no 32-bit overflow of size_one_kv_head.
#include <evodispatch/heuristics/policy.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace evodispatch {

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// The flash_api.cpp parameters this dispatch reads, derived from a Shape.
struct Fa3Params {
  int b, seqlen_q, seqlen_k, h, h_k, d, d_rounded;
  int element_size;  // bytes per K/V element
  bool paged;
  int page_size;
  bool is_causal;
  bool pagedkv_tma = false;
  int num_sm;
  int num_splits = 0;
};

int round_up_headdim(int d) {
  for (int supported : {64, 96, 128, 192})
    if (d <= supported) return supported;
  return 256;
}

struct Tile {
  int block_m, block_n;
};

// tile_size_fwd_sm90 with headdim_v == headdim, no local window, no softcap, K-major V.
Tile tile_size_fwd_sm90(int headdim, bool is_causal, int element_size, bool paged_kv_non_tma) {
  if (element_size == 2) {
    if (headdim <= 64) return {192, is_causal || paged_kv_non_tma ? 128 : 192};
    if (headdim <= 96) return {192, paged_kv_non_tma ? 128 : 144};
    if (headdim <= 128) return {128, is_causal || paged_kv_non_tma ? 128 : 176};
    if (headdim <= 192) return {128, paged_kv_non_tma ? 96 : 112};  // headdim_v = 192 > 128
    return {128, 80};
  }
  if (headdim <= 64) return {192, 160};
  if (headdim <= 96) return {192, 128};
  if (headdim <= 128) return {128, paged_kv_non_tma ? 160 : 224};
  if (headdim <= 192) return {128, 160};
  return {128, 128};
}

Tile kernel_tile(const Fa3Params& p) {
  return tile_size_fwd_sm90(p.d_rounded, p.is_causal, p.element_size, p.paged && !p.pagedkv_tma);
}

bool get_pagedkv_tma(const Fa3Params& p) {
  if (!p.paged) return false;
  const Tile t = tile_size_fwd_sm90(p.d_rounded, p.is_causal, p.element_size, /*paged_kv_non_tma=*/false);
  return p.page_size % t.block_n == 0 && p.seqlen_q * (p.h / p.h_k) > t.block_m;
}

bool should_pack_gqa(int seqlen_q, int qhead_per_khead, int block_m) {
  auto round_up = [](int a, int b) { return ceil_div(a, b) * b; };
  const float nopack_efficiency = float(seqlen_q) / float(round_up(seqlen_q, block_m));
  const float pack_efficiency =
      float(seqlen_q * qhead_per_khead) / float(round_up(seqlen_q * qhead_per_khead, block_m));
  return nopack_efficiency < 0.9 * pack_efficiency;
}

bool get_pack_gqa(const Fa3Params& p) {
  if ((p.paged && !p.pagedkv_tma) || p.num_splits > 1) return true;
  if (p.h == p.h_k) return false;
  return should_pack_gqa(p.seqlen_q, p.h / p.h_k, kernel_tile(p).block_m);
}

int num_splits_heuristic(int total_mblocks, int num_sms, int num_n_blocks, int num_m_blocks,
                         std::int64_t size_one_kv_head, bool is_causal_or_local, int max_splits) {
  if (total_mblocks >= 0.8f * num_sms) {
    const std::int64_t size_l2 = 50 * 1024 * 1024;
    if (size_one_kv_head > size_l2 && num_m_blocks >= num_sms * 2 && !is_causal_or_local)
      return static_cast<int>(std::min<std::int64_t>((size_one_kv_head + size_l2 - 1) / size_l2, max_splits));
    return 1;
  }
  if (num_n_blocks <= 4) return 1;
  max_splits = std::min({max_splits, num_sms, num_n_blocks});
  std::vector<float> efficiency;
  float max_efficiency = 0.f;
  for (int s = 1; s <= max_splits; ++s) {
    const float n_waves = float(total_mblocks * s) / num_sms;
    const float eff = n_waves / std::ceil(n_waves);
    max_efficiency = std::max(max_efficiency, eff);
    efficiency.push_back(eff);
  }
  for (int s = 1; s <= max_splits; ++s)
    if (efficiency[s - 1] >= 0.85 * max_efficiency) return s;
  return 1;
}

int get_num_splits(const Fa3Params& p) {
  const Tile t = kernel_tile(p);
  const int num_n_blocks = ceil_div(p.seqlen_k, t.block_n);
  const int num_m_blocks = ceil_div(p.seqlen_q * (p.h / p.h_k), t.block_m);
  const std::int64_t size_one_kv_head = std::int64_t(p.seqlen_k) * (p.d + p.d) * p.element_size;
  const int total_mblocks = p.b * p.h_k * num_m_blocks;
  return num_splits_heuristic(total_mblocks, p.num_sm, num_n_blocks, num_m_blocks, size_one_kv_head, p.is_causal,
                              128);
}

// What mha_fwd sets up before asking the heuristics.
Fa3Params params_of(const Shape& s, const DeviceInfo& hw) {
  Fa3Params p{};
  p.b = s.batch;
  p.seqlen_q = s.seqlen_q;
  p.paged = s.page_size > 0;
  p.page_size = s.page_size;
  p.seqlen_k = p.paged ? ceil_div(s.seqlen_k, s.page_size) * s.page_size : s.seqlen_k;
  p.h = s.h_q;
  p.h_k = s.h_kv;
  p.d = s.head_dim;
  p.d_rounded = round_up_headdim(s.head_dim);
  p.element_size = s.dtype == Dtype::fp8 ? 1 : 2;
  // One query token: causal is the same as non-causal, and FA3 drops it except for
  // head dim (64, 128] with a paged cache (kBlockN = 128 suits paged KV and TMA there).
  p.is_causal = s.causal;
  if (s.seqlen_q == 1 && (s.head_dim <= 64 || s.head_dim > 128 || !p.paged)) p.is_causal = false;
  p.num_sm = hw.num_sms;  // - sm_margin (0)
  return p;
}

}  // namespace

Decision fa3_reference(const Shape& shape, const DeviceInfo& hw) {
  Fa3Params p = params_of(shape, hw);
  p.pagedkv_tma = get_pagedkv_tma(p);
  p.num_splits = get_num_splits(p);
  Decision d;
  d.num_splits = p.num_splits;
  d.pack_gqa = get_pack_gqa(p);  // after num_splits, as in mha_fwd
  d.sm_margin = 0;
  return d;
}

// hopper/flash_api.cpp mha_fwd with seqused_k: `use_dynamic_split = is_varlen && b <= 992`
// (PREPARE_VARLEN_MAX_BATCHES_1CTA); get_num_splits then counts total_mblocks with batch 1,
// an upper bound that prepare_varlen_num_blocks_kernel (hopper/flash_prepare_scheduler.cu
// @ fa60e7cc) lowers per request:
//   blocks_per_sm = ceilf(total_blocks * 1.1f * num_head / num_sm)
//   num_splits    = max(min(ceil(num_n_blocks / blocks_per_sm), static), 1)
// with num_head = h_kv when packed, h_q otherwise. Every request holds seqlen_k keys.
Decision fa3_kvcache_reference(const Shape& shape, const DeviceInfo& hw) {
  constexpr int kMaxDynamicBatch = 992;
  const bool dynamic = shape.batch <= kMaxDynamicBatch;
  Fa3Params p = params_of(shape, hw);
  p.pagedkv_tma = get_pagedkv_tma(p);
  Fa3Params bound = p;
  if (dynamic) bound.b = 1;
  p.num_splits = get_num_splits(bound);
  Decision d;
  d.pack_gqa = get_pack_gqa(p);
  d.num_splits = p.num_splits;
  d.sm_margin = 0;
  if (!dynamic) return d;
  const Tile t = kernel_tile(p);
  const bool packed = *d.pack_gqa;
  const int num_m_blocks = ceil_div(p.seqlen_q * (packed ? p.h / p.h_k : 1), t.block_m);
  const int num_n_blocks = ceil_div(shape.seqlen_k, t.block_n);  // the request's own keys
  const int heads = packed ? p.h_k : p.h;
  const int total_blocks = p.b * num_m_blocks * num_n_blocks;
  const int blocks_per_sm = static_cast<int>(std::ceil(float(total_blocks) * 1.1f * float(heads) / float(p.num_sm)));
  d.num_splits = std::max(std::min(ceil_div(num_n_blocks, blocks_per_sm), p.num_splits), 1);
  return d;
}

}  // namespace evodispatch
