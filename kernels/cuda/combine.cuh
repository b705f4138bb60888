#pragma once
// Merges the num_splits fp32 partials of every query row (DESIGN.md §2):
//   lse = log(sum_s exp(lse_s)),  out = sum_s exp(lse_s - lse) * O_s
// A split whose LSE is -inf (empty, or every key masked for that row) contributes nothing
// and its O is never read (the decode kernel does not write it for empty splits).
//
// Each row is D / 8 threads wide, 8 floats (two 16-byte loads) per thread per split; a
// grid of any size >= 1 walks the rows with a static stride, like the decode kernel, so
// the host can cap it at SMs - sm_margin.
#include "common.cuh"

namespace evodispatch {
namespace dev {

template <int D, int DT>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const __grid_constant__ DecodeParams p) {
  constexpr int kThreadsPerRow = D / 8;
  constexpr int kRowsPerCta = kCombineThreads / kThreadsPerRow;
  static_assert(kCombineThreads % kThreadsPerRow == 0, "whole rows per CTA");
  constexpr float kLog2e = 1.4426950408889634f;
  using E = Elem<DT>;

  const int total_rows = p.batch * p.seqlen_q * p.h_q;  // row = (b * Lq + i) * Hq + h
  const i64 split_rows = total_rows;                      // o_partial rows per split
  const i64 lse_split_stride = total_rows;                // lse_partial entries per split
  const int ch = threadIdx.x % kThreadsPerRow;
  wait_for_prerequisite_grids();  // the decode kernel's partials (see common.cuh)

  for (int base = blockIdx.x * kRowsPerCta; base < total_rows; base += gridDim.x * kRowsPerCta) {
    const int row = base + threadIdx.x / kThreadsPerRow;
    if (row >= total_rows) continue;
    const int h = row % p.h_q;
    const int i = (row / p.h_q) % p.seqlen_q;
    const int b = row / (p.h_q * p.seqlen_q);
    const float* const lse_s = p.lse_partial + (static_cast<i64>(b) * p.h_q + h) * p.seqlen_q + i;

    float mx = neg_inf();
    for (int s = 0; s < p.num_splits; ++s) mx = fmaxf(mx, lse_s[s * lse_split_stride]);

    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    float l = 0.f;
    if (mx != neg_inf()) {
      const float* o_s = p.o_partial + static_cast<i64>(row) * D + ch * 8;
#pragma unroll 4
      for (int s = 0; s < p.num_splits; ++s) {
        const float ls = lse_s[s * lse_split_stride];
        if (ls == neg_inf()) continue;
        const float w = fast_exp2((ls - mx) * kLog2e);
        const float* src = o_s + s * split_rows * D;
        const float4 u = *reinterpret_cast<const float4*>(src);
        const float4 v = *reinterpret_cast<const float4*>(src + 4);
        l += w;
        acc[0] += w * u.x, acc[1] += w * u.y, acc[2] += w * u.z, acc[3] += w * u.w;
        acc[4] += w * v.x, acc[5] += w * v.y, acc[6] += w * v.z, acc[7] += w * v.w;
      }
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const i64 off = b * p.out_batch_stride + i * p.out_row_stride + h * p.out_head_stride + ch * 8;
    store_16(static_cast<char*>(p.out) + 2 * off, E::pack(acc[0] * inv, acc[1] * inv), E::pack(acc[2] * inv, acc[3] * inv),
             E::pack(acc[4] * inv, acc[5] * inv), E::pack(acc[6] * inv, acc[7] * inv));
    if (p.lse && ch == 0)
      p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i] = l > 0.f ? mx + fast_log2(l) / kLog2e : neg_inf();
  }
}

}  // namespace dev
}  // namespace evodispatch
