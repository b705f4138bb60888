#pragma once
// The parameter block of the GPU float32 reference kernel (support.cuh), shared by the
// host (g++) and NVRTC so both see one layout. Plain fields only, no includes.

namespace evodispatch {

// Dense layouts as the decode kernels take them: q [B, Lq, Hq, D]; k, v
// [B, seqlen_k_max, Hkv, D] contiguous or [num_pages, page_size, Hkv, D] paged with
// page_table [B, max_pages]; out [B, Lq, Hq, D] fp32; lse [B, Hq, Lq] fp32.
struct ReferenceParams {
  const void* q;
  const void* k;
  const void* v;
  const int* seqlens;     // [B]
  const int* page_table;  // paged only
  float* out;
  float* lse;
  int batch, seqlen_q, h_q, h_kv, head_dim;
  int page_size;     // 0 = contiguous
  int max_pages;
  int seqlen_k_max;  // rows per request in a contiguous cache
  int causal;
  int dtype;         // of q: 0 bf16, 1 fp16 (kDtypeBf16 / kDtypeFp16); of k and v too unless kv_fp8
  int kv_fp8;        // 1: k and v are fp8 e4m3, the true value stored x descale
  const float* k_descale;  // kv_fp8: at b * descale_batch_stride + kv_head * descale_head_stride
  const float* v_descale;
  long long descale_batch_stride, descale_head_stride;
  float scale;
};

// Threads of one reference CTA; one CTA per (request, token, query head).
constexpr int kReferenceThreads = 128;
// Largest head_dim the reference handles (accumulators per thread = this / threads).
constexpr int kReferenceMaxHeadDim = 512;

}  // namespace evodispatch
