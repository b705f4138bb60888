#pragma once
// The device buffers of one measured case: `sets` copies of (q, k, v, out, fp32
// workspace) laid out back to back in one allocation, so that a cold-L2 graph can give
// each call the next set, plus what every set shares (cache_seqlens, page table) and the
// LSE output of the checked run.
#include <cstdint>
#include <vector>

#include <evodispatch/evaluator/gpu_runner.hpp>
#include <evodispatch/kernels/decode_params.hpp>

#include "cuda_util.hpp"
#include "support_kernels.hpp"

namespace evodispatch::gpu {

// Byte offsets inside one set (each region 256-byte aligned) and element counts.
struct CaseLayout {
  std::int64_t q = 0, k = 0, v = 0, out = 0, o_partial = 0, lse_partial = 0;
  std::int64_t set_bytes = 0;
  std::int64_t q_elems = 0, kv_elems = 0;  // out has q_elems
  int max_pages = 0, num_pages = 0;        // paged only
};
// Room for a workspace of up to `max_splits` splits (none when 1).
CaseLayout case_layout(const Shape&, int max_splits);

// The seed of a case's inputs: a hash of the shape and the request lengths.
std::uint64_t case_seed(const MeasureCase&);
// Each request's KV length; throws InputError naming what is wrong with c.seqlens.
std::vector<int> request_lengths(const MeasureCase&);
// A permutation of [0, batch * max_pages) as a [batch, max_pages] table, from `seed`.
std::vector<int> shuffled_page_table(int batch, int max_pages, std::uint64_t seed);

// fp8 KV cache: the descales of a case, [B, Hkv] or one value (per_tensor_descale), drawn
// log-uniform in [1/2, 2) from `seed`: k's first, then v's.
std::vector<float> case_descales(const MeasureCase&, std::uint64_t seed);

class DecodeBuffers {
 public:
  // Places the sets at the start of `arena` and fills them (every 16-bit element drawn
  // from N(0, 1), then, for an fp8 cache, every K/V element from N(0, 1) rounded to e4m3:
  // set 0's inputs depend only on the case, not on max_splits or sets; then set 0's rows
  // of a contiguous cache past a request's length NaN, see poison_past_lengths). `arena_at_least`
  // sizes the arena if it must be allocated. The arena must outlive the buffers and
  // serve no other case meanwhile.
  DecodeBuffers(const MeasureCase&, int max_splits, int sets, SupportKernels&, const Stream&, DeviceArena& arena,
                std::size_t arena_at_least);

  int sets() const { return sets_; }
  const CaseLayout& layout() const { return layout_; }
  const std::vector<int>& seqlens() const { return seqlens_; }
  const std::vector<int>& page_table() const { return page_table_; }
  // fp8 only: the descales (empty otherwise), where (request, KV head) finds its own, and
  // the request that owns a page.
  std::vector<float> k_descales() const;
  std::vector<float> v_descales() const;
  int descale_index(int batch, int kv_head) const;
  int page_owner(int page) const { return page_owner_[static_cast<std::size_t>(page)]; }

  // `base` (decode_params_for) with the pointers of set `set`; `with_lse` also writes the
  // LSE output (the checked run).
  DecodeParams params(const DecodeParams& base, int set, bool with_lse) const;
  // The reference's view of set 0, writing to out / lse.
  ReferenceParams reference_params(float* out, float* lse) const;

  void* out(int set) const { return base(set) + layout_.out; }
  float* lse() const { return static_cast<float*>(lse_.get()); }
  void* q(int set) const { return base(set) + layout_.q; }
  void* k(int set) const { return base(set) + layout_.k; }
  void* v(int set) const { return base(set) + layout_.v; }

 private:
  char* base(int set) const { return sets_base_ + static_cast<std::int64_t>(set) * layout_.set_bytes; }
  // MeasureCase::spread_query_rows: every set's query rows times 2^-20 .. 2^4.
  void spread_query_rows(const Stream&);
  // Set 0's K and V rows past each request's length, contiguous cache: all bits set, a NaN
  // in every dtype. A serving cache holds anything there (a freed request's keys, or memory
  // never written); a kernel that lets one row of it into its output, by a mask off by one
  // or a tile copied without its bound, fails the numeric check, which runs on set 0 (the
  // timing sets are left alone: nothing reads their check).
  void poison_past_lengths(const Stream&);

  Shape shape_;
  CaseLayout layout_;
  int sets_;
  bool per_tensor_descale_;
  std::vector<int> seqlens_, page_table_, page_owner_;
  std::vector<float> descales_;  // k's then v's
  char* sets_base_ = nullptr;  // set 0, at the start of the arena
  DeviceBuffer seqlens_d_, page_table_d_, lse_, descales_d_;
};

}  // namespace evodispatch::gpu
