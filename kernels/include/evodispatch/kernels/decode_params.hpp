#pragma once
// The decode kernels' parameter block and shared-memory layout, shared by the host (g++)
// and the device (NVRTC, which embeds this file by its base name). Plain fields and
// constexpr arithmetic only: no includes, no std::, so both compilers see one definition
// and the host can never disagree with the kernel about a byte offset.

#if defined(__CUDACC__)
#define EVO_HD __host__ __device__
#else
#define EVO_HD
#endif

namespace evodispatch {

// Element type of q and out (the template argument of the kernels); k and v are of the
// same type, or fp8 e4m3 in the variants built for an fp8 KV cache.
enum DecodeDtype : int { kDtypeBf16 = 0, kDtypeFp16 = 1 };

// Threads of one combine CTA (DecodeParams is shared by both kernels).
constexpr int kCombineThreads = 128;
// The most splits one call may have (the dispatch contract's kMaxSplits; a test checks).
constexpr int kMaxSplitsPerCall = 256;
// The most splits a cluster-merged call may have (KernelSpec::cluster_merge): its splits
// are the CTAs of one thread-block cluster, and 8 is the portable cluster size.
constexpr int kMaxClusterSplits = 8;
// Splits whose partial O one combine thread loads at once (one memory round trip).
constexpr int kCombineSplitsPerLoad = 8;

// Threads of a combine row that split its splits among them ("split lanes"), each lane
// head_dim / 8 threads wide. One lane walks the splits in round trips of
// kCombineSplitsPerLoad; with few query rows and many splits (one long request on one KV
// head) those round trips are the combine's whole time, so the lanes grow until one round
// trip covers every split or the row fills the CTA. A power of two.
EVO_HD constexpr int combine_split_lanes(int num_splits, int head_dim) {
  const int max_lanes = kCombineThreads / (head_dim / 8);
  int lanes = 1;
  while (lanes < max_lanes && lanes * kCombineSplitsPerLoad < num_splits) lanes *= 2;
  return lanes;
}

// n / d for 0 <= n < 2^31 as a multiply-high and a shift (Granlund and Montgomery,
// "Division by invariant integers using multiplication", 1994). An integer division by a
// runtime value is a sequence of about twenty instructions on the GPU; a short work item,
// run at one warp per scheduler, waits for every instruction of its per-item and per-row
// divisions.
struct FastDivisor {
  int d;         // the divisor, >= 1 (0 for a divisor never used: page_size when contiguous)
  unsigned mul;  // d > 1: ceil(2^(31 + s) / d) with s = ceil(log2 d), which is below 2^32
  int shift;     // d > 1: s - 1
};
EVO_HD constexpr FastDivisor fast_divisor(int d) {
  FastDivisor f{d, 0u, 0};
  if (d <= 1) return f;
  int s = 0;
  while ((1ll << s) < d) ++s;
  // n * mul / 2^(31 + s) = n / d + n * e / 2^(31 + s), 0 <= e < 1: for n < 2^31 the error
  // is under 2^-s <= 1 / d, so the floor is the quotient's.
  f.mul = static_cast<unsigned>(((1ull << (31 + s)) + static_cast<unsigned long long>(d) - 1) / static_cast<unsigned long long>(d));
  f.shift = s - 1;
  return f;
}
// n / f.d for 0 <= n < 2^31: the high word of n * mul, shifted. The host's is the same
// arithmetic as the kernels' multiply-high, so that the tests check what the kernels run.
EVO_HD inline int fast_div(int n, FastDivisor f) {
  if (f.d == 1) return n;
#ifdef __CUDA_ARCH__
  const unsigned high = __umulhi(static_cast<unsigned>(n), f.mul);
#else
  const auto high = static_cast<unsigned>((static_cast<unsigned long long>(static_cast<unsigned>(n)) * f.mul) >> 32);
#endif
  return static_cast<int>(high >> f.shift);
}
// The remainder of n / f.d; n becomes the quotient.
EVO_HD inline int take_mod(int& n, FastDivisor f) {
  const int q = fast_div(n, f), r = n - q * f.d;
  n = q;
  return r;
}

// One decode-attention call. Strides are in elements; the innermost (head_dim) dimension
// must be contiguous and every row 16-byte aligned (the kernels load 16 bytes at a time).
struct DecodeParams {
  // Ordered by when a decode CTA first reads a field. The parameters sit in a constant bank
  // from byte 0x210, fetched in 64-byte lines, and a warp stalls on the first read of each
  // line; the lines of bytes 0x300 and on came in later still (a second 256-byte block).
  // Nsight Compute on an H200 counted seven lines on a short CTA's way to its first tile,
  // each a serial stall, four of them before its length's load. Here the item's indices
  // and its length's address share the driver's line at 0x200 and the next; Q's and K/V's
  // addresses the two after; the rest, first read once the copies are in flight, the
  // second block (docs/performance.md).
  int num_work_items;  // batch * h_kv * num_splits * groups_per_kv_head * m_tiles
  FastDivisor m_tiles_div, groups_div, h_kv_div;  // an item's indices (the divisors below)
  int* cta_sms;        // [grid] or null: CTA i writes the SM it runs on (the evaluator's check)
  FastDivisor batch_div, splits_div;
  const int* cache_seqlens;  // [B]: keys of request b, the Lq new tokens included
  int num_splits;            // 1..256; 1 writes `out` directly
  int qpk;                   // h_q / h_kv
  int heads_per_group;       // pack_gqa ? qpk : 1 (the work decomposition below)
  int rows_per_group;        // heads_per_group * seqlen_q
  FastDivisor heads_div;
  int seqlen_q;

  // Inputs. k/v: [B, Lk_max, Hkv, D] contiguous, [num_pages, page_size, Hkv, D] paged.
  const void* q;  // [B, Lq, Hq, D]
  long long q_batch_stride, q_row_stride, q_head_stride;
  const void* k;
  const void* v;
  long long k_batch_stride, k_row_stride, k_head_stride;  // batch stride = page stride when paged
  long long v_batch_stride, v_row_stride, v_head_stride;  // paged: K's batch and row strides
  const int* page_table;  // [B, max_pages] (paged only)
  long long page_table_batch_stride;
  FastDivisor page_div;  // of page_size (its d is the page size)
  int causal;            // 1: token i of Lq sees keys [0, len - Lq + i]

  // The second block's first line: the softmax's scale (read as the first tile's copies
  // are in flight) and what the epilogue of a call of one split reads.
  float scale_log2;  // softmax_scale * log2(e): scores go through exp2
  int batch;
  void* out;  // [B, Lq, Hq, D] in the input dtype
  float* lse;  // [B, Hq, Lq] natural-log sum of exp, or null
  long long out_batch_stride, out_row_stride, out_head_stride;
  long long lse_batch_stride, lse_head_stride;  // the Lq dimension is contiguous

  float* o_partial;    // [num_splits, B, Lq, Hq, D] fp32, dense (num_splits > 1)
  float* lse_partial;  // [num_splits, B, Hq, Lq] fp32, dense (num_splits > 1)
  int h_q, h_kv;
  // fp8 KV cache only: the true K (V) of KV head h of request b is the stored value times
  // k_descale[b * descale_batch_stride + h * descale_head_stride] (v_descale): FA3's
  // [B, Hkv] tensors, or one value per tensor with both strides 0. Positive.
  const float* k_descale;
  const float* v_descale;
  long long descale_batch_stride, descale_head_stride;
  float softmax_scale;
  int page_size;  // 0 = contiguous

  // Work decomposition, filled by the host (see kernel_spec.hpp: decode_params_for).
  // A head group is the set of query heads one CTA serves: all qpk heads of a KV head
  // with pack_gqa, one head without. Its rows are (token i, head h) with
  // row = i * heads_per_group + h, tiled by block_m into m_tiles (heads_per_group,
  // rows_per_group and num_work_items are at the top).
  int groups_per_kv_head;  // pack_gqa ? 1 : qpk
  int m_tiles;             // ceil(rows_per_group / block_m)

  // The kernels' runtime divisors as fast_divisor(...) of m_tiles, groups_per_kv_head, h_kv,
  // batch, num_splits, heads_per_group, page_size (at the top), and (the combine kernel's
  // rows) h_q and seqlen_q; decode_params_for fills them with the fields.
  FastDivisor h_q_div, seqlen_q_div;
};

// Byte offsets of the decode kernel's dynamic shared memory, one 128-byte aligned region
// each: the Q tile, the K/V row-offset table (paged only), per-row softmax statistics, and a
// union of the K/V pipeline stages with the cross-warp reduction buffer (used only after
// the last stage is consumed). An fp8 cache lands in its stages as stored (1 byte per
// element) and is widened in registers.
struct DecodeSmemLayout {
  int q;       // block_m x D elements, swizzled
  int table;   // stages x block_n K/V row element offsets, long long
  int stats;   // warps_n x block_m (m, l) + block_m (1/l, lse) floats
  int tiles;   // stages x (K tile, V tile), each block_n x D elements of kv_bytes
  int reduce;  // warps_n x block_m x (D + 8) floats, aliases `tiles`
  int total;
};

// KV rows per split block (DESIGN.md §2: split s covers blocks [s * bps, (s + 1) * bps)).
// Must equal builtin_block_n() of the dispatch contract (a test checks it); the kernel's
// own K/V tile (block_n of KernelSpec) divides it.
EVO_HD constexpr int decode_split_block(int head_dim) { return head_dim <= 128 ? 128 : 64; }

EVO_HD constexpr int evo_align128(int bytes) { return (bytes + 127) / 128 * 128; }

// Floats per row of the reduction buffer: the +8 keeps the float2 stores of an mma
// accumulator fragment free of bank conflicts.
EVO_HD constexpr int decode_reduce_row_floats(int head_dim) { return head_dim + 8; }

// kv_bytes: 2 for a 16-bit cache, 1 for fp8.
EVO_HD constexpr DecodeSmemLayout decode_smem_layout(int head_dim, int block_m, int block_n, int warps_n,
                                                     int stages, bool paged, int kv_bytes = 2) {
  DecodeSmemLayout l{};
  l.q = 0;
  l.table = l.q + evo_align128(block_m * head_dim * 2);
  l.stats = l.table + (paged ? evo_align128(stages * block_n * 8) : 0);
  l.tiles = l.stats + evo_align128((2 * warps_n * block_m + 2 * block_m) * 4);
  l.reduce = l.tiles;
  const int tiles_bytes = stages * 2 * block_n * head_dim * kv_bytes;
  const int reduce_bytes = warps_n * block_m * decode_reduce_row_floats(head_dim) * 4;
  l.total = l.tiles + evo_align128(tiles_bytes > reduce_bytes ? tiles_bytes : reduce_bytes);
  return l;
}

}  // namespace evodispatch
