#pragma once
// The CPU float64 reference of the decode kernels: the same computation, on float inputs
// already rounded to the input dtype (dtype.hpp), in the dense layouts of
// decode_params_for. Slow and obvious on purpose; the GPU float32 reference of the
// evaluator is tested against it.
#include <cstdint>
#include <span>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

struct ReferenceInputs {
  Shape shape;                     // batch, seqlen_q, h_q, h_kv, head_dim, page_size, causal
  std::span<const float> q;        // [B, Lq, Hq, D]
  std::span<const float> k, v;     // [B, seqlen_k, Hkv, D], or [num_pages, page_size, Hkv, D] when paged
  std::span<const int> cache_seqlens;  // [B]; empty: every request has shape.seqlen_k keys
  std::span<const int> page_table;     // [B, max_pages] (paged only)
  int max_pages = 0;
  double softmax_scale = 0;        // 0: 1 / sqrt(head_dim)
};

struct ReferenceOutputs {
  std::vector<double> out;  // [B, Lq, Hq, D]; a row that sees no key is 0
  std::vector<double> lse;  // [B, Hq, Lq], natural log; -inf for a row that sees no key
};

// Token i of request b attends to keys [0, len_b - Lq + i] when causal, [0, len_b)
// otherwise; query head h reads KV head h / (Hq / Hkv). Throws InputError on
// inconsistent sizes (a span too short, a page id out of range).
ReferenceOutputs reference_attention(const ReferenceInputs&);

}  // namespace evodispatch
