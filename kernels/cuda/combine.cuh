#pragma once
// Merges the num_splits fp32 partials of every query row (DESIGN.md §2):
//   lse = log(sum_s exp(lse_s)),  out = sum_s exp(lse_s - lse) * O_s
// A split whose LSE is -inf (empty, or every key masked for that row) contributes nothing
// and its O is never read (the decode kernel does not write it for empty splits).
//
// Each row is D / 8 threads wide (within one warp), 8 floats (two 16-byte loads) per thread
// per split; a grid of any size >= 1 walks the rows with a static stride, so the host can
// cap it at SMs - sm_margin.
#include "common.cuh"

namespace evodispatch {
namespace dev {

template <int D, int DT>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const __grid_constant__ DecodeParams p) {
  constexpr int kThreadsPerRow = D / 8;
  constexpr int kRowsPerCta = kCombineThreads / kThreadsPerRow;
  constexpr int kBatch = 8;  // splits whose O loads are in flight together
  static_assert(kCombineThreads % kThreadsPerRow == 0 && 32 % kThreadsPerRow == 0, "whole rows per warp");
  constexpr float kLog2e = 1.4426950408889634f;
  using E = Elem<DT>;
  // The LSE of every split of the CTA's rows, read once by the row's threads together.
  __shared__ float lse_smem[kRowsPerCta][kMaxSplitsPerCall];

  const int total_rows = p.batch * p.seqlen_q * p.h_q;  // row = (b * Lq + i) * Hq + h
  const i64 split_rows = total_rows;                      // o_partial rows per split
  const i64 lse_split_stride = total_rows;                // lse_partial entries per split
  const int ch = threadIdx.x % kThreadsPerRow, local_row = threadIdx.x / kThreadsPerRow;
  const int S = p.num_splits;
  float* const lse_row = lse_smem[local_row];
  wait_for_prerequisite_grids();  // the decode kernel's partials (see common.cuh)

  // The loads are the cost here (a few bytes of math per byte read), so each row issues
  // its first kBatch O loads and all its LSE loads before waiting on any: two memory
  // round trips up to kBatch splits, one more per further kBatch (a loop of dependent
  // loads took 11 us at 11 splits on an H100).
  for (int base = blockIdx.x * kRowsPerCta; base < total_rows; base += gridDim.x * kRowsPerCta) {
    const int row = base + local_row;
    const bool valid = row < total_rows;  // a short last tile: its threads still join the shuffles
    const int r = valid ? row : total_rows - 1;
    const int h = r % p.h_q;
    const int i = (r / p.h_q) % p.seqlen_q;
    const int b = r / (p.h_q * p.seqlen_q);
    const float* const lse_s = p.lse_partial + (static_cast<i64>(b) * p.h_q + h) * p.seqlen_q + i;
    const float* const o_s = p.o_partial + static_cast<i64>(r) * D + ch * 8;

    float4 u[kBatch], v[kBatch];
    auto load_batch = [&](int s0) {
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
        if (s0 + j < S) {
          // An empty split's O is never written: whatever is there is read and then
          // discarded by a select (never multiplied by a zero weight: it may be NaN).
          const float* src = o_s + (s0 + j) * split_rows * D;
          u[j] = *reinterpret_cast<const float4*>(src);
          v[j] = *reinterpret_cast<const float4*>(src + 4);
        }
    };
    load_batch(0);
    float mx = neg_inf();
    for (int s = ch; s < S; s += kThreadsPerRow) {
      const float l = lse_s[s * lse_split_stride];
      lse_row[s] = l;
      mx = fmaxf(mx, l);
    }
#pragma unroll
    for (int off = kThreadsPerRow / 2; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    __syncwarp();  // the row's LSEs in shared memory

    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    float l = 0.f;
    for (int s0 = 0; s0 < S; s0 += kBatch) {
      if (s0 > 0) load_batch(s0);
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const float ls = s0 + j < S ? lse_row[s0 + j] : neg_inf();
        if (ls == neg_inf()) continue;  // empty split, or every key masked for this row
        const float w = fast_exp2((ls - mx) * kLog2e);
        l += w;
        acc[0] += w * u[j].x, acc[1] += w * u[j].y, acc[2] += w * u[j].z, acc[3] += w * u[j].w;
        acc[4] += w * v[j].x, acc[5] += w * v[j].y, acc[6] += w * v[j].z, acc[7] += w * v[j].w;
      }
    }
    __syncwarp();  // lse_row is rewritten by the next row of this thread group
    if (!valid) continue;
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
